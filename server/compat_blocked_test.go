package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestCompatBlockedSubmitIsBoundLikeOurs: a compatibility submit (POST …/producer/submit)
// to a full queue with on_full=block waits for room as our own submit does, no longer: the
// server's long-poll limit (Config.LongPollMax, submitBounded, the one bound of both), then
// it answers the same 429 queue_full body as ours. On the old code it waited as long as its
// client stayed connected (here: until the failsafe below gave up on it).
func TestCompatBlockedSubmitIsBoundLikeOurs(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{LongPollMax: 200 * time.Millisecond})
	r := b.doJSON(t, "PUT", Q+"/admission", map[string]any{"max_depth": 1, "on_full": "block"}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	b.submitDirect(t) // the queue is full

	ours := b.doJSON(t, "POST", Q+"/invocations", map[string]any{"payload": "ours"}, "")
	var oursBody api.ErrorBody
	require.NoError(t, json.Unmarshal(ours.body, &oursBody), "%s", ours.body)
	require.Equal(t, 429, ours.status, "%s", ours.body)
	require.Equal(t, plane.ErrQueueFull.Code, oursBody.Code)

	raw, err := msgpack.Marshal(map[string]any{"queue": "jobs", "args_blob": []byte{0xa6, 'c', 'o', 'm', 'p', 'a', 't'}})
	require.NoError(t, err)
	answer := make(chan *response, 1)
	go func() {
		answer <- b.do(t, "POST", "/v1/namespaces/default/producer/submit", "application/x-msgpack", raw, "")
	}()
	var compat *response
	select {
	case compat = <-answer:
	case <-time.After(time.Minute): // a failsafe for the old code's endless wait, not a verdict on speed
		t.Fatal("the compatibility submit still waits for room a minute later: no bound")
	}
	var compatBody map[string]any // the compatibility routes answer msgpack
	require.NoError(t, msgpack.Unmarshal(compat.body, &compatBody), "%q", compat.body)
	require.Equal(t, ours.status, compat.status, "%v", compatBody)
	require.Equal(t, oursBody.Code, compatBody["code"], "the same answer as our blocked submit's")
	require.Equal(t, oursBody.Message, compatBody["message"])
}
