package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/server"
)

// jsonCall sends a JSON body (or none) as curl would and decodes the JSON answer into a
// generic value; no msgpack anywhere.
func (b *testBundle) jsonCall(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	ct := ""
	if body != "" {
		ct = api.ContentTypeJSON
	}
	r := b.do(t, method, path, ct, []byte(body), "")
	require.Equal(t, api.ContentTypeJSON, r.header.Get("Content-Type"), "JSON in (or nothing), JSON out: %s", r.body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(r.body, &out), "%s", r.body)
	return r.status, out
}

// TestPlainJSONLifecycle: a client speaking only JSON over plain HTTP (what curl does)
// submits {"x": 1}, claims it, posts a frame, acks with a result, waits for it and reads the
// frames, all as plain JSON values.
func TestPlainJSONLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	status, sub := b.jsonCall(t, "POST", Q+"/invocations", `{"payload": {"x": 1}, "key": "order-42"}`)
	require.Equal(t, 200, status, "%v", sub)
	id := sub["id"].(string)
	require.Equal(t, false, sub["existing"])

	// Nothing to wait for yet: 200 with done=false, not 408.
	status, w := b.jsonCall(t, "GET", "/v1/invocations/"+id+"/wait?timeout=0.05", "")
	require.Equal(t, 200, status)
	require.Equal(t, map[string]any{"done": false}, w)

	status, cl := b.jsonCall(t, "POST", Q+"/claim", `{"max": 4, "wait": 1}`)
	require.Equal(t, 200, status, "%v", cl)
	jobs := cl["jobs"].([]any)
	require.Len(t, jobs, 1)
	job := jobs[0].(map[string]any)
	require.Equal(t, id, job["id"])
	require.Equal(t, map[string]any{"x": 1.0}, job["payload"], "the payload comes back as the JSON it went in as")
	token := job["token"].(string)

	status, p := b.jsonCall(t, "POST", "/v1/invocations/"+id+"/frames", `{"token": "`+token+`", "value": {"step": 1, "loss": 0.5}}`)
	require.Equal(t, 200, status, "%v", p)
	status, hb := b.jsonCall(t, "POST", "/v1/invocations/"+id+"/heartbeat", `{"token": "`+token+`", "lease_ttl": 60}`)
	require.Equal(t, 200, status, "%v", hb)
	_, err := time.Parse(time.RFC3339Nano, hb["lease_expires_at"].(string))
	require.NoError(t, err)

	status, st := b.jsonCall(t, "POST", "/v1/invocations/"+id+"/settle", `{"token": "`+token+`", "outcome": "succeeded", "result": {"y": [1, 2.5, "z"]}}`)
	require.Equal(t, 200, status, "%v", st)
	require.Empty(t, st)

	status, w = b.jsonCall(t, "GET", "/v1/invocations/"+id+"/wait?timeout=5", "")
	require.Equal(t, 200, status)
	require.Equal(t, true, w["done"])
	inv := w["invocation"].(map[string]any)
	require.Equal(t, "succeeded", inv["state"])
	require.Equal(t, map[string]any{"y": []any{1.0, 2.5, "z"}}, inv["result"])
	require.Equal(t, map[string]any{"x": 1.0}, inv["payload"])

	status, fr := b.jsonCall(t, "GET", "/v1/invocations/"+id+"/frames?since=-1", "")
	require.Equal(t, 200, status)
	frames := fr["frames"].([]any)
	require.Len(t, frames, 2, "the VALUE frame and the END frame of the ack")
	require.Equal(t, map[string]any{"step": 1.0, "loss": 0.5}, frames[0].(map[string]any)["value"])
	require.Equal(t, "END", frames[1].(map[string]any)["kind"])
	require.Equal(t, true, fr["closed"])

	// The listing finds it, without payloads.
	status, ls := b.jsonCall(t, "GET", Q+"/invocations?state=succeeded&order=oldest&limit=10", "")
	if status == 501 {
		t.Log("the plane does not list yet:", ls)
	} else {
		require.Equal(t, 200, status, "%v", ls)
		invs := ls["invocations"].([]any)
		require.Len(t, invs, 1)
		require.NotContains(t, invs[0], "payload")
	}

	// Extension values go through as tagged objects.
	status, sub = b.jsonCall(t, "POST", Q+"/invocations",
		`{"payload": {"a": {"$ndarray": {"dtype": "float32", "shape": [2], "data": "AACAPwAAAEA="}}, "b": {"$bytes": "AAE="}}}`)
	require.Equal(t, 200, status, "%v", sub)
	status, got := b.jsonCall(t, "GET", "/v1/invocations/"+sub["id"].(string), "")
	require.Equal(t, 200, status)
	require.Equal(t, map[string]any{"a": map[string]any{"$ndarray": map[string]any{"dtype": "float32", "shape": []any{2.0}, "data": "AACAPwAAAEA="}},
		"b": map[string]any{"$bytes": "AAE="}}, got["payload"])
}

// TestWaitTimeoutIsNotAnError: a long-poll that ends with nothing is a 200 "nothing yet"
// (issue 11 item 20; 408 before), and a graceful shutdown ending long-polls logs no ERROR.
func TestWaitTimeoutIsNotAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	status, sub := b.jsonCall(t, "POST", Q+"/invocations", `{}`)
	require.Equal(t, 200, status)
	status, w := b.jsonCall(t, "GET", "/v1/invocations/"+sub["id"].(string)+"/wait?timeout=0.01", "")
	require.Equal(t, 200, status)
	require.Equal(t, false, w["done"])

	done := make(chan *response, 3)
	go func() { done <- b.do(t, "GET", "/v1/invocations/"+sub["id"].(string)+"/wait?timeout=30", "", nil, "") }()
	go func() {
		done <- b.do(t, "POST", "/v1/namespaces/default/queues/empty/claim", api.ContentTypeJSON, []byte(`{"wait": 30}`), "")
	}()
	go func() { done <- b.do(t, "GET", Q+"/topics/t/frames?wait=30", "", nil, "") }()
	require.Eventually(t, func() bool {
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil, "").body), "lakeshore_http_long_polls_open 3")
	}, 10*time.Second, 5*time.Millisecond)
	b.srv.Stop()
	for range 3 {
		(<-done).requireError(t, 503, "shutting_down")
	}
	require.NotContains(t, b.logs.String(), "level=ERROR", "ended long-polls are not errors")
}

// TestOneLogLinePerRequest: with LogRequests (serve -v) every successful request is one
// info line; without it they stay at debug.
func TestOneLogLinePerRequest(t *testing.T) {
	t.Parallel()
	for _, verbose := range []bool{false, true} {
		b := setup(t, &server.Config{LogRequests: verbose})
		for range 3 {
			require.Equal(t, 200, b.do(t, "GET", "/healthz", "", nil, "").status)
		}
		logs := b.logs.String()
		require.Equal(t, 3, strings.Count(logs, "route=\"GET /healthz\""), "one line per request")
		level := "level=DEBUG"
		if verbose {
			level = "level=INFO"
		}
		require.Equal(t, 3, strings.Count(logs, level+" msg=request"), logs)
	}
}

// TestIntegerFieldsRefuseExponentForm: an integer field sent as a JSON number with an
// exponent or a fraction ("max": 1e2, "max_attempts": 1e1, 2.0) is 400 invalid naming the
// field and saying an integer is expected, on every route that has one, and nothing is
// stored or claimed: the API promises an integer as "a number without fraction or
// exponent" (docs/http-api.md), never a float truncated or rounded. A float field
// (priority) takes an exponent: 1e300 is a priority, 1e309 beyond a float's range is
// refused saying so.
func TestIntegerFieldsRefuseExponentForm(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	Q := "/v1/namespaces/default/queues/q"
	const rule = "want an integer (digits, no fraction or exponent)"
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", Q + "/claim", `{"max": 1e2}`, "max"},
		{"POST", Q + "/claim", `{"max": 1E0}`, "max"},
		{"POST", Q + "/claim", `{"max": 2.0}`, "max"},
		{"POST", Q + "/invocations", `{"payload": 1, "max_attempts": 1e1}`, "max_attempts"},
		{"POST", Q + "/invocations/batch", `{"invocations": [{"payload": 1}, {"payload": 1, "max_attempts": 3e0}]}`, "invocations[1].max_attempts"},
		{"PUT", Q + "/admission", `{"concurrency_limit": 1e1}`, "concurrency_limit"},
		{"PUT", Q + "/admission", `{"max_depth": 1e3}`, "max_depth"},
		{"PUT", "/v1/namespaces/default/schedules/s", `{"queue": "q", "every": 60, "max_attempts": 1e1}`, "max_attempts"},
	} {
		r := b.do(t, c.method, c.path, api.ContentTypeJSON, []byte(c.body), "")
		e := r.requireError(t, 400, "invalid")
		require.Equal(t, c.field, e.Details.Field, "%s %s", c.path, c.body)
		require.Contains(t, e.Message, rule, "%s %s", c.path, c.body)
	}
	require.Zero(t, b.total(t), "nothing was stored")
	r := b.do(t, "GET", "/v1/namespaces/default/queues/q/admission", "", nil, "")
	require.NotContains(t, string(r.body), "concurrency_limit", "no limit was set")

	r = b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(`{"payload": 1, "priority": 1e300}`), "")
	require.Equal(t, 200, r.status, "a float field takes an exponent: %s", r.body)
	e := b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(`{"payload": 1, "priority": 1e309}`), "").requireError(t, 400, "invalid")
	require.Equal(t, "priority", e.Details.Field)
	require.Contains(t, e.Message, "out of range")
	require.EqualValues(t, 1, b.total(t))
}
