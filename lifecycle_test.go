package lakeshore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// TestWorkerLifecycle: OnHostSetup runs once before any handler, OnRunSetup before each,
// OnShutdown once after the last; Phase follows (docs/fabric.md).
func TestWorkerLifecycle(t *testing.T) {
	ctx := t.Context()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	defer d.Close()
	q, err := d.Queue("lifecycle", nil)
	require.NoError(t, err)
	for i := range 3 {
		_, err := q.Submit(ctx, i, nil)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var events []string
	add := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	var w *lakeshore.Worker
	w, err = lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("lifecycle", func(ctx context.Context, job *lakeshore.Job) (any, error) {
		add("body:" + string(w.Phase()))
		return nil, nil
	})}, &lakeshore.WorkerOptions{
		MaxJobs: 3,
		OnHostSetup: func(ctx context.Context) error {
			add("host:" + string(w.Phase()))
			return nil
		},
		OnRunSetup: func(ctx context.Context, job *lakeshore.Job) error {
			add("run")
			return nil
		},
		OnShutdown: func(ctx context.Context) { add("shutdown:" + string(w.Phase())) },
	})
	require.NoError(t, err)
	require.Equal(t, lakeshore.PhaseSetup, w.Phase())
	require.NoError(t, w.Start(ctx))
	<-w.Done()
	require.NoError(t, w.Err())
	require.Equal(t, []string{"host:setup", "run", "body:ready", "run", "body:ready", "run", "body:ready", "shutdown:draining"}, events)
}

// TestWorkerHostSetupFails: a failed host set-up fails the start, not the jobs, which
// stay queued; a failed run set-up fails the attempt and the handler does not run.
func TestWorkerHostSetupFails(t *testing.T) {
	ctx := t.Context()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	defer d.Close()
	q, err := d.Queue("setup-fails", nil)
	require.NoError(t, err)
	id, err := q.Submit(ctx, 1, &lakeshore.SubmitOptions{MaxAttempts: 1})
	require.NoError(t, err)
	ran := false
	handler := lakeshore.Handle("setup-fails", func(ctx context.Context, job *lakeshore.Job) (any, error) {
		ran = true
		return nil, nil
	})
	boom := errors.New("no GPU here")
	err = lakeshore.RunWorker(ctx, d, []lakeshore.Handler{handler}, &lakeshore.WorkerOptions{
		Once: true, OnHostSetup: func(context.Context) error { return boom }})
	require.ErrorIs(t, err, boom)
	inv, err := q.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, lakeshore.StateQueued, inv.State, "the job stays queued for another worker")

	err = lakeshore.RunWorker(ctx, d, []lakeshore.Handler{handler}, &lakeshore.WorkerOptions{
		Once: true, OnRunSetup: func(context.Context, *lakeshore.Job) error { return errors.New("scratch disk full") }})
	require.NoError(t, err)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = q.Result(waitCtx, id, nil, nil)
	require.ErrorIs(t, err, lakeshore.ErrFailed)
	require.Contains(t, err.Error(), "run setup: scratch disk full")
	require.False(t, ran)
}
