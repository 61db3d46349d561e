package planekit

import (
	"context"
	"time"
)

// Lead runs pass on every beat (a ticker's channel: every maintenance interval) while
// this process holds a lease that take takes or renews (for ttl), and at once again,
// without waiting for a beat, after a pass that reported work left behind (a backlog of
// rows to trim or leases to end), until stop closes; the other processes try to take the
// lease on the same beat, and one of them does once the holder stops renewing (it died, or
// closed and released it). The lease is renewed when a third of ttl has gone; between
// renewals it is this process's. warn reports a failed take or pass (not one that stop
// ended). pgplane's maintenance runs in it.
func Lead(stop <-chan struct{}, beat <-chan time.Time, ttl time.Duration, take func(context.Context) (bool, error),
	pass func(context.Context) (behind bool, err error), warn func(what string, err error)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	var renewed time.Time // when this process last took or renewed the lease
	behind := false       // the last pass left work for the next
	for {
		if behind {
			select {
			case <-stop:
				return
			default:
			}
		} else {
			select {
			case <-stop:
				return
			case <-beat:
			}
		}
		behind = false
		if renewed.IsZero() || time.Since(renewed) > ttl/3 {
			leader, err := take(ctx)
			if err != nil && ctx.Err() == nil {
				warn("lease", err)
			}
			if err != nil || !leader {
				renewed = time.Time{}
				continue
			}
			renewed = time.Now()
		}
		var err error
		if behind, err = pass(ctx); err != nil && ctx.Err() == nil {
			warn("pass", err)
		}
	}
}
