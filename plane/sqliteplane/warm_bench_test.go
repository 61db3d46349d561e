package sqliteplane

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// benchHostKey is host key i of BenchmarkClaimWarm.
func benchHostKey(i int) string { return fmt.Sprintf("hk1_%032x", i) }

// BenchmarkClaimWarm: the cost of a claim warm for one host key from a queue holding 1,000
// or LAKESHORE_BENCH_DEPTH (default 100,000) jobs without a requirement spread evenly over
// 100 host keys (the other 99 keys' jobs are never read). One job of the key is put back
// after each claim, outside the timer, so the depth stays. The cost should be the same at
// both depths. Run with -benchtime 1000x.
func BenchmarkClaimWarm(b *testing.B) {
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
				batch[i] = plane.SubmitParams{Payload: []byte{0x80}, Metadata: map[string]string{plane.MetaHostKey: benchHostKey((done + i) % 100)}}
			}
			if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "warm", Invocations: batch[:n]}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("depth=%d/keys=100/warm=1", depth), func(b *testing.B) {
			warm := []string{benchHostKey(57)}
			for range b.N {
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "warm", WarmHostKeys: warm})
				if err != nil || len(jobs) != 1 {
					b.Fatal("claim", err, len(jobs))
				}
				b.StopTimer()
				if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "warm",
					Invocations: []plane.SubmitParams{{Payload: []byte{0x80}, Metadata: map[string]string{plane.MetaHostKey: warm[0]}}}}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
