package planetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

func (b *bundle) cancel(t *testing.T, id string) bool {
	t.Helper()
	ok, err := b.drv.InvocationCancel(b.ctx, id)
	must(t, err, "cancel")
	return ok
}

func (b *bundle) kill(t *testing.T, id string) bool {
	t.Helper()
	ok, err := b.drv.InvocationKill(b.ctx, id)
	must(t, err, "kill")
	return ok
}

func testCancel(t *testing.T, s *suite) {
	t.Run("CancelQueued", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "cancel me", "keep me")
		at := b.advance(time.Second)
		require.True(t, b.cancel(t, ids[0]), "cancel of a queued invocation")
		inv := b.requireState(t, ids[0], plane.StateCancelled, 0)
		requireTime(t, at, inv.FinishedAt, "finished at")
		requireTerminalError(t, b.waitTerminal(t, ids[0]), plane.ErrCancelled)
		require.False(t, b.cancel(t, ids[0]), "a second cancel changes nothing")
		b.claimID(t, ids[1]) // the cancelled one is never claimed
		b.requireNothingClaimable(t)
		b.requireCounts(t, map[plane.State]int64{plane.StateCancelled: 1, plane.StateRunning: 1})
	})

	t.Run("CancelRunningChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		before := b.get(t, id)
		require.False(t, b.cancel(t, id), "cancel of a running invocation")
		after := b.requireState(t, id, plane.StateRunning, 1)
		require.True(t, before.LeaseExpiresAt.Equal(after.LeaseExpiresAt))
		require.NoError(t, b.heartbeat(t, id, j.Token, 0).Err, "the running attempt keeps its lease")
		b.ack(t, j, "finished anyway")
		require.Equal(t, []byte("finished anyway"), b.requireState(t, id, plane.StateSucceeded, 1).Result)
	})

	t.Run("CancelTerminalChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		b.ack(t, b.claimID(t, id), "done")
		require.False(t, b.cancel(t, id))
		require.False(t, b.kill(t, id))
		b.requireState(t, id, plane.StateSucceeded, 1)
	})

	t.Run("KillRunning", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 3})
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: time.Minute})[0]
		b.post(t, j, "partial")
		at := b.advance(time.Second)
		require.True(t, b.kill(t, id), "kill of a running invocation")
		inv := b.requireState(t, id, plane.StateKilled, 1)
		requireTime(t, at, inv.FinishedAt, "finished at")
		b.requireErrorFrame(t, id, 1)
		requireTerminalError(t, b.waitTerminal(t, id), plane.ErrCancelled)
		// The lease is revoked: the worker's heartbeat tells it to stop, its settles fail.
		b.requireFenced(t, j, "killed")
		_, err := b.postErr(invJournal(id), j.Token, "after kill", false)
		require.True(t, errors.Is(err, plane.ErrLeaseLost) || errors.Is(err, plane.ErrJournalClosed),
			"post after kill: want ErrLeaseLost or ErrJournalClosed, got %v", err)
		frames, _ := b.frames(t, invJournal(id))
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameError}, frameKinds(frames))
		require.False(t, b.kill(t, id), "a second kill changes nothing")
		// Attempts were left, but a killed invocation is not retried.
		b.advance(plane.LeaseTTLDefault * 2)
		b.maintain(t)
		b.requireNothingClaimable(t)
		b.requireCounts(t, map[plane.State]int64{plane.StateKilled: 1})
	})

	t.Run("KillNonRunningChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		require.False(t, b.kill(t, id), "kill of a queued invocation")
		b.requireState(t, id, plane.StateQueued, 0)
		j := b.claimID(t, id)
		b.nack(t, j, false, "failed")
		require.False(t, b.kill(t, id), "kill of a failed invocation")
		b.requireState(t, id, plane.StateFailed, 1)
	})
}
