package sqliteplane

import (
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Direct handoff (planekit.Handoffs). A claimer with Wait that finds nothing claimable
// registers itself, inside the same write transaction, as a waiter of its queue; the writer
// claims for the waiters in the transaction that makes jobs of that queue claimable, and
// hands them the jobs after the commit.

// claimWaiter is one parked claim.
type claimWaiter = planekit.Waiter

// markClaimable notes that the transaction made jobs of a queue claimable now: its parked
// claims are handed jobs before the commit, and claims over several queues woken after it.
func (t *wtx) markClaimable(namespace, queue string) {
	t.handoffs.MarkClaimable(namespace, queue)
	t.wake(planekit.ClaimableKey(namespace, queue)) // claims over several queues
}

// handOff claims, at the end of the transaction, for the parked waiters of every queue that
// got claimable jobs (planekit.Handoffs.Serve): a waiter that gets nothing goes back to the
// head of its line. A waiter that gets nothing although a job of its queue comes due later
// (a key freed by a settle but held back by its rate limit until its next token) is woken
// after the commit, as pgplane's handOff wakes it: it claims again and sleeps until that
// time, where it would otherwise sleep out the wait it began with (server's
// TestWaitingClaimWokenWhenFreedKeyIsRateHeld).
func (t *wtx) handOff() error {
	due, _, err := t.handoffs.Serve(&t.w.d.claimWaiters, true, func(w *claimWaiter) ([]*plane.Job, int64, error) {
		return t.claim(w.P, w.Kind, w.N, w.Lease)
	})
	for key := range due {
		t.wake(key)
	}
	return err
}

// deliver hands the claimed jobs over after a commit. After a rollback (committed false) the
// claims never happened: their waiters go back to the head of their queues' lines.
func (t *wtx) deliver(committed bool) {
	t.handoffs.Deliver(committed, func(w *claimWaiter) {
		planekit.Requeue(&t.w.d.claimWaiters, planekit.QueueKey(w.P.Namespace, w.P.Queue), w)
	})
}

// ParkedClaims is the number of claims on namespace/queue parked now for a direct handoff
// (a claim with a wait that found nothing claimable). It lets a test act once a claim is
// parked, where a sleep would only hope it is; it is not part of plane.Driver.
func (d *Driver) ParkedClaims(namespace, queue string) int {
	return d.claimWaiters.Parked(planekit.QueueKey(namespace, queue))
}
