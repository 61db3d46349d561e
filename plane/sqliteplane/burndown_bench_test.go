package sqliteplane

import (
	"strconv"
	"sync"
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// BenchmarkBurndown64: b.N jobs submitted first (calls of 1,000), then 64 workers claim
// and ack one job at a time until the queue is empty (pgplane's benchmark of the same
// name, on a file with synchronous=FULL). Reports jobs/s.
func BenchmarkBurndown64(b *testing.B) { burndown64(b, 0, 0) }

// BenchmarkBurndown64Keys: BenchmarkBurndown64 with every job under one of 100
// concurrency keys, limit 4 each (issue 27's burn-down with keys).
func BenchmarkBurndown64Keys(b *testing.B) { burndown64(b, 100, 4) }

func burndown64(b *testing.B, keys int, limit int64) {
	d := benchDriver(b)
	if keys > 0 {
		if err := d.QueueAdmissionSet(b.Context(), &plane.AdmissionParams{Namespace: "default", Queue: "q",
			Admission: plane.Admission{ConcurrencyLimit: limit}}); err != nil {
			b.Fatal(err)
		}
	}
	batch := make([]plane.SubmitParams, 1000)
	for n := 0; n < b.N; n += len(batch) {
		for i := range batch {
			batch[i] = plane.SubmitParams{Payload: []byte{0xc0}}
			if keys > 0 {
				batch[i].ConcurrencyKey = "tenant-" + strconv.Itoa((n+i)%keys)
			}
		}
		if _, err := d.InvocationSubmitMany(b.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch[:min(len(batch), b.N-n)]}); err != nil {
			b.Fatal(err)
		}
	}
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
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
