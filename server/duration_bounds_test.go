package server_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestDurationFieldsNameThePlaneBound: a submit's delay, unique_for and debounce, a
// settle's retry_delay and a schedule's every out of range are refused with the bound the
// plane applies (366 days; at least 1 s), not the wider range a duration holds (292 years,
// which a later value then met as a second, different bound), and nothing is stored.
func TestDurationFieldsNameThePlaneBound(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	Q := "/v1/namespaces/default/queues/q"
	const rule = "use seconds from 0 to 31622400 (366 days)"
	for _, field := range []string{"delay", "unique_for", "debounce"} {
		for _, v := range []string{"-1", "1e300", "31622401", "1e9"} {
			body := []byte(`{"payload": 1, "key": "k", "` + field + `": ` + v + `}`)
			e := b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, body, "").requireError(t, 400, "invalid")
			require.Contains(t, e.Message, "invalid "+field+" ", "%s %s", field, v)
			require.Contains(t, e.Message, rule, "%s %s", field, v)
			require.NotContains(t, e.Message, "292 years", "%s %s", field, v)
			require.Equal(t, field, e.Details.Field, "%s %s", field, v)
			batch := []byte(`{"invocations": [{"payload": 1}, {"payload": 1, "key": "k", "` + field + `": ` + v + `}]}`)
			e = b.do(t, "POST", Q+"/invocations/batch", api.ContentTypeJSON, batch, "").requireError(t, 400, "invalid")
			require.Contains(t, e.Message, "invalid invocations[1]."+field+" ", "%s %s", field, v)
			require.Contains(t, e.Message, rule, "%s %s", field, v)
		}
	}
	// The bound itself is taken.
	ok := b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(`{"payload": 1, "key": "k", "unique_for": 31622400}`), "")
	require.Equal(t, 200, ok.status, "%s", ok.body)
	count := b.do(t, "GET", Q+"/count?state=queued", "", nil, "")
	require.JSONEq(t, `{"count": 1}`, string(count.body), "only the submit at the bound was stored")

	// A settle's retry_delay, on the claimed job (checked before the token is).
	claim := b.do(t, "POST", Q+"/claim", api.ContentTypeJSON, []byte(`{"max": 1}`), "")
	require.Equal(t, 200, claim.status, "%s", claim.body)
	var got struct {
		Jobs []struct{ ID, Token string } `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(claim.body, &got))
	require.Len(t, got.Jobs, 1)
	for _, v := range []string{"-1", "1e300"} {
		body := []byte(`{"token": "` + got.Jobs[0].Token + `", "outcome": "rate_limited", "retry_delay": ` + v + `}`)
		e := b.do(t, "POST", "/v1/invocations/"+got.Jobs[0].ID+"/settle", api.ContentTypeJSON, body, "").requireError(t, 400, "invalid")
		require.Contains(t, e.Message, "invalid retry_delay ")
		require.Contains(t, e.Message, rule)
	}
	inv := b.do(t, "GET", "/v1/invocations/"+got.Jobs[0].ID, "", nil, "")
	require.Contains(t, string(inv.body), `"state":"running"`, "a refused settle changes nothing")

	// A schedule's every: its rule says an interval is at least 1 s.
	for _, v := range []string{"-5", "1e300"} {
		e := b.do(t, "PUT", "/v1/namespaces/default/schedules/s", api.ContentTypeJSON, []byte(`{"queue": "q", "every": `+v+`}`), "").requireError(t, 400, "invalid")
		require.Contains(t, e.Message, "invalid every ")
		require.Contains(t, e.Message, "use seconds from 1 to 9223372036, in whole milliseconds")
	}
	list := b.do(t, "GET", "/v1/schedules?namespace=default", "", nil, "")
	require.JSONEq(t, `{"schedules": []}`, string(list.body), "nothing stored")
}

// TestLeaseTTLNamesItsRange: a claim's, settle-and-claim's or heartbeat's lease_ttl out of
// range — negative, not finite, or past api.MaxLeaseTTL — is refused with one rule that
// names the whole range (0 to 604800 seconds), and nothing is claimed. Before, a negative
// or huge value answered "use seconds ≥ 0", which 1e300 is.
func TestLeaseTTLNamesItsRange(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	Q := "/v1/namespaces/default/queues/q"
	require.Equal(t, 200, b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(`{"payload": 1}`), "").status)
	const rule = "use seconds from 0 (the default, 30) to 604800 (7 days); heartbeat to keep a longer job"
	for _, v := range []string{"-1", "1e300", "604801"} {
		for _, c := range []struct{ path, body, field string }{
			{Q + "/claim", `{"max": 1, "lease_ttl": ` + v + `}`, "lease_ttl"},
			{Q + "/settle-and-claim", `{"settles": [], "claim": {"max": 1, "lease_ttl": ` + v + `}}`, "claim.lease_ttl"},
			{"/v1/heartbeat", `{"heartbeats": [{"id": "01M93CEVJ5BTXWKNBHFMCZEJ6F", "token": "t", "lease_ttl": ` + v + `}]}`, "heartbeats[0].lease_ttl"},
		} {
			e := b.do(t, "POST", c.path, api.ContentTypeJSON, []byte(c.body), "").requireError(t, 400, "invalid")
			require.Equal(t, c.field, e.Details.Field, "%s %s", c.path, v)
			require.Contains(t, e.Message, rule, "%s %s", c.path, v)
		}
	}
	count := b.do(t, "GET", Q+"/count?state=queued", "", nil, "")
	require.JSONEq(t, `{"count": 1}`, string(count.body), "nothing was claimed")
}

// TestMaxAttemptsBoundOverHTTP: max_attempts beyond 10,000 (or one an integer column
// cannot hold) is 400 invalid naming the field and what is allowed, in a submit, a batch
// and a schedule, in both encodings, and nothing is stored; 10,000 itself is taken. Before,
// any positive number was stored.
func TestMaxAttemptsBoundOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	Q := "/v1/namespaces/default/queues/q"
	const rule = "use 1 to 10000 attempts, or 0 for the default (3)"
	for _, n := range []int64{10_001, 1 << 31, 1<<63 - 1} {
		for path, body := range map[string]any{
			Q + "/invocations":       map[string]any{"max_attempts": n},
			Q + "/invocations/batch": map[string]any{"invocations": []any{map[string]any{}, map[string]any{"max_attempts": n}}},
		} {
			for name, send := range b.sendBoth(t, "POST", path, body) {
				e := send().requireError(t, 400, "invalid")
				require.Contains(t, e.Message, rule, "%s %s %d", name, path, n)
				require.Contains(t, e.Details.Field, "max_attempts", "%s %s %d", name, path, n)
			}
		}
		sched := map[string]any{"queue": "q", "every": 60.0, "max_attempts": n}
		for name, send := range b.sendBoth(t, "PUT", "/v1/namespaces/default/schedules/s", sched) {
			e := send().requireError(t, 400, "invalid")
			require.Contains(t, e.Message, rule, "%s schedule %d", name, n)
		}
	}
	require.Zero(t, b.total(t), "nothing was stored")
	r := b.doJSON(t, "POST", Q+"/invocations", map[string]any{"max_attempts": 10_000}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	inv, err := b.back.InvocationGet(t.Context(), idOf(t, r))
	require.NoError(t, err)
	require.Equal(t, 10_000, inv.MaxAttempts)
	page, err := b.back.ScheduleList(t.Context(), &plane.ScheduleListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Schedules, "no refused schedule was stored")
}

// TestSubNanosecondDurationsRefused: a positive duration in seconds shorter than 1 ns (a
// submit's unique_for, debounce, delay or attempt_timeout, a claim's lease_ttl) is refused
// with 400 invalid naming the field and the smallest value taken (1e-09), and nothing is
// stored or claimed. Before, it rounded to 0 ns, which means no window (the key then held
// until trimmed) or the default: unique_for 1e-12 silently became no dedup window. 1e-09
// itself is taken, as a 1 ns window, as the Go SDK's SubmitOptions.UniqueFor of 1 ns is.
// A wait under 1 ns is not refused: it is no wait, what 0 means there.
func TestSubNanosecondDurationsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	Q := "/v1/namespaces/default/queues/q"
	for _, field := range []string{"unique_for", "debounce", "delay", "attempt_timeout"} {
		for _, v := range []float64{1e-12, 4e-10, 9.99e-10, 5e-324} {
			for path, body := range map[string]any{
				Q + "/invocations":       map[string]any{"key": "k", field: v},
				Q + "/invocations/batch": map[string]any{"invocations": []any{map[string]any{}, map[string]any{"key": "k", field: v}}},
			} {
				for name, send := range b.sendBoth(t, "POST", path, body) {
					e := send().requireError(t, 400, "invalid")
					require.Contains(t, e.Details.Field, field, "%s %s %s %g", name, path, field, v)
					require.Contains(t, e.Message, "at least 1e-09 seconds (1 ns)", "%s %s %s %g", name, path, field, v)
				}
			}
		}
	}
	require.Zero(t, b.total(t), "nothing was stored")
	e := b.do(t, "POST", Q+"/claim", api.ContentTypeJSON, []byte(`{"max": 1, "lease_ttl": 1e-12}`), "").requireError(t, 400, "invalid")
	require.Equal(t, "lease_ttl", e.Details.Field)
	require.Contains(t, e.Message, "at least 1e-09 seconds (1 ns)")

	// A wait under 1 ns is no wait, as 0 (a client's time left to its deadline can come out
	// that small): a claim's, a settle-and-claim's, a result wait's and a frame read's.
	r := b.do(t, "POST", Q+"/claim", api.ContentTypeJSON, []byte(`{"max": 1, "wait": 1e-12}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.do(t, "POST", Q+"/settle-and-claim", api.ContentTypeJSON, []byte(`{"settles": [], "claim": {"max": 1, "wait": 1e-12}}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)

	// 1 ns itself is a window: the invocation is stored marked with it.
	r = b.doJSON(t, "POST", Q+"/invocations", map[string]any{"payload": 1, "key": "k", "unique_for": 1e-9}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	id := idOf(t, r)
	inv, err := b.back.InvocationGet(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, "0.000000001", inv.Metadata[plane.MetaUniqueFor], "a 1 ns dedup window, not none")
	r = b.do(t, "GET", "/v1/invocations/"+id+"/wait?timeout=1e-12", "", nil, "")
	require.Equal(t, 200, r.status, "a result wait under 1 ns checks once: %s", r.body)
	r = b.do(t, "GET", "/v1/invocations/"+id+"/frames?wait=1e-12", "", nil, "")
	require.Equal(t, 200, r.status, "a frame read's wait under 1 ns does not wait: %s", r.body)
}
