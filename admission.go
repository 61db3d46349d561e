package lakeshore

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/lakeshore-dev/lakeshore/plane"
)

type (
	// Admission is a queue's admission block — MaxDepth with its OnFull policy, RateLimit
	// with Burst, DeadlineCutoff — stored in the plane and enforced inside every submit
	// transaction, so it holds across processes. A submit whose key already exists bypasses
	// it. Its ConcurrencyLimit, ConcurrencyLimits and KeyWeights apply at claim to the
	// invocations submitted with a SubmitOptions.ConcurrencyKey (docs/semantics.md,
	// "Concurrency keys and fair share"). An alias of plane.Admission; its fields document
	// their defaults.
	Admission = plane.Admission

	// OnFull is what a submit does when its queue is at Admission.MaxDepth: OnFullReject
	// or OnFullBlock. An alias of plane.OnFull.
	OnFull = plane.OnFull

	// AdmissionError is a submit refused by a queue's admission block. It matches
	// ErrQueueFull (depth, or a blocked submit whose ctx ended) or ErrRateLimited (rate;
	// RetryAfter says when to try again). An alias of plane.AdmissionError.
	AdmissionError = plane.AdmissionError

	// KeyStats is one concurrency key of a queue: its claimable and running jobs, limit and
	// weight (Queue.ConcurrencyKeys, QueueStats.Keys). An alias of plane.KeyStats.
	KeyStats = plane.KeyStats
	// Requirement is what an invocation needs from its worker (SubmitOptions.Requirement;
	// docs/semantics.md, "Placement"): CPUs (×1000), memory in bytes, GPUs, a GPU type,
	// labels. An alias of plane.Requirement.
	Requirement = plane.Requirement
	// Offers is what a worker offers to the jobs it claims (WorkerOptions.Offers,
	// ClaimOptions.Offers), in Requirement's fields. An alias of plane.Offers.
	Offers = plane.Offers
)

// The full-queue policies.
const (
	// OnFullReject fails a submit to a full queue at once with ErrQueueFull.
	OnFullReject = plane.OnFullReject
	// OnFullBlock makes a submit to a full queue wait for room, bounded by its ctx.
	OnFullBlock = plane.OnFullBlock
)

// SetAdmission stores a as the queue's admission block, replacing any earlier one; it
// applies to every later submit from any process. Errors: *InvalidError naming the bad
// field.
func (q *Queue) SetAdmission(ctx context.Context, a Admission) error {
	_, err := q.d.drv.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: q.opts.Namespace, Queue: q.name, Admission: a})
	return err
}

// updateAdmissionTries bounds UpdateAdmission's reads and conditional writes.
const updateAdmissionTries = 10

// UpdateAdmission changes the queue's admission block with change and returns the block
// written (as stored, defaults filled in: a burst that follows the rate shows the new
// rate's), without losing a concurrent change: it reads the block, calls change on a copy
// (a zero block when the queue has none), and writes the result only if the stored block is
// still the one it read (a conditional set, plane.AdmissionParams.IfMatch); when another
// writer came first, it reads again and calls change again, at most 10 times. An error of
// change ends it with nothing written. Errors: as SetAdmission; ErrChanged when every try
// met another writer's change.
func (q *Queue) UpdateAdmission(ctx context.Context, change func(a *Admission) error) (*Admission, error) {
	for range updateAdmissionTries {
		current, err := q.Admission(ctx)
		if err != nil {
			return nil, err
		}
		var a Admission
		if current != nil {
			a = *current
			// The maps are the change's to edit: copies, so a retry starts from the stored block.
			a.ConcurrencyLimits = maps.Clone(a.ConcurrencyLimits)
			a.KeyWeights = maps.Clone(a.KeyWeights)
			a.KeyRateLimits = maps.Clone(a.KeyRateLimits)
			a.KeyBursts = maps.Clone(a.KeyBursts)
		}
		if err := change(&a); err != nil {
			return nil, err
		}
		stored, err := q.d.drv.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: q.opts.Namespace, Queue: q.name,
			Admission: a, IfMatch: plane.AdmissionTag(current)})
		if !errors.Is(err, plane.ErrChanged) {
			// The block as stored (a burst that follows the rate moved with it): this
			// set's own, never a racing set's.
			return stored, err
		}
	}
	return nil, fmt.Errorf("update admission of queue %s/%s: %w (another writer's at each of %d tries)", q.opts.Namespace, q.name, plane.ErrChanged, updateAdmissionTries)
}

// Admission returns the queue's admission block, or nil when it has none (no limits).
func (q *Queue) Admission(ctx context.Context) (*Admission, error) {
	return q.d.drv.QueueAdmissionGet(ctx, q.opts.Namespace, q.name)
}

// ClearAdmission removes the queue's admission block, lifting its limits, and reports
// whether there was one.
func (q *Queue) ClearAdmission(ctx context.Context) (bool, error) {
	return q.d.drv.QueueAdmissionDelete(ctx, q.opts.Namespace, q.name)
}

// Pause pauses the queue and reports whether it was running: it still accepts submits
// (its admission block applies), but no claim takes its invocations — workers keep
// waiting — until Resume. Invocations already running are not touched. The pause is stored
// in the plane, so it holds for every process and server. Errors: *InvalidError (a bad
// name); over HTTP, ErrForbidden without an admin token.
func (q *Queue) Pause(ctx context.Context) (bool, error) {
	return q.d.drv.QueuePause(ctx, &plane.PauseParams{Namespace: q.opts.Namespace, Queue: q.name, Paused: true})
}

// Resume resumes a paused queue and reports whether it was paused: its queued invocations
// are claimable at once, and waiting workers take them.
func (q *Queue) Resume(ctx context.Context) (bool, error) {
	return q.d.drv.QueuePause(ctx, &plane.PauseParams{Namespace: q.opts.Namespace, Queue: q.name, Paused: false})
}

// Paused reports whether the queue is paused (from Dispatch.QueueStats).
func (q *Queue) Paused(ctx context.Context) (bool, error) {
	stats, err := q.d.drv.QueueStatsList(ctx, q.opts.Namespace)
	if err != nil {
		return false, err
	}
	for _, s := range stats {
		if s.Queue == q.name {
			return s.Paused, nil
		}
	}
	return false, nil
}

// ConcurrencyKeys returns the queue's concurrency keys with jobs claimable or running now,
// or held back by a worker's "slow down" (RateLimited: KeyStats.RateWait says how long,
// also when the key's only job waits out the hold), the most running first (at most 100;
// from Dispatch.QueueStats).
func (q *Queue) ConcurrencyKeys(ctx context.Context) ([]KeyStats, error) {
	stats, err := q.d.drv.QueueStatsList(ctx, q.opts.Namespace)
	if err != nil {
		return nil, err
	}
	for _, s := range stats {
		if s.Queue == q.name {
			return s.Keys, nil
		}
	}
	return nil, nil
}
