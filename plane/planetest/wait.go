package planetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// lateWait is what waitAsync reports.
type lateWait struct {
	inv *plane.Invocation
	err error
	at  time.Time // when the wait returned
}

// waitAsync starts an InvocationWait on its own goroutine and reports on the channel.
func (b *bundle) waitAsync(id string, timeout time.Duration) <-chan lateWait {
	ch := make(chan lateWait, 1)
	go func() {
		inv, err := b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id, Timeout: timeout})
		ch <- lateWait{inv: inv, err: err, at: time.Now()}
	}()
	return ch
}

func testWait(t *testing.T, s *suite) {
	t.Run("TerminalReturnsAtOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		b.ack(t, b.claimID(t, id), "ready")
		start := time.Now()
		inv, err := b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id, Timeout: longWait})
		must(t, err, "wait")
		require.Less(t, time.Since(start), wakeLatency, "a finished invocation's result comes at once")
		require.Equal(t, plane.StateSucceeded, inv.State)
		require.Equal(t, []byte("ready"), inv.Result)
		inv, err = b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id})
		must(t, err, "wait without timeout")
		require.Equal(t, plane.StateSucceeded, inv.State)
	})

	t.Run("UnknownIDNotFoundAtOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		start := time.Now()
		_, err := b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: unknownID, Timeout: longWait})
		requireIs(t, err, plane.ErrNotFound)
		require.Less(t, time.Since(start), wakeLatency)
	})

	t.Run("TimeoutElapsesAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "queued", "running")
		j := b.claimID(t, ids[0])
		for _, id := range ids {
			before := b.get(t, id)
			start := time.Now()
			_, err := b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id, Timeout: shortWait})
			elapsed := time.Since(start)
			requireIs(t, err, plane.ErrTimeout, "the caller's wait elapsed")
			require.GreaterOrEqual(t, elapsed, shortWait*9/10, "the wait lasted its timeout")
			require.Less(t, elapsed, shortWait+wakeLatency)
			after := b.get(t, id)
			require.Equal(t, before.State, after.State, "waiting changes nothing")
			require.Equal(t, before.Attempt, after.Attempt)
			require.True(t, before.LeaseExpiresAt.Equal(after.LeaseExpiresAt))

			start = time.Now()
			_, err = b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id, Timeout: 0})
			requireIs(t, err, plane.ErrTimeout, "Timeout 0 checks once")
			require.Less(t, time.Since(start), wakeLatency)
		}
		b.ack(t, j, "the worker is unaffected")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1, plane.StateSucceeded: 1})
	})

	t.Run("WokenByEveryWayToEnd", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name  string
			setup func(*testing.T, *bundle) (string, func())
			want  plane.State
		}{
			{"Ack", func(t *testing.T, b *bundle) (string, func()) {
				j := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
				return j.ID, func() { b.ack(t, j, "r") }
			}, plane.StateSucceeded},
			{"PostFinalThenAck", func(t *testing.T, b *bundle) (string, func()) {
				j := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
				return j.ID, func() {
					_, err := b.postErr(invJournal(j.ID), j.Token, "r", true)
					must(t, err, "post final")
					b.ack(t, j, "r")
				}
			}, plane.StateSucceeded},
			{"Nack", func(t *testing.T, b *bundle) (string, func()) {
				j := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
				return j.ID, func() { b.nack(t, j, false, "no") }
			}, plane.StateFailed},
			{"RetryOnLastAttempt", func(t *testing.T, b *bundle) (string, func()) {
				j := b.claimID(t, b.submitOne(t, plane.SubmitParams{MaxAttempts: 1}))
				return j.ID, func() { b.nack(t, j, true, "no") }
			}, plane.StateFailed},
			{"Cancel", func(t *testing.T, b *bundle) (string, func()) {
				id := b.submitOne(t, plane.SubmitParams{})
				return id, func() { require.True(t, b.cancel(t, id)) }
			}, plane.StateCancelled},
			{"Kill", func(t *testing.T, b *bundle) (string, func()) {
				j := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
				return j.ID, func() { require.True(t, b.kill(t, j.ID)) }
			}, plane.StateKilled},
			{"LeaseExpiry", func(t *testing.T, b *bundle) (string, func()) {
				j := b.claimID(t, b.submitOne(t, plane.SubmitParams{MaxAttempts: 1}))
				return j.ID, func() { b.advance(plane.LeaseTTLDefault + time.Second); b.maintain(t) }
			}, plane.StateTimeout},
			{"AttemptTimeout", func(t *testing.T, b *bundle) (string, func()) {
				j := b.claimID(t, b.submitOne(t, plane.SubmitParams{MaxAttempts: 1, AttemptTimeout: time.Second}))
				return j.ID, func() { b.advance(2 * time.Second); b.maintain(t) }
			}, plane.StateTimeout},
			{"Deadline", func(t *testing.T, b *bundle) (string, func()) {
				id := b.submitOne(t, plane.SubmitParams{Deadline: b.now().Add(time.Second)})
				return id, func() { b.advance(2 * time.Second); b.maintain(t) }
			}, plane.StateTimeout},
		} {
			t.Run(c.name, func(t *testing.T) {
				b := s.setup(t, config{})
				id, event := c.setup(t, b)
				waited := b.waitAsync(id, longWait)
				<-time.After(headStart) // let the waiter park; correctness does not depend on it
				event()
				ended := time.Now() // the bound starts when the event is done: its own duration (a busy Maintain) is not the waiter's latency
				w := <-waited
				must(t, w.err, c.name+": wait")
				require.Equal(t, c.want, w.inv.State, c.name)
				require.Less(t, w.at.Sub(ended), wakeLatency, "%s: the waiter is woken by notification", c.name)
			})
		}
	})

	t.Run("NotReturnedBeforeTerminal", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 2})
		waited := b.waitAsync(id, longWait)
		j := b.claimID(t, id)
		b.nack(t, j, true, "once more")
		b.advance(pastBackoff)
		j2 := b.claimID(t, id)
		b.ack(t, j2, "second")
		w := <-waited
		must(t, w.err, "wait")
		require.Equal(t, plane.StateSucceeded, w.inv.State, "a claim or a retry does not end the wait")
		require.Equal(t, 2, w.inv.Attempt)
		require.Equal(t, []byte("second"), w.inv.Result)
	})

	t.Run("WaitEndsWithContext", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		ctx, cancel := context.WithTimeout(b.ctx, shortWait)
		defer cancel()
		start := time.Now()
		_, err := b.drv.InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: longWait})
		skipUnimplemented(t, err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(start), shortWait+wakeLatency)
		b.requireState(t, id, plane.StateQueued, 0)
	})
}
