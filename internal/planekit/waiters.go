package planekit

import (
	"sync"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Direct handoff. A claim with Wait that finds nothing claimable parks itself as a waiter
// of its queue in this process. A later transaction of this process that makes jobs of that
// queue claimable (a submit, a retry, a promotion, a lease expiry) takes the waiters, first
// come first served, claims for them before it commits, and hands them the jobs after the
// commit. So a submit reaches an idle claimer in one commit, and wakes only the claimers it
// feeds: no herd of idle claimers racing for one job. The drivers keep the claim itself.

// Waiters are the parked claims per queue key, in arrival order; W is the driver's waiter.
// The zero Waiters is ready to use. Safe for concurrent use.
type Waiters[W any] struct {
	mu      sync.Mutex
	byQueue map[string][]*W
	// left holds the waiters whose wait ended while a transaction held them (Unpark found
	// them gone): PutBack answers them instead of parking them again.
	left map[*W]struct{}
	// arriving counts, per key, the claims between their watch of the key and their park
	// (Arrive, Arrived): no handoff sees them, so Quiet leaves their key to be woken.
	arriving map[string]int
	// parkedAt is, per key with parked waiters, the sequence number of its latest Park
	// (Seq), so Quiet can tell the waiters parked after a handoff began.
	parkedAt map[string]uint64
	seq      uint64
}

// Park adds w to the end of key's waiters unless it is there already.
func (c *Waiters[W]) Park(key string, w *W) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.park(key, w)
}

// park is Park with c.mu held.
func (c *Waiters[W]) park(key string, w *W) {
	if c.byQueue == nil {
		c.byQueue = make(map[string][]*W)
	}
	if c.parkedAt == nil {
		c.parkedAt = make(map[string]uint64)
	}
	for _, x := range c.byQueue[key] {
		if x == w {
			return
		}
	}
	c.byQueue[key] = append(c.byQueue[key], w)
	c.seq++
	c.parkedAt[key] = c.seq
}

// Arrive notes a claim of key that watched key and is about to try: until its Arrived, a
// commit's handoff cannot see it, although its try may read before that commit, so Quiet
// keeps key to be woken.
func (c *Waiters[W]) Arrive(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.arriving == nil {
		c.arriving = make(map[string]int)
	}
	c.arriving[key]++
}

// Arrived ends the claim's Arrive once it tried; with park, it parks w as Park does, in
// the same step, so no Quiet falls between the two.
func (c *Waiters[W]) Arrived(key string, w *W, park bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if park {
		c.park(key, w)
	}
	if c.arriving[key]--; c.arriving[key] <= 0 {
		delete(c.arriving, key)
	}
}

// Seq is the sequence number of the latest Park: a handoff reads it before it serves, for
// Quiet.
func (c *Waiters[W]) Seq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// Quiet returns the keys of idle (keys whose waiters a handoff that began at seq served,
// all without jobs, none with a job due) whose waiters may stay asleep after the handoff's
// commit: those with no claim arriving (Arrive) and no waiter parked after seq. Those the
// handoff did not see, and their try may have read before its commit: they must be woken,
// else they sleep until their plane's poll although a job waits (pgplane, where a claim
// parks after its try's transaction).
func (c *Waiters[W]) Quiet(idle map[string]struct{}, seq uint64) map[string]struct{} {
	if len(idle) == 0 {
		return idle
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[string]struct{}
	for key := range idle {
		if c.arriving[key] > 0 || c.parkedAt[key] > seq {
			continue
		}
		out = mark(out, key)
	}
	return out
}

// forget drops key's park sequence once no waiter of key is parked; c.mu held.
func (c *Waiters[W]) forget(key string) {
	delete(c.byQueue, key)
	delete(c.parkedAt, key)
}

// Parked is the number of waiters parked on key now (for tests that must act once a claim
// is parked, and diagnostics).
func (c *Waiters[W]) Parked(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byQueue[key])
}

// Unpark removes w and reports whether it was still parked. false means a transaction took
// it: that transaction answers it exactly once, with its jobs or, when it would have put w
// back (PutBack), with none; the caller takes the answer with Collect.
func (c *Waiters[W]) Unpark(key string, w *W) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := c.byQueue[key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			if len(ws) == 0 {
				c.forget(key)
			} else {
				c.byQueue[key] = ws
			}
			return true
		}
	}
	if c.left == nil {
		c.left = make(map[*W]struct{})
	}
	c.left[w] = struct{}{}
	return false
}

// Collect returns the answer on deliver to w, which Unpark reported taken.
func (c *Waiters[W]) Collect(w *W, deliver <-chan []*plane.Job) []*plane.Job {
	jobs := <-deliver
	c.mu.Lock()
	delete(c.left, w) // when the answer was jobs: PutBack did not see w
	c.mu.Unlock()
	return jobs
}

// Take removes and returns the first waiter of key, or nil.
func (c *Waiters[W]) Take(key string) *W {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := c.byQueue[key]
	if len(ws) == 0 {
		return nil
	}
	w := ws[0]
	if len(ws) == 1 {
		c.forget(key)
	} else {
		c.byQueue[key] = ws[1:]
	}
	return w
}

// TakeFirst removes and returns the first waiter of key for which ok is true, or nil; the
// waiters it passes over keep their places.
func (c *Waiters[W]) TakeFirst(key string, ok func(*W) bool) *W {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := c.byQueue[key]
	for i, w := range ws {
		if ok(w) {
			ws = append(ws[:i:i], ws[i+1:]...)
			if len(ws) == 0 {
				c.forget(key)
			} else {
				c.byQueue[key] = ws
			}
			return w
		}
	}
	return nil
}

// PutBack returns w, which a transaction took and did not serve, to the head of key's
// waiters and reports true; or, when w's wait ended meanwhile (Unpark reported false),
// leaves it out and reports false: the caller must then answer w with no jobs (Requeue).
func (c *Waiters[W]) PutBack(key string, w *W) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.left[w]; ok {
		delete(c.left, w)
		return false
	}
	if c.byQueue == nil {
		c.byQueue = make(map[string][]*W)
	}
	c.byQueue[key] = append([]*W{w}, c.byQueue[key]...)
	return true
}

// Handoff is a parked waiter a transaction took and the jobs it claimed for it.
type Handoff[W any] struct {
	Waiter *W
	Jobs   []*plane.Job
}

// Serve claims, at the end of a transaction, for the parked waiters of every queue key in
// claimable (the queues it made jobs claimable in), first come first served. It takes one
// key at a time, since a claim may promote or requeue rows and mark more keys. serve claims
// for one waiter it took and reports whether it got jobs; one that got none, serve puts back
// or answers, as the driver does, and the key's other waiters of its class (class: the same
// offers, plane/placement.go) are passed over, since they would get none either, while a
// waiter of another class is still tried: its offers may satisfy jobs the first's do not.
// Serve stops at serve's first error.
func (c *Waiters[W]) Serve(claimable map[string]struct{}, class func(*W) string, serve func(key string, w *W) (got bool, err error)) error {
	for len(claimable) > 0 {
		var key string
		for key = range claimable {
			break
		}
		delete(claimable, key)
		var refused map[string]bool
		untried := func(w *W) bool { return !refused[class(w)] }
		for {
			w := c.TakeFirst(key, untried)
			if w == nil {
				break
			}
			got, err := serve(key, w)
			if err != nil {
				return err
			}
			if !got {
				if refused == nil {
					refused = make(map[string]bool)
				}
				refused[class(w)] = true
			}
		}
	}
	return nil
}
