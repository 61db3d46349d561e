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
type handoff struct {
	w    *claimWaiter
	jobs []*plane.Job
}

// markClaimable notes that the transaction made jobs of a queue claimable now: its parked
// claims are handed jobs before the commit, and claims over several queues woken after it.
func (t *wtx) markClaimable(namespace, queue string) {
	if t.claimable == nil {
		t.claimable = make(map[string][2]string)
	}
	t.claimable[planekit.QueueKey(namespace, queue)] = [2]string{namespace, queue}
	t.wake(planekit.ClaimableKey(namespace, queue)) // claims over several queues
}

// handOff claims, at the end of the transaction, for the parked waiters of every queue that
// got claimable jobs, until the waiters or the jobs run out.
func (t *wtx) handOff() error {
	waiters := &t.w.d.claimWaiters
	for len(t.claimable) > 0 {
		var key string
		for key = range t.claimable {
			break
		}
		// A claim below may promote due jobs of other queues and mark them: take one key at
		// a time so none is missed.
		delete(t.claimable, key)
		// A waiter that gets nothing goes back, and the next waiter with other offers is
		// tried: its offers may satisfy jobs the first's do not (plane/placement.go).
		// Waiters with the offers of one that got nothing are passed over.
		var refused map[string]bool
		untried := func(w *claimWaiter) bool { return !refused[w.offers] }
		for {
			w := waiters.TakeFirst(key, untried)
			if w == nil {
				break
			}
			jobs, _, err := t.claim(w.p, w.kind, w.n, w.lease)
			if err != nil {
				waiters.PutBack(key, w)
				return err
			}
			if len(jobs) == 0 {
				waiters.PutBack(key, w)
				if refused == nil {
					refused = make(map[string]bool)
				}
				refused[w.offers] = true
				continue
			}
			t.handoffs = append(t.handoffs, handoff{w, jobs})
		}
	}
	return nil
}

// deliver hands the claimed jobs over after a commit. After a rollback (committed false) the
// claims never happened: their waiters go back to the head of their queues' lines.
func (t *wtx) deliver(committed bool) {
	for _, h := range t.handoffs {
		if committed {
			h.w.deliver <- h.jobs
		} else {
			t.w.d.claimWaiters.PutBack(planekit.QueueKey(h.w.p.Namespace, h.w.p.Queue), h.w)
		}
	}
	t.handoffs = nil
}
