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

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
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
