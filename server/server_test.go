package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testBundle is a server on a loopback listener over a fresh ":memory:" plane.
type testBundle struct {
	srv  *server.Server
	ts   *httptest.Server
	back plane.Driver
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func setup(t testing.TB, cfg *server.Config) *testBundle {
	t.Helper()
	return setupWrapped(t, cfg, nil)
}

// setupWrapped is setup with the server's driver wrapped (nil: not wrapped), for a test
// that interleaves plane calls with the server's.
func setupWrapped(t testing.TB, cfg *server.Config, wrap func(plane.Driver) plane.Driver) *testBundle {
	t.Helper()
	var c server.Config
	if cfg != nil {
		c = *cfg
	}
	// A test's clock (Config.Now) is the plane's too, as a server's default clock is the
	// plane's (plane.ClockOf): a server on a fake clock in front of a plane on this
	// machine's saw its maintenance pass (every 250 ms, on the real clock) trim a token
	// the test had just minted "expired a minute ago" on 2026-01-01 as expired for months.
	var planeConfig *sqliteplane.Config
	if c.Now != nil {
		planeConfig = &sqliteplane.Config{Now: c.Now}
	}
	back, err := sqliteplane.Open(t.Context(), ":memory:", planeConfig)
	require.NoError(t, err)
	t.Cleanup(func() { back.Close() }) // after the server's clean-up (clean-ups run last first)
	var drv plane.Driver = back
	if wrap != nil {
		drv = wrap(back)
	}
	return serveOn(t, back, drv, &c)
}

// serveOn starts a server of cfg over drv (back, or back wrapped) and stops it when the test
// ends, leaving back open: a test that starts several servers in turn over one plane (data
// stores reopened, the job plane unchanged) opens the plane once.
func serveOn(t testing.TB, back, drv plane.Driver, cfg *server.Config) *testBundle {
	t.Helper()
	c := *cfg
	b := &testBundle{back: back, logs: &syncBuffer{}}
	c.Logger = slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b.srv = server.New(drv, &c)
	b.ts = httptest.NewServer(b.srv)
	t.Cleanup(func() {
		b.srv.Stop()
		b.ts.Close()
		if t.Failed() {
			t.Log(b.logs.String())
		}
	})
	return b
}

// response is a raw answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// errBody decodes the answer as an error body (JSON or msgpack by its Content-Type).
func (r *response) errBody(t *testing.T) api.ErrorBody {
	t.Helper()
	var eb api.ErrorBody
	c, err := api.CodecFor(r.header.Get("Content-Type"))
	require.NoError(t, err, "error answers are msgpack or JSON")
	require.NoError(t, c.Unmarshal(r.body, &eb), "body %q", r.body)
	return eb
}

// requireError checks status and code of an error answer.
func (r *response) requireError(t *testing.T, status int, code string) api.ErrorBody {
	t.Helper()
	require.Equal(t, status, r.status, "body %s", r.body)
	eb := r.errBody(t)
	require.Equal(t, code, eb.Code, "message %q", eb.Message)
	require.NotEmpty(t, eb.Message)
	return eb
}

func (b *testBundle) do(t *testing.T, method, path, contentType string, body []byte, token string) *response {
	t.Helper()
	headers := map[string]string{}
	if contentType != "" {
		headers["Content-Type"] = contentType
	}
	if token != "" {
		headers["Authorization"] = "Bearer " + token
	}
	return b.doHeaders(t, method, path, body, headers)
}

// doHeaders is do with the request's header lines given by name; "Host" sets the host
// the request names.
func (b *testBundle) doHeaders(t *testing.T, method, path string, body []byte, headers map[string]string) *response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.ts.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	for name, value := range headers {
		if name == "Host" {
			req.Host = value
			continue
		}
		req.Header.Set(name, value)
	}
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

func (b *testBundle) doJSON(t *testing.T, method, path string, v any, token string) *response {
	t.Helper()
	var data []byte
	if v != nil {
		var err error
		data, err = json.Marshal(v)
		require.NoError(t, err)
	}
	return b.do(t, method, path, api.ContentTypeJSON, data, token)
}

// total counts every invocation in the plane, in every state.
func (b *testBundle) total(t *testing.T) int64 {
	t.Helper()
	stats, err := b.back.QueueStatsList(context.Background(), "")
	require.NoError(t, err)
	var n int64
	for _, s := range stats {
		for _, c := range s.Counts {
			n += c
		}
	}
	return n
}

// mustMsgpack encodes v: api bodies with their generated code, anything else with
// vmihailenco (an independent encoder).
func mustMsgpack(t *testing.T, v any) []byte {
	t.Helper()
	if body, ok := v.(api.Body); ok {
		b, err := api.Msgpack.Marshal(body)
		require.NoError(t, err)
		return b
	}
	b, err := msgpack.Marshal(v)
	require.NoError(t, err)
	return b
}

// Q is the path prefix of queue default/jobs.
const Q = "/v1/namespaces/default/queues/jobs"

func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{MaxBodyBytes: 4096})
	valid := &api.SubmitRequest{Payload: api.Value{Wire: []byte{0xc0}}}

	cases := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        []byte
		status      int
		code        string
	}{
		{"MalformedMsgpack", "POST", Q + "/invocations", api.ContentTypeMsgpack, []byte{0xc1, 0x00}, 400, "invalid"},
		{"TruncatedMsgpack", "POST", Q + "/invocations", api.ContentTypeMsgpack, mustMsgpack(t, valid)[:10], 400, "invalid"},
		{"MsgpackWithTrailingBytes", "POST", Q + "/invocations", api.ContentTypeMsgpack, append(mustMsgpack(t, valid), 0x01), 400, "invalid"},
		{"MsgpackOfWrongShape", "POST", Q + "/invocations", api.ContentTypeMsgpack, mustMsgpack(t, []int{1, 2}), 400, "invalid"},
		{"MalformedJSON", "POST", Q + "/invocations", api.ContentTypeJSON, []byte(`{"key": "default", "priority": `), 400, "invalid"},
		{"JSONWithTrailingData", "POST", Q + "/invocations", api.ContentTypeJSON, []byte(`{"key":"k"} {}`), 400, "invalid"},
		{"JSONWrongTypes", "POST", Q + "/invocations", api.ContentTypeJSON, []byte(`{"priority":"high"}`), 400, "invalid"},
		{"EmptyBody", "POST", Q + "/invocations", api.ContentTypeJSON, nil, 400, "invalid"},
		{"BadQueueName", "POST", "/v1/namespaces/default/queues/jobs%21/invocations", api.ContentTypeJSON, []byte(`{}`), 400, "invalid"},
		{"NoContentType", "POST", Q + "/invocations", "", []byte(`{"key":"k"}`), 415, "unsupported_media_type"},
		{"TextPlain", "POST", Q + "/invocations", "text/plain", []byte(`{"key":"k"}`), 415, "unsupported_media_type"},
		{"FormEncoded", "POST", Q + "/invocations", "application/x-www-form-urlencoded", []byte(`namespace=default&queue=jobs`), 415, "unsupported_media_type"},
		{"Oversized", "POST", Q + "/invocations", api.ContentTypeJSON, []byte(`{"key":"` + strings.Repeat("k", 5000) + `"}`), 413, "invalid"},
		{"OversizedBatch", "POST", Q + "/invocations/batch", api.ContentTypeMsgpack, mustMsgpack(t, &api.SubmitBatchRequest{Invocations: []api.SubmitInvocation{{Payload: api.Value{Wire: make([]byte, 5000)}}}}), 413, "invalid"},
		{"UnknownRoute", "GET", "/v1/nope", "", nil, 404, "route_not_found"},
		{"UnknownVersion", "POST", "/v2/namespaces/default/queues/jobs/invocations", api.ContentTypeJSON, []byte(`{}`), 404, "route_not_found"},
		{"WrongMethod", "DELETE", Q + "/invocations", "", nil, 405, "method_not_allowed"},
		{"WrongMethodOnID", "DELETE", "/v1/invocations/01ARZ3NDEKTSV4RRFFQ69G5FAV", "", nil, 405, "method_not_allowed"},
		{"IDWithDotDot", "GET", "/v1/invocations/..%2F..%2Fv1%2Ftokens", "", nil, 404, "route_not_found"},
		{"IDWithDots", "GET", "/v1/invocations/..%2E", "", nil, 400, "invalid"},
		{"IDWithEncodedSlash", "POST", "/v1/invocations/01ARZ3NDEKTSV4RRFFQ69G5FAV%2Fkill/cancel", "", nil, 400, "invalid"},
		{"IDNotULID", "GET", "/v1/invocations/%00%00", "", nil, 400, "invalid"},
		{"UncleanPath", "GET", "/v1/invocations/x/../../tokens", "", nil, 404, "route_not_found"},
		{"DoubleSlash", "POST", "/v1/namespaces/default//queues/jobs/invocations", api.ContentTypeJSON, []byte(`{}`), 404, "route_not_found"},
		{"UnknownID", "GET", "/v1/invocations/01ARZ3NDEKTSV4RRFFQ69G5FAV", "", nil, 404, "not_found"},
		{"BadState", "GET", Q + "/count?state=lost", "", nil, 400, "invalid"},
		{"BadWait", "GET", "/v1/invocations/01ARZ3NDEKTSV4RRFFQ69G5FAV/wait?timeout=soon", "", nil, 400, "invalid"},
		{"NegativeWait", "GET", Q + "/topics/t/frames?wait=-1", "", nil, 400, "invalid"},
		{"BadOutcome", "POST", "/v1/settle", api.ContentTypeJSON, []byte(`{"settles":[{"id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","token":"x","outcome":"maybe"}]}`), 400, "invalid"},
		{"BadClaimKind", "POST", Q + "/claim", api.ContentTypeJSON, []byte(`{"kind":"lifo"}`), 400, "invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(t, tc.method, tc.path, tc.contentType, tc.body, "")
			r.requireError(t, tc.status, tc.code)
			require.NotEmpty(t, r.header.Get(server.RequestIDHeader), "every answer has a request id")
			if tc.status == 405 {
				require.NotEmpty(t, r.header.Get("Allow"))
			}
		})
	}
	require.Zero(t, b.total(t), "nothing was written by bad requests")

	// The same valid request goes through, so the cases above failed for their own reason.
	r := b.do(t, "POST", Q+"/invocations", api.ContentTypeMsgpack, mustMsgpack(t, valid), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, api.ContentTypeMsgpack, r.header.Get("Content-Type"), "msgpack in, msgpack out")
	var sr map[string]any
	require.NoError(t, msgpack.Unmarshal(r.body, &sr), "the answer is standard msgpack (an independent decoder reads it)")
	require.NoError(t, plane.ValidateID(sr["id"].(string)))
	require.Equal(t, false, sr["existing"])
	require.Equal(t, int64(1), b.total(t))
}

func TestInvalidDetailsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	r := b.doJSON(t, "POST", "/v1/namespaces/default/queues/bad%20queue%21/invocations", map[string]any{}, "")
	eb := r.requireError(t, 400, "invalid")
	require.NotNil(t, eb.Details)
	require.Equal(t, "queue name", eb.Details.Field)
	require.Equal(t, plane.NameRule, eb.Details.Rule)
	require.Equal(t, "bad queue!", eb.Details.Value)
}

func TestAdmissionOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	r := b.doJSON(t, "PUT", Q+"/admission", map[string]any{"rate_limit": 0.5, "burst": 1}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	sub := map[string]any{}
	first := time.Now() // the bucket is emptied after this
	require.Equal(t, 200, b.doJSON(t, "POST", Q+"/invocations", sub, "").status)
	r = b.doJSON(t, "POST", Q+"/invocations", sub, "")
	between := time.Since(first) // the refused submit came at most this long after
	eb := r.requireError(t, 429, "rate_limited")
	require.Equal(t, "2", r.header.Get("Retry-After"), "a token refills in 2 s at 0.5/s")
	// The token refills 2 s after the first submit took the last one: the wait is 2 s less
	// the time between the two submits (millisecond clock).
	require.LessOrEqual(t, eb.Details.RetryAfter, 2.001)
	require.GreaterOrEqual(t, eb.Details.RetryAfter, 2-between.Seconds()-0.002)

	r = b.doJSON(t, "PUT", "/v1/namespaces/default/queues/full/admission", map[string]any{"max_depth": 1}, "")
	require.Equal(t, 200, r.status)
	full := map[string]any{}
	require.Equal(t, 200, b.doJSON(t, "POST", "/v1/namespaces/default/queues/full/invocations", full, "").status)
	r = b.doJSON(t, "POST", "/v1/namespaces/default/queues/full/invocations", full, "")
	r.requireError(t, 429, "queue_full")
	require.Empty(t, r.header.Get("Retry-After"), "no wait is known for a full queue")
	require.Equal(t, int64(2), b.total(t))
}

// TestAdmissionIfMatchEmptyTag: an If-Match that carries no tag (`""`, `W/""`) is a
// malformed condition, refused as invalid with nothing written. Before, it was read as no
// condition at all and the PUT overwrote whatever block was stored meanwhile: the lost
// update a conditional write exists to prevent.
func TestAdmissionIfMatchEmptyTag(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.Equal(t, 200, b.doJSON(t, "PUT", Q+"/admission", map[string]any{"concurrency_limit": 2}, "").status)
	for _, tag := range []string{`""`, `W/""`, ` `} {
		req, err := http.NewRequestWithContext(t.Context(), "PUT", b.ts.URL+Q+"/admission",
			strings.NewReader(`{"concurrency_limit": 3}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", api.ContentTypeJSON)
		req.Header.Set("If-Match", tag)
		resp, err := b.ts.Client().Do(req)
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		r := &response{status: resp.StatusCode, header: resp.Header, body: data}
		eb := r.requireError(t, 400, "invalid")
		require.Equal(t, "If-Match", eb.Details.Field, "If-Match %q", tag)
		a, err := b.back.QueueAdmissionGet(t.Context(), "default", "jobs")
		require.NoError(t, err)
		require.EqualValues(t, 2, a.ConcurrencyLimit, "If-Match %q: nothing written", tag)
	}
}

// TestAdmissionNullKeyOverride: a null value in a per-key override map (JSON null, msgpack
// nil) is no override, as the CLI's KEY=-: the key takes the queue's default, and the
// answer and a later GET leave it out. Before, JSON read null as 0 — a concurrency or rate
// limit of 0 ("no limit for that key") was stored silently, and a weight was refused as
// "invalid key_weights[a] 0" — while msgpack (the Python SDK) refused it as "got nil".
func TestAdmissionNullKeyOverride(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	body := map[string]any{"concurrency_limit": 2,
		"concurrency_limits": map[string]any{"a": nil, "b": 5},
		"key_weights":        map[string]any{"a": nil, "b": 2.0},
		"key_rate_limits":    map[string]any{"a": nil, "b": 3.0},
		"key_bursts":         map[string]any{"a": nil, "b": 4}}
	mp, err := msgpack.Marshal(body)
	require.NoError(t, err)
	js, err := json.Marshal(body)
	require.NoError(t, err)
	for name, send := range map[string]func() *response{
		"json":    func() *response { return b.do(t, "PUT", Q+"/admission", api.ContentTypeJSON, js, "") },
		"msgpack": func() *response { return b.do(t, "PUT", Q+"/admission", api.ContentTypeMsgpack, mp, "") },
	} {
		_, err := b.back.QueueAdmissionSet(t.Context(), &plane.AdmissionParams{Namespace: "default", Queue: "jobs"})
		require.NoError(t, err)
		r := send()
		require.Equal(t, 200, r.status, "%s: %s", name, r.body)
		require.NotContains(t, string(r.body), `"a"`, "%s: the answer leaves the key out", name)
		a, err := b.back.QueueAdmissionGet(t.Context(), "default", "jobs")
		require.NoError(t, err)
		require.NotNil(t, a, name)
		require.Equal(t, map[string]int64{"b": 5}, a.ConcurrencyLimits, "%s: a null limit is no override", name)
		require.Equal(t, map[string]float64{"b": 2}, a.KeyWeights, "%s: a null weight is the default", name)
		require.Equal(t, map[string]float64{"b": 3}, a.KeyRateLimits, "%s: a null rate is no override", name)
		require.Equal(t, map[string]int64{"b": 4}, a.KeyBursts, "%s: a null bucket is no override", name)
		got := b.doJSON(t, "GET", Q+"/admission", nil, "")
		require.Equal(t, 200, got.status)
		require.NotContains(t, string(got.body), `"a"`, "%s: the answer leaves the key out", name)
	}
	// Only nulls: no override map at all.
	r := b.doJSON(t, "PUT", Q+"/admission", map[string]any{"concurrency_limit": 2, "key_weights": map[string]any{"a": nil}}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	a, err := b.back.QueueAdmissionGet(t.Context(), "default", "jobs")
	require.NoError(t, err)
	require.Empty(t, a.KeyWeights)
}

func TestBlockedSubmitHeldWithinLongPollLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{LongPollMax: 300 * time.Millisecond})
	require.Equal(t, 200, b.doJSON(t, "PUT", Q+"/admission", map[string]any{"max_depth": 1, "on_full": "block"}, "").status)
	sub := map[string]any{}
	require.Equal(t, 200, b.doJSON(t, "POST", Q+"/invocations", sub, "").status)
	start := time.Now()
	r := b.doJSON(t, "POST", Q+"/invocations", map[string]any{"max_wait": 30}, "")
	eb := r.requireError(t, 429, "queue_full")
	require.Equal(t, "deadline", eb.Details.Cause, "the long-poll limit ended the block")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "held open up to the limit")
	require.Less(t, time.Since(start), 15*time.Second, "and no longer (not the submit's 30 s max_wait)")
	require.Equal(t, int64(1), b.total(t))
}

func TestLongPollLimitAndStop(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{MaxLongPolls: 1})
	claim := map[string]any{"wait": 30}
	first := make(chan *response, 1)
	go func() { first <- b.doJSON(t, "POST", Q+"/claim", claim, "") }()

	// Wait until the first claim holds the only slot: a second one is refused.
	require.Eventually(t, func() bool {
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil, "").body), "lakeshore_http_long_polls_open 1")
	}, 10*time.Second, 5*time.Millisecond)
	r := b.doJSON(t, "POST", Q+"/claim", claim, "")
	r.requireError(t, 503, "too_many_long_polls")
	require.Equal(t, "1", r.header.Get("Retry-After"))
	// A claim that does not wait needs no slot.
	require.Equal(t, 200, b.doJSON(t, "POST", Q+"/claim", map[string]any{}, "").status)

	b.srv.Stop()
	r = <-first
	r.requireError(t, 503, "shutting_down")
	require.Equal(t, "1", r.header.Get("Retry-After"))
	b.doJSON(t, "POST", Q+"/claim", claim, "").requireError(t, 503, "shutting_down")
	b.do(t, "GET", "/readyz", "", nil, "").requireError(t, 503, "shutting_down")
	require.Equal(t, 200, b.do(t, "GET", "/healthz", "", nil, "").status)
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.Equal(t, 200, b.do(t, "GET", "/readyz", "", nil, "").status)
	require.Equal(t, 200, b.do(t, "GET", "/healthz", "", nil, "").status)
	require.NoError(t, b.back.Close())
	b.do(t, "GET", "/readyz", "", nil, "").requireError(t, 503, "closed")
}

func TestRequestIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req, err := http.NewRequest("GET", b.ts.URL+"/healthz", nil)
	require.NoError(t, err)
	req.Header.Set(server.RequestIDHeader, "my-req-42")
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "my-req-42", resp.Header.Get(server.RequestIDHeader), "a client's id is kept")
	require.Contains(t, b.logs.String(), "request_id=my-req-42", "and logged")

	req.Header.Set(server.RequestIDHeader, "bad id\twith spaces")
	resp, err = b.ts.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.NoError(t, plane.ValidateID(resp.Header.Get(server.RequestIDHeader)), "an unusable one is replaced by a ULID")
}

// TestAdmissionSetAnswersWhatGetShows: PUT …/admission answers the block as GET then shows
// it, defaults filled in (the burst a rate gives when none was set, on_full), also when the
// block set is the one read with a changed rate (the burst then follows the rate).
func TestAdmissionSetAnswersWhatGetShows(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, body := range []map[string]any{
		{"rate_limit": 10},
		{"rate_limit": 1000, "burst": 10, "on_full": "reject"}, // the block read, the rate raised
		{"rate_limit": 5, "burst": 20},
	} {
		put := b.doJSON(t, "PUT", Q+"/admission", body, "")
		require.Equal(t, 200, put.status, "%s", put.body)
		got := b.doJSON(t, "GET", Q+"/admission", nil, "")
		require.Equal(t, 200, got.status, "%s", got.body)
		require.JSONEq(t, string(got.body), string(put.body), "PUT %v answers what GET shows", body)
	}
	got := b.doJSON(t, "GET", Q+"/admission", nil, "")
	require.Contains(t, string(got.body), `"burst":20`, "an explicit burst stays")
}
