package lakeshore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// TestPlacement: a submit's Requirement reaches the plane and Get; a worker takes only the
// jobs its WorkerOptions.Offers satisfy (and those without a requirement), a worker
// without offers only jobs without one; bad offers fail the worker's start.
func TestPlacement(t *testing.T) {
	t.Parallel()
	q, d, _ := setupWorker(t)
	ctx := t.Context()
	a100 := &lakeshore.Requirement{GPUs: 1, GPUType: "a100", MemoryBytes: 40 << 30}
	gpuID, err := q.Submit(ctx, "gpu", &lakeshore.SubmitOptions{Requirement: a100})
	require.NoError(t, err)
	plainID, err := q.Submit(ctx, "plain", nil)
	require.NoError(t, err)
	inv := state(t, q, gpuID)
	require.Equal(t, a100, inv.Requirement)
	require.Equal(t, a100.Shape(), inv.Shape)

	_, err = q.Submit(ctx, "bad", &lakeshore.SubmitOptions{Requirement: &lakeshore.Requirement{GPUs: -1}})
	require.ErrorIs(t, err, lakeshore.ErrInvalid)

	var mu sync.Mutex
	ranBy := map[string]string{}
	handler := func(name string) lakeshore.HandlerFunc {
		return func(ctx context.Context, job *lakeshore.Job) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			ranBy[job.ID] = name
			return nil, nil
		}
	}
	// A worker without offers: it takes the plain job, never the GPU one.
	done := runWorker(t, ctx, d, []lakeshore.Handler{lakeshore.Handle("test", handler("cpu"))},
		&lakeshore.WorkerOptions{ExitWhenIdle: true, ClaimWait: 50 * time.Millisecond})
	require.NoError(t, waitDone(t, done))
	require.Equal(t, lakeshore.StateQueued, state(t, q, gpuID).State, "no capable worker: it waits")
	require.Equal(t, lakeshore.StateSucceeded, state(t, q, plainID).State)

	err = lakeshore.RunWorker(ctx, d, []lakeshore.Handler{lakeshore.Handle("test", handler("bad"))},
		&lakeshore.WorkerOptions{Offers: &lakeshore.Offers{GPUType: "a 100"}, Logger: testLogger(t)})
	require.ErrorIs(t, err, lakeshore.ErrInvalid)

	done = runWorker(t, ctx, d, []lakeshore.Handler{lakeshore.Handle("test", handler("gpu"))},
		&lakeshore.WorkerOptions{MaxJobs: 1, Offers: &lakeshore.Offers{GPUs: 2, GPUType: "a100", MemoryBytes: 80 << 30}})
	require.NoError(t, waitDone(t, done))
	require.Equal(t, lakeshore.StateSucceeded, state(t, q, gpuID).State)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]string{plainID: "cpu", gpuID: "gpu"}, ranBy)
}

// TestWorkerOffersFromEnv: without WorkerOptions.Offers a worker offers LAKESHORE_OFFERS
// (what a provider sets for a worker it launches for a shape), so it takes the shape's
// job; a bad LAKESHORE_OFFERS fails its start naming the variable.
func TestWorkerOffersFromEnv(t *testing.T) {
	q, d, _ := setupWorker(t)
	ctx := t.Context()
	gpuID, err := q.Submit(ctx, "gpu", &lakeshore.SubmitOptions{Requirement: &lakeshore.Requirement{GPUs: 1, GPUType: "a100"}})
	require.NoError(t, err)
	t.Setenv("LAKESHORE_OFFERS", "gpus=1,gpu_type=a100")
	done := runWorker(t, ctx, d, []lakeshore.Handler{lakeshore.Handle("test", func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })},
		&lakeshore.WorkerOptions{MaxJobs: 1})
	require.NoError(t, waitDone(t, done))
	require.Equal(t, lakeshore.StateSucceeded, state(t, q, gpuID).State)
	t.Setenv("LAKESHORE_OFFERS", "gpus=one")
	err = lakeshore.RunWorker(ctx, d, []lakeshore.Handler{lakeshore.Handle("test", func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })},
		&lakeshore.WorkerOptions{Logger: testLogger(t)})
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
	require.Contains(t, err.Error(), "LAKESHORE_OFFERS")
}

// TestWarmHostKeys: a worker started with WorkerOptions.WarmHostKeys takes the job of its
// key before an older one; bad keys fail its start.
func TestWarmHostKeys(t *testing.T) {
	t.Parallel()
	q, d, _ := setupWorker(t)
	ctx := t.Context()
	hk := "hk1_" + strings.Repeat("b", 32)
	_, err := q.Submit(ctx, "cold", nil)
	require.NoError(t, err)
	warmID, err := q.Submit(ctx, "warm", &lakeshore.SubmitOptions{Metadata: map[string]string{"lakeshore.host_key": hk}})
	require.NoError(t, err)
	var first string
	var once sync.Once
	done := runWorker(t, ctx, d, []lakeshore.Handler{lakeshore.Handle("test", func(ctx context.Context, job *lakeshore.Job) (any, error) {
		once.Do(func() { first = job.ID })
		return nil, nil
	})}, &lakeshore.WorkerOptions{MaxJobs: 1, WarmHostKeys: []string{hk}})
	require.NoError(t, waitDone(t, done))
	require.Equal(t, warmID, first, "the warm job first")
	err = lakeshore.RunWorker(ctx, d, []lakeshore.Handler{lakeshore.Handle("test", func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })},
		&lakeshore.WorkerOptions{WarmHostKeys: []string{"a key"}, Logger: testLogger(t)})
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
}
