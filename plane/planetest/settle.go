package planetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// requireTerminalError checks the error a waiter gets for inv: it matches want and none of
// the other terminal sentinels.
func requireTerminalError(t *testing.T, inv *plane.Invocation, want error) *plane.TerminalError {
	t.Helper()
	err := inv.TerminalError()
	require.Error(t, err, "state %s", inv.State)
	for _, s := range []error{plane.ErrFailed, plane.ErrCancelled, plane.ErrTimedOut} {
		require.Equal(t, s == want, errors.Is(err, s), "state %s: errors.Is(%v, %v)", inv.State, err, s)
	}
	te, ok := err.(*plane.TerminalError)
	require.True(t, ok)
	require.Equal(t, inv.ID, te.ID)
	return te
}

func testSettle(t *testing.T, s *suite) {
	t.Run("AckStoresResult", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		finished := b.advance(2 * time.Second)
		b.ack(t, j, "the result")
		inv := b.requireState(t, id, plane.StateSucceeded, 1)
		require.Equal(t, []byte("the result"), inv.Result)
		require.Nil(t, inv.Error)
		requireTime(t, finished, inv.FinishedAt, "finished at")
		waited := b.waitTerminal(t, id)
		require.Equal(t, []byte("the result"), waited.Result)
		require.NoError(t, waited.TerminalError())
		frames, closed := b.frames(t, invJournal(id))
		require.True(t, closed)
		require.Equal(t, []plane.FrameKind{plane.FrameEnd}, frameKinds(frames))
		require.Equal(t, []byte("the result"), frames[0].Value)
		b.requireCounts(t, map[plane.State]int64{plane.StateSucceeded: 1})
	})

	t.Run("NackRetryBacksOffThenFails", func(t *testing.T) {
		t.Parallel()
		bo := plane.Backoff{Base: time.Minute, Max: 3 * time.Minute, Jitter: 0.1}
		b := s.setup(t, config{backoff: bo})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 4})
		for attempt := 1; attempt <= 4; attempt++ {
			j := b.claimID(t, id)
			require.Equal(t, attempt, j.Attempt)
			b.post(t, j, fmt.Sprintf("attempt %d working", attempt))
			nackedAt := b.advance(time.Second)
			b.nack(t, j, true, fmt.Sprintf("boom %d", attempt))
			if attempt == 4 {
				break
			}
			inv := b.requireState(t, id, plane.StateQueued, attempt)
			// 1 min, 2 min, then capped at 3 min, each within ±10% jitter.
			requireBackoff(t, bo, attempt, nackedAt, inv.AvailableAt)
			_, err := b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id})
			requireIs(t, err, plane.ErrTimeout, "a job waiting for its retry is not terminal")
			b.advance(inv.AvailableAt.Sub(nackedAt) - time.Millisecond)
			b.requireNothingClaimable(t)
			b.advance(2 * time.Millisecond)
		}
		inv := b.requireState(t, id, plane.StateFailed, 4)
		te := requireTerminalError(t, b.waitTerminal(t, id), plane.ErrFailed)
		require.Equal(t, plane.ErrorInfo{Type: "error", Message: "boom 4", Attempt: 4}, te.Info, "the last attempt's error reaches the waiter")
		require.Contains(t, te.Error(), "boom 4")
		require.Equal(t, te.Info, *inv.Error)
		info := b.requireErrorFrame(t, id, 4)
		require.Equal(t, "boom 4", info.Message)
		frames, _ := b.frames(t, invJournal(id))
		require.Len(t, frames, 5, "four VALUE frames and the ERROR frame")
		for i := range 4 {
			require.Equal(t, i+1, frames[i].Attempt, "frames carry their attempt")
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateFailed: 1})
		b.requireNothingClaimable(t)
	})

	t.Run("NackWithoutRetryFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 3})
		j := b.claimID(t, id)
		b.post(t, j, "progress")
		must(t, b.settle(t, plane.SettleParams{ID: id, Token: j.Token, Outcome: plane.OutcomeFailed,
			Error: &plane.ErrorInfo{Type: "ValueError", Message: "bad input", Attempt: 99}}), "nack")
		inv := b.requireState(t, id, plane.StateFailed, 1)
		want := plane.ErrorInfo{Type: "ValueError", Message: "bad input", Attempt: 1}
		require.Equal(t, want, *inv.Error, "the plane fills in the attempt")
		requireTime(t, b.now(), inv.FinishedAt, "finished at")
		require.Equal(t, want, b.requireErrorFrame(t, id, 1))
		te := requireTerminalError(t, b.waitTerminal(t, id), plane.ErrFailed)
		require.Equal(t, want, te.Info)
		b.advance(time.Hour)
		b.maintain(t)
		b.requireNothingClaimable(t)
		b.requireState(t, id, plane.StateFailed, 1)
	})

	t.Run("RetryOnLastAttemptFails", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 1})
		b.nack(t, b.claimID(t, id), true, "no more tries")
		b.requireState(t, id, plane.StateFailed, 1)
		require.Equal(t, "no more tries", b.requireErrorFrame(t, id, 1).Message)
		requireTerminalError(t, b.waitTerminal(t, id), plane.ErrFailed)
	})

	t.Run("SettleManyIsPerItem", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "a", "b", "c", "d")
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 4})
		require.Len(t, jobs, 4)
		errs, err := b.drv.InvocationSettleMany(b.ctx, []plane.SettleParams{
			{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded, Result: []byte("r0")},
			nackParams(jobs[1], false, "failed"),
			nackParams(jobs[2], true, "retry"),
			{ID: jobs[3].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded},
			{ID: unknownID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded},
		})
		must(t, err, "settle many")
		require.Len(t, errs, 5)
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.NoError(t, errs[2])
		require.ErrorIs(t, errs[3], plane.ErrLeaseLost)
		require.ErrorIs(t, errs[4], plane.ErrNotFound)
		require.Equal(t, []byte("r0"), b.requireState(t, ids[0], plane.StateSucceeded, 1).Result)
		b.requireState(t, ids[1], plane.StateFailed, 1)
		b.requireState(t, ids[2], plane.StateQueued, 1)
		b.requireState(t, ids[3], plane.StateRunning, 1)
		b.requireCounts(t, map[plane.State]int64{plane.StateSucceeded: 1, plane.StateFailed: 1, plane.StateQueued: 1, plane.StateRunning: 1})
	})

	t.Run("TerminalNeverChanges", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ended := map[plane.State]*plane.Job{}
		// succeeded
		ended[plane.StateSucceeded] = b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
		b.ack(t, ended[plane.StateSucceeded], "ok")
		// failed
		ended[plane.StateFailed] = b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
		b.nack(t, ended[plane.StateFailed], false, "no")
		// killed
		ended[plane.StateKilled] = b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
		killed, err := b.drv.InvocationKill(b.ctx, ended[plane.StateKilled].ID)
		must(t, err, "kill")
		require.True(t, killed)
		// timeout
		ended[plane.StateTimeout] = b.claimID(t, b.submitOne(t, plane.SubmitParams{MaxAttempts: 1}))
		b.advance(plane.LeaseTTLDefault + time.Second)
		b.maintain(t)
		// cancelled
		cancelledID := b.submitOne(t, plane.SubmitParams{})
		cancelled, err := b.drv.InvocationCancel(b.ctx, cancelledID)
		must(t, err, "cancel")
		require.True(t, cancelled)

		before := map[string]*plane.Invocation{cancelledID: b.get(t, cancelledID)}
		for state, j := range ended {
			before[j.ID] = b.requireState(t, j.ID, state, 1)
		}
		for state, j := range ended {
			b.requireFenced(t, j, string(state))
		}
		for id := range before {
			ok, err := b.drv.InvocationCancel(b.ctx, id)
			must(t, err, "cancel")
			require.False(t, ok, "cancel of a terminal invocation")
			ok, err = b.drv.InvocationKill(b.ctx, id)
			must(t, err, "kill")
			require.False(t, ok, "kill of a terminal invocation")
		}
		b.advance(plane.LeaseTTLDefault * 10)
		b.maintain(t)
		b.requireNothingClaimable(t)
		for id, inv := range before {
			after := b.get(t, id)
			require.Equal(t, inv.State, after.State, "a terminal invocation never changes state")
			require.Equal(t, inv.Attempt, after.Attempt)
			require.Equal(t, inv.Result, after.Result)
			require.Equal(t, inv.Error, after.Error)
			require.True(t, inv.FinishedAt.Equal(after.FinishedAt), "finished at is kept")
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateSucceeded: 1, plane.StateFailed: 1, plane.StateKilled: 1,
			plane.StateTimeout: 1, plane.StateCancelled: 1})
	})

	t.Run("AttemptTimeoutRetriesThenTimesOut", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 2, AttemptTimeout: 5 * time.Second})
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: time.Minute})[0]
		require.Equal(t, 5*time.Second, j.AttemptTimeout)
		b.post(t, j, "slow")
		b.advance(4 * time.Second)
		require.NoError(t, b.heartbeat(t, id, j.Token, time.Minute).Err)
		b.maintain(t)
		b.requireState(t, id, plane.StateRunning, 1)
		b.advance(2 * time.Second) // 6 s into a 5 s attempt; the lease still has 58 s
		b.maintain(t)
		b.requireState(t, id, plane.StateQueued, 1)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
		_, closed := b.frames(t, invJournal(id))
		require.False(t, closed, "an attempt timeout with attempts left is retried, not ended")
		b.requireFenced(t, j, "attempt timed out")
		b.advance(pastBackoff)
		j2 := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: time.Minute})[0]
		require.Equal(t, 2, j2.Attempt)
		b.advance(5*time.Second + time.Millisecond)
		b.maintain(t)
		b.requireState(t, id, plane.StateTimeout, 2)
		b.requireCounts(t, map[plane.State]int64{plane.StateTimeout: 1})
		b.requireErrorFrame(t, id, 2)
		requireTerminalError(t, b.waitTerminal(t, id), plane.ErrTimedOut)
		b.requireFenced(t, j2, "last attempt timed out")
	})

	t.Run("SettleAfterAttemptTimeoutEndsItAsTimeout", func(t *testing.T) {
		t.Parallel()
		// A worker that honours its attempt timeout cancels its handler and nacks, maybe
		// before maintenance has noticed the overdue attempt. The attempt still ends as an
		// attempt timeout (retried, then timeout), never as a plain failure.
		b := s.setup(t, config{noMaintenance: true})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 2, AttemptTimeout: 5 * time.Second})
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: time.Minute})[0]
		b.advance(5*time.Second + time.Millisecond)
		err := b.settle(t, nackParams(j, true, "context deadline exceeded"))
		requireIs(t, err, plane.ErrLeaseLost, "the attempt was already over")
		inv := b.requireState(t, id, plane.StateQueued, 1)
		require.NotNil(t, inv.Error)
		require.Equal(t, "attempt_timeout", inv.Error.Type)
		b.advance(pastBackoff)
		j2 := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: time.Minute})[0]
		b.advance(6 * time.Second)
		err = b.settle(t, nackParams(j2, false, "gave up"))
		requireIs(t, err, plane.ErrLeaseLost)
		b.requireState(t, id, plane.StateTimeout, 2)
		requireTerminalError(t, b.waitTerminal(t, id), plane.ErrTimedOut)
		// An ack after the attempt's timeout is fenced the same way.
		late := b.submitOne(t, plane.SubmitParams{MaxAttempts: 1, AttemptTimeout: time.Second})
		j3 := b.claimID(t, late)
		b.advance(2 * time.Second)
		requireIs(t, b.settle(t, plane.SettleParams{ID: j3.ID, Token: j3.Token, Outcome: plane.OutcomeSucceeded}), plane.ErrLeaseLost)
		b.requireState(t, late, plane.StateTimeout, 1)
	})

	t.Run("NackTimedOutRetriesThenTimesOut", func(t *testing.T) {
		t.Parallel()
		// A worker whose own time limit ran out (not the invocation's AttemptTimeout) says so:
		// the attempt is retried while attempts remain, then the invocation ends as timeout.
		b := s.setup(t, config{noMaintenance: true})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 2})
		timedOut := func(j *plane.Job) plane.SettleParams {
			return plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeTimedOut,
				Error: &plane.ErrorInfo{Type: "error", Message: "job timeout 1s passed"}}
		}
		must(t, b.settle(t, timedOut(b.claimID(t, id))), "first timeout")
		b.requireState(t, id, plane.StateQueued, 1)
		b.advance(pastBackoff)
		must(t, b.settle(t, timedOut(b.claimID(t, id))), "last timeout")
		inv := b.requireState(t, id, plane.StateTimeout, 2)
		require.Equal(t, "job timeout 1s passed", inv.Error.Message)
		requireTerminalError(t, b.waitTerminal(t, id), plane.ErrTimedOut)
		b.requireErrorFrame(t, id, 2)
	})
}
