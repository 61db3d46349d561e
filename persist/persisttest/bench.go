package persisttest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// The loops the stores' benchmarks share (persist/filestore/bench_test.go,
// persist/httpstore/httpstore_bench_test.go), so that a figure of one store and the
// same figure of another measure the same calls.

// BenchPutBatches puts batch b.N times with PutBatch, from goroutines goroutines at
// once, and reports records/s.
func BenchPutBatches(b *testing.B, q *persist.Queue, batch []persist.Record, goroutines int) {
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := q.PutBatch(ctx, batch); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*len(batch))/time.Since(start).Seconds(), "records/s")
}

// BenchReadOnly reads fields of 1,024 consecutive records with Queue.Read b.N times
// (no consumption), from offsets spread over the first rows of q, and reports rows/s.
func BenchReadOnly(b *testing.B, q *persist.Queue, rows int, fields []string) {
	ctx := context.Background()
	var got int64
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		off := int64(i*1024) % int64(rows-1024)
		bt, err := q.Read(ctx, off, 1024, &persist.GetOpts{Fields: fields})
		if err != nil {
			b.Fatal(err)
		}
		got += int64(bt.Len())
		bt.Release()
	}
	b.ReportMetric(float64(got)/time.Since(start).Seconds(), "rows/s")
}
