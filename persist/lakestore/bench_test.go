package lakestore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
)

func benchRecords(n, base int) []persist.Record {
	recs := make([]persist.Record, n)
	for i := range recs {
		x := base + i
		recs[i] = persist.Record{"a": int64(x), "b": float64(x) / 2, "c": int64(x % 7), "d": float64(x % 11), "e": "s" + fmt.Sprint(x%13)}
	}
	return recs
}

// flushedBenchStore opens a store (no background flush) holding rows benchRecords,
// put 10,000 at a time and flushed into fragments.
func flushedBenchStore(b *testing.B, rows int) *Store {
	b.Helper()
	ctx := context.Background()
	s := openTest(b, pgtest.Database(b), fileBucket(b), "q", &Config{FlushRows: -1})
	for i := 0; i < rows; i += 10_000 {
		if _, err := s.PutPartition(ctx, persist.DefaultPartition, benchRecords(10_000, i), nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkPutBatch: batches of 1,000 records of 5 scalar fields, durable in the tail
// table when each returns (the background flusher off).
func BenchmarkPutBatch(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, pgtest.Database(b), fileBucket(b), "q", &Config{FlushRows: -1})
	recs := benchRecords(1000, 0)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := s.PutPartition(ctx, persist.DefaultPartition, recs, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkGetBatch: Scan of 1,024 rows of 5 numeric fields from flushed fragments
// (decoded fragments cached).
func BenchmarkGetBatch(b *testing.B) {
	ctx := context.Background()
	const rows = 100_000
	s := flushedBenchStore(b, rows)
	opts := &persist.GetOpts{Fields: []string{"a", "b", "c", "d"}}
	var off int64
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		bt, next, err := s.Scan(ctx, off, 1024, opts)
		if err != nil {
			b.Fatal(err)
		}
		bt.Release()
		off = next
		if off >= rows {
			off = 0
		}
	}
	b.ReportMetric(float64(b.N*1024)/time.Since(start).Seconds(), "rows/s")
}

// BenchmarkReaderGetBatch: what a trainer loop does, Reader.GetBatch (GetMeta with the
// sequential sampler, consumption decided in the catalog, then the data) of 1,024 rows of
// 5 numeric fields from flushed fragments; the "GetBatch" figure.
func BenchmarkReaderGetBatch(b *testing.B) {
	ctx := context.Background()
	const rows = 200_000
	s := flushedBenchStore(b, rows)
	q := persist.New(s)
	r := q.Reader()
	fields := []string{"a", "b", "c", "d"}
	task := fmt.Sprintf("bench-%d", b.N)
	var got int64
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		bt, _, err := r.GetBatch(ctx, &persist.MetaRequest{Fields: fields, BatchSize: 1024, Task: task})
		if err != nil {
			b.Fatal(err)
		}
		if bt.Len() == 0 { // every row consumed: start the task again
			if err := q.ResetConsumption(ctx, task, persist.DefaultPartition); err != nil {
				b.Fatal(err)
			}
		}
		got += int64(bt.Len())
		bt.Release()
	}
	b.ReportMetric(float64(got)/time.Since(start).Seconds(), "rows/s")
}

// BenchmarkFlush: the flush of 10,000 new rows on queues already holding 0, 100,000
// and 500,000 flushed rows (LAKESTORE_BENCH_SIZES=0,1000000,10000000 for other sizes): a
// flush reads only the tail, so its cost does not grow with the queue.
func BenchmarkFlush(b *testing.B) {
	ctx := context.Background()
	sizes := []int{0, 100_000, 500_000}
	if v := os.Getenv("LAKESTORE_BENCH_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("LAKESTORE_BENCH_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("queue=%d", size), func(b *testing.B) {
			s := flushedBenchStore(b, size)
			recs := benchRecords(10_000, size)
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				if _, err := s.PutPartition(ctx, persist.DefaultPartition, recs, nil); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := s.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
