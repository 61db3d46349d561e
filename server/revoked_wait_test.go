package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestLongPollOfRevokedTokenAnswersUnauthorized: a claim or a result wait that began with a
// token revoked while it waited answers 401, not the job or the result that came meanwhile;
// the job is given back unrun (claimable at once, its attempt not counted). On the code
// before, the claim handed the revoked token the job (held until its lease expired: the
// token could not settle it) and the wait handed it the result.
func TestLongPollOfRevokedTokenAnswersUnauthorized(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	secret, tok := b.mint(t, "default", "jobs", 0, plane.PermissionConsume, plane.PermissionRead)
	claimDirect := func() []*plane.Job {
		jobs, err := b.back.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "jobs",
			Kind: plane.KindFIFO, Max: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		return jobs
	}

	// A running job whose result the token waits for, and a claim of the token parked on
	// the (then empty) queue.
	id := b.submitDirect(t)
	running := claimDirect()
	require.Len(t, running, 1)
	waited := make(chan *response, 1)
	go func() { waited <- b.do(t, "GET", "/v1/invocations/"+id+"/wait?timeout=20", "", nil, secret) }()
	claimed := make(chan *response, 1)
	go func() {
		claimed <- b.doJSON(t, "POST", Q+"/claim", map[string]any{"max": 1, "wait": 20, "lease_ttl": 600}, secret)
	}()

	require.Eventually(t, func() bool { // both parked (authenticated) before the revocation
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil, adminSecret).body), "lakeshore_http_long_polls_open 2")
	}, 10*time.Second, 5*time.Millisecond)
	r := b.do(t, "DELETE", "/v1/tokens/"+tok.ID, "", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	time.Sleep(1100 * time.Millisecond) // past one recheck interval of the waits begun before

	errs, err := b.back.InvocationSettleMany(t.Context(), []plane.SettleParams{{ID: id, Token: running[0].Token,
		Outcome: plane.OutcomeSucceeded, Result: []byte{0xa2, 'o', 'k'}}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	(<-waited).requireError(t, 401, "unauthorized") // before: 200 with the result

	second := b.submitDirect(t)
	(<-claimed).requireError(t, 401, "unauthorized") // before: 200 with the job
	again := claimDirect()
	require.Len(t, again, 1, "the job claimed for the revoked token is claimable again at once")
	require.Equal(t, second, again[0].ID)
	require.Equal(t, 1, again[0].Attempt, "given back unrun: its attempt not counted")
}

// submitDirect submits one invocation to default/jobs on the plane and returns its id.
func (b *testBundle) submitDirect(t *testing.T) string {
	t.Helper()
	res, err := b.back.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "jobs",
		Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
	require.NoError(t, err)
	return res[0].ID
}

// TestDataLongPollOfRevokedTokenAnswersUnauthorized: a data queue's long-polls (GetMeta and
// GetBatch that wait, a read that waits for records, a wait for a change, a put blocked by
// back-pressure) begun with a token revoked while they waited answer 401, not what was put
// meanwhile, and the records they would have handed out are neither consumed nor leased
// (the task reads them at once), the blocked put writes nothing. On the code before, each
// answered 200 (a GetMeta consuming the records for the revoked token, the put writing).
func TestDataLongPollOfRevokedTokenAnswersUnauthorized(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, &server.Config{AdminToken: adminSecret})
	secret, tok := b.mint(t, "default", "rollouts", 0, plane.PermissionDataRead, plane.PermissionDataPut)
	put := func() {
		r := b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	put() // the queue, and one record of the two each GetMeta waits for
	r := b.do(t, "GET", D+"/changes?after=-1&wait=0", "", nil, secret)
	require.Equal(t, 200, r.status, "%s", r.body)
	var changed api.DataVersionResponse
	require.NoError(t, json.Unmarshal(r.body, &changed))

	answers := make(chan *response, 5)
	go func() {
		answers <- b.doJSON(t, "POST", D+"/meta", map[string]any{"fields": []string{"x"}, "batch_size": 2, "task": "consumed",
			"wait": true, "timeout": 20}, secret)
	}()
	go func() {
		answers <- b.doJSON(t, "POST", D+"/batch", map[string]any{"fields": []string{"x"}, "batch_size": 2, "task": "leased",
			"wait": true, "timeout": 20, "lease": 600}, secret)
	}()
	go func() { answers <- b.do(t, "GET", D+"/records?offset=1&wait=20", "", nil, secret) }()
	go func() {
		answers <- b.do(t, "GET", fmt.Sprintf("%s/changes?after=%d&wait=20", D, changed.Version), "", nil, secret)
	}()
	go func() { // blocked while task blocker has the first record unconsumed
		answers <- b.do(t, "POST", D+"/records?admission_task=blocker&max_unconsumed=1&admission_block=true&admission_timeout=20",
			api.ContentTypeJSON, []byte(`{"records": [{"x": 2}]}`), secret)
	}()
	require.Eventually(t, func() bool { // all parked (authenticated) before the revocation
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil, adminSecret).body), "lakeshore_http_long_polls_open 5")
	}, 10*time.Second, 5*time.Millisecond)
	r = b.do(t, "DELETE", "/v1/tokens/"+tok.ID, "", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	time.Sleep(1100 * time.Millisecond) // past one recheck interval of the waits begun before

	put()
	r = b.doJSON(t, "POST", D+"/meta", map[string]any{"fields": []string{"x"}, "batch_size": 2, "task": "blocker"}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body) // wakes the blocked put: nothing unconsumed
	for range 5 {
		(<-answers).requireError(t, 401, "unauthorized") // before: 200 with the records, the put written
	}
	r = b.do(t, "GET", D+"/stats", "", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	var stats api.DataStats
	require.NoError(t, json.Unmarshal(r.body, &stats))
	require.EqualValues(t, 2, stats.NextIndex, "the revoked token's blocked put wrote nothing")
	for _, task := range []string{"consumed", "leased"} {
		r := b.doJSON(t, "POST", D+"/meta", map[string]any{"fields": []string{"x"}, "batch_size": 2, "task": task}, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
		var m api.DataBatchMeta
		require.NoError(t, json.Unmarshal(r.body, &m))
		require.Equal(t, []int64{0, 1}, m.Indexes, "task %s: nothing consumed or leased for the revoked token", task)
	}
}

// TestBlockedSubmitOfRevokedTokenWritesNothing: a submit (ours, and the compatibility
// route's) that waits for room in a full queue (on_full block) and whose token is revoked
// meanwhile answers 401 once room is made, and submits nothing (plane.SubmitManyParams.
// Recheck, called by the planes' one blocking loop, planekit.SubmitBlocking). On the code
// before, the revoked token's job was queued as soon as a claim made room.
func TestBlockedSubmitOfRevokedTokenWritesNothing(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 2)
	b := setupWrapped(t, &server.Config{AdminToken: adminSecret}, func(d plane.Driver) plane.Driver {
		return &submitEntered{Driver: d, entered: entered}
	})
	secret, tok := b.mint(t, "default", "jobs", 0, plane.PermissionSubmit)
	r := b.doJSON(t, "PUT", Q+"/admission", map[string]any{"max_depth": 1, "on_full": "block"}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	b.submitDirect(t) // the queue is full
	answers := make(chan *response, 2)
	go func() {
		answers <- b.doJSON(t, "POST", Q+"/invocations", map[string]any{"payload": "ours", "max_wait": 25}, secret)
	}()
	go func() {
		raw, err := msgpack.Marshal(map[string]any{"queue": "jobs", "args_blob": []byte{0xa6, 'c', 'o', 'm', 'p', 'a', 't'}})
		require.NoError(t, err)
		answers <- b.do(t, "POST", "/v1/namespaces/default/producer/submit", "application/x-msgpack", raw, secret)
	}()
	<-entered // both authenticated, in the plane's submit (blocked: the queue is full)
	<-entered
	r = b.do(t, "DELETE", "/v1/tokens/"+tok.ID, "", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	time.Sleep(1100 * time.Millisecond) // past one recheck interval of the submits begun before

	for range 2 { // each claim makes room for one blocked submit
		_, err := b.back.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "jobs",
			Kind: plane.KindFIFO, Max: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		(<-answers).requireError(t, 401, "unauthorized") // before: 200, the job queued
	}
	n, err := b.back.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "jobs", State: plane.StateQueued})
	require.NoError(t, err)
	require.Zero(t, n, "the revoked token's blocked submits queued nothing")
}

// submitEntered is a plane that tells entered when a submit the server makes reaches it,
// before it runs.
type submitEntered struct {
	plane.Driver
	entered chan<- struct{}
}

func (s *submitEntered) InvocationSubmitMany(ctx context.Context, p *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
	s.entered <- struct{}{}
	return s.Driver.InvocationSubmitMany(ctx, p)
}
