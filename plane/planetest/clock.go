package planetest

import (
	"sync"
	"time"
)

// clockStart is where every fake clock starts: a fixed instant on a whole second, so that
// stored times survive any plane's precision down to milliseconds.
var clockStart = time.Date(2030, time.June, 1, 12, 0, 0, 0, time.UTC)

// fakeClock is the plane's clock in most subtests: it stands still until the test moves it.
// Safe for concurrent use (the plane's maintenance goroutine reads it).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: clockStart} }

// Now returns the clock's time. It is the Options.Now of the plane.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}
