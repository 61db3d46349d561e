package sqliteplane

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// BenchmarkDemandList: the cost of one Driver.DemandList (what a supervisor reads each
// tick) for a queue holding 1,000 or LAKESHORE_BENCH_DEPTH (default 100,000) jobs spread
// evenly over 100 shapes, plus as many default jobs: counters and one index probe per
// shape, so the cost should be the same at both depths.
func BenchmarkDemandList(b *testing.B) {
	ctx := context.Background()
	large := 100_000
	if v, err := strconv.Atoi(os.Getenv("LAKESHORE_BENCH_DEPTH")); err == nil && v > 0 {
		large = v
	}
	for _, depth := range []int{1_000, large} {
		d := benchDriver(b)
		batch := make([]plane.SubmitParams, 1000)
		for done := 0; done < 2*depth; done += len(batch) {
			n := min(len(batch), 2*depth-done)
			for i := range n {
				batch[i] = plane.SubmitParams{Payload: []byte{0x80}}
				if (done+i)%2 == 0 {
					batch[i].Requirement = benchShape((done + i) / 2 % 100)
				}
			}
			if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "shaped", Invocations: batch[:n]}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("depth=%d/shapes=100", depth), func(b *testing.B) {
			for range b.N {
				list, err := d.DemandList(ctx, "")
				if err != nil || len(list) != 101 {
					b.Fatal("demand", err, len(list))
				}
			}
		})
	}
}
