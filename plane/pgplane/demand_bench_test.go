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

// BenchmarkDemandList: the cost of one Driver.DemandList (what a supervisor reads each
// tick) for a queue holding 1,000 or LAKESHORE_BENCH_DEPTH (default 100,000) jobs spread
// evenly over 100 shapes, plus as many default jobs: the counters (summed over their
// shards) and one index probe per shape, so the cost should be the same at both depths.
// The tables are vacuumed after the submits, as autovacuum keeps them.
func BenchmarkDemandList(b *testing.B) {
	large := 100_000
	if v, err := strconv.Atoi(os.Getenv("LAKESHORE_BENCH_DEPTH")); err == nil && v > 0 {
		large = v
	}
	for _, depth := range []int{1_000, large} {
		b.Run(fmt.Sprintf("depth=%d/shapes=100", depth), func(b *testing.B) {
			url := pgtest.Database(b)
			d, err := Open(b.Context(), url, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			batch := make([]plane.SubmitParams, 1000)
			for done := 0; done < 2*depth; done += len(batch) {
				n := min(len(batch), 2*depth-done)
				for i := range n {
					batch[i] = plane.SubmitParams{Payload: []byte{0xc0}}
					if (done+i)%2 == 0 {
						batch[i].Requirement = &plane.Requirement{MilliCPUs: int64((done+i)/2%100+1) * 100}
					}
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
			conn.Exec(b.Context(), `VACUUM ANALYZE lakeshore.placement_counts`) // as its autovacuum does (migration 0010)
			conn.Close(b.Context())
			b.ResetTimer()
			for range b.N {
				list, err := d.DemandList(b.Context(), "")
				if err != nil || len(list) != 101 {
					b.Fatal("demand", err, len(list))
				}
			}
		})
	}
}
