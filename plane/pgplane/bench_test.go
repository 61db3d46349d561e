package pgplane

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
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
// harness's burndown-64).
func BenchmarkBurndown64(b *testing.B) {
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
	for n := 0; n < b.N; n += len(batch) {
		if _, err := d.InvocationSubmitMany(b.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch[:min(len(batch), b.N-n)]}); err != nil {
			b.Fatal(err)
		}
	}
	wal := walMark(b, url)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				jobs, err := d.InvocationClaimMany(b.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q"})
				if err != nil {
					b.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				if _, err := d.InvocationSettleMany(b.Context(), []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}}); err != nil {
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
