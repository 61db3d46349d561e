package planekit

import (
	"context"
	"errors"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Sleep waits, for a waiter that watched changed on a Hub, until the first of: changed
// closes (nil, nil: read again); a direct handoff arrives on deliver (nil: none expected),
// returned non-nil even when empty; poll ends when 0 < poll < wait (nil, nil: a plane whose
// notifications may be lost re-checks); wait ends (plane.ErrTimeout); ctx ends (its error);
// stop closes (plane.ErrClosed).
func Sleep(ctx context.Context, stop, changed <-chan struct{}, deliver <-chan []*plane.Job, wait, poll time.Duration) ([]*plane.Job, error) {
	if wait <= 0 {
		return nil, plane.ErrTimeout
	}
	final := true
	if poll > 0 && poll < wait {
		wait, final = poll, false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case jobs := <-deliver:
		if jobs == nil {
			jobs = []*plane.Job{} // delivered: not to be waited for again
		}
		return jobs, nil
	case <-changed:
		return nil, nil
	case <-timer.C:
		if final {
			return nil, plane.ErrTimeout
		}
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-stop:
		return nil, plane.ErrClosed
	}
}

// WaitTerminal is Driver.InvocationWait over a plane's hub, its row read (get) and its
// sleep: it returns invocation id once terminal, or plane.ErrTimeout after timeout.
func WaitTerminal(ctx context.Context, hub *Hub, id string, timeout time.Duration,
	get func(context.Context, string) (*Row, error),
	sleep func(context.Context, <-chan struct{}, time.Duration) error,
) (*plane.Invocation, error) {
	if err := plane.ValidateID(id); err != nil {
		return nil, err
	}
	if timeout < 0 {
		return nil, plane.Invalid("timeout", timeout, "use a duration ≥ 0")
	}
	waitUntil := time.Now().Add(timeout)
	for {
		changed, release := hub.Watch(InvocationKey(id))
		r, err := get(ctx, id)
		if err != nil {
			release()
			return nil, err
		}
		if r.Terminal() {
			release()
			return r.Invocation(), nil
		}
		err = sleep(ctx, changed, time.Until(waitUntil))
		release()
		if errors.Is(err, plane.ErrTimeout) && time.Until(waitUntil) > 0 {
			continue
		}
		if err != nil {
			return nil, err
		}
	}
}

// Get is Driver.InvocationGet over a plane's row read.
func Get(ctx context.Context, id string, get func(context.Context, string) (*Row, error)) (*plane.Invocation, error) {
	if err := plane.ValidateID(id); err != nil {
		return nil, err
	}
	r, err := get(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.Invocation(), nil
}

// ListBudget checks the listing p (plane.ListParams.Validate, then checkOpen: the plane's
// plane.ErrClosed once it closes) and returns its page size and how many invocations one
// page may examine: the page size, or plane.ListScanFactor times it with a KeyPrefix.
func ListBudget(p *plane.ListParams, checkOpen func() error) (limit, budget int, err error) {
	if err := p.Validate(); err != nil {
		return 0, 0, err
	}
	if err := checkOpen(); err != nil {
		return 0, 0, err
	}
	limit = p.Limit
	if limit == 0 {
		limit = plane.ListLimitDefault
	}
	if p.KeyPrefix != "" {
		return limit, limit * plane.ListScanFactor, nil
	}
	return limit, limit, nil
}

// CheckOpen returns plane.ErrClosed once stop (a plane's, closed by its Close) is closed.
func CheckOpen(stop <-chan struct{}) error {
	select {
	case <-stop:
		return plane.ErrClosed
	default:
		return nil
	}
}
