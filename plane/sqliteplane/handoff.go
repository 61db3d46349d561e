package sqliteplane

import (
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
)

// Direct handoff. A claimer with Wait that finds nothing claimable registers itself, inside
// the same write transaction, as a waiter of its queue. When a later transaction makes jobs
// of that queue claimable (a submit, a lease expiry), the writer claims for the waiters in
// that same transaction, first come first served, and hands them the jobs after the
// commit. So a submit reaches an idle claimer in one commit, and a submit wakes only the
// claimers it feeds: no herd of idle claimers racing for one job.

// claimWaiter is one parked claim; handoff is jobs claimed for it in the current
// transaction.
type (
	claimWaiter = planekit.Waiter
	handoff     = planekit.Handoff[claimWaiter]
)

// markClaimable notes that the transaction made jobs of a queue claimable now: its parked
// claims are handed jobs before the commit, and claims over several queues woken after it.
func (t *wtx) markClaimable(namespace, queue string) {
	if t.claimable == nil {
		t.claimable = make(map[string]struct{})
	}
	t.claimable[planekit.QueueKey(namespace, queue)] = struct{}{}
	t.wake(planekit.ClaimableKey(namespace, queue)) // claims over several queues
}

// handOff claims, at the end of the transaction, for the parked waiters of every queue that
// got claimable jobs, until the waiters or the jobs run out (planekit.Waiters.Serve: a
// waiter that gets nothing goes back, and the next one with other offers is tried). A
// waiter that gets nothing although a job of its queue comes due later (a key freed by a
// settle but held back by its rate limit until its next token) is woken after the commit,
// as pgplane's handOff wakes it: it claims again and sleeps until that time, where it
// would otherwise sleep out the wait it began with (server's
// TestWaitingClaimWokenWhenFreedKeyIsRateHeld).
func (t *wtx) handOff() error {
	waiters := &t.w.d.claimWaiters
	return waiters.Serve(t.claimable, planekit.ByOffers, func(key string, w *claimWaiter) (bool, error) {
		jobs, nextMS, err := t.claim(w.P, w.Kind, w.N, w.Lease)
		if err != nil || len(jobs) == 0 {
			planekit.Requeue(waiters, key, w)
			if err == nil && nextMS != 0 {
				t.wake(key)
			}
			return false, err
		}
		t.handoffs = append(t.handoffs, handoff{Waiter: w, Jobs: jobs})
		return true, nil
	})
}

// deliver hands the claimed jobs over after a commit. After a rollback (committed false) the
// claims never happened: their waiters go back to the head of their queues' lines.
func (t *wtx) deliver(committed bool) {
	planekit.Deliver(t.handoffs, committed, func(w *claimWaiter) {
		planekit.Requeue(&t.w.d.claimWaiters, planekit.QueueKey(w.P.Namespace, w.P.Queue), w)
	})
	t.handoffs = nil
}
