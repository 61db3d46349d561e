package planekit

import "github.com/lakeshore-dev/lakeshore/plane"

// Handoffs is a write transaction's side of the direct handoff (waiters.go), on both SQL
// planes: the queues it made jobs claimable in, and the parked claims it took with the jobs
// it claimed for them. A driver's transaction holds one; the zero Handoffs is ready to use.
// Not safe for concurrent use.
type Handoffs struct {
	claimable map[string]struct{}
	taken     []Handoff[Waiter]
	// since is the waiters' Seq when Serve began (Quiet).
	since uint64
}

// MarkClaimable notes that the transaction made jobs of the queue claimable (a submit, a
// retry, a promotion, a lease expiry, a resume): Serve serves its parked claims. It returns
// the queue's key (QueueKey).
func (h *Handoffs) MarkClaimable(namespace, queue string) string {
	key := QueueKey(namespace, queue)
	if h.claimable == nil {
		h.claimable = make(map[string]struct{})
	}
	h.claimable[key] = struct{}{}
	return key
}

// Marked reports whether the transaction made jobs of any queue claimable (MarkClaimable)
// that Serve has not served yet.
func (h *Handoffs) Marked() bool { return len(h.claimable) > 0 }

// Serve claims, at the end of the transaction, for the parked waiters of every queue it
// made jobs claimable in, until the waiters or the jobs run out (Waiters.Serve, a class by
// its offers: a waiter that gets nothing passes over the others of its class). claim
// claims for w in the transaction; nextMS, when it takes nothing, is when a job of w's
// queue becomes claimable (Unix ms; 0: none known). With requeue, a waiter whose claim
// gets nothing or fails is put back at the head of its line at once (Requeue); without, a
// waiter taken is answered exactly once (Deliver), even when its claim fails, and one that
// gets nothing is answered with no jobs after the commit and claims again by itself. Of
// the keys where a waiter got nothing, due are those where one had a job due later, and,
// without requeue, idle those where none had: their waiters in this process would find
// nothing if woken after the commit.
func (h *Handoffs) Serve(waiters *Waiters[Waiter], requeue bool, claim func(w *Waiter) (jobs []*plane.Job, nextMS int64, err error)) (due, idle map[string]struct{}, err error) {
	var empty map[string]struct{} // keys where a waiter got nothing (without requeue)
	h.since = waiters.Seq()
	err = waiters.Serve(h.claimable, ByOffers, func(key string, w *Waiter) (bool, error) {
		if !requeue {
			h.taken = append(h.taken, Handoff[Waiter]{Waiter: w}) // answered even if the claim fails
		}
		jobs, nextMS, err := claim(w)
		switch {
		case requeue && (err != nil || len(jobs) == 0):
			Requeue(waiters, key, w)
		case requeue:
			h.taken = append(h.taken, Handoff[Waiter]{Waiter: w, Jobs: jobs})
		case err == nil:
			h.taken[len(h.taken)-1].Jobs = jobs
		}
		if err != nil || len(jobs) > 0 {
			return err == nil, err
		}
		if !requeue {
			empty = mark(empty, key)
		}
		if nextMS != 0 {
			due = mark(due, key)
		}
		return false, nil
	})
	if err != nil {
		return nil, nil, err
	}
	for key := range empty {
		if _, ok := due[key]; !ok {
			idle = mark(idle, key)
		}
	}
	return due, idle, nil
}

// mark adds key to m, made when nil.
func mark(m map[string]struct{}, key string) map[string]struct{} {
	if m == nil {
		m = make(map[string]struct{})
	}
	m[key] = struct{}{}
	return m
}

// Quiet returns the keys of idle (Serve's) whose waiters in this process need not be woken
// after the commit (Waiters.Quiet): a claim that was trying or parked while Serve ran was
// not seen by it and is woken. Call it after the commit.
func (h *Handoffs) Quiet(waiters *Waiters[Waiter], idle map[string]struct{}) map[string]struct{} {
	return waiters.Quiet(idle, h.since)
}

// Deliver hands each waiter Serve took the jobs claimed for it (Deliver) after the
// transaction committed; after a rollback the claims never happened, and rolledBack gets
// each waiter instead (to put it back in line, or to tell it to claim again).
func (h *Handoffs) Deliver(committed bool, rolledBack func(w *Waiter)) {
	Deliver(h.taken, committed, rolledBack)
	h.taken = nil
}
