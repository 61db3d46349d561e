package filestore

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// Benchmarks. Figures and commands are recorded in docs/benchmarks.md (detail: docs/benchmarks-persist.md).
// Sizes of the large-queue benchmarks come from PERSIST_BENCH_SIZES (comma-separated
// row counts) and PERSIST_BENCH_OPEN_ROWS.

func benchQueue(b *testing.B, cfg *persist.Config) *fileQueue {
	b.Helper()
	if cfg == nil {
		cfg = &persist.Config{}
	}
	cfg.Dir = b.TempDir()
	q, err := openFile(context.Background(), "bench", cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close(context.Background()) })
	return q
}

func scalarRecord(i int) persist.Record {
	return persist.Record{"id": i, "score": float64(i) * 0.5, "name": "sample"}
}

// BenchmarkPutBatch: durable PutBatch of 3-scalar records in batches of 1,000 from 8
// goroutines (target ≥ 300,000 records/s).
func BenchmarkPutBatch(b *testing.B) {
	q := benchQueue(b, nil)
	batch := make([]persist.Record, 1000)
	for i := range batch {
		batch[i] = scalarRecord(i)
	}
	persisttest.BenchPutBatches(b, persist.New(q), batch, 8)
	reportGroupCommit(b, q)
}

// BenchmarkPutSingle: durable single-record Put from 64 goroutines (target ≥ 50,000/s).
func BenchmarkPutSingle(b *testing.B) {
	ctx := context.Background()
	q := benchQueue(b, nil)
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := persist.New(q).Put(ctx, scalarRecord(int(i))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	reportGroupCommit(b, q)
}

// reportGroupCommit reports the average number of operations per write transaction.
func reportGroupCommit(b *testing.B, q *fileQueue) {
	st, err := q.Stats(context.Background())
	if err == nil && st.Commits > 0 {
		b.ReportMetric(float64(st.CommittedOps)/float64(st.Commits), "ops/commit")
	}
}

func benchSizes(def string) []int {
	s := os.Getenv("PERSIST_BENCH_SIZES")
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err == nil {
			out = append(out, n)
		}
	}
	return out
}

// fill puts n 3-scalar records (batches of 10,000 from 4 goroutines) and flushes.
func fill(b *testing.B, q *fileQueue, n int, rec func(i int) persist.Record) {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for {
				lo := int(next.Add(10_000)) - 10_000
				if lo >= n {
					return
				}
				recs := make([]persist.Record, min(10_000, n-lo))
				for i := range recs {
					recs[i] = rec(lo + i)
				}
				if _, err := persist.New(q).PutBatch(ctx, recs); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := q.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	// Let the kernel write back the setup's dirty pages now, so that the measured
	// fsyncs do not pay for them.
	syscall.Sync()
}

// BenchmarkFlush: the cost of flushing 10,000 new rows into queues that already hold
// N rows in fragments (should be flat in N).
func BenchmarkFlush(b *testing.B) {
	for _, n := range benchSizes("0,100000,1000000") {
		b.Run(fmt.Sprintf("existing=%d", n), func(b *testing.B) {
			ctx := context.Background()
			q := benchQueue(b, &persist.Config{FlushRows: -1, FlushInterval: -1, CompactFragments: -1})
			fill(b, q, n, scalarRecord)
			batch := make([]persist.Record, 1000)
			for i := range batch {
				batch[i] = scalarRecord(i)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := 0; j < 10; j++ {
					if _, err := persist.New(q).PutBatch(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := q.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func numericRecord(i int) persist.Record {
	return persist.Record{"a": i, "b": float64(i), "c": i * 2, "d": float64(i) / 3, "e": i % 7}
}

// BenchmarkGetBatch: Reader.GetBatch (GetMeta with consumption + GetData) of 5 numeric
// fields in batches of 1,024 (target ≥ 1,000,000 rows/s). Goroutines=1 is one trainer
// loop; Goroutines=4 is four readers of one task sharing the group commit.
func BenchmarkGetBatch(b *testing.B) {
	rows := 1_000_000
	if testing.Short() {
		rows = 100_000
	}
	ctx := context.Background()
	q := benchQueue(b, &persist.Config{FlushRows: -1, FlushInterval: -1})
	fill(b, q, rows, numericRecord)
	fields := []string{"a", "b", "c", "d", "e"}
	for _, goroutines := range []int{1, 4} {
		b.Run(fmt.Sprintf("Goroutines=%d", goroutines), func(b *testing.B) {
			task := fmt.Sprintf("bench-%d-%d", goroutines, b.N)
			q.ResetConsumption(ctx, task, persist.DefaultPartition)
			r := q.fileReader()
			var next atomic.Int64
			var got atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := 0; g < goroutines; g++ {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						bt, _, err := persist.New(r.q).Reader().GetBatch(ctx, &persist.MetaRequest{Fields: fields, BatchSize: 1024, Task: task})
						if err != nil {
							b.Error(err)
							return
						}
						if bt.Len() == 0 { // wrapped around: start the task again
							q.ResetConsumption(ctx, task, persist.DefaultPartition)
						}
						got.Add(int64(bt.Len()))
						bt.Release()
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(got.Load())/time.Since(start).Seconds(), "rows/s")
		})
	}
	b.Run("ReadOnly", func(b *testing.B) {
		// The data phase alone (Queue.Read of 1,024 consecutive rows), no consumption.
		persisttest.BenchReadOnly(b, persist.New(q), rows, fields)
	})
}

// BenchmarkTensorRead: reading 1 MiB tensors (16 per read) from fragments (target
// ≥ 1 GB/s). Cached: decoded column chunks stay in the cache (zero-copy slices);
// Uncached: CacheBytes=1, every read decodes its row group from the file.
func BenchmarkTensorRead(b *testing.B) {
	const n, per = 128, 16
	for _, cached := range []bool{true, false} {
		b.Run(map[bool]string{true: "Cached", false: "Uncached"}[cached], func(b *testing.B) {
			ctx := context.Background()
			cfg := &persist.Config{FlushRows: -1, FlushInterval: -1, CompactFragments: -1, RowGroupRows: per}
			if !cached {
				cfg.CacheBytes = 1
			}
			q := benchQueue(b, cfg)
			data := make([]byte, 1<<20)
			for i := range data {
				data[i] = byte(i * 7)
			}
			fill(b, q, n, func(i int) persist.Record {
				return persist.Record{"x": persist.Tensor{DType: "float32", Shape: []int{512, 512}, Data: data}}
			})
			b.SetBytes(per << 20)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := int64(i*per) % n
				bt, err := persist.New(q).Read(ctx, off, per, &persist.GetOpts{Fields: []string{"x"}})
				if err != nil {
					b.Fatal(err)
				}
				if bt.Len() != per {
					b.Fatalf("read %d tensors", bt.Len())
				}
				bt.Release()
			}
		})
	}
}

// BenchmarkOpen: opening a queue of PERSIST_BENCH_OPEN_ROWS rows (default 1,000,000)
// in fragments; reports the heap in use after Open.
func BenchmarkOpen(b *testing.B) {
	rows, _ := strconv.Atoi(os.Getenv("PERSIST_BENCH_OPEN_ROWS"))
	if rows == 0 {
		rows = 1_000_000
	}
	ctx := context.Background()
	dir := b.TempDir()
	q, err := openFile(ctx, "bench", &persist.Config{Dir: dir, FlushRows: -1, FlushInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	fill(b, q, rows, scalarRecord)
	if err := q.Close(ctx); err != nil {
		b.Fatal(err)
	}
	var heap uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		q, err := openFile(ctx, "bench", &persist.Config{Dir: dir, FlushRows: -1, FlushInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		n, err := q.Len(ctx)
		if err != nil || n != int64(rows) {
			b.Fatalf("len %d, %v", n, err)
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
		b.StopTimer()
		q.Close(ctx)
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/(1<<20), "heapMiB")
}

// BenchmarkGetBatchStaleness: one trainer loop of Reader.GetBatch (5 numeric fields,
// batches of 1,024) over records tagged with weight versions, Plain (no bound) against
// Bounded (MetaRequest.Staleness with a bound every record meets, so both hand out the
// same rows: the figure is the cost of judging each sample's version). Flushed: the
// records are in Parquet fragments (the steady state); the version column is read for
// the sampler's window of each GetMeta.
func BenchmarkGetBatchStaleness(b *testing.B) {
	rows := 200_000
	ctx := context.Background()
	q := benchQueue(b, &persist.Config{FlushRows: -1, FlushInterval: -1})
	fill(b, q, rows, func(i int) persist.Record {
		r := numericRecord(i)
		r[persist.WeightVersionField] = int64(i / 10_000)
		return r
	})
	if err := q.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := q.SetVersion(ctx, int64(rows/10_000)); err != nil {
		b.Fatal(err)
	}
	fields := []string{"a", "b", "c", "d", "e"}
	for _, c := range []struct {
		name string
		st   *persist.Staleness
	}{{"Plain", nil}, {"Bounded", &persist.Staleness{Max: int64(rows / 10_000)}}} {
		b.Run(c.name, func(b *testing.B) {
			task := fmt.Sprintf("bench-%s-%d", c.name, b.N)
			r := persist.New(q).Reader()
			var got int64
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				bt, _, err := r.GetBatch(ctx, &persist.MetaRequest{Fields: fields, BatchSize: 1024, Task: task, Staleness: c.st})
				if err != nil {
					b.Fatal(err)
				}
				if bt.Len() == 0 { // wrapped around: start the task again
					q.ResetConsumption(ctx, task, persist.DefaultPartition)
				}
				got += int64(bt.Len())
				bt.Release()
			}
			b.ReportMetric(float64(got)/time.Since(start).Seconds(), "rows/s")
		})
	}
}

// BenchmarkReplay: Queue.Replay of 1,024 draws weighted by a float field over a window
// of 100,000 flushed records of 5 numeric fields (the window's weights are read at the
// first call, then kept in memory), returning the 5 fields.
func BenchmarkReplay(b *testing.B) { benchReplay(b, []string{"a", "b", "c", "d", "e"}) }

// BenchmarkReplayIndexes: as BenchmarkReplay, drawing indexes only (no record read):
// the draw itself.
func BenchmarkReplayIndexes(b *testing.B) { benchReplay(b, []string{}) }

func benchReplay(b *testing.B, fields []string) {
	const rows = 100_000
	ctx := context.Background()
	q := benchQueue(b, &persist.Config{FlushRows: -1, FlushInterval: -1})
	fill(b, q, rows, func(i int) persist.Record {
		r := numericRecord(i)
		r["prio"] = float64(i%100) + 1
		return r
	})
	if err := q.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	qq := persist.New(q)
	var draws int64
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		rs, err := qq.Replay(ctx, &persist.ReplayRequest{Fields: fields, Size: 1024, Window: rows, Weight: "prio"})
		if err != nil {
			b.Fatal(err)
		}
		draws += int64(len(rs.Draws))
		rs.Batch.Release()
	}
	b.ReportMetric(float64(draws)/time.Since(start).Seconds(), "draws/s")
}
