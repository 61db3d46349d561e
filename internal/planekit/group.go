package planekit

import (
	"context"
	"sync"
	"time"
)

// Grouper gathers the requests of concurrent callers into groups that one transaction
// serves (group commit): while a group runs, the callers that arrive queue up; when it ends,
// the first of them runs the next group with everyone queued behind it. A lone caller runs
// at once, with no timer, so grouping costs latency only under load, when it pays. The shape
// of River's batch completer, made synchronous: every caller gets its own answer. pgplane
// groups its submits, claims, settles, settle-and-claims and posts with it.
type Grouper[T any] struct {
	max  int         // bounds one group's weight, so one transaction stays short
	size func(T) int // a request's weight (its invocations)
	run  func(context.Context, []T)
	open func() error // the plane's open check

	mu      sync.Mutex
	pending []*member[T]
	running bool // a group is running; the next leader is chosen when it ends
}

type member[T any] struct {
	req  T
	done chan struct{} // closed when served
	lead chan struct{} // closed when this member is to run the next group
}

// NewGrouper returns a grouper whose groups, of at most max weight (size of each request;
// one request alone may weigh more), run runs; open is the plane's open check.
func NewGrouper[T any](open func() error, max int, run func(context.Context, []T), size func(T) int) *Grouper[T] {
	return &Grouper[T]{max: max, size: size, run: run, open: open}
}

// Do serves req in a group and returns when it has been served (run filled in its answer),
// or at once with plane.ErrClosed once the plane closes, or ctx's error once ctx has ended.
// A caller whose ctx ends after it joined is still served: the group's transaction does
// not belong to any one caller.
func (g *Grouper[T]) Do(ctx context.Context, req T) error {
	if err := g.open(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m := &member[T]{req: req, done: make(chan struct{}), lead: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, m)
	if g.running {
		g.mu.Unlock()
		select {
		case <-m.done:
			return nil
		case <-m.lead:
		}
		g.mu.Lock()
	}
	g.running = true
	var group []*member[T]
	weight := 0
	for len(g.pending) > 0 && (weight == 0 || weight+g.size(g.pending[0].req) <= g.max) {
		weight += g.size(g.pending[0].req)
		group = append(group, g.pending[0])
		g.pending = g.pending[1:]
	}
	g.mu.Unlock()

	reqs := make([]T, len(group))
	for i, m := range group {
		reqs[i] = m.req
	}
	// The group runs on its own context: a leader whose caller gives up must not fail the
	// others' requests.
	gctx, cancel := Detached(ctx)
	g.run(gctx, reqs)
	cancel()

	g.mu.Lock()
	if len(g.pending) > 0 {
		close(g.pending[0].lead)
	} else {
		g.running = false
	}
	g.mu.Unlock()
	for _, other := range group {
		if other != m {
			close(other.done)
		}
	}
	return nil
}

// DetachedTimeout bounds a transaction that runs on a context of its own.
const DetachedTimeout = time.Minute

// Detached returns a context for a transaction that must run to its answer whoever waits
// for it: ctx's values, not its end, bounded by DetachedTimeout.
func Detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), DetachedTimeout)
}

// Partition splits reqs into the parts whose requests share key, in the order of each
// part's first request: the requests a group's transaction serves with one statement.
func Partition[T any, K comparable](reqs []T, key func(T) K) [][]T {
	var parts [][]T
	index := map[K]int{}
	for _, r := range reqs {
		k := key(r)
		i, ok := index[k]
		if !ok {
			i = len(parts)
			index[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], r)
	}
	return parts
}
