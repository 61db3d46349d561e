package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// TestValuesAreMsgpack: the server stores only payloads, results and frame values that
// are exactly one msgpack value, so every reader can decode them; an absent payload is
// msgpack nil.
func TestValuesAreMsgpack(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	bad := map[string][]byte{
		"InvalidPrefix": {0xc1},
		"TwoValues":     {0x01, 0x02},
		"Truncated":     {0x92, 0x01},
		"RawText":       []byte("hello"),
	}
	for name, v := range bad {
		t.Run(name, func(t *testing.T) {
			r := b.doJSON(t, "POST", "/v1/submit", map[string]any{"namespace": "default", "queue": "jobs", "payload": v}, "")
			eb := r.requireError(t, 400, "invalid")
			require.Contains(t, eb.Message, "payload")
			r = b.doJSON(t, "POST", "/v1/submit/batch", map[string]any{"namespace": "default", "queue": "jobs",
				"invocations": []map[string]any{{"payload": []byte{0xc0}}, {"payload": v}}}, "")
			eb = r.requireError(t, 400, "invalid")
			require.Contains(t, eb.Message, "invocations[1].payload")
		})
	}
	// "wcHB" is base64 for c1 c1 c1 in JSON.
	r := b.do(t, "POST", "/v1/submit", api.ContentTypeJSON, []byte(`{"namespace":"default","queue":"jobs","payload":"wcHB"}`), "")
	r.requireError(t, 400, "invalid")
	require.Zero(t, b.total(t), "nothing stored")

	// An absent payload is stored as msgpack nil.
	r = b.doJSON(t, "POST", "/v1/submit", map[string]any{"namespace": "default", "queue": "jobs"}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	jobs, err := b.back.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "jobs",
		Kind: plane.KindFIFO, Max: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, []byte{0xc0}, jobs[0].Payload)
	job := jobs[0]

	// Settle results and post values are checked the same way.
	for name, v := range bad {
		r := b.doJSON(t, "POST", "/v1/settle", map[string]any{"settles": []map[string]any{
			{"id": job.ID, "token": job.Token, "outcome": "succeeded", "result": v}}}, "")
		eb := r.requireError(t, 400, "invalid")
		require.Contains(t, eb.Message, "settles[0].result", name)
		r = b.doJSON(t, "POST", "/v1/post", map[string]any{"journal": map[string]any{"invocation_id": job.ID},
			"token": job.Token, "value": v}, "")
		eb = r.requireError(t, 400, "invalid")
		require.Contains(t, eb.Message, "value", name)
		r = b.doJSON(t, "POST", "/v1/post", map[string]any{"journal": map[string]any{"namespace": "default", "queue": "jobs", "topic": "t"},
			"value": v}, "")
		r.requireError(t, 400, "invalid")
	}
	res, err := b.back.FrameRead(t.Context(), &plane.FrameReadParams{Journal: plane.Journal{InvocationID: job.ID}, Since: -1})
	require.NoError(t, err)
	require.Empty(t, res.Frames, "nothing posted")

	// Good values go through and read back.
	one, err := wire.Marshal(map[string]any{"step": 1})
	require.NoError(t, err)
	r = b.doJSON(t, "POST", "/v1/post", map[string]any{"journal": map[string]any{"invocation_id": job.ID},
		"token": job.Token, "value": one}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.doJSON(t, "POST", "/v1/settle", map[string]any{"settles": []map[string]any{
		{"id": job.ID, "token": job.Token, "outcome": "succeeded"}}}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	inv, err := b.back.InvocationGet(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateSucceeded, inv.State)
	var out any
	require.NoError(t, wire.Unmarshal(inv.Result, &out), "an absent result is msgpack nil")
	require.Nil(t, out)
}

// TestRawValues: with Config.RawValues the server stores values as opaque bytes.
func TestRawValues(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{RawValues: true})
	r := b.doJSON(t, "POST", "/v1/submit", map[string]any{"namespace": "default", "queue": "jobs", "payload": []byte("hello")}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
}

// TestUnknownJSONFields: a JSON body naming a field the request does not have is refused,
// naming it, instead of being silently dropped.
func TestUnknownJSONFields(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/submit", `{"namespace":"default","queue":"jobs","prority":5}`, "prority"},
		{"/v1/submit/batch", `{"namespace":"default","queue":"jobs","invocations":[{"max_attempt":2}]}`, "max_attempt"},
		{"/v1/claim", `{"namespace":"default","queue":"jobs","lease":30}`, "lease"},
	} {
		r := b.do(t, "POST", tc.path, api.ContentTypeJSON, []byte(tc.body), "")
		eb := r.requireError(t, 400, "invalid")
		require.Contains(t, eb.Message, `"`+tc.field+`"`)
		require.NotNil(t, eb.Details)
		require.Equal(t, tc.field, eb.Details.Value)
	}
	require.Zero(t, b.total(t))
	r := b.do(t, "POST", "/v1/submit", api.ContentTypeJSON, []byte(`{"namespace":"default","queue":"jobs","priority":5}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
}

// TestPostWithoutJournal: a post that names no journal says which field is missing.
func TestPostWithoutJournal(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	r := b.do(t, "POST", "/v1/post", api.ContentTypeJSON, []byte(`{"value":"wA=="}`), "")
	eb := r.requireError(t, 400, "invalid")
	require.Contains(t, eb.Message, "journal")
	require.Contains(t, eb.Message, "invocation_id")
}

// TestClientCancelIsNotAServerError: a client that gives up on a long-poll is logged as a
// client cancel with status 499, not as an error 500, in logs and metrics.
func TestClientCancelIsNotAServerError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", b.ts.URL+"/v1/invocations/01ARZ3NDEKTSV4RRFFQ69G5FAV/wait?timeout=30", nil)
	require.NoError(t, err)
	// Claim-like long-polls on an empty queue too.
	creq, err := http.NewRequestWithContext(ctx, "POST", b.ts.URL+"/v1/claim", strings.NewReader(`{"namespace":"default","queue":"jobs","wait":30}`))
	require.NoError(t, err)
	creq.Header.Set("Content-Type", api.ContentTypeJSON)
	for _, rq := range []*http.Request{req, creq} {
		resp, err := b.ts.Client().Do(rq)
		if err == nil {
			resp.Body.Close()
			if rq == req {
				require.Equal(t, 404, resp.StatusCode, "unknown id: answered at once")
				continue
			}
		}
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	require.Eventually(t, func() bool { return strings.Contains(b.logs.String(), "status=499") }, 5*time.Second, 10*time.Millisecond)
	logs := b.logs.String()
	require.NotContains(t, logs, "status=500")
	require.NotContains(t, logs, "level=ERROR")
	r := b.do(t, "GET", "/metrics", "", nil, "")
	require.Contains(t, string(r.body), `route="POST /v1/claim",status="499"`)
	require.NotContains(t, string(r.body), `status="500"`)
}
