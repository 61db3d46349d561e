package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestDataRefusedPutCreatesNothing: a put that the server refuses (a body that does not
// decode, a bad partition name, records a store refuses whatever the queue holds, a bad
// put id or back-pressure parameters, a put back-pressure refuses at a new queue's
// version 0, a bad version), on each route that creates its queue
// (POST D/records, D/kv, D/version), creates no queue: nothing is listed, no directory is
// made, and the refused put does not count against the namespace's data-queue cap; a good
// put of each route still creates its queue. (On the code before, each route opened its
// queue with create before reading the body, so every refused put here left an empty
// queue behind, counted by the cap; until 2026-12-07 the put back-pressure refused did.)
func TestDataRefusedPutCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, &server.Config{DataDir: dir, MaxDataQueuesPerNamespace: 4})
	t.Cleanup(func() { require.NoError(t, b.srv.Close(context.Background())) })
	const ns = "/v1/namespaces/team-a/data/"
	listed := func() []string {
		t.Helper()
		r := b.do(t, "GET", "/v1/namespaces/team-a/data", "", nil, "")
		require.Equal(t, 200, r.status, "%s", r.body)
		var out api.DataQueuesResponse
		require.NoError(t, json.Unmarshal(r.body, &out))
		return out.Queues
	}
	r := b.do(t, "POST", ns+"held/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)

	for _, c := range []struct{ path, contentType, body, code string }{
		{"/records", api.ContentTypeJSON, `{"records": [`, "invalid"},
		{"/records", api.ContentTypeJSON, `{"records": [null]}`, "invalid"},
		{"/records?partition=_bad", api.ContentTypeJSON, `{"records": [{"x": 1}]}`, "invalid"},
		{"/records", api.ContentTypeJSON, `{"partition": "no/slash", "records": [{"x": 1}]}`, "invalid"},
		{"/records?partition=p1", api.ContentTypeJSON, `{"partition": "p2", "records": [{"x": 1}]}`, "invalid"},
		{"/records", api.ContentTypeJSON, `{"records": [{"x": 1}, {"x": "one"}]}`, "incompatible_type"},
		{"/records", api.ContentTypeJSON, `{"records": [{"z": 18446744073709551615}]}`, "unsupported_value"},
		{"/records", api.ContentTypeJSON, `{"records": [{"weight_version": -1}]}`, "invalid"},
		{"/records?admission_block=true", api.ContentTypeJSON, `{"records": [{"x": 1}]}`, "invalid"},
		{"/records?max_unconsumed=-1&admission_task=t", api.ContentTypeJSON, `{"records": [{"x": 1}]}`, "invalid"},
		{"/records?admission_task=t", api.ContentTypeJSON, `{"records": [{"x": 1}]}`, "invalid"},
		{"/records?max_ahead=5&admission_block=true&admission_timeout=0", api.ContentTypeJSON, `{"records": [{"x": 1}]}`, "invalid"},
		// back-pressure: a record meant for version 3 while a new queue is at 0
		{"/records?max_ahead=0", api.ContentTypeJSON, `{"records": [{"x": 1, "weight_version": 3}]}`, "queue_full"},
		{"/records?max_ahead=2&admission_task=t&max_unconsumed=5", api.ContentTypeJSON, `{"records": [{"target_weight_version": 3}]}`, "queue_full"},
		{"/records", api.ContentTypeArrow, `not an arrow stream`, "invalid"},
		{"/kv", api.ContentTypeJSON, `{"keys": ["k"`, "invalid"},
		{"/kv?partition=_bad", api.ContentTypeJSON, `{"keys": ["k"], "records": [{"x": 1}]}`, "invalid"},
		{"/kv", api.ContentTypeJSON, `{"keys": [""], "records": [{"x": 1}]}`, "invalid"},
		{"/kv", api.ContentTypeJSON, `{"keys": ["a", "b"], "records": [{"x": 1}]}`, "invalid"},
		{"/kv", api.ContentTypeJSON, `{"keys": ["a", "b"], "records": [{"x": 1}, {"x": "one"}]}`, "incompatible_type"},
		{"/version", api.ContentTypeJSON, `{"version": `, "invalid"},
		{"/version", api.ContentTypeJSON, `{"version": -1}`, "invalid"},
	} {
		r := b.do(t, "POST", ns+"fresh"+c.path, c.contentType, []byte(c.body), "")
		require.GreaterOrEqual(t, r.status, 400, "%s %s: %s", c.path, c.body, r.body)
		require.Less(t, r.status, 500, "%s %s: %s", c.path, c.body, r.body)
		var eb api.DataErrorBody
		require.NoError(t, json.Unmarshal(r.body, &eb), "%s %s: %s", c.path, c.body, r.body)
		require.Equal(t, c.code, eb.Code, "%s %s: %s", c.path, c.body, eb.Message)
		require.Equal(t, []string{"held"}, listed(), "the refused %s %s created no queue", c.path, c.body)
		_, err := os.Stat(filepath.Join(dir, "team-a", "fresh"))
		require.ErrorIs(t, err, os.ErrNotExist, "the refused %s %s made no directory", c.path, c.body)
	}

	// The refused puts took no room under the cap (4): each route's good put creates its
	// queue, and the fifth queue is the one refused.
	for _, c := range []struct{ queue, path, body string }{
		{"r", "/records", `{"records": [{"x": 1}]}`},
		{"k", "/kv", `{"keys": ["k"], "records": [{"x": 1}]}`},
		{"v", "/version", `{"version": 1}`},
	} {
		r := b.do(t, "POST", ns+c.queue+c.path, api.ContentTypeJSON, []byte(c.body), "")
		require.Equal(t, 200, r.status, "%s: %s", c.path, r.body)
	}
	require.Equal(t, []string{"held", "k", "r", "v"}, listed())
	r = b.do(t, "GET", ns+"v/version", "", nil, "")
	require.JSONEq(t, `{"version": 1}`, string(r.body))
	b.do(t, "POST", ns+"fresh/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), "").requireError(t, 409, "limit_exceeded")
}

// TestDataReadBadPartition: a read's partition filter follows the rule of a put's
// partition, on every read route: GET D/records and GET D/kv refuse a name no put can make
// ("../..", a NUL) with 400 invalid. (On the code before, GET D/kv?partition=../.. answered
// 200 with no keys.)
func TestDataReadBadPartition(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{DataDir: t.TempDir()})
	t.Cleanup(func() { require.NoError(t, b.srv.Close(context.Background())) })
	r := b.do(t, "POST", D+"/kv", api.ContentTypeJSON, []byte(`{"keys": ["k"], "records": [{"x": 1}]}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	for _, route := range []string{"/records", "/kv"} {
		for _, partition := range []string{"../..", "%00", "_bad"} {
			r := b.do(t, "GET", D+route+"?partition="+partition, "", nil, "")
			require.Equal(t, 400, r.status, "GET %s?partition=%s: %s", route, partition, r.body)
			var eb api.DataErrorBody
			require.NoError(t, json.Unmarshal(r.body, &eb), "%s", r.body)
			require.Equal(t, "invalid", eb.Code, "GET %s?partition=%s: %s", route, partition, eb.Message)
			require.Contains(t, eb.Message, "partition")
		}
	}
}

// TestDataPutWithoutDataQueues: a put to a server that serves no data queues is 501
// not_implemented whatever its body, as every data route answers there (the put's body is
// read only once the server serves data queues).
func TestDataPutWithoutDataQueues(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{})
	for _, path := range []string{"/records", "/kv", "/version"} {
		b.do(t, "POST", D+path, api.ContentTypeJSON, []byte(`{"records": [`), "").requireError(t, 501, "not_implemented")
		b.do(t, "POST", D+path, api.ContentTypeJSON, []byte(`{"version": 1, "keys": ["k"], "records": [{"x": 1}]}`), "").requireError(t, 501, "not_implemented")
	}
}

// TestDataPutAdmissionParamsWithoutBound: a put's admission_timeout or admission_block
// without a bound to wait on (max_unconsumed, max_ahead) is 400 invalid naming the
// parameter given. Before 2026-12-07 admission_timeout alone was refused as
// `invalid admission_block "": only with …`, naming a parameter the put did not send.
func TestDataPutAdmissionParamsWithoutBound(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{DataDir: t.TempDir()})
	t.Cleanup(func() { require.NoError(t, b.srv.Close(context.Background())) })
	for _, c := range []struct{ query, field string }{
		{"admission_timeout=5", "admission_timeout"},
		{"admission_block=true", "admission_block"},
		{"admission_block=true&admission_timeout=5", "admission_block"},
	} {
		eb := b.do(t, "POST", D+"/records?"+c.query, api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), "").requireError(t, 400, "invalid")
		require.Contains(t, eb.Message, "invalid "+c.field+" ", "%s: names the parameter given", c.query)
		require.Contains(t, eb.Message, "max_unconsumed or max_ahead", "%s: says what it needs", c.query)
	}
}

// TestDataPutAdmissionTimeoutZeroRefused: admission_timeout=0 is 400 invalid naming it and
// saying what is allowed, and stores nothing. Before 2026-12-07 the server read 0 as
// "the default", so a put told to wait 0 s waited 30 s, while `data put --block 0` and
// Python's Backpressure(timeout=0) refuse 0 (docs/http-api.md).
func TestDataPutAdmissionTimeoutZeroRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{DataDir: t.TempDir()})
	t.Cleanup(func() { require.NoError(t, b.srv.Close(context.Background())) })
	// Every refused value says the one rule, > 0 (until 2026-12-07 -1 was told "use seconds
	// from 0 to …" and "abc" "a number ≥ 0", while 0 is refused).
	for _, q := range []string{"admission_timeout=0", "admission_timeout=0.0", "admission_timeout=-0",
		"admission_timeout=-1", "admission_timeout=abc", "admission_timeout=1e18", "admission_timeout=NaN"} {
		eb := b.do(t, "POST", D+"/records?max_ahead=5&admission_block=true&"+q, api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), "").requireError(t, 400, "invalid")
		require.Contains(t, eb.Message, "invalid admission_timeout ", q)
		require.Contains(t, eb.Message, "seconds > 0", q)
		require.NotContains(t, eb.Message, "from 0", q)
		require.NotContains(t, eb.Message, "≥ 0", q)
		require.Contains(t, eb.Message, "leave admission_timeout out for the default 30 s", q)
	}
}
