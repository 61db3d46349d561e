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

// TestWorkerStopDuringHostSetup: a Stop called while OnHostSetup runs is not lost. It
// waits for the set-up, and the worker then claims nothing, runs OnShutdown and stops;
// before, Stop returned nil at once and the worker went on to claim and run every job.
func TestWorkerStopDuringHostSetup(t *testing.T) {
	for _, cancelRunning := range []bool{false, true} {
		ctx := t.Context()
		d, err := lakeshore.Open(ctx, ":memory:", nil)
		require.NoError(t, err)
		defer d.Close()
		q, err := d.Queue("stop-in-setup", nil)
		require.NoError(t, err)
		id, err := q.Submit(ctx, 1, nil)
		require.NoError(t, err)
		var ran, shutdown atomic.Int32
		inSetup, release := make(chan struct{}), make(chan struct{})
		w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("stop-in-setup", func(ctx context.Context, job *lakeshore.Job) (any, error) {
			ran.Add(1)
			return nil, nil
		})}, &lakeshore.WorkerOptions{
			OnHostSetup: func(context.Context) error {
				close(inSetup)
				<-release
				return nil
			},
			OnShutdown: func(context.Context) { shutdown.Add(1) },
		})
		require.NoError(t, err)
		started := make(chan error, 1)
		go func() { started <- w.Start(ctx) }()
		<-inSetup
		stopped := make(chan error, 1)
		go func() {
			if cancelRunning {
				stopped <- w.StopAndCancel(ctx)
			} else {
				stopped <- w.Stop(ctx)
			}
		}()
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned %v while the host set-up still ran: the stop was dropped", err)
		case <-time.After(200 * time.Millisecond):
		}
		close(release)
		require.NoError(t, <-started)
		select {
		case err := <-stopped:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("Stop did not return after the host set-up ended")
		}
		select {
		case <-w.Done():
		default:
			t.Fatal("Stop returned before the worker stopped")
		}
		require.Zero(t, ran.Load(), "a worker stopped during its host set-up ran a job")
		require.Equal(t, int32(1), shutdown.Load(), "OnShutdown runs once")
		inv, err := q.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateQueued, inv.State, "the job stays queued for another worker")
	}
}

// TestWorkerHooksThatPanic: a lifecycle hook's panic is the hook's failure, as a handler's
// panic is the handler's. OnHostSetup's fails Start (a *PanicError), and a Stop called
// while it ran returns instead of waiting for good; OnShutdown's is logged and the worker
// still deregisters and stops, as Python's run_shutdown logs a raising hook. Before, a
// panicking OnShutdown took the whole process down from the worker's own goroutine (no
// caller could recover it) and a panicking OnHostSetup left Stop waiting forever.
func TestWorkerHooksThatPanic(t *testing.T) {
	ctx := t.Context()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	defer d.Close()
	q, err := d.Queue("hooks-panic", nil)
	require.NoError(t, err)
	id, err := q.Submit(ctx, 1, nil)
	require.NoError(t, err)
	handler := lakeshore.Handle("hooks-panic", func(ctx context.Context, job *lakeshore.Job) (any, error) { return "ok", nil })

	entered, proceed := make(chan struct{}), make(chan struct{})
	w, err := lakeshore.NewWorker(d, []lakeshore.Handler{handler}, &lakeshore.WorkerOptions{
		OnHostSetup: func(context.Context) error {
			close(entered)
			<-proceed
			panic("no model file")
		},
	})
	require.NoError(t, err)
	stopped := make(chan error, 1)
	go func() {
		// A Stop while the set-up runs waits for it (TestWorkerStopDuringHostSetup); one
		// that reaches its wait before the panic waited for good on the old code.
		<-entered
		stopping := make(chan struct{})
		go func() {
			close(stopping)
			stopped <- w.Stop(ctx)
		}()
		<-stopping
		close(proceed)
	}()
	var startErr error
	require.NotPanics(t, func() { startErr = w.Start(ctx) }, "a panicking OnHostSetup fails Start, as its error does")
	var pe *lakeshore.PanicError
	require.ErrorAs(t, startErr, &pe)
	require.Contains(t, startErr.Error(), "host setup: panic: no model file")
	require.NoError(t, <-stopped, "a Stop during a set-up that panicked returns (the worker never started)")
	inv, err := q.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, lakeshore.StateQueued, inv.State, "the job stays queued for another worker")

	w, err = lakeshore.NewWorker(d, []lakeshore.Handler{handler}, &lakeshore.WorkerOptions{
		Once:       true,
		OnShutdown: func(context.Context) { panic("flush failed") },
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	<-w.Done()
	require.NoError(t, w.Err())
	var out string
	require.NoError(t, q.Result(ctx, id, &out, nil))
	require.Equal(t, "ok", out)
	workers, err := d.Workers(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, workers, "the worker deregisters after its shutdown hook panicked")
}
