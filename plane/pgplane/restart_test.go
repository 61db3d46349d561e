package pgplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestServerRestart restarts PostgreSQL in the middle of a workload spread over two planes:
// every acknowledged submit ends succeeded, no job is acked successfully twice, and callers
// saw only retryable errors.
func TestServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the test server; skipped with -short")
	}
	url := pgtest.Database(t)
	srv := pgtest.Shared(t)
	cfg := Config{MaintenanceInterval: 100 * time.Millisecond, LeaderTTL: time.Second, PollInterval: 200 * time.Millisecond}
	planes := []*Driver{open(t, url, &cfg), open(t, url, &cfg)}
	const jobs = 1500
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	acknowledged := map[string]bool{} // submitted and acknowledged
	acked := map[string]int{}         // successful acks per job
	var unexpected atomic.Value
	var unavailable atomic.Int64
	retryable := func(err error) bool {
		if err == nil || errors.Is(err, plane.ErrUnavailable) {
			unavailable.Add(1)
			return true
		}
		unexpected.CompareAndSwap(nil, err)
		return false
	}
	var submitted atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 { // producers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < jobs; i += 4 {
				for ctx.Err() == nil {
					res, err := planes[i%2].InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
						Invocations: []plane.SubmitParams{{Key: fmt.Sprintf("job-%d", i), Payload: []byte{0xc0}}}})
					if err == nil {
						mu.Lock()
						acknowledged[res[0].ID] = true
						mu.Unlock()
						submitted.Add(1)
						break
					}
					if !retryable(err) {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	done := make(chan struct{})
	for w := range 6 { // workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := planes[w%2]
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 5,
					LeaseTTL: 2 * time.Second, Wait: 200 * time.Millisecond})
				if err != nil {
					if !retryable(err) {
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				for _, j := range got {
					for try := 0; try < 20; try++ {
						errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
						if err == nil {
							if errs[0] == nil {
								mu.Lock()
								acked[j.ID]++
								mu.Unlock()
							}
							break
						}
						if !retryable(err) {
							return
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return submitted.Load() > jobs/3 }, time.Minute, 10*time.Millisecond)
	require.NoError(t, srv.Restart())
	t.Logf("restarted PostgreSQL after %d acknowledged submits", submitted.Load())

	// Wait until every job is terminal.
	require.Eventually(t, func() bool {
		if submitted.Load() < jobs {
			return false
		}
		n, err := planes[0].InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateSucceeded})
		return err == nil && n == jobs
	}, 90*time.Second, 100*time.Millisecond, "all jobs succeed")
	close(done)
	wg.Wait()
	if err, _ := unexpected.Load().(error); err != nil {
		t.Fatalf("a caller got a non-retryable error: %v", err)
	}
	t.Logf("callers met %d retryable errors", unavailable.Load())
	require.Len(t, acknowledged, jobs, "one job per key, every submit acknowledged")
	for id := range acknowledged {
		inv, err := planes[1].InvocationGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, plane.StateSucceeded, inv.State, "job %s", id)
		require.LessOrEqual(t, acked[id], 1, "job %s acked successfully twice", id)
	}
	stats, err := planes[0].QueueStatsList(ctx, "default")
	require.NoError(t, err)
	require.Equal(t, map[plane.State]int64{plane.StateSucceeded: jobs}, stats[0].Counts, "the counters match")
}
