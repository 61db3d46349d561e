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

// BenchmarkClaimWarm: as sqliteplane's, the cost of a claim (and its ack) warm for one host
// key from a queue holding 1,000 or LAKESHORE_BENCH_DEPTH (default 100,000) jobs without a
// requirement spread evenly over 100 host keys (the other 99 keys' jobs are never read).
// Run with -benchtime 1000x.
func BenchmarkClaimWarm(b *testing.B) {
	large := 100_000
	if v, err := strconv.Atoi(os.Getenv("LAKESHORE_BENCH_DEPTH")); err == nil && v > 0 {
		large = v
	}
	key := func(i int) string { return fmt.Sprintf("hk1_%032x", i) }
	for _, depth := range []int{1_000, large} {
		b.Run(fmt.Sprintf("depth=%d/keys=100/warm=1", depth), func(b *testing.B) {
			url := pgtest.Database(b)
			d, err := Open(b.Context(), url, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			total := depth + 100*b.N // enough of key 57 for b.N claims
			batch := make([]plane.SubmitParams, 1000)
			for done := 0; done < total; done += len(batch) {
				n := min(len(batch), total-done)
				for i := range n {
					batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, Metadata: map[string]string{plane.MetaHostKey: key((done + i) % 100)}}
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
			warm := []string{key(57)}
			b.ResetTimer()
			for range b.N {
				jobs, err := d.InvocationClaimMany(b.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", WarmHostKeys: warm})
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
