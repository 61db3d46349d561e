// Package bgloop runs the stores' background loops (flushes, compaction, sweeps): a
// piece of work done every interval and whenever it is kicked, until the store closes.
package bgloop

import (
	"context"
	"time"
)

// Run calls work each time interval passes (never, for an interval ≤ 0) and each time
// kick delivers (never, for a nil kick), until ctx is done; work learns whether the
// interval woke it (ticked) rather than a kick. Run returns when ctx is done, between
// two calls of work.
func Run(ctx context.Context, interval time.Duration, kick <-chan struct{}, work func(ticked bool)) {
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		ticked := false
		select {
		case <-ctx.Done():
			return
		case <-tick:
			ticked = true
		case <-kick:
		}
		work(ticked)
	}
}
