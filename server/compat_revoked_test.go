package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestCompatWaitsOfRevokedTokenGetNothing: the compatibility routes that wait (a result
// stream, a poll, an await: server/compat) look their token up again before they hand out
// what came meanwhile, as ours do (recheckToken). A token revoked while they waited gets
// 401 from the poll (the job given back unrun) and the await, and its stream ends without
// the frames posted after the revocation. On the code before, the stream went on
// delivering every frame posted to the topic for as long as it stayed open (no bound),
// the poll handed the revoked token the job, the await the state that came.
func TestCompatWaitsOfRevokedTokenGetNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	secret, tok := b.mint(t, "default", "*", 0, plane.PermissionConsume, plane.PermissionRead, plane.PermissionSubmit)
	pack := func(v any) []byte {
		raw, err := msgpack.Marshal(v)
		require.NoError(t, err)
		return raw
	}
	const mp = "application/x-msgpack"

	// A stream of a topic, open (its headers came) before the revocation.
	req, err := http.NewRequestWithContext(t.Context(), "GET", b.ts.URL+"/v1/namespaces/default/producer/invocations/news/result/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	streamed := make(chan string, 1)
	go func() {
		raw, _ := io.ReadAll(resp.Body)
		streamed <- string(raw)
	}()

	// An await of a running job, and a poll of the (then empty) queue, both parked.
	id := b.submitDirect(t)
	running, err := b.back.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "jobs",
		Kind: plane.KindFIFO, Max: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, running, 1)
	awaited := make(chan *response, 1)
	go func() {
		awaited <- b.do(t, "POST", "/v1/namespaces/default/producer/await", mp, pack(map[string]any{"invocation_id": id, "timeout_s": 25}), secret)
	}()
	polled := make(chan *response, 1)
	go func() {
		polled <- b.do(t, "POST", "/v1/daemon/poll", mp, pack(map[string]any{"worker_id": "w", "queue": "jobs", "timeout_s": 25}), secret)
	}()
	require.Eventually(t, func() bool { // all three parked (authenticated) before the revocation
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil, adminSecret).body), "lakeshore_http_long_polls_open 3")
	}, 10*time.Second, 5*time.Millisecond)
	r := b.do(t, "DELETE", "/v1/tokens/"+tok.ID, "", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	time.Sleep(1100 * time.Millisecond) // past one recheck interval of the waits begun before

	// A frame after the revocation, then the topic closed (so that the stream ends).
	for _, final := range []bool{false, true} {
		r := b.doJSON(t, "POST", "/v1/namespaces/default/queues/_topics/topics/news/frames",
			map[string]any{"value": "after-revocation", "final": final}, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	require.NotContains(t, <-streamed, "after-revocation", "a frame posted after the revocation reached the revoked token's stream")

	errs, err := b.back.InvocationSettleMany(t.Context(), []plane.SettleParams{{ID: id, Token: running[0].Token,
		Outcome: plane.OutcomeSucceeded, Result: []byte{0xa2, 'o', 'k'}}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	(<-awaited).requireError(t, 401, api.ErrUnauthorized.Code) // before: 200, succeeded, with the result

	second := b.submitDirect(t)
	(<-polled).requireError(t, 401, api.ErrUnauthorized.Code) // before: 200 with the job
	again, err := b.back.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "jobs",
		Kind: plane.KindFIFO, Max: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, again, 1, "the job polled for the revoked token is claimable again at once")
	require.Equal(t, second, again[0].ID)
	require.Equal(t, 1, again[0].Attempt, "given back unrun: its attempt not counted")
}
