package httpplane_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// The benchmarks run each workload twice: "inproc" calls a SQLite plane (a file in a temp
// dir, synchronous=FULL) directly; "http" calls the same kind of plane through httpplane →
// server over a loopback listener. docs/benchmarks.md records the ratios.
//
//	go test ./plane/httpplane -run '^$' -bench . -benchtime 3s

const benchClients = 64

type planeKind struct {
	name string
	open func(b *testing.B) plane.Driver
}

var planeKinds = []planeKind{{"inproc", openInproc}, {"http", openHTTP}}

func openBack(b *testing.B) *sqliteplane.Driver {
	b.Helper()
	d, err := sqliteplane.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func openInproc(b *testing.B) plane.Driver { return openBack(b) }

func openHTTP(b *testing.B) plane.Driver {
	back := openBack(b)
	srv := server.New(back, &server.Config{Logger: slog.New(slog.DiscardHandler)})
	ts := httptest.NewServer(srv)
	drv, err := httpplane.New(ts.URL, &httpplane.Config{Token: "-"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		drv.Close()
		srv.Stop()
		ts.Close()
	})
	return drv
}

func submitN(ctx context.Context, drv plane.Driver, queue string, n int) ([]plane.SubmitResult, error) {
	return drv.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: queue,
		Invocations: make([]plane.SubmitParams, n)})
}

// BenchmarkLifecycle: 64 clients, each submitting a batch of 16, claiming up to 16 and
// acking what it claimed, until b.N jobs have been submitted. Reports jobs/s.
func BenchmarkLifecycle(b *testing.B) {
	const batch = 16
	for _, k := range planeKinds {
		b.Run(k.name, func(b *testing.B) {
			drv := k.open(b)
			ctx := context.Background()
			var left atomic.Int64
			left.Store(int64(b.N))
			var settled atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range benchClients {
				wg.Go(func() {
					for {
						n := min(int64(batch), left.Add(-batch)+batch)
						if n <= 0 {
							break
						}
						if _, err := submitN(ctx, drv, "life", int(n)); err != nil {
							b.Error(err)
							return
						}
						jobs, err := drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "life", Kind: plane.KindFIFO, Max: batch})
						if err != nil {
							b.Error(err)
							return
						}
						ss := make([]plane.SettleParams, len(jobs))
						for i, j := range jobs {
							ss[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: []byte{0xc0}}
						}
						if len(ss) > 0 {
							if _, err := drv.InvocationSettleMany(ctx, ss); err != nil {
								b.Error(err)
								return
							}
						}
						settled.Add(int64(len(jobs)))
					}
				})
			}
			wg.Wait()
			// Drain what the race between clients left queued.
			for settled.Load() < int64(b.N) {
				jobs, err := drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "life", Kind: plane.KindFIFO, Max: 256})
				if err != nil {
					b.Fatal(err)
				}
				if len(jobs) == 0 {
					b.Fatalf("settled %d of %d", settled.Load(), b.N)
				}
				ss := make([]plane.SettleParams, len(jobs))
				for i, j := range jobs {
					ss[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
				}
				if _, err := drv.InvocationSettleMany(ctx, ss); err != nil {
					b.Fatal(err)
				}
				settled.Add(int64(len(jobs)))
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
		})
	}
}

// BenchmarkSubmit: 64 clients submitting one job per call. Reports submits/s.
func BenchmarkSubmit(b *testing.B) {
	for _, k := range planeKinds {
		b.Run(k.name, func(b *testing.B) {
			drv := k.open(b)
			ctx := context.Background()
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range benchClients {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if _, err := submitN(ctx, drv, "sub", 1); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "submits/s")
		})
	}
}

func reportPercentiles(b *testing.B, samples []time.Duration) {
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[min(len(samples)-1, int(q*float64(len(samples))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLatencySubmitToClaim: a claimer waits (long-poll); the time from calling submit
// to the claim returning the job. One sample per op.
func BenchmarkLatencySubmitToClaim(b *testing.B) {
	for _, k := range planeKinds {
		b.Run(k.name, func(b *testing.B) {
			drv := k.open(b)
			ctx := context.Background()
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				got := make(chan time.Time, 1)
				parked := make(chan struct{})
				go func() {
					close(parked)
					jobs, err := drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "lat", Kind: plane.KindFIFO, Wait: 10 * time.Second})
					if err != nil || len(jobs) != 1 {
						b.Error(err, len(jobs))
					}
					got <- time.Now()
				}()
				<-parked
				time.Sleep(2 * time.Millisecond) // let the claim reach its wait
				start := time.Now()
				if _, err := submitN(ctx, drv, "lat", 1); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, (<-got).Sub(start))
			}
			reportPercentiles(b, samples)
		})
	}
}

// BenchmarkLatencyAckToResult: a waiter waits for the result (long-poll); the time from
// calling ack to the wait returning the succeeded invocation.
func BenchmarkLatencyAckToResult(b *testing.B) {
	for _, k := range planeKinds {
		b.Run(k.name, func(b *testing.B) {
			drv := k.open(b)
			ctx := context.Background()
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				if _, err := submitN(ctx, drv, "ack", 1); err != nil {
					b.Fatal(err)
				}
				jobs, err := drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "ack", Kind: plane.KindFIFO})
				if err != nil || len(jobs) != 1 {
					b.Fatal(err, len(jobs))
				}
				got := make(chan time.Time, 1)
				go func() {
					inv, err := drv.InvocationWait(ctx, &plane.WaitParams{ID: jobs[0].ID, Timeout: 10 * time.Second})
					if err != nil || inv.State != plane.StateSucceeded {
						b.Error(err)
					}
					got <- time.Now()
				}()
				time.Sleep(2 * time.Millisecond) // let the wait park
				start := time.Now()
				if _, err := drv.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}}); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, (<-got).Sub(start))
			}
			reportPercentiles(b, samples)
		})
	}
}

// BenchmarkIdleLongPolls holds 1,000 claims waiting on an empty queue and reports the
// memory they take (heap and stacks, client and server together for http), per poll.
func BenchmarkIdleLongPolls(b *testing.B) {
	const polls = 1000
	for _, k := range planeKinds {
		b.Run(k.name, func(b *testing.B) {
			for range b.N {
				drv := k.open(b)
				ctx, cancel := context.WithCancel(context.Background())
				// Warm up one connection and the plane.
				if _, err := drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "idle", Kind: plane.KindFIFO}); err != nil {
					b.Fatal(err)
				}
				before := memInUse()
				var wg sync.WaitGroup
				for range polls {
					wg.Go(func() {
						drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "idle", Kind: plane.KindFIFO, Wait: time.Minute}) //nolint:errcheck // ended by cancel
					})
				}
				time.Sleep(2 * time.Second) // let every poll connect and park
				after := memInUse()
				b.ReportMetric(float64(after-before)/polls, "B/poll")
				cancel()
				wg.Wait()
			}
		})
	}
}

func memInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
