package planetest

import (
	"strconv"
	"sync"
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Burndown64 is the burn-down benchmark both SQL planes run (BenchmarkBurndown64 and
// BenchmarkBurndown64Keys in each): b.N jobs submitted to queue default/q in calls of 1,000
// — with keys > 0, each under one of keys concurrency keys ("tenant-0" …) limited to limit
// running at once — then 64 workers claim and ack one job at a time until the queue is
// empty; only the burn-down is timed. started, when set, runs after the submits, just
// before the timer starts (a plane's own measurements). Reports jobs/s; fails unless every
// job succeeded.
func Burndown64(b *testing.B, d plane.Driver, keys int, limit int64, started func()) {
	if keys > 0 {
		if _, err := d.QueueAdmissionSet(b.Context(), &plane.AdmissionParams{Namespace: "default", Queue: "q",
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
	if started != nil {
		started()
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
	// Every job succeeded: a claim path that skipped jobs would end the run early, and read
	// fast.
	b.StopTimer()
	stats, err := d.QueueStatsList(b.Context(), "default")
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range stats {
		if s.Queue == "q" && s.Counts[plane.StateSucceeded] != int64(b.N) {
			b.Fatalf("%d of %d jobs succeeded: %v", s.Counts[plane.StateSucceeded], b.N, s.Counts)
		}
	}
}
