package sqliteplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
// tenant's p50 and p95 wait, and the p50 of its submit's part of it. Run with -benchtime 1x.
//
// saturated-priority-first is the bound no claim order can beat: no keys, the small
// tenant's jobs at a higher priority and priority claims, so each takes the first worker
// that frees (what is left is waiting for that worker, its claim and the submit).
//
// The sub-benchmarks unloaded, saturated and saturated-without-keys have each worker ack
// a job and then claim the next (two writer operations). Those under settle-and-claim/
// have it settle and claim in one call, as lakeshore.Worker does, with 4, 16 or 64
// workers: the more workers share the big tenant's backlog, the sooner one of them is
// free when a small job arrives (the part of the wait no claim order can remove).
//
// Every job above holds its worker exactly 2 ms, so workers that start together stay in
// step (a small job that arrives just after they all claimed waits out a whole job). Those
// under exponential/ hold each job for a time drawn from an exponential distribution of
// mean 2 ms (each worker its own seeded source), as jobs of varying length do: a small job
// waits for the first of the busy workers to free.
func BenchmarkFairShareWait(b *testing.B) {
	cases := []fairShareScenario{{name: "unloaded", keyed: true}, {name: "saturated", saturated: true, keyed: true},
		{name: "saturated-without-keys", saturated: true}, {name: "saturated-priority-first", saturated: true, priorityFirst: true},
		{name: "exponential/unloaded", keyed: true, exponential: true},
		{name: "exponential/saturated", saturated: true, keyed: true, exponential: true},
		{name: "exponential/saturated-priority-first", saturated: true, priorityFirst: true, exponential: true}}
	for _, workers := range []int{4, 16, 64} {
		for _, saturated := range []bool{false, true} {
			name := fmt.Sprintf("settle-and-claim/workers=%d/unloaded", workers)
			if saturated {
				name = fmt.Sprintf("settle-and-claim/workers=%d/saturated", workers)
			}
			cases = append(cases, fairShareScenario{name: name, saturated: saturated, keyed: true, workers: workers, settleAndClaim: true})
		}
	}
	for _, c := range cases {
		c.workers = cmp.Or(c.workers, 4)
		b.Run(c.name, func(b *testing.B) {
			var waits, submits []time.Duration
			for range b.N {
				w, s := fairShareRun(b, c)
				waits, submits = append(waits, w...), append(submits, s...)
			}
			at := func(ds []time.Duration, q float64) float64 {
				slices.Sort(ds)
				return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(at(waits, 0.50), "p50-ms")
			b.ReportMetric(at(waits, 0.95), "p95-ms")
			b.ReportMetric(at(submits, 0.50), "submit-p50-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// fairShareScenario is one sub-benchmark of BenchmarkFairShareWait.
type fairShareScenario struct {
	name string
	// saturated: the big tenant's backlog and its 9 jobs per small one; keyed: the tenants'
	// jobs carry their concurrency keys.
	saturated, keyed bool
	workers          int // 4 when 0
	// settleAndClaim: each worker settles a job and claims the next in one call, else it
	// acks and then claims.
	settleAndClaim bool
	// priorityFirst: the small tenant's jobs have priority 1 and the workers claim in
	// priority order.
	priorityFirst bool
	// exponential: each job is held for an exponentially distributed time of mean 2 ms,
	// else exactly 2 ms.
	exponential bool
}

// fairShareRun runs one scenario of BenchmarkFairShareWait and returns the small tenant's
// waits and, of each, the part its submit took (to its return). A saturated run fails
// unless the big tenant still has jobs queued at its end.
func fairShareRun(b *testing.B, c fairShareScenario) (waits, submits []time.Duration) {
	const smallJobs, bigPerSmall = 100, 9
	const service, every = 2 * time.Millisecond, 20 * time.Millisecond
	saturated, keyed, workers, settleAndClaim, priorityFirst := c.saturated, c.keyed, c.workers, c.settleAndClaim, c.priorityFirst
	// Enough for the workers not to drain it within the run (100 × 20 ms), at about 1,500
	// jobs per second per 4 workers with 2 ms jobs.
	bigBacklog := 3000 * max(1, workers/4)
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
			if priorityFirst && tenant == "small" {
				ps[i].Priority = 1
			}
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
	var claimedSmall atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			source := rand.New(rand.NewPCG(uint64(w), 27))
			hold := func() time.Duration {
				if c.exponential {
					return time.Duration(source.ExpFloat64() * float64(service))
				}
				return service
			}
			claim := &plane.ClaimParams{Namespace: "default", Queue: "fair", Max: 1,
				Worker: fmt.Sprintf("w%d", w), Wait: 100 * time.Millisecond}
			if priorityFirst {
				claim.Kind = plane.KindPriority
			}
			var settle []plane.SettleParams // the job to settle with the next claim
			for ctx.Err() == nil {
				var jobs []*plane.Job
				var err error
				if settle != nil {
					var errs []error
					errs, jobs, err = d.InvocationSettleAndClaim(ctx, settle, claim)
					if err == nil {
						err = errors.Join(errs...)
					}
					settle = nil
				} else {
					jobs, err = d.InvocationClaimMany(ctx, claim)
				}
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
					time.Sleep(hold())
					done := plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
					if settleAndClaim {
						settle = []plane.SettleParams{done}
						continue
					}
					if _, err := d.InvocationSettleMany(ctx, []plane.SettleParams{done}); err != nil && ctx.Err() == nil {
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
		submits = append(submits, time.Since(at))
		submitted.Store(ids[0], at)
		if saturated {
			submit("big", bigPerSmall)
		}
	}
	tick.Stop()
	for claimedSmall.Load() < smallJobs && !b.Failed() {
		time.Sleep(10 * time.Millisecond)
	}
	if saturated {
		n, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "fair", State: plane.StateQueued})
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			b.Fatalf("not saturated: the big tenant's backlog drained before the run ended (%d workers)", workers)
		}
	}
	cancel()
	wg.Wait()
	return waits, submits
}
