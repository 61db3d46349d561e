package pgplane

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// BenchmarkEnqueue64 submits b.N jobs one per call from 64 goroutines (the harness's
// enqueue-64), on a durable server (fsync, synchronous_commit on).
func BenchmarkEnqueue64(b *testing.B) {
	url := pgtest.Database(b)
	d, err := Open(b.Context(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var left atomic.Int64
	left.Store(int64(b.N))
	wal := walMark(b, url)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				_, err := d.InvocationSubmitMany(b.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
					Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(wal()/float64(b.N), "wal-bytes/job")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkBurndown64 claims and acks b.N queued jobs one at a time from 64 goroutines (the
// harness's burndown-64). BenchmarkBurndown64Keys is the same with every job under one of
// 100 concurrency keys limited to 4 running each (issue 27: at least 80 % of the figure
// without keys).
func BenchmarkBurndown64(b *testing.B) { burndown64(b, 0, 0) }

// BenchmarkBurndown64Keys: BenchmarkBurndown64 with 100 concurrency keys, limit 4 each.
func BenchmarkBurndown64Keys(b *testing.B) { burndown64(b, 100, 4) }

func burndown64(b *testing.B, keys int, limit int64) {
	url := pgtest.Database(b)
	d, err := Open(b.Context(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var wal func() float64
	planetest.Burndown64(b, d, keys, limit, func() { wal = walMark(b, url) })
	b.ReportMetric(wal()/float64(b.N), "wal-bytes/job")
}

// BenchmarkBatch1000 submits b.N jobs in calls of 1,000 (the harness's batch-1000).
func BenchmarkBatch1000(b *testing.B) {
	url := pgtest.Database(b)
	d, err := Open(b.Context(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	batch := make([]plane.SubmitParams, 1000)
	for i := range batch {
		batch[i] = plane.SubmitParams{Payload: []byte{0xc0}}
	}
	wal := walMark(b, url)
	b.ResetTimer()
	for n := 0; n < b.N; n += len(batch) {
		if _, err := d.InvocationSubmitMany(b.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch[:min(len(batch), b.N-n)]}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(wal()/float64(b.N), "wal-bytes/job")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// walBytes reports the WAL the server wrote since mark (server-wide: run alone).
func walMark(b *testing.B, url string) func() float64 {
	b.Helper()
	conn, err := pgx.Connect(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	var start string
	if err := conn.QueryRow(b.Context(), `SELECT pg_current_wal_lsn()::text`).Scan(&start); err != nil {
		b.Fatal(err)
	}
	return func() float64 {
		defer conn.Close(context.Background())
		var n float64
		if err := conn.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, start).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
}

// BenchmarkClaimDepth claims and acks one job at a time behind a backlog: queued jobs (the
// claim reads the head of the index) or delayed ones (kept out of the claim indexes), so
// claim cost can be compared across depths. In due-trickle, behind the delayed ones, a job
// delayed by a millisecond is submitted after each ack (outside the timer), which a later
// claim's promote moves (about one a claim): claims behind delayed jobs that fall due a
// few at a time.
// LAKESHORE_BENCH_DEPTH sets the large depth (default 100,000).
func BenchmarkClaimDepth(b *testing.B) {
	large := 100_000
	if v, err := strconv.Atoi(os.Getenv("LAKESHORE_BENCH_DEPTH")); err == nil && v > 0 {
		large = v
	}
	for _, c := range []struct {
		name            string
		queued, delayed int
		trickle         bool
	}{
		{"queued-1000", 1000, 0, false},
		{fmt.Sprintf("queued-%d", large), large, 0, false},
		{fmt.Sprintf("delayed-%d", large), 1000, large, false},
		{fmt.Sprintf("due-trickle-%d", large), 1000, large, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			url := pgtest.Database(b)
			d, err := Open(b.Context(), url, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			seed := func(n int, delay time.Duration) {
				batch := make([]plane.SubmitParams, 1000)
				for i := range batch {
					batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, Delay: delay}
				}
				for done := 0; done < n; done += len(batch) {
					if _, err := d.InvocationSubmitMany(b.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
						Invocations: batch[:min(len(batch), n-done)]}); err != nil {
						b.Fatal(err)
					}
				}
			}
			seed(c.delayed, time.Hour)
			seed(c.queued+b.N, 0)
			conn, err := pgx.Connect(b.Context(), url)
			if err != nil {
				b.Fatal(err)
			}
			conn.Exec(b.Context(), `VACUUM ANALYZE lakeshore.invocations`)
			conn.Close(b.Context())
			b.ResetTimer()
			for range b.N {
				jobs, err := d.InvocationClaimMany(b.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q"})
				if err != nil || len(jobs) != 1 {
					b.Fatal(err, len(jobs))
				}
				if _, err := d.InvocationSettleMany(b.Context(), []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}}); err != nil {
					b.Fatal(err)
				}
				if c.trickle {
					b.StopTimer()
					seed(1, time.Millisecond)
					b.StartTimer()
				}
			}
			b.StopTimer()
			began := time.Now()
			if _, err := d.InvocationCount(b.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued}); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(began).Microseconds()), "count-µs")
		})
	}
}

// BenchmarkMaintainActiveKeys: one maintenance pass (Maintain) over a queue of 100,000
// concurrency keys, each with a job queued and none kept for its rate state alone; the
// pass's look for counter rows that count nothing (planekit.DropSettledKeys) reads them all.
func BenchmarkMaintainActiveKeys(b *testing.B) {
	url := pgtest.Database(b)
	d, err := Open(b.Context(), url, &Config{MaintenanceInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for done := 0; done < 100_000; done += 1000 {
		batch := make([]plane.SubmitParams, 1000)
		for i := range batch {
			batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, ConcurrencyKey: fmt.Sprintf("k%06d", done+i)}
		}
		if _, err := d.InvocationSubmitMany(b.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if err := d.Maintain(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
