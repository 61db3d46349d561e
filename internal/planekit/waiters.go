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
}

// Park adds w to the end of key's waiters unless it is there already.
func (c *Waiters[W]) Park(key string, w *W) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byQueue == nil {
		c.byQueue = make(map[string][]*W)
	}
	for _, x := range c.byQueue[key] {
		if x == w {
			return
		}
	}
	c.byQueue[key] = append(c.byQueue[key], w)
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
				delete(c.byQueue, key)
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
		delete(c.byQueue, key)
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
				delete(c.byQueue, key)
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
