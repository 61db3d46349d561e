package pgplane

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// BenchmarkClaimShapes: the cost of claiming (and acking) one job with offers from a queue
// holding 1,000 or LAKESHORE_BENCH_DEPTH (default 100,000) jobs spread evenly over 100
// shapes — shape i asks for (i+1) × 100 millicpus —, for offers that satisfy one shape
// (100 millicpus: the other 99 shapes' jobs are never read) and all 100 (10,000: the claim
// locks the head of each). The cost should be the same at both depths (issue 25: claim
// cost flat in the queued jobs). The queue holds b.N more jobs of every shape than the
// depth, so it keeps its depth while claimed.
func BenchmarkClaimShapes(b *testing.B) {
	large := 100_000
	if v, err := strconv.Atoi(os.Getenv("LAKESHORE_BENCH_DEPTH")); err == nil && v > 0 {
		large = v
	}
	for _, depth := range []int{1_000, large} {
		for _, offers := range []struct {
			name string
			cpus int64
		}{{"one", 100}, {"all", 10_000}} {
			b.Run(fmt.Sprintf("depth=%d/shapes=100/satisfied=%s", depth, offers.name), func(b *testing.B) {
				url := pgtest.Database(b)
				d, err := Open(b.Context(), url, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				total := depth + 100*b.N // enough of shape 0 for b.N claims of "one"
				batch := make([]plane.SubmitParams, 1000)
				for done := 0; done < total; done += len(batch) {
					n := min(len(batch), total-done)
					for i := range n {
						batch[i] = plane.SubmitParams{Payload: []byte{0xc0},
							Requirement: &plane.Requirement{MilliCPUs: int64((done+i)%100+1) * 100}}
					}
					if _, err := d.InvocationSubmitMany(b.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
						Invocations: batch[:n]}); err != nil {
						b.Fatal(err)
					}
				}
				conn, err := pgx.Connect(b.Context(), url)
				if err != nil {
					b.Fatal(err)
				}
				conn.Exec(b.Context(), `VACUUM ANALYZE lakeshore.invocations`)
				conn.Close(b.Context())
				o := &plane.Offers{MilliCPUs: offers.cpus}
				b.ResetTimer()
				for range b.N {
					jobs, err := d.InvocationClaimMany(b.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Offers: o})
					if err != nil || len(jobs) != 1 {
						b.Fatal(err, len(jobs))
					}
					if _, err := d.InvocationSettleMany(b.Context(), []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkBatch1000Shapes is BenchmarkBatch1000 with every job of one of 100 shapes (job
// i asks for (i mod 100 + 1) × 100 millicpus): batches of 1,000 submits, each row counted in
// its shape's counters by the placement trigger (migrations 0010, 0016), so the trigger's
// cost per row shows beside the commit's.
func BenchmarkBatch1000Shapes(b *testing.B) {
	url := pgtest.Database(b)
	d, err := Open(b.Context(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	batch := make([]plane.SubmitParams, 1000)
	for i := range batch {
		batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, Requirement: &plane.Requirement{MilliCPUs: int64(i%100+1) * 100}}
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
