package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
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

// crafted are values the wire codec refuses, each with a word of the message that names
// the problem. The server stored 10 of the first 11 before it checked values with wire.
func crafted() map[string]struct {
	value []byte
	says  string
} {
	deep := append(bytes.Repeat([]byte{0x91}, 10000), 0xc0)
	shortArray := []byte{0xc7, 17, 0x01, 0x93, 0xa7, 'f', 'l', 'o', 'a', 't', '3', '2', 0x91, 0x02, 0xc4, 0x04, 0, 0, 0x80, 0x3f}
	return map[string]struct {
		value []byte
		says  string
	}{
		"DeepNesting":       {deep, "deeper than 512"},
		"InvalidUTF8":       {[]byte{0xa2, 0xff, 0xfe}, "UTF-8"},
		"UnknownExtension":  {[]byte{0xd4, 42, 0x00}, "unknown ext type 42"},
		"DuplicateMapKey":   {[]byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02}, "duplicate map key"},
		"ShortNDArrayData":  {shortArray, "needs 8"},
		"IntMapKey":         {[]byte{0x81, 0x01, 0x02}, "str keys"},
		"InvalidUTF8MapKey": {[]byte{0x81, 0xa1, 0xff, 0x01}, "UTF-8"},
		"NeverUsedByte":     {[]byte{0xc1}, "0xc1"},
		"TwoValues":         {[]byte{0x01, 0x02}, "follow"},
		"Truncated":         {[]byte{0x92, 0x01}, "declares 2 elements"},
		"HugeDeclaredArray": {[]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, "array declares"},
		"BadTimestamp":      {[]byte{0xc7, 0x03, 0xff, 0, 0, 0}, "timestamp"},
	}
}

// TestCraftedValuesRefusedAtTheEdge: every value the wire codec refuses is refused at
// submit (one and batch), settle and post, in msgpack bodies, with 400 invalid naming the
// field and the problem; nothing is stored.
func TestCraftedValuesRefusedAtTheEdge(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	job := b.claimOne(t)
	for name, tc := range crafted() {
		t.Run(name, func(t *testing.T) {
			v := api.Value{Wire: tc.value}
			check := func(r *response, field string) {
				t.Helper()
				eb := r.requireError(t, 400, "invalid")
				require.Equal(t, field, eb.Details.Field)
				require.Contains(t, eb.Message, tc.says)
				require.NotRegexp(t, `wire\.[A-Z]|\[\]byte|interface`, eb.Message, "no Go type names")
			}
			check(b.do(t, "POST", Q+"/invocations", api.ContentTypeMsgpack, mustMsgpack(t, &api.SubmitRequest{Payload: v}), ""), "payload")
			check(b.do(t, "POST", Q+"/invocations/batch", api.ContentTypeMsgpack, mustMsgpack(t, &api.SubmitBatchRequest{
				Invocations: []api.SubmitInvocation{{}, {Payload: v}}}), ""), "invocations[1].payload")
			check(b.do(t, "POST", "/v1/settle", api.ContentTypeMsgpack, mustMsgpack(t, &api.SettlesRequest{Settles: []api.Settle{
				{ID: job.ID, Token: job.Token, Outcome: "succeeded", Result: v}}}), ""), "settles[0].result")
			check(b.do(t, "POST", "/v1/invocations/"+job.ID+"/settle", api.ContentTypeMsgpack, mustMsgpack(t, &api.SettleRequest{
				Token: job.Token, Outcome: "succeeded", Result: v}), ""), "result")
			check(b.do(t, "POST", "/v1/invocations/"+job.ID+"/frames", api.ContentTypeMsgpack, mustMsgpack(t, &api.PostRequest{
				Token: job.Token, Value: v}), ""), "value")
			check(b.do(t, "POST", Q+"/topics/t/frames", api.ContentTypeMsgpack, mustMsgpack(t, &api.PostRequest{Value: v}), ""), "value")
			// The same bytes as {"$msgpack": …} in JSON.
			body := `{"payload": {"$msgpack": "` + base64.StdEncoding.EncodeToString(tc.value) + `"}}`
			eb := b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(body), "").requireError(t, 400, "invalid")
			require.Contains(t, eb.Message, "payload")
		})
	}
	require.Equal(t, int64(1), b.total(t), "only the job claimed at the start is stored")
	inv, err := b.back.InvocationGet(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateRunning, inv.State, "no settle went through")
	res, err := b.back.FrameRead(t.Context(), &plane.FrameReadParams{Journal: plane.Journal{InvocationID: job.ID}, Since: -1})
	require.NoError(t, err)
	require.Empty(t, res.Frames, "nothing posted")
}

// TestCraftedJSONValuesRefused: JSON values that do not map to a wire value are refused
// naming the field in JSON terms.
func TestCraftedJSONValuesRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	for name, tc := range map[string]struct{ body, field, says string }{
		"DeepNesting":     {`{"payload": ` + deep + `}`, "request body", "depth"},
		"Nesting600":      {`{"payload": ` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, "payload", "deeper than 512"},
		"UnknownTag":      {`{"payload": {"$frob": 1}}`, "payload", "unknown tag"},
		"ShortNDArray":    {`{"payload": {"$ndarray": {"dtype": "float32", "shape": [2], "data": "AACAPw=="}}}`, "payload", "needs 8"},
		"UnknownDType":    {`{"payload": {"$ndarray": {"dtype": "float128", "shape": [1], "data": ""}}}`, "payload", "dtype"},
		"BadBase64":       {`{"payload": {"$bytes": "!!"}}`, "payload", "base64"},
		"TagOfWrongType":  {`{"payload": {"x": {"$bytes": 5}}}`, "payload", "$bytes"},
		"HugeInteger":     {`{"payload": 99999999999999999999}`, "payload", "2^64"},
		"DuplicateKey":    {`{"payload": {"a": 1, "a": 2}}`, "request body", "duplicate"},
		"BadTimestamp":    {`{"payload": {"$timestamp": "yesterday"}}`, "payload", "RFC 3339"},
		"NestedInBatch":   {`{"invocations": [{}, {"payload": {"x": {"$frob": 1}}}]}`, "invocations[1].payload", "unknown tag"},
		"WrongFieldType":  {`{"priority": "high"}`, "priority", "want a number, got a string"},
		"WrongNestedType": {`{"invocations": [{"max_attempts": 1.5}]}`, "invocations[0].max_attempts", "want an integer"},
		"CaseSensitive":   {`{"Priority": 2}`, "request body field", "unknown field"},
	} {
		t.Run(name, func(t *testing.T) {
			path := Q + "/invocations"
			if strings.Contains(tc.body, "invocations") {
				path += "/batch"
			}
			eb := b.do(t, "POST", path, api.ContentTypeJSON, []byte(tc.body), "").requireError(t, 400, "invalid")
			require.True(t, strings.HasPrefix(eb.Details.Field, tc.field), "field %q", eb.Details.Field)
			require.Contains(t, eb.Message, tc.says)
			require.NotRegexp(t, `api\.[A-Z]|wire\.[A-Z]|Go type|struct|reflect|\[\]byte|interface`, eb.Message, "no Go type names")
		})
	}
	require.Zero(t, b.total(t))
}

// claimOne submits one invocation and claims it directly on the plane.
func (b *testBundle) claimOne(t *testing.T) *plane.Job {
	t.Helper()
	r := b.doJSON(t, "POST", Q+"/invocations", map[string]any{}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	jobs, err := b.back.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "jobs",
		Kind: plane.KindFIFO, Max: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0]
}

// TestAbsentValuesAreNil: an absent payload or result is stored as msgpack nil, a good
// value byte-exact.
func TestAbsentValuesAreNil(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	job := b.claimOne(t)
	require.Equal(t, []byte{0xc0}, job.Payload)
	one, err := wire.Marshal(map[string]any{"step": 1})
	require.NoError(t, err)
	r := b.do(t, "POST", "/v1/invocations/"+job.ID+"/frames", api.ContentTypeMsgpack,
		mustMsgpack(t, &api.PostRequest{Token: job.Token, Value: api.Value{Wire: one}}), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.doJSON(t, "POST", "/v1/invocations/"+job.ID+"/settle", map[string]any{"token": job.Token, "outcome": "succeeded"}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	inv, err := b.back.InvocationGet(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateSucceeded, inv.State)
	require.Equal(t, []byte{0xc0}, inv.Result, "an absent result is msgpack nil")
	res, err := b.back.FrameRead(t.Context(), &plane.FrameReadParams{Journal: plane.Journal{InvocationID: job.ID}, Since: -1})
	require.NoError(t, err)
	require.Equal(t, one, res.Frames[0].Value, "byte-exact")
}

// TestRawValues: with Config.RawValues the server stores msgpack values as opaque bytes.
func TestRawValues(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{RawValues: true})
	r := b.do(t, "POST", Q+"/invocations", api.ContentTypeMsgpack, mustMsgpack(t, &api.SubmitRequest{Payload: api.Value{Wire: []byte("hello")}}), "")
	require.Equal(t, 200, r.status, "%s", r.body)
}

// TestUnknownJSONFields: a JSON body naming a field the request does not have is refused,
// naming it, instead of being silently dropped.
func TestUnknownJSONFields(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, tc := range []struct{ path, body, field string }{
		{Q + "/invocations", `{"prority":5}`, "prority"},
		{Q + "/invocations/batch", `{"invocations":[{"max_attempt":2}]}`, "invocations[0].max_attempt"},
		{Q + "/claim", `{"lease":30}`, "lease"},
		{Q + "/invocations", `{"namespace":"default"}`, "namespace"},
	} {
		r := b.do(t, "POST", tc.path, api.ContentTypeJSON, []byte(tc.body), "")
		eb := r.requireError(t, 400, "invalid")
		require.NotNil(t, eb.Details)
		require.Equal(t, tc.field, eb.Details.Value)
	}
	require.Zero(t, b.total(t))
	r := b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(`{"priority":5}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
}

// TestClientCancelIsNotAServerError: a client that gives up on a long-poll is logged as a
// client cancel with status 499, not as an error 500, in logs and metrics.
func TestClientCancelIsNotAServerError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// A wait for an unknown id is answered at once.
	r := b.do(t, "GET", "/v1/invocations/01ARZ3NDEKTSV4RRFFQ69G5FAV/wait?timeout=30", "", nil, "")
	require.Equal(t, 404, r.status, "unknown id: answered at once")
	// A claim long-polls on an empty queue; the client gives up once the server holds it.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	creq, err := http.NewRequestWithContext(ctx, "POST", b.ts.URL+Q+"/claim", strings.NewReader(`{"wait":30}`))
	require.NoError(t, err)
	creq.Header.Set("Content-Type", api.ContentTypeJSON)
	done := make(chan error, 1)
	go func() {
		resp, err := b.ts.Client().Do(creq)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil, "").body), "lakeshore_http_long_polls_open 1")
	}, 10*time.Second, 5*time.Millisecond, "the claim is held")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Eventually(t, func() bool { return strings.Contains(b.logs.String(), "status=499") }, 5*time.Second, 10*time.Millisecond)
	logs := b.logs.String()
	require.NotContains(t, logs, "status=500")
	require.NotContains(t, logs, "level=ERROR")
	r = b.do(t, "GET", "/metrics", "", nil, "")
	require.Contains(t, string(r.body), `route="POST /v1/namespaces/{namespace}/queues/{queue}/claim",status="499"`)
	require.NotContains(t, string(r.body), `status="500"`)
}

// TestBadValuesNotEchoed: a bad value is quoted in an error answer at most once in the
// message (and once in the rule), cut to plane.MaxQuotedBytes, and never logged: a 1 MiB
// integer literal, map key, tag, idempotency key or data record answers a short 400 and
// logs a short line with the code and field.
func TestBadValuesNotEchoed(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, nil)
	big := strings.Repeat("1", 1<<20)
	Q := "/v1/namespaces/default/queues/q"
	for name, c := range map[string]struct{ path, body string }{
		"integer":         {Q + "/invocations", `{"payload": ` + big + `}`},
		"negative":        {Q + "/invocations", `{"payload": -` + big + `}`},
		"float":           {Q + "/invocations", `{"payload": ` + big + `e400}`},
		"map key":         {Q + "/invocations", `{"payload": {"` + big + `": 1, "` + big + `": 2}}`},
		"tag":             {Q + "/invocations", `{"payload": {"$` + big + `": 1}}`},
		"timestamp":       {Q + "/invocations", `{"payload": {"$timestamp": "` + big + `"}}`},
		"key":             {Q + "/invocations", `{"key": "` + big + `"}`},
		"metadata key":    {Q + "/invocations", `{"metadata": {"` + big + `": "x"}}`},
		"data record":     {D + "/records", `{"records": [{"x": ` + big + `}]}`},
		"data record key": {D + "/records", `{"records": [{"` + big + `": 1}]}`},
		"kv key":          {D + "/kv", `{"keys": ["` + big + `"], "records": [{"x": 1}]}`},
	} {
		before := len(b.logs.String())
		r := b.do(t, "POST", c.path, api.ContentTypeJSON, []byte(c.body), "")
		require.Equal(t, 400, r.status, "%s: %.300s", name, r.body)
		require.Less(t, len(r.body), 4096, "%s: %.300s", name, r.body)
		eb := r.errBody(t)
		require.Equal(t, "invalid", eb.Code, name)
		require.LessOrEqual(t, strings.Count(eb.Message, strings.Repeat("1", 60)), 1, "%s: the value is quoted once: %s", name, eb.Message)
		require.Less(t, len(eb.Message), 600, "%s: %s", name, eb.Message)
		t.Logf("%s: %s", name, eb.Message)
		logs := b.logs.String()[before:]
		require.NotContains(t, logs, "1111111111", "%s: values are never logged", name)
		require.Contains(t, logs, "code=invalid", name)
	}
}
