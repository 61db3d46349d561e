package pgplane

import (
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
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

// claimWaiter is one parked claim; handoff is a waiter taken by the current transaction,
// and the jobs claimed for it.
type (
	claimWaiter = planekit.Waiter
	handoff     = planekit.Handoff[claimWaiter]
)

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
// got claimable jobs, until the waiters or the jobs run out (planekit.Waiters.Serve: a
// waiter that gets nothing claims again by itself, and the next one with other offers is
// tried). A queue whose waiters got nothing, none of them with a job due, is not woken in
// this process after the commit: its remaining waiters would find nothing.
func (t *tx) handOff() error {
	if len(t.claimable) == 0 {
		return nil
	}
	// The transaction holds what it wrote (a submit the counter rows of its keys, a settle
	// its rows): its claims promote without waiting (promoteHolding).
	t.holdsRows = true
	var empty, due map[string]bool // keys where a waiter got nothing; where one of those has a job due
	err := t.d.claimWaiters.Serve(t.claimable, planekit.ByOffers, func(key string, w *claimWaiter) (bool, error) {
		r := &claimRequest{p: w.P, kind: w.Kind, n: w.N, lease: w.Lease}
		t.handoffs = append(t.handoffs, handoff{Waiter: w}) // delivered to even if the claim fails
		if err := t.claimFor([]*claimRequest{r}); err != nil {
			return false, err
		}
		t.handoffs[len(t.handoffs)-1].Jobs = r.jobs
		if len(r.jobs) == 0 {
			empty = mark(empty, key)
			if r.next != 0 {
				due = mark(due, key)
			}
		}
		return len(r.jobs) > 0, nil
	})
	if err != nil {
		return err
	}
	for key := range empty {
		if !due[key] {
			if t.quiet == nil {
				t.quiet = make(map[string]struct{})
			}
			t.quiet[key] = struct{}{}
		}
	}
	return nil
}

// mark adds key to m, made when nil.
func mark(m map[string]bool, key string) map[string]bool {
	if m == nil {
		m = make(map[string]bool)
	}
	m[key] = true
	return m
}

// deliver hands the claimed jobs over after a commit, or nil after a rollback (the claims
// never happened: the waiters claim again by themselves).
func (t *tx) deliver(committed bool) {
	planekit.Deliver(t.handoffs, committed, func(w *claimWaiter) { w.Deliver <- nil })
	t.handoffs = nil
}
