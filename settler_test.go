package lakeshore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// TestWorkerBatchedSettles covers a worker at concurrency > 1 on one queue: its handlers'
// settles go to one settler that sends them with the claim of the freed slots in one
// InvocationSettleAndClaim.
func TestWorkerBatchedSettles(t *testing.T) {
	t.Parallel()

	t.Run("EveryJobSettledOnceInBatches", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		const jobs, concurrency = 300, 16
		ids := submitN(t, q, jobs, nil)
		var active, peak atomic.Int64
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			n := active.Add(1)
			defer active.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			var i int
			if err := job.Decode(&i); err != nil {
				return nil, err
			}
			time.Sleep(time.Millisecond) // let settles gather
			return i + 1, nil
		}
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Concurrency: concurrency, ExitWhenIdle: true}))
		require.NoError(t, err)
		require.LessOrEqual(t, peak.Load(), int64(concurrency), "never more handlers than slots")
		for i, id := range ids {
			var got int
			require.NoError(t, q.Result(t.Context(), id, &got, nil))
			require.Equal(t, i+1, got)
			require.Equal(t, 1, spy.settleCount(id), "settled exactly once")
		}
		spy.mu.Lock()
		defer spy.mu.Unlock()
		settled := 0
		for _, n := range spy.settleBatches {
			settled += n
		}
		require.Equal(t, jobs, settled, "every settle went through settle-and-claim (nothing else stopped claiming)")
		require.Less(t, len(spy.settleBatches), jobs, "settles were batched")
		require.Positive(t, spy.chained, "jobs were claimed with settles")
	})

	t.Run("MaxJobsExact", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		ids := submitN(t, q, 100, nil)
		var calls atomic.Int64
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) { calls.Add(1); return nil, nil }
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Concurrency: 8, MaxJobs: 37}))
		require.NoError(t, err)
		require.Equal(t, int64(37), calls.Load())
		n, err := q.Count(t.Context(), lakeshore.StateSucceeded)
		require.NoError(t, err)
		require.Equal(t, int64(37), n)
		n, err = q.Len(t.Context())
		require.NoError(t, err)
		require.Equal(t, int64(63), n, "nothing claimed beyond MaxJobs is left running")
		for _, id := range ids {
			require.LessOrEqual(t, spy.settleCount(id), 1)
		}
	})

	t.Run("KillOneOfABatchCancelsOnlyIt", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		const concurrency = 4
		ids := submitN(t, q, concurrency, nil)
		var started sync.WaitGroup
		started.Add(concurrency)
		release := make(chan struct{})
		causes := make(map[string]chan error, concurrency)
		for _, id := range ids {
			causes[id] = make(chan error, 1)
		}
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			started.Done()
			select {
			case <-ctx.Done():
				causes[job.ID] <- context.Cause(ctx)
				return "too late", nil // must not be acked
			case <-release:
				return "done", nil
			}
		}
		done := runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			// Heartbeats every 200 ms tell the worker of the kill soon; the lease outlasts a
			// stalled heartbeat many times over (a 600 ms lease lost the three running jobs
			// under the race detector on a loaded machine, and their handlers were cancelled).
			&lakeshore.WorkerOptions{Concurrency: concurrency, ExitWhenIdle: true, LeaseTTL: 10 * time.Second,
				HeartbeatInterval: 200 * time.Millisecond})
		started.Wait()
		killed, err := q.Kill(t.Context(), ids[1])
		require.NoError(t, err)
		require.True(t, killed)
		select {
		case err := <-causes[ids[1]]:
			require.ErrorIs(t, err, lakeshore.ErrLeaseLost)
		case <-time.After(10 * time.Second):
			t.Fatal("the killed job's handler was not cancelled")
		}
		close(release)
		require.NoError(t, waitDone(t, done))
		for i, id := range ids {
			if i == 1 {
				require.Equal(t, lakeshore.StateKilled, state(t, q, id).State)
				require.Zero(t, spy.settleCount(id), "a killed job is not settled")
				continue
			}
			require.Empty(t, causes[id], "only the killed job's handler was cancelled")
			require.Equal(t, lakeshore.StateSucceeded, state(t, q, id).State)
			require.Equal(t, 1, spy.settleCount(id))
		}
	})

	t.Run("ABadSettleDoesNotFailTheBatch", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		ids := submitN(t, q, 40, nil)
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			var i int
			if err := job.Decode(&i); err != nil {
				return nil, err
			}
			if i == 5 {
				return make([]byte, 17<<20), nil // the plane refuses this ack: the result is too large
			}
			return i, nil
		}
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Concurrency: 8, ExitWhenIdle: true, MaxJobs: 40}))
		require.NoError(t, err)
		for i, id := range ids {
			if i == 5 {
				require.Equal(t, lakeshore.StateFailed, state(t, q, id).State, "its ack was refused: nacked without retry")
				require.Equal(t, 1, spy.settleCount(id), "only the nack reached the plane")
				continue
			}
			require.Equal(t, lakeshore.StateSucceeded, state(t, q, id).State)
		}
	})

	t.Run("FallsBackWithoutSettleAndClaim", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		spy.noSettleAndClaim.Store(true)
		ids := submitN(t, q, 50, nil)
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) { return "ok", nil }
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Concurrency: 8, ExitWhenIdle: true}))
		require.NoError(t, err)
		for _, id := range ids {
			require.Equal(t, lakeshore.StateSucceeded, state(t, q, id).State)
			require.Equal(t, 1, spy.settleCount(id))
		}
	})

	t.Run("StopDrainsClaimingNothingMore", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		submitN(t, q, 20, nil)
		const concurrency = 4
		var started sync.WaitGroup
		started.Add(concurrency)
		release := make(chan struct{})
		var calls atomic.Int64
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			if calls.Add(1) <= concurrency {
				started.Done()
			}
			<-release
			return "ok", ctx.Err()
		}
		w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Concurrency: concurrency, Logger: testLogger(t)})
		require.NoError(t, err)
		require.NoError(t, w.Start(t.Context()))
		started.Wait()
		// A Stop whose ctx has already ended stops claiming, then returns at once.
		ended, cancel := context.WithCancel(t.Context())
		cancel()
		require.ErrorIs(t, w.Stop(ended), context.Canceled)
		close(release)
		require.NoError(t, w.Stop(t.Context()))
		require.Equal(t, int64(concurrency), calls.Load(), "nothing was claimed after Stop")
		n, err := q.Count(t.Context(), lakeshore.StateSucceeded)
		require.NoError(t, err)
		require.Equal(t, int64(concurrency), n, "the running jobs finished and settled")
		spy.mu.Lock()
		defer spy.mu.Unlock()
		require.Zero(t, spy.chained, "the drained settles claimed nothing")
	})

	t.Run("StopAndCancelNacksTheBatch", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		ids := submitN(t, q, 4, nil)
		var started sync.WaitGroup
		started.Add(4)
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			started.Done()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Concurrency: 4, Logger: testLogger(t)})
		require.NoError(t, err)
		require.NoError(t, w.Start(t.Context()))
		started.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		err = w.StopAndCancel(ctx)
		require.True(t, err == nil || errors.Is(err, context.Canceled), "%v", err)
		for _, id := range ids {
			inv := state(t, q, id)
			require.Equal(t, lakeshore.StateQueued, inv.State, "nacked with retry at once")
			require.Equal(t, 1, inv.Attempt)
		}
	})
}
