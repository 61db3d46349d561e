package planetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// settleAndClaim calls Driver.InvocationSettleAndClaim with a fifo claim of max jobs from
// the subtest's queue.
func (b *bundle) settleAndClaim(t *testing.T, ps []plane.SettleParams, max int, wait time.Duration) ([]error, []*plane.Job) {
	t.Helper()
	errs, jobs, err := b.drv.InvocationSettleAndClaim(b.ctx, ps, &plane.ClaimParams{
		Namespace: b.ns, Queue: b.q, Kind: plane.KindFIFO, Max: max, Wait: wait, Worker: "worker-1"})
	must(t, err, "settle and claim")
	require.Len(t, errs, len(ps), "one settle result per param")
	for _, j := range jobs {
		require.NotNil(t, j)
	}
	return errs, jobs
}

func ackParams(j *plane.Job, result string) plane.SettleParams {
	return plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: []byte(result)}
}

func testSettleAndClaim(t *testing.T, s *suite) {
	t.Run("AckThenClaimNext", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "a", "b", "c")
		j := b.claimID(t, ids[0])
		errs, jobs := b.settleAndClaim(t, []plane.SettleParams{ackParams(j, "done a")}, 1, 0)
		require.NoError(t, errs[0])
		require.Len(t, jobs, 1)
		require.Equal(t, ids[1], jobs[0].ID, "the next job in fifo order")
		require.Equal(t, []byte("b"), jobs[0].Payload)
		require.Equal(t, 1, jobs[0].Attempt)
		require.NotEmpty(t, jobs[0].Token)
		require.Equal(t, []byte("done a"), b.requireState(t, ids[0], plane.StateSucceeded, 1).Result)
		b.requireState(t, ids[1], plane.StateRunning, 1)
		b.requireCounts(t, map[plane.State]int64{plane.StateSucceeded: 1, plane.StateRunning: 1, plane.StateQueued: 1})
		// The claimed job's token fences as any claim's does.
		errs, jobs = b.settleAndClaim(t, []plane.SettleParams{ackParams(jobs[0], "done b")}, 5, 0)
		require.NoError(t, errs[0])
		require.Len(t, jobs, 1, "only c is left")
		require.Equal(t, ids[2], jobs[0].ID)
		errs, jobs = b.settleAndClaim(t, []plane.SettleParams{ackParams(jobs[0], "done c")}, 1, 0)
		require.NoError(t, errs[0])
		require.Empty(t, jobs, "nothing left: an empty claim, no error")
		b.requireCounts(t, map[plane.State]int64{plane.StateSucceeded: 3})
	})

	t.Run("NackRetryIsNotReclaimedAtOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{backoff: plane.Backoff{Base: time.Minute, Max: time.Minute}})
		ids := b.submitPayloads(t, "a", "b")
		j := b.claimID(t, ids[0])
		errs, jobs := b.settleAndClaim(t, []plane.SettleParams{nackParams(j, true, "boom")}, 2, 0)
		require.NoError(t, errs[0])
		require.Len(t, jobs, 1, "the nacked job waits out its backoff")
		require.Equal(t, ids[1], jobs[0].ID)
		inv := b.requireState(t, ids[0], plane.StateQueued, 1)
		require.Equal(t, "boom", inv.Error.Message)
	})

	t.Run("StaleTokenIsFencedAndTheClaimStillHappens", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "a", "b")
		j := b.claimID(t, ids[0])
		require.True(t, b.kill(t, ids[0]))
		errs, jobs := b.settleAndClaim(t, []plane.SettleParams{ackParams(j, "too late")}, 1, 0)
		requireIs(t, errs[0], plane.ErrLeaseLost, "a killed job's token is stale")
		require.Len(t, jobs, 1, "the caller holds no lease: it gets the next job")
		require.Equal(t, ids[1], jobs[0].ID)
		inv := b.requireState(t, ids[0], plane.StateKilled, 1)
		require.Nil(t, inv.Result, "the stale ack changed nothing")

		// A wrong token on a running job, and an unknown id, are refused item by item.
		errs, jobs = b.settleAndClaim(t, []plane.SettleParams{
			{ID: jobs[0].ID, Token: "not-the-token", Outcome: plane.OutcomeSucceeded},
			{ID: unknownID, Token: "x", Outcome: plane.OutcomeSucceeded},
		}, 1, 0)
		requireIs(t, errs[0], plane.ErrLeaseLost)
		requireIs(t, errs[1], plane.ErrNotFound)
		require.Empty(t, jobs)
		b.requireState(t, ids[1], plane.StateRunning, 1)
	})

	t.Run("InvalidClaimSettlesNothing", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		_, _, err := b.drv.InvocationSettleAndClaim(b.ctx, []plane.SettleParams{ackParams(j, "r")},
			&plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: "sideways"})
		requireIs(t, err, plane.ErrInvalid)
		_, _, err = b.drv.InvocationSettleAndClaim(b.ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: 99}},
			&plane.ClaimParams{Namespace: b.ns, Queue: b.q})
		requireIs(t, err, plane.ErrInvalid)
		b.requireState(t, id, plane.StateRunning, 1)
		b.ack(t, j, "r")
	})

	t.Run("SettleCommitsBeforeTheClaimWaits", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		type answer struct {
			errs []error
			jobs []*plane.Job
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			errs, jobs, err := b.drv.InvocationSettleAndClaim(b.ctx, []plane.SettleParams{ackParams(j, "r")},
				&plane.ClaimParams{Namespace: b.ns, Queue: b.q, Wait: 10 * time.Second, Worker: "worker-1"})
			done <- answer{errs, jobs, err}
		}()
		// The ack is visible while the claim still waits for a job.
		inv, err := b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id, Timeout: 5 * time.Second})
		must(t, err, "wait for the ack")
		require.Equal(t, plane.StateSucceeded, inv.State)
		select {
		case a := <-done:
			t.Fatalf("the claim returned before any job came: %+v", a)
		default:
		}
		next := b.submitOne(t, plane.SubmitParams{Payload: []byte("next")})
		a := <-done
		must(t, a.err, "settle and claim")
		require.NoError(t, a.errs[0])
		require.Len(t, a.jobs, 1, "the waiting claim gets the new job")
		require.Equal(t, next, a.jobs[0].ID)
	})

	t.Run("ContextEndingTheWaitKeepsTheSettles", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		// The deadline must leave the settles time to be done on a busy machine: over HTTP
		// their results travel in the answer, which the client asks for before the deadline
		// (a 100 ms deadline ended the request itself under load, settles and all).
		ctx, cancel := context.WithTimeout(b.ctx, wakeLatency)
		defer cancel()
		errs, jobs, err := b.drv.InvocationSettleAndClaim(ctx, []plane.SettleParams{ackParams(j, "r")},
			&plane.ClaimParams{Namespace: b.ns, Queue: b.q, Wait: time.Minute})
		must(t, err, "settle and claim: the settles are done, so the call did not fail")
		require.Len(t, errs, 1)
		require.NoError(t, errs[0])
		require.Empty(t, jobs)
		b.requireState(t, id, plane.StateSucceeded, 1)
	})
}
