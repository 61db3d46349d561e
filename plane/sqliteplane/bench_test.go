package sqliteplane

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Benchmarks of the SQLite plane at synchronous=FULL on a file in b.TempDir(). Figures and
// the commands that produce them are in docs/benchmarks.md.

func benchDriver(b *testing.B) *Driver {
	b.Helper()
	d, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), &Config{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func submitOne(ctx context.Context, d *Driver, queue string) (string, error) {
	res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: queue,
		Invocations: []plane.SubmitParams{{Payload: []byte{0x80}}}})
	if err != nil {
		return "", err
	}
	return res[0].ID, nil
}

// BenchmarkSubmit: Submit, one invocation a call, from 64 goroutines.
func BenchmarkSubmit(b *testing.B) {
	d := benchDriver(b)
	ctx := context.Background()
	b.SetParallelism(32) // × GOMAXPROCS(2) = 64 goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := submitOne(ctx, d, "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
}

// BenchmarkSubmitMany: SubmitMany in batches of 1,000; b.N counts invocations.
func BenchmarkSubmitMany(b *testing.B) {
	d := benchDriver(b)
	ctx := context.Background()
	batch := make([]plane.SubmitParams, 1000)
	for i := range batch {
		batch[i].Payload = []byte{0x80}
	}
	b.ResetTimer()
	for n := 0; n < b.N; n += len(batch) {
		if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "bench", Invocations: batch}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
}

// BenchmarkLifecycle: 64 goroutines each submit, claim, ack and read the result of no-op
// jobs; b.N counts jobs.
func BenchmarkLifecycle(b *testing.B) {
	d := benchDriver(b)
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				id, err := submitOne(ctx, d, "bench")
				if err != nil {
					b.Error(err)
					return
				}
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "bench", Max: 1})
				if err != nil || len(jobs) != 1 {
					b.Error("claim", err, len(jobs))
					return
				}
				if _, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}}); err != nil {
					b.Error(err)
					return
				}
				if _, err := d.InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: 30 * time.Second}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}
