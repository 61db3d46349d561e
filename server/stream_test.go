package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

func (b *testBundle) post(t *testing.T, topic, value string, final bool) {
	t.Helper()
	_, err := b.back.FramePost(context.Background(), &plane.FramePostParams{Journal: plane.Journal{Namespace: "default", Queue: "jobs", Topic: topic},
		Value: []byte(value), Final: final})
	require.NoError(t, err)
}

func (b *testBundle) streamRequest(t *testing.T, path, accept string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", b.ts.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", accept)
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestStreamSSE(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.post(t, "news", "a", false)
	resp := b.streamRequest(t, Q+"/topics/news/stream?since=-1&timeout=20", "text/event-stream")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, api.ContentTypeEventStream, resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	var events []api.Frame
	var first string
	read := func() {
		for sc.Scan() {
			line := sc.Text()
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				if first == "" {
					first = data
				}
				var f api.Frame
				require.NoError(t, json.Unmarshal([]byte(data), &f))
				events = append(events, f)
				return
			}
		}
	}
	read()
	require.Len(t, events, 1)
	require.Equal(t, "a", string(events[0].Value.Wire), "0x61 is the fixint 97: JSON 97 maps back to it")
	require.Contains(t, first, `"value":97`, "frame values are plain JSON in SSE")
	// Frames posted while the stream is open arrive live, then END closes it.
	b.post(t, "news", "b", false)
	read()
	b.post(t, "news", "", true)
	read()
	require.Len(t, events, 3)
	require.Equal(t, "b", string(events[1].Value.Wire))
	require.Equal(t, string(plane.FrameEnd), events[2].Kind)
	require.Equal(t, int64(2), events[2].Seq)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the server ends the stream after END")
	require.NotContains(t, string(rest), "data:")
}

func TestStreamMsgpack(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.post(t, "t", "x", false)
	b.post(t, "t", "y", false)
	b.post(t, "t", "", true)
	resp := b.streamRequest(t, Q+"/topics/t/stream?since=0", api.ContentTypeMsgpack)
	require.Equal(t, api.ContentTypeMsgpack, resp.Header.Get("Content-Type"))
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	// An independent decoder reads the sequence of maps.
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	var generic []map[string]any
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		generic = append(generic, m)
	}
	require.Len(t, generic, 2)
	var got []api.StreamEvent
	for len(data) > 0 {
		var ev api.StreamEvent
		data, err = ev.UnmarshalMsg(data)
		require.NoError(t, err)
		got = append(got, ev)
	}
	require.Len(t, got, 2, "frames after since=0: y and END")
	require.Equal(t, "y", string(got[0].Frame.Value.Wire))
	require.Equal(t, string(plane.FrameEnd), got[1].Frame.Kind)
}

func TestStreamSilenceAndUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	resp := b.streamRequest(t, Q+"/topics/quiet/stream?timeout=0.2", api.ContentTypeMsgpack)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var ev api.StreamEvent
	for ev.Error == nil {
		ev = api.StreamEvent{}
		data, err = ev.UnmarshalMsg(data)
		require.NoError(t, err)
	}
	require.Equal(t, "timeout", ev.Error.Code, "silence ends the stream with a timeout error")

	r := b.do(t, "GET", "/v1/invocations/01ARZ3NDEKTSV4RRFFQ69G5FAV/stream", "", nil, "")
	r.requireError(t, 404, "not_found")
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.Equal(t, 200, b.doJSON(t, "POST", Q+"/invocations", map[string]any{}, "").status)
	require.Equal(t, 200, b.doJSON(t, "POST", Q+"/invocations", map[string]any{}, "").status)
	require.Equal(t, 200, b.doJSON(t, "POST", Q+"/claim", map[string]any{}, "").status)
	r := b.do(t, "GET", "/metrics", "", nil, "")
	require.Equal(t, 200, r.status)
	text := string(r.body)
	for _, want := range []string{
		`lakeshore_queue_invocations{namespace="default",queue="jobs",state="queued"} 1`,
		`lakeshore_queue_invocations{namespace="default",queue="jobs",state="running"} 1`,
		`lakeshore_submits_total{namespace="default",queue="jobs"} 2`,
		`lakeshore_claims_total{namespace="default",queue="jobs"} 1`,
		`lakeshore_http_request_duration_seconds_count{route="POST /v1/namespaces/{namespace}/queues/{queue}/invocations",status="200"} 2`,
		`lakeshore_http_long_polls_open 0`,
	} {
		require.Contains(t, text, want)
	}
}

// TestStreamEndsWhenTokenRevoked: a live stream opened with a stored token stops
// delivering frames once the token is revoked: the next turn (within a second) ends it
// with an error event, code unauthorized, and no frame posted after the revocation
// reaches it. (On the code before, the open stream went on delivering every frame posted
// after the revocation, as long as frames kept coming.)
func TestStreamEndsWhenTokenRevoked(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	secret, tok := b.mint(t, "default", "jobs", 0, plane.PermissionRead)
	b.post(t, "news", "x", false) // the fixint 120
	req, err := http.NewRequestWithContext(t.Context(), "GET", b.ts.URL+Q+"/topics/news/stream?since=-1&timeout=20", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	next := func() string {
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return data
			}
		}
		return ""
	}
	require.Contains(t, next(), `"value":120`)
	r := b.do(t, "DELETE", "/v1/tokens/"+tok.ID, "", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	time.Sleep(1100 * time.Millisecond) // past one recheck interval
	b.post(t, "news", "y", false)       // the fixint 121
	last := next()
	require.NotContains(t, last, `"value":121`, "a frame posted after the revocation reached the revoked token's stream")
	require.Contains(t, last, `"unauthorized"`)
	require.Empty(t, next(), "the stream ends after the error")
}

// TestDataStreamEndsWhenTokenRevoked: GET D/stream opened with a stored token ends once the
// token is revoked, without the records put after the revocation (on the code before, it
// went on delivering every record put while it was open).
func TestDataStreamEndsWhenTokenRevoked(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, &server.Config{AdminToken: adminSecret})
	put := func(body string) {
		r := b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(body), adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	put(`{"records": [{"x": 1}]}`)
	secret, tok := b.mint(t, "default", "*", 0, plane.PermissionDataRead)
	req, err := http.NewRequestWithContext(t.Context(), "GET", b.ts.URL+D+"/stream?offset=0&batch_size=10&idle_timeout=20", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	rd, err := ipc.NewReader(resp.Body)
	require.NoError(t, err)
	defer rd.Release()
	require.True(t, rd.Next(), "the first batch: %v", rd.Err())
	r := b.do(t, "DELETE", "/v1/tokens/"+tok.ID, "", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	time.Sleep(1100 * time.Millisecond) // past one recheck interval
	put(`{"records": [{"x": 2}]}`)
	done := make(chan bool, 1)
	go func() { done <- rd.Next() }()
	select {
	case more := <-done:
		require.False(t, more, "a record put after the revocation reached the revoked token's stream")
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked token's stream went on waiting")
	}
}
