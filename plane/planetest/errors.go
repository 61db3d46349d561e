package planetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// allSentinels are every sentinel of package plane.
var allSentinels = []*plane.Error{
	plane.ErrNotFound, plane.ErrTimeout, plane.ErrFailed, plane.ErrCancelled, plane.ErrTimedOut, plane.ErrLeaseLost,
	plane.ErrJournalClosed, plane.ErrQueueFull, plane.ErrRateLimited, plane.ErrInvalid, plane.ErrClosed, plane.ErrNotImplemented,
}

// requireSentinel checks that err is want (errors.Is and its stable code) and no other
// sentinel: the identity a plane's error must keep, across HTTP too.
func requireSentinel(t *testing.T, err error, want *plane.Error, what string) {
	t.Helper()
	skipUnimplemented(t, err)
	require.Error(t, err, what)
	for _, s := range allSentinels {
		require.Equal(t, s == want, errors.Is(err, s), "%s: errors.Is(%q, %s)", what, err, s.Code)
	}
	require.Equal(t, want.Code, plane.Code(err), "%s: stable code", what)
	require.NotEmpty(t, err.Error())
}

func testErrors(t *testing.T, s *suite) {
	t.Run("SentinelsKeepTheirIdentity", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})

		_, err := b.drv.InvocationGet(b.ctx, unknownID)
		requireSentinel(t, err, plane.ErrNotFound, "get of an unknown id")

		_, err = b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id})
		requireSentinel(t, err, plane.ErrTimeout, "wait that elapsed")

		hb := b.heartbeat(t, id, "stale-token", 0)
		requireSentinel(t, hb.Err, plane.ErrLeaseLost, "heartbeat of an unclaimed job")
		requireSentinel(t, b.settle(t, plane.SettleParams{ID: id, Token: "stale-token", Outcome: plane.OutcomeSucceeded}),
			plane.ErrLeaseLost, "settle with a stale token")

		b.topicPost(t, "closed", "", true)
		_, err = b.postErr(b.topicJournal("closed"), "", "late", false)
		requireSentinel(t, err, plane.ErrJournalClosed, "post to a closed topic")

		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: "bad queue!", Invocations: []plane.SubmitParams{{}}})
		requireSentinel(t, err, plane.ErrInvalid, "submit to a bad queue name")
		require.Contains(t, err.Error(), "queue name", "the message says which argument")
		require.Contains(t, err.Error(), plane.NameRule, "and what is allowed")

		_, err = b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindBoltzmann})
		requireSentinel(t, err, plane.ErrInvalid, "boltzmann claim without a temperature")
	})

	t.Run("TerminalStatesMapToSentinels", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		succeeded := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
		b.ack(t, succeeded, "r")
		failed := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
		b.nack(t, failed, false, "the failure")
		killed := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
		require.True(t, b.kill(t, killed.ID))
		cancelled := b.submitOne(t, plane.SubmitParams{})
		require.True(t, b.cancel(t, cancelled))
		timedOut := b.submitOne(t, plane.SubmitParams{Deadline: b.now().Add(time.Second)})
		b.advance(2 * time.Second)
		b.maintain(t)

		require.NoError(t, b.waitTerminal(t, succeeded.ID).TerminalError())
		te := requireTerminalError(t, b.waitTerminal(t, failed.ID), plane.ErrFailed)
		require.Equal(t, "the failure", te.Info.Message)
		requireTerminalError(t, b.waitTerminal(t, killed.ID), plane.ErrCancelled)
		requireTerminalError(t, b.waitTerminal(t, cancelled), plane.ErrCancelled)
		requireTerminalError(t, b.waitTerminal(t, timedOut), plane.ErrTimedOut)
	})

	t.Run("ClosedPlane", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{})
		waited := b.waitAsync(id, longWait)
		<-time.After(headStart) // let the waiter park; correctness does not depend on it
		closedAt := time.Now()
		require.NoError(t, b.drv.Close())
		w := <-waited
		requireSentinel(t, w.err, plane.ErrClosed, "a wait in progress when the plane closes")
		require.Less(t, w.at.Sub(closedAt), wakeLatency, "Close ends the waits in progress")
		_, err := b.drv.InvocationGet(b.ctx, id)
		requireSentinel(t, err, plane.ErrClosed, "get after close")
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{{}}})
		requireSentinel(t, err, plane.ErrClosed, "submit after close")
		_, err = b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindFIFO, Wait: longWait})
		requireSentinel(t, err, plane.ErrClosed, "claim after close")
		require.NoError(t, b.drv.Close(), "Close is safe to call twice")
	})
}
