package planetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

func testDeadline(t *testing.T, s *suite) {
	t.Run("QueuedPastDeadlineTimesOut", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		deadline := b.now().Add(10 * time.Second)
		late := b.submitOne(t, plane.SubmitParams{Deadline: deadline, Payload: []byte("late")})
		other := b.submitOne(t, plane.SubmitParams{Payload: []byte("no deadline")})
		requireTime(t, deadline, b.get(t, late).Deadline, "deadline")
		b.advance(9 * time.Second)
		b.maintain(t)
		b.requireState(t, late, plane.StateQueued, 0)
		at := b.advance(2 * time.Second)
		b.maintain(t)
		inv := b.requireState(t, late, plane.StateTimeout, 0)
		requireTime(t, at, inv.FinishedAt, "finished at")
		b.requireErrorFrame(t, late, 0)
		requireTerminalError(t, b.waitTerminal(t, late), plane.ErrTimedOut)
		b.claimID(t, other) // the timed-out invocation never runs
		b.requireNothingClaimable(t)
		b.requireCounts(t, map[plane.State]int64{plane.StateTimeout: 1, plane.StateRunning: 1})
	})

	t.Run("ClaimBeforeMaintenanceSkipsExpired", func(t *testing.T) {
		t.Parallel()
		for _, kind := range []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority, plane.KindBoltzmann} {
			b := s.setup(t, config{noMaintenance: true})
			// The expired job is first in every order: oldest (fifo), newest (filo), highest.
			var late string
			if kind == plane.KindFILO {
				b.submitOne(t, plane.SubmitParams{})
				late = b.submitOne(t, plane.SubmitParams{Deadline: b.now().Add(10 * time.Second), Priority: 100})
			} else {
				late = b.submitOne(t, plane.SubmitParams{Deadline: b.now().Add(10 * time.Second), Priority: 100})
				b.submitOne(t, plane.SubmitParams{})
			}
			b.advance(11 * time.Second)
			jobs := b.claim(t, plane.ClaimParams{Kind: kind, Temperature: 1, Max: 10})
			require.Len(t, jobs, 1, "%s: only the job without a deadline is claimed", kind)
			require.NotEqual(t, late, jobs[0].ID, "%s: a job past its deadline never runs", kind)
			inv := b.get(t, late)
			require.Zero(t, inv.Attempt, "%s: never claimed", kind)
			require.Contains(t, []plane.State{plane.StateQueued, plane.StateTimeout}, inv.State, kind)
			b.requireCounts(t, map[plane.State]int64{inv.State: 1, plane.StateRunning: 1})
			b.maintain(t)
			b.requireState(t, late, plane.StateTimeout, 0)
			b.requireCounts(t, map[plane.State]int64{plane.StateTimeout: 1, plane.StateRunning: 1})
		}
	})

	t.Run("DeadlineDoesNotStopRunningAttempt", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{Deadline: b.now().Add(10 * time.Second)})
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: time.Minute})[0]
		require.False(t, j.Deadline.IsZero(), "the job carries its deadline")
		b.advance(20 * time.Second)
		b.maintain(t)
		b.requireState(t, id, plane.StateRunning, 1)
		b.ack(t, j, "made it")
		b.requireState(t, id, plane.StateSucceeded, 1)
	})

	t.Run("RetryPastDeadlineTimesOut", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{Deadline: b.now().Add(10 * time.Second), MaxAttempts: 3})
		p := nackParams(b.claimID(t, id), true, "try later")
		p.RetryDelay = time.Minute
		must(t, b.settle(t, p), "nack")
		b.advance(11 * time.Second)
		b.maintain(t)
		b.requireState(t, id, plane.StateTimeout, 1)
		frames, closed := b.frames(t, invJournal(id))
		require.True(t, closed)
		require.Equal(t, []plane.FrameKind{plane.FrameError}, frameKinds(frames))
		requireTerminalError(t, b.waitTerminal(t, id), plane.ErrTimedOut)
		b.advance(time.Hour)
		b.requireNothingClaimable(t)
	})
}
