package planekit

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The claim's loops both SQL planes run around their own claim statements: what a claim's
// parameters decide (ClaimOf), the dispatch of InvocationClaimMany and
// InvocationSettleAndClaim between a claim of one queue and one over several (ClaimMany,
// SettleThenClaim), the try of a claim over several queues (TryEach), and a parked claim's
// wait (WaitLeft, Waiters.Await). A driver keeps the claim of one queue in one
// transaction, its transaction shape (one write op in SQLite, grouped transactions in
// PostgreSQL) and where it parks.

// Claim is what a validated claim's parameters decide for its transaction.
type Claim struct {
	// Kind is the claim order (plane.ParseKind of ClaimParams.Kind; fifo when empty).
	Kind plane.Kind
	// N is how many jobs the claim takes at the most: ClaimParams.Max, at least 1.
	N int
	// Lease is the lease of each job: ClaimParams.LeaseTTL, or plane.LeaseTTLDefault.
	Lease time.Duration
}

// ClaimOf returns what p, validated, decides for the claim.
func ClaimOf(p *plane.ClaimParams) Claim {
	kind, _ := plane.ParseKind(string(p.Kind))
	return Claim{Kind: kind, N: max(p.Max, 1), Lease: cmp.Or(p.LeaseTTL, plane.LeaseTTLDefault)}
}

// ClaimLoop is a driver's claim loop: it claims for p (of one queue, or of several for the
// driver's loop of claims over several queues) as InvocationClaimMany does, waiting as
// p.Wait allows; before, when set, runs in the first transaction, before the claim. It
// returns the jobs and whether that first transaction committed. T is the driver's
// transaction.
type ClaimLoop[T any] func(ctx context.Context, p *plane.ClaimParams, before func(t T) error) (jobs []*plane.Job, committed bool, err error)

// ClaimMany is InvocationClaimMany over a driver's two claim loops: p validated, then across
// for a claim over several queues (p.Queues), one for a claim of one queue.
func ClaimMany[T any](ctx context.Context, p *plane.ClaimParams, one, across ClaimLoop[T]) ([]*plane.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	loop := one
	if len(p.Queues) > 0 {
		loop = across
	}
	jobs, _, err := loop(ctx, p, nil)
	return jobs, err
}

// SettleClaim serves a settle-and-claim of one queue: the settles (each result into out) and
// the claim, then its wait as p.Wait allows. committed reports whether the settles
// committed.
type SettleClaim func(ctx context.Context, settle []plane.SettleParams, p *plane.ClaimParams, out []error) (jobs []*plane.Job, committed bool, err error)

// SettleThenClaim is InvocationSettleAndClaim: settle and p validated, then one for a claim
// of one queue, or, for a claim over several queues (p.Queues), across with settleAll (each
// settle's result into out) run in its first transaction. Once the settles committed, a
// wait ended by ctx or Close is no error of the call (the caller learns of it from its next
// one): it answers the results and the jobs.
func SettleThenClaim[T any](ctx context.Context, settle []plane.SettleParams, p *plane.ClaimParams, one SettleClaim, across ClaimLoop[T],
	settleAll func(t T, settle []plane.SettleParams, out []error) error,
) ([]error, []*plane.Job, error) {
	if err := ValidateAll(settle); err != nil {
		return nil, nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	out := make([]error, len(settle))
	var jobs []*plane.Job
	var committed bool
	var err error
	if len(p.Queues) > 0 {
		jobs, committed, err = across(ctx, p, func(t T) error { return settleAll(t, settle, out) })
	} else {
		jobs, committed, err = one(ctx, settle, p, out)
	}
	if err != nil && !committed {
		return nil, nil, err
	}
	return out, jobs, nil
}

// TryEach is the try of a claim over several queues (TryAcross) over a driver's
// transaction: one transaction (do) runs before, on the first try only, then claim for
// each queue in the order given, with p narrowed to that queue, until one claims jobs.
// claim returns, with no job, when a job of its queue becomes claimable (Unix
// milliseconds, 0: none known); the try's due is the earliest of them, from now. A ctx
// that ended fails the try before its transaction.
func TryEach[T any](p *plane.ClaimParams, before func(t T) error, do func(ctx context.Context, fn func(t T) error) error,
	now func() time.Time, claim func(t T, one *plane.ClaimParams) (jobs []*plane.Job, nextMS int64, err error),
) TryAcross {
	return func(ctx context.Context, queues []string) ([]*plane.Job, time.Duration, error) {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		var jobs []*plane.Job
		var next int64
		first := before
		before = nil
		err := do(ctx, func(t T) error {
			jobs, next = nil, 0
			if first != nil {
				if err := first(t); err != nil {
					return err
				}
			}
			for _, q := range queues {
				one := *p
				one.Queue, one.Queues = q, nil
				got, at, err := claim(t, &one)
				if err != nil {
					return err
				}
				if len(got) > 0 {
					jobs = got
					return nil
				}
				next = EarlierDue(next, at)
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
		return jobs, DueIn(next, now()), nil
	}
}

// DueIn is how long from now until nextMS (Unix milliseconds), at least a millisecond; 0
// when nextMS is 0 (none known).
func DueIn(nextMS int64, now time.Time) time.Duration {
	if nextMS <= 0 {
		return 0
	}
	return max(time.Duration(nextMS-now.UnixMilli())*time.Millisecond, time.Millisecond)
}

// WaitLeft is how long a claim that found nothing sleeps: until waitUntil, or, when a job
// becomes claimable before then (nextMS, Unix milliseconds; 0: none known), until then
// (DueIn).
func WaitLeft(waitUntil time.Time, nextMS int64, now time.Time) time.Duration {
	wait := time.Until(waitUntil)
	if nextMS > 0 {
		wait = min(wait, DueIn(nextMS, now))
	}
	return wait
}

// ClaimTry is one claim transaction of a claim of one queue: it claims, and when it finds
// nothing and w is set (the claim may wait), it may park w (parked) in that transaction, so
// that no commit slips between. nextMS is when a job of the queue becomes claimable (Unix
// ms, 0: none known); committed reports whether the transaction committed.
type ClaimTry func(w *Waiter) (jobs []*plane.Job, nextMS int64, parked, committed bool, err error)

// ClaimWaiting is the claim loop of a claim of one queue: try, and while it finds nothing
// and p.Wait allows, w parked at the queue's key (by try, or else here) for a direct
// handoff and the wait (sleep, which changes of the key, a handoff on deliver, ctx and
// Close end, for wait at the most) — then try again. The key is watched before each try,
// so a commit between the try and the park still wakes the wait, and the claim counts as
// arriving from its watch to its park (Waiters.Arrive), so such a commit's handoff does not
// leave the key quiet (Waiters.Quiet). It returns the jobs and whether any try committed.
func ClaimWaiting(p *plane.ClaimParams, hub *Hub, waiters *Waiters[Waiter], now func() time.Time, try ClaimTry,
	sleep func(changed <-chan struct{}, wait time.Duration, deliver <-chan []*plane.Job) ([]*plane.Job, error),
) (jobs []*plane.Job, committed bool, err error) {
	c := ClaimOf(p)
	waitUntil := time.Now().Add(p.Wait)
	key := QueueKey(p.Namespace, p.Queue)
	for {
		var changed <-chan struct{}
		release := func() {}
		var w *Waiter
		if p.Wait > 0 {
			changed, release = hub.Watch(key)
			waiter := NewWaiter(p, c)
			w = &waiter
			waiters.Arrive(key) // until parked, a commit's handoff does not see w (Waiters.Quiet)
		}
		jobs, nextMS, parked, ok, err := try(w)
		committed = committed || ok
		if err != nil || len(jobs) > 0 || p.Wait == 0 {
			if w != nil {
				waiters.Arrived(key, w, false)
			}
			if parked && !waiters.Unpark(key, w) {
				jobs = append(jobs, waiters.Collect(w, w.Deliver)...) // parked by a try that rolled back, then taken
			}
			release()
			return jobs, committed, err
		}
		waiters.Arrived(key, w, !parked)
		// A queued invocation may become claimable before the wait ends.
		wait := WaitLeft(waitUntil, nextMS, now())
		handed, again, err := waiters.Await(key, w, w.Deliver, waitUntil, func() ([]*plane.Job, error) {
			return sleep(changed, wait, w.Deliver)
		}, release)
		if !again {
			return handed, true, err
		}
	}
}

// Boltzmann is the boltzmann draw of a claim over a queue's priority levels (count per
// level): while more reports that the claim wants more and levels remain, a level is drawn
// (plane.DrawLevel, with draw's number) and take takes that level's first claimable job;
// found false (every job of the level is waiting, or taken) drops the level, as does
// spending its count.
func Boltzmann(levels []plane.Level, temperature float64, draw func() float64, more func() bool,
	take func(priority float64) (found bool, err error),
) error {
	for more() && len(levels) > 0 {
		i := plane.DrawLevel(levels, temperature, draw())
		found, err := take(levels[i].Priority)
		if err != nil {
			return err
		}
		if levels[i].Count--; !found || levels[i].Count <= 0 {
			levels = slices.Delete(levels, i, i+1)
		}
	}
	return nil
}

// Waiter is a parked claim, on both planes (Waiters[Waiter]).
type Waiter struct {
	// P is the claim's parameters.
	P *plane.ClaimParams
	// Claim is what P decides.
	Claim
	// Deliver carries the jobs a transaction claimed for the waiter (buffered 1: written at
	// most once by the transaction that took it).
	Deliver chan []*plane.Job
	// Offers is P.Offers' shape key (plane.Requirement.Shape): waiters with equal offers get
	// the same jobs, so Waiters.Serve passes over the others of a class that got none.
	Offers string
}

// NewWaiter returns the waiter of a claim with parameters p, which decide c.
func NewWaiter(p *plane.ClaimParams, c Claim) Waiter {
	return Waiter{P: p, Claim: c, Deliver: make(chan []*plane.Job, 1), Offers: (*plane.Requirement)(p.Offers).Shape()}
}

// ByOffers is a waiter's class for Waiters.Serve: its offers' shape key.
func ByOffers(w *Waiter) string { return w.Offers }

// Deliver hands each waiter of handoffs the jobs claimed for it (on its Deliver) after
// the transaction committed; after a rollback the claims never happened, and rolledBack
// gets each waiter instead (to put it back in line, or to tell it to claim again).
func Deliver(handoffs []Handoff[Waiter], committed bool, rolledBack func(w *Waiter)) {
	for _, h := range handoffs {
		if committed {
			h.Waiter.Deliver <- h.Jobs
		} else {
			rolledBack(h.Waiter)
		}
	}
}

// Requeue puts w, a waiter a transaction took and did not serve, back at the head of key's
// line; or, when w's wait ended while the transaction held it, answers it with no jobs, so
// that wait returns (Waiters.PutBack).
func Requeue(c *Waiters[Waiter], key string, w *Waiter) {
	if !c.PutBack(key, w) {
		w.Deliver <- nil
	}
}

// Await is the wait of w, a claim parked at key: sleep (which a delivery on w's Deliver,
// the wait passing, ctx or Close ends), then release, then w unparked — or, when a
// transaction took it meanwhile, its delivery, which comes right after that transaction's
// commit, so jobs claimed for w are returned even when ctx ended and no lease is left
// without a holder. It returns the jobs handed to w, and what ended the wait early (nil
// when it passed: plane.ErrTimeout is no error here); again reports that neither ended
// the claim and waitUntil is still ahead: the claim tries again.
func (c *Waiters[W]) Await(key string, w *W, deliver <-chan []*plane.Job, waitUntil time.Time, sleep func() ([]*plane.Job, error), release func()) (jobs []*plane.Job, again bool, err error) {
	handed, err := sleep()
	if err == plane.ErrTimeout {
		err = nil
	}
	release()
	if handed == nil && !c.Unpark(key, w) {
		handed = c.Collect(w, deliver)
	}
	switch {
	case len(handed) > 0:
		return handed, false, nil
	case err != nil:
		return nil, false, err
	}
	return nil, time.Until(waitUntil) > 0, nil
}
