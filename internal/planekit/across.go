package planekit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// A claim over several queues (plane.ClaimParams.Queues). Each try is one transaction of
// the driver that claims from the first of the queues, in the order given, that has
// claimable work. The order rotates by one place from try to try (Rotation), so a queue
// that always has work cannot starve the others: with k queues, a queue with work is tried
// first at least once in every k tries. With nothing claimable the claim waits on every
// queue at once through the hub (Hub.WatchAny), and tries again when any of them gets
// claimable work, a delayed job falls due, or the plane's poll says so. Such a claim is not
// a parked waiter of the direct handoff (waiters.go): a waiter of one queue is handed jobs
// by the transaction that made them claimable, which cannot know that a waiter of several
// queues took a job elsewhere meanwhile.

// ClaimableKey is the hub key a plane notifies when it makes jobs of a queue claimable
// (a submit, a retry, a promotion, a lease expiry) for the claims over several queues.
// Claims of one queue wait by direct handoff instead, so this key wakes no herd of them.
func ClaimableKey(namespace, queue string) string { return "c:" + namespace + "/" + queue }

// Rotation turns which queue a claim over several queues tries first. The zero Rotation is
// ready to use. Safe for concurrent use.
type Rotation struct{ next atomic.Uint64 }

// Order returns queues rotated one place further than the previous call's (a new slice).
func (r *Rotation) Order(queues []string) []string {
	i := int((r.next.Add(1) - 1) % uint64(len(queues)))
	out := make([]string, 0, len(queues))
	out = append(out, queues[i:]...)
	return append(out, queues[:i]...)
}

// TryAcross claims, in one transaction, up to the claim's Max jobs from the first of
// queues, in their order, with claimable work. With none, due is how long until a delayed
// job of one of them becomes claimable (0: none known).
type TryAcross func(ctx context.Context, queues []string) (jobs []*plane.Job, due time.Duration, err error)

// ClaimAcross is the claim loop of a claim over several queues (p.QueueNames()): tries in
// the rotation's order, waiting between them as p.Wait allows on the hub keys that key
// names for each queue, with sleep (the driver's wait: changed closing, the wait passing as
// plane.ErrTimeout, ctx or Close ending it). It returns the jobs (none when the wait ended
// first), and whether a try committed (settle-and-claim runs its settles in the first).
func ClaimAcross(ctx context.Context, p *plane.ClaimParams, rot *Rotation, hub *Hub, key func(namespace, queue string) string,
	try TryAcross, sleep func(ctx context.Context, changed <-chan struct{}, wait time.Duration) error,
) (jobs []*plane.Job, committed bool, err error) {
	queues := p.QueueNames()
	keys := make([]string, len(queues))
	for i, q := range queues {
		keys[i] = key(p.Namespace, q)
	}
	waitUntil := time.Now().Add(p.Wait)
	for {
		var changed <-chan struct{}
		release := func() {}
		if p.Wait > 0 {
			// Watched before the try, so a commit between the try and the sleep still
			// wakes us.
			changed, release = hub.WatchAny(keys)
		}
		jobs, due, err := try(ctx, rot.Order(queues))
		committed = committed || err == nil
		if err != nil || len(jobs) > 0 || p.Wait == 0 {
			release()
			return jobs, committed, err
		}
		wait := time.Until(waitUntil)
		if due > 0 {
			wait = min(wait, due)
		}
		err = sleep(ctx, changed, wait)
		release()
		switch {
		case errors.Is(err, plane.ErrTimeout):
			if time.Until(waitUntil) <= 0 {
				return nil, committed, nil
			}
		case err != nil:
			return nil, committed, err
		}
	}
}
