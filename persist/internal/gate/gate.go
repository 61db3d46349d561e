// Package gate keeps a store's calls in flight apart from its Close: each call enters
// and leaves the gate; Close shuts it, so that later calls fail with ErrClosed, and
// waits for the calls still inside.
package gate

import (
	"sync"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// Gate is the gate of one store. Make it with New.
type Gate struct {
	mu       sync.RWMutex // guards closed against Enter
	closed   bool
	closing  chan struct{}
	inflight sync.WaitGroup
}

// New returns an open gate.
func New() *Gate { return &Gate{closing: make(chan struct{})} }

// Enter registers a call in flight; it fails with ErrClosed once Shut was called. A
// call that entered calls Leave when it ends.
func (g *Gate) Enter() error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return record.ErrClosed
	}
	g.inflight.Add(1)
	return nil
}

// Leave ends a call Enter registered.
func (g *Gate) Leave() { g.inflight.Done() }

// Shut makes every later Enter fail and closes Closing. It reports whether this call
// shut the gate: false when it was shut already (a store's Close is idempotent).
func (g *Gate) Shut() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	close(g.closing)
	return true
}

// Wait waits until every call that entered has left.
func (g *Gate) Wait() { g.inflight.Wait() }

// Closing is closed when the gate is shut: waits (for changes, for admission) select on
// it to end with ErrClosed.
func (g *Gate) Closing() <-chan struct{} { return g.closing }
