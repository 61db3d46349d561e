package lakeshore_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
)

func benchDispatch(b *testing.B) *lakeshore.Dispatch {
	b.Helper()
	d, err := lakeshore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"),
		&lakeshore.Config{SQLite: &sqliteplane.Config{Synchronous: "FULL"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func noop(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil }

// BenchmarkRunWorkerLifecycle is plane/sqliteplane's BenchmarkLifecycle through the SDK and
// RunWorker: 64 goroutines each submit a job and wait for its result while RunWorker
// (concurrency 64) claims and acks them with a no-op handler. b.N counts jobs.
func BenchmarkRunWorkerLifecycle(b *testing.B) {
	d := benchDispatch(b)
	q, err := d.Queue("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- lakeshore.RunWorker(ctx, d, []lakeshore.Handler{lakeshore.Handle("bench", noop)},
			&lakeshore.WorkerOptions{Concurrency: 64})
	}()
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if _, err := q.Call(ctx, nil, nil, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	cancel()
	<-done
}

// BenchmarkRunWorkerDrain times RunWorker (concurrency 64, no-op handler) draining b.N
// jobs submitted beforehand (untimed): claims and acks only.
func BenchmarkRunWorkerDrain(b *testing.B) {
	d := benchDispatch(b)
	q, err := d.Queue("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]lakeshore.Submission, 0, 1000)
	for i := 0; i < b.N; i += len(batch) {
		batch = batch[:min(1000, b.N-i)]
		if _, err := q.SubmitMany(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	err = lakeshore.RunWorker(context.Background(), d, []lakeshore.Handler{lakeshore.Handle("bench", noop)},
		&lakeshore.WorkerOptions{Concurrency: 64, ExitWhenIdle: true})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkRunWorkerDrainSequential is BenchmarkRunWorkerDrain at concurrency 1: a
// sequential worker burning down b.N jobs, where each settle claims the next job in the
// same commit (one durable commit per job).
func BenchmarkRunWorkerDrainSequential(b *testing.B) {
	d := benchDispatch(b)
	q, err := d.Queue("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]lakeshore.Submission, 0, 1000)
	for i := 0; i < b.N; i += len(batch) {
		batch = batch[:min(1000, b.N-i)]
		if _, err := q.SubmitMany(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	err = lakeshore.RunWorker(context.Background(), d, []lakeshore.Handler{lakeshore.Handle("bench", noop)},
		&lakeshore.WorkerOptions{Concurrency: 1, ExitWhenIdle: true})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
