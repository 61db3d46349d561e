package pgplane

import (
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Direct handoff, as in sqliteplane. A claim with Wait that finds nothing claimable parks
// itself as a waiter of its queue in this process. A later transaction of this process that
// makes jobs of that queue claimable (a submit, a retry, a promotion, a lease expiry) claims
// for the parked waiters, first come first served, with the claim statements of
// InvocationClaimMany (FOR UPDATE SKIP LOCKED, a fresh lease token, the counters), before it
// commits, and hands them the jobs after the commit. So a submit reaches an idle claimer of
// its own process in one commit instead of two. Claimers in other processes are woken by
// NOTIFY as before and claim in a transaction of their own.
//
// A waiter the writer takes is delivered to exactly once: its jobs after a commit, nil after
// a rollback or when the claim found nothing for it (it then claims again by itself).

// claimWaiter is one parked claim.
type claimWaiter struct {
	p       *plane.ClaimParams
	kind    plane.Kind
	n       int
	req     *claimRequest     // the claim the writer runs for the waiter
	deliver chan []*plane.Job // buffered 1: written once by the writer that took the waiter
	offers  string            // p.Offers' shape key: waiters with equal offers get the same jobs
}

// handoff is a waiter taken by the current transaction, and the jobs claimed for it.
type handoff struct {
	w    *claimWaiter
	jobs []*plane.Job
}

// wakeQueue marks a queue that the transaction made jobs claimable in: its parked claimers
// are served before the commit and its other waiters woken after it.
func (t *tx) wakeQueue(namespace, queue string) {
	key := planekit.QueueKey(namespace, queue)
	t.wake(key)
	if t.claimable == nil {
		t.claimable = make(map[string]struct{})
	}
	t.claimable[key] = struct{}{}
}

// handOff claims, at the end of the transaction, for the parked waiters of every queue that
// got claimable jobs, until the waiters or the jobs run out. A queue whose jobs ran out
// before its waiters, with none delayed, is not woken in this process after the commit: its
// remaining waiters would find nothing.
func (t *tx) handOff() error {
	waiters := &t.d.claimWaiters
	for len(t.claimable) > 0 {
		var key string
		for key = range t.claimable {
			break
		}
		// A claim below may time out or requeue rows and mark their queues: one key at a
		// time, so none is missed.
		delete(t.claimable, key)
		// A waiter that gets nothing claims again by itself, and the next waiter with other
		// offers is tried: its offers may satisfy jobs the first's do not (plane/
		// placement.go). Waiters with the offers of one that got nothing are passed over.
		var refused map[string]bool
		untried := func(w *claimWaiter) bool { return !refused[w.offers] }
		quiet := true // every waiter that got nothing has nothing due either
		for {
			w := waiters.TakeFirst(key, untried)
			if w == nil {
				break
			}
			r := &claimRequest{p: w.p, kind: w.kind, n: w.n, lease: w.req.lease}
			h := handoff{w: w}
			t.handoffs = append(t.handoffs, &h)
			if err := t.claimFor([]*claimRequest{r}); err != nil {
				return err
			}
			h.jobs = r.jobs
			if len(r.jobs) == 0 {
				quiet = quiet && r.next == 0
				if refused == nil {
					refused = make(map[string]bool)
				}
				refused[w.offers] = true
			}
		}
		if refused != nil && quiet {
			if t.quiet == nil {
				t.quiet = make(map[string]struct{})
			}
			t.quiet[key] = struct{}{}
		}
	}
	return nil
}

// deliver hands the claimed jobs over after a commit, or nil after a rollback (the claims
// never happened: the waiters claim again by themselves).
func (t *tx) deliver(committed bool) {
	for _, h := range t.handoffs {
		if committed {
			h.w.deliver <- h.jobs
		} else {
			h.w.deliver <- nil
		}
	}
	t.handoffs = nil
}
