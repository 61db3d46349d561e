package pgplane

import (
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Direct handoff (planekit.Handoffs), as in sqliteplane. A claim with Wait that finds
// nothing claimable parks itself as a waiter of its queue in this process. A later
// transaction of this process that makes jobs of that queue claimable claims for the parked
// waiters with the claim statements of InvocationClaimMany (FOR UPDATE SKIP LOCKED, a fresh
// lease token, the counters), before it commits, and hands them the jobs after the commit.
// Claimers in other processes are woken by NOTIFY as before and claim in a transaction of
// their own. Maintenance's promote hands nothing off: it wakes the parked claimers after
// its commit (maintenance.Promote), so that no transaction reads key turns while it holds
// the counter rows of keys it promoted (queuePromote).
//
// A waiter the writer takes is delivered to exactly once: its jobs after a commit, nil after
// a rollback or when the claim found nothing for it (it then claims again by itself).

// claimWaiter is one parked claim.
type claimWaiter = planekit.Waiter

// wakeQueue marks a queue that the transaction made jobs claimable in: its parked claimers
// are served before the commit and its other waiters woken after it.
func (t *tx) wakeQueue(namespace, queue string) {
	t.wake(t.handoffs.MarkClaimable(namespace, queue))
}

// handOff claims, at the end of the transaction, for the parked waiters of every queue that
// got claimable jobs (planekit.Handoffs.Serve: a waiter that gets nothing claims again by
// itself). A queue whose waiters got nothing, none of them with a job due, is not woken in
// this process after the commit (quiet): its remaining waiters would find nothing.
func (t *tx) handOff() error {
	if !t.handoffs.Marked() {
		return nil
	}
	// The transaction holds what it wrote (a submit the counter rows of its keys, a settle
	// its rows): its claims promote without waiting (promoteHolding).
	t.holdsRows = true
	var err error
	_, t.quiet, err = t.handoffs.Serve(&t.d.claimWaiters, false, func(w *claimWaiter) ([]*plane.Job, int64, error) {
		r := &claimRequest{P: w.P, Claim: w.Claim}
		err := t.claimFor([]*claimRequest{r})
		return r.Jobs, r.Next, err
	})
	return err
}

// deliver hands the claimed jobs over after a commit, or nil after a rollback (the claims
// never happened: the waiters claim again by themselves).
func (t *tx) deliver(committed bool) {
	t.handoffs.Deliver(committed, func(w *claimWaiter) { w.Deliver <- nil })
}
