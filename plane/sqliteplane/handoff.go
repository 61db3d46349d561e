package sqliteplane

import (
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Direct handoff. A claimer with Wait that finds nothing claimable registers itself, inside
// the same write transaction, as a waiter of its queue. When a later transaction makes jobs
// of that queue claimable (a submit, a lease expiry), the writer claims for the waiters in
// that same transaction, first come first served, and hands them the jobs after the
// commit. So a submit reaches an idle claimer in one commit, and a submit wakes only the
// claimers it feeds: no herd of idle claimers racing for one job.

// claimWaiter is one parked claim.
type claimWaiter struct {
	p       *plane.ClaimParams
	kind    plane.Kind
	n       int
	lease   time.Duration
	deliver chan []*plane.Job // buffered 1: the writer delivers at most once per waiter
	parked  bool              // set by the claim transaction that parked it
	offers  string            // p.Offers' shape key: waiters with equal offers get the same jobs
}

// handoff is jobs claimed for a parked waiter in the current transaction.
type handoff = planekit.Handoff[claimWaiter]

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
// waiter that gets nothing goes back, and the next one with other offers is tried).
func (t *wtx) handOff() error {
	waiters := &t.w.d.claimWaiters
	return waiters.Serve(t.claimable, offersOf, func(key string, w *claimWaiter) (bool, error) {
		jobs, _, err := t.claim(w.p, w.kind, w.n, w.lease)
		if err != nil || len(jobs) == 0 {
			waiters.PutBack(key, w)
			return false, err
		}
		t.handoffs = append(t.handoffs, handoff{Waiter: w, Jobs: jobs})
		return true, nil
	})
}

// offersOf is a waiter's class for Serve: its offers' key.
func offersOf(w *claimWaiter) string { return w.offers }

// deliver hands the claimed jobs over after a commit. After a rollback (committed false) the
// claims never happened: their waiters go back to the head of their queues' lines.
func (t *wtx) deliver(committed bool) {
	for _, h := range t.handoffs {
		if committed {
			h.Waiter.deliver <- h.Jobs
		} else {
			t.w.d.claimWaiters.PutBack(planekit.QueueKey(h.Waiter.p.Namespace, h.Waiter.p.Queue), h.Waiter)
		}
	}
	t.handoffs = nil
}
