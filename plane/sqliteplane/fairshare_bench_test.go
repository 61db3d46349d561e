package sqliteplane

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// BenchmarkFairShareWait: issue 27's fairness figure, the small tenant's wait (submit to
// claim, measured by the client) under a 90/10 skew at saturation against its wait with
// the queue to itself. Four workers claim one job at a time and hold each for 2 ms; the
// small tenant submits one job every 20 ms (100 in all). "unloaded": nothing else is
// queued. "saturated": the big tenant has 3,000 jobs queued first and submits 9 more with
// each of the small tenant's, far more than the workers finish, so the queue never drains;
// with concurrency keys the claims rotate across the two keys, without them (FIFO, for
// contrast) the small tenant's jobs wait behind the big backlog. Reports the small
// tenant's p50 and p95 wait. Run with -benchtime 1x.
func BenchmarkFairShareWait(b *testing.B) {
	for _, c := range []struct {
		name             string
		saturated, keyed bool
	}{{"unloaded", false, true}, {"saturated", true, true}, {"saturated-without-keys", true, false}} {
		b.Run(c.name, func(b *testing.B) {
			var waits []time.Duration
			for range b.N {
				waits = append(waits, fairShareRun(b, c.saturated, c.keyed)...)
			}
			slices.Sort(waits)
			at := func(q float64) float64 {
				return float64(waits[min(len(waits)-1, int(q*float64(len(waits))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.95), "p95-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// fairShareRun runs one scenario of BenchmarkFairShareWait and returns the small tenant's
// waits.
func fairShareRun(b *testing.B, saturated, keyed bool) []time.Duration {
	const workers, smallJobs, bigBacklog, bigPerSmall = 4, 100, 3000, 9
	const service, every = 2 * time.Millisecond, 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := benchDriver(b)
	key := func(k string) string {
		if keyed {
			return k
		}
		return ""
	}
	submit := func(tenant string, n int) []string {
		ps := make([]plane.SubmitParams, n)
		for i := range ps {
			ps[i] = plane.SubmitParams{Payload: []byte(tenant), ConcurrencyKey: key(tenant)}
		}
		res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "fair", Invocations: ps})
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]string, n)
		for i, r := range res {
			ids[i] = r.ID
		}
		return ids
	}
	if saturated {
		for done := 0; done < bigBacklog; done += 1000 {
			submit("big", 1000)
		}
	}
	var submitted sync.Map // small job id → submit time
	var mu sync.Mutex
	var waits []time.Duration
	var claimedSmall atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "fair", Max: 1,
					Worker: fmt.Sprintf("w%d", w), Wait: 100 * time.Millisecond})
				if err != nil {
					if ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				now := time.Now()
				for _, j := range jobs {
					if string(j.Payload) == "small" {
						for { // the submitter records the id after its submit returns
							if at, ok := submitted.Load(j.ID); ok {
								mu.Lock()
								waits = append(waits, now.Sub(at.(time.Time)))
								mu.Unlock()
								claimedSmall.Add(1)
								break
							}
							time.Sleep(100 * time.Microsecond)
						}
					}
					time.Sleep(service)
					if _, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}}); err != nil && ctx.Err() == nil {
						b.Error(err)
					}
				}
			}
		}()
	}
	tick := time.NewTicker(every)
	for range smallJobs {
		<-tick.C
		at := time.Now()
		ids := submit("small", 1)
		submitted.Store(ids[0], at)
		if saturated {
			submit("big", bigPerSmall)
		}
	}
	tick.Stop()
	for claimedSmall.Load() < smallJobs && !b.Failed() {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	return waits
}
