package pgplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestServerRestart restarts PostgreSQL (fast shutdown) in the middle of a workload spread
// over two planes: every acknowledged submit ends succeeded, no job is acked successfully
// twice, every wait answers, and callers saw only retryable errors.
func TestServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the test server; skipped with -short")
	}
	srv := pgtest.Shared(t)
	survivesOutages(t, 1500, 1, func(t *testing.T, _ string) { require.NoError(t, srv.Restart()) })
}

// TestServerCrash crashes PostgreSQL three times in the middle of the same workload: a
// backend SIGKILLed, so the postmaster ends every other session at once and runs crash
// recovery (as after a power cut, without the fast shutdown's checkpoint), refusing
// connections (57P03) until it is done. The same outcome is asked of it.
func TestServerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes the test server; skipped with -short")
	}
	survivesOutages(t, 1200, 3, crashServer)
}

// crashServer SIGKILLs one backend of database url's server.
func crashServer(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var pid int
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
}

// survivesOutages runs jobs through producers, workers and waiters (one per tenth job) on
// two planes of a fresh database, calling outage outages times, spread over the submits,
// and checks that every acknowledged submit ends succeeded, no job is acked successfully
// twice, every wait answers, the counters match and callers met only retryable errors.
func survivesOutages(t *testing.T, jobs, outages int, outage func(t *testing.T, url string)) {
	url := pgtest.Database(t)
	cfg := Config{MaintenanceInterval: 100 * time.Millisecond, LeaderTTL: time.Second, PollInterval: 200 * time.Millisecond}
	planes := []*Driver{open(t, url, &cfg), open(t, url, &cfg)}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
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
		if ctx.Err() == nil { // else the test is over
			unexpected.CompareAndSwap(nil, err)
		}
		return false
	}
	var submitted atomic.Int64
	var wg sync.WaitGroup
	waited := make(chan string, jobs)
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
						if i%10 == 0 {
							waited <- res[0].ID
						}
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
	var answered atomic.Int64
	for w := range 8 { // waiters, across the outages
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var id string
				select {
				case id = <-waited:
				case <-ctx.Done():
					return
				}
				for {
					inv, err := planes[w%2].InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: 2 * time.Minute})
					if err == nil && inv.State.Terminal() {
						answered.Add(1)
						break
					}
					if err != nil && !retryable(err) {
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
	for n := 1; n <= outages; n++ {
		require.Eventually(t, func() bool { return submitted.Load() > int64(n*jobs/(outages+2)) }, time.Minute, 5*time.Millisecond)
		outage(t, url)
		t.Logf("outage %d after %d acknowledged submits", n, submitted.Load())
	}

	// Wait until every job is terminal and every wait answered.
	require.Eventually(t, func() bool {
		if submitted.Load() < int64(jobs) {
			return false
		}
		n, err := planes[0].InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateSucceeded})
		return err == nil && n == int64(jobs)
	}, 2*time.Minute, 100*time.Millisecond, "all jobs succeed")
	require.Eventually(t, func() bool { return answered.Load() == int64(jobs/10) }, time.Minute, 10*time.Millisecond,
		"every wait answers")
	if err, _ := unexpected.Load().(error); err != nil {
		t.Fatalf("a caller got a non-retryable error: %v", err)
	}
	close(done)
	cancel()
	wg.Wait()
	t.Logf("callers met %d retryable errors", unavailable.Load())
	require.Len(t, acknowledged, jobs, "one job per key, every submit acknowledged")
	for id := range acknowledged {
		inv, err := planes[1].InvocationGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, plane.StateSucceeded, inv.State, "job %s", id)
		require.LessOrEqual(t, acked[id], 1, "job %s acked successfully twice", id)
	}
	stats, err := planes[0].QueueStatsList(t.Context(), "default")
	require.NoError(t, err)
	require.Equal(t, map[plane.State]int64{plane.StateSucceeded: int64(jobs)}, stats[0].Counts, "the counters match")
}
