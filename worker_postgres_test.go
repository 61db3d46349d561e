package lakeshore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
)

// TestWorkerSettlesAcrossPostgresOutage: a job whose handler returns while PostgreSQL is
// down (crashed: every session cut, connections refused for two seconds) is settled once
// PostgreSQL is back, within the job's lease, by a Worker and by Queue.Working on the
// PostgreSQL plane: the job succeeds with the handler's result, run once. Before, the one
// settle failed with ErrUnavailable and was dropped: the job stayed running until its lease
// expired and then, its one attempt spent, ended as timed out although its handler had
// succeeded. It stops the test binary's shared server, so it never runs in parallel with
// other tests.
func TestWorkerSettlesAcrossPostgresOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops the test server for two seconds, twice")
	}
	t.Run("Worker", func(t *testing.T) {
		settleAcrossOutage(t, func(ctx context.Context, d *lakeshore.Dispatch, q *lakeshore.Queue, fn lakeshore.HandlerFunc) func() {
			w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle(q.Name(), fn)},
				&lakeshore.WorkerOptions{LeaseTTL: 20 * time.Second})
			require.NoError(t, err)
			require.NoError(t, w.Start(ctx))
			return func() { _ = w.Stop(context.Background()) }
		})
	})
	t.Run("Working", func(t *testing.T) {
		settleAcrossOutage(t, func(ctx context.Context, d *lakeshore.Dispatch, q *lakeshore.Queue, fn lakeshore.HandlerFunc) func() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = q.Working(ctx, fn, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{
					Wait: 30 * time.Second, LeaseTTL: 20 * time.Second}})
			}()
			return func() { <-done }
		})
	})
}

// settleAcrossOutage runs one job through the worker that start starts (returning how to
// stop it), crashing PostgreSQL while the handler runs and letting the handler return
// while it is down.
func settleAcrossOutage(t *testing.T, start func(ctx context.Context, d *lakeshore.Dispatch, q *lakeshore.Queue, fn lakeshore.HandlerFunc) func()) {
	db := pgtest.Database(t)
	srv := pgtest.Shared(t)
	d, err := lakeshore.Open(t.Context(), db, &lakeshore.Config{Logger: testLogger(t),
		Postgres: &pgplane.Config{MaintenanceInterval: 100 * time.Millisecond, PollInterval: 100 * time.Millisecond}})
	require.NoError(t, err)
	defer d.Close()
	q, err := d.Queue("outage", nil)
	require.NoError(t, err)
	id, err := q.Submit(t.Context(), "work", &lakeshore.SubmitOptions{MaxAttempts: 1})
	require.NoError(t, err)

	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int64
	stop := start(t.Context(), d, q, func(ctx context.Context, job *lakeshore.Job) (any, error) {
		if runs.Add(1) == 1 {
			close(started)
		}
		<-release
		return "done", nil
	})
	defer stop()

	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the job never started")
	}
	require.NoError(t, srv.Crash())
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	close(release) // the handler returns while PostgreSQL is down
	time.Sleep(2 * time.Second)
	require.NoError(t, srv.Resume())
	resumed = true

	var got string
	err = q.Result(t.Context(), id, &got, &lakeshore.ResultOptions{Timeout: 40 * time.Second})
	require.NoError(t, err, "the job succeeds: its settle outlived the outage")
	require.Equal(t, "done", got)
	require.EqualValues(t, 1, runs.Load(), "the handler ran once")
	inv, err := q.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, 1, inv.Attempt)
}
