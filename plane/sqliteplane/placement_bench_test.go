package sqliteplane

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// benchShape is shape i of the placement benchmarks: (i+1) × 100 millicpus, so offers of
// 100 millicpus satisfy shape 0 alone and offers of 10,000 satisfy all 100.
func benchShape(i int) *plane.Requirement {
	return &plane.Requirement{MilliCPUs: int64(i+1) * 100, Labels: map[string]string{"pool": "bench"}}
}

// BenchmarkClaimShapes: the cost of claiming one job with offers from a queue holding
// 1,000 or LAKESHORE_BENCH_DEPTH (default 100,000) jobs spread evenly over 100 shapes, for
// offers that satisfy one shape (the other 99 shapes' jobs are never read) and all 100
// (the claim compares the head of each). One job of the claimed shape is put back after
// each claim, outside the timer, so the depth stays. The cost should be the same at both
// depths (issue 25: claim cost flat in the queued jobs). Run with -benchtime 1000x.
func BenchmarkClaimShapes(b *testing.B) {
	ctx := context.Background()
	large := 100_000
	if v, err := strconv.Atoi(os.Getenv("LAKESHORE_BENCH_DEPTH")); err == nil && v > 0 {
		large = v
	}
	for _, depth := range []int{1_000, large} {
		d := benchDriver(b)
		batch := make([]plane.SubmitParams, 1000)
		for done := 0; done < depth; done += len(batch) {
			n := min(len(batch), depth-done)
			for i := range n {
				batch[i] = plane.SubmitParams{Payload: []byte{0x80}, Requirement: benchShape((done + i) % 100)}
			}
			if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "shaped", Invocations: batch[:n]}); err != nil {
				b.Fatal(err)
			}
		}
		for _, offers := range []struct {
			name  string
			cpus  int64
			count int
		}{{"one", 100, 1}, {"all", 10_000, 100}} {
			b.Run(fmt.Sprintf("depth=%d/shapes=100/satisfied=%s", depth, offers.name), func(b *testing.B) {
				o := &plane.Offers{MilliCPUs: offers.cpus, Labels: map[string]string{"pool": "bench"}}
				for range b.N {
					jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "shaped", Offers: o})
					if err != nil || len(jobs) != 1 {
						b.Fatal("claim", err, len(jobs))
					}
					b.StopTimer()
					inv, err := d.InvocationGet(ctx, jobs[0].ID)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "shaped",
						Invocations: []plane.SubmitParams{{Payload: []byte{0x80}, Requirement: inv.Requirement}}}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}
