package sqliteplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Benchmarks of the SQLite plane at synchronous=FULL on a file in b.TempDir(). Figures and
// the commands that produce them are in docs/benchmarks.md.

func benchDriver(b *testing.B) *Driver {
	b.Helper()
	d, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), &Config{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func submitOne(ctx context.Context, d *Driver, queue string) (string, error) {
	res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: queue,
		Invocations: []plane.SubmitParams{{Payload: []byte{0x80}}}})
	if err != nil {
		return "", err
	}
	return res[0].ID, nil
}

// BenchmarkSubmit: Submit, one invocation a call, from 64 goroutines.
func BenchmarkSubmit(b *testing.B) {
	benchSubmitParallel(b, benchDriver(b))
}

// BenchmarkSubmitAdmission: Submit from 64 goroutines into a queue whose admission block
// (max depth and rate limit, both too high to refuse) is checked in every submit
// transaction; compare with BenchmarkSubmit (no block).
func BenchmarkSubmitAdmission(b *testing.B) {
	d := benchDriver(b)
	if _, err := d.QueueAdmissionSet(context.Background(), &plane.AdmissionParams{Namespace: "default", Queue: "bench",
		Admission: plane.Admission{MaxDepth: 1 << 40, RateLimit: 1e9, Burst: 1 << 40}}); err != nil {
		b.Fatal(err)
	}
	benchSubmitParallel(b, d)
}

// benchSubmitParallel submits one invocation a call to queue "bench" from 64 goroutines.
func benchSubmitParallel(b *testing.B, d *Driver) {
	ctx := context.Background()
	b.SetParallelism(32) // × GOMAXPROCS(2) = 64 goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := submitOne(ctx, d, "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
}

// BenchmarkSubmitMany: SubmitMany in batches of 1,000; b.N counts invocations. The keys=100
// case gives every invocation one of 100 concurrency keys (issue 27's keyed submit).
func BenchmarkSubmitMany(b *testing.B) {
	for _, keys := range []int{0, 100} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			d := benchDriver(b)
			ctx := context.Background()
			batch := make([]plane.SubmitParams, 1000)
			for i := range batch {
				batch[i].Payload = []byte{0x80}
				if keys > 0 {
					batch[i].ConcurrencyKey = "tenant-" + strconv.Itoa(i%keys)
				}
			}
			b.ResetTimer()
			for n := 0; n < b.N; n += len(batch) {
				// Exactly b.N invocations, so that ns/op is per invocation (the last batch is short).
				part := batch[:min(len(batch), b.N-n)]
				if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "bench", Invocations: part}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
		})
	}
}

// BenchmarkSubmitEight: SubmitMany of 8 invocations with the caller's ids, one call after
// another (the Python SDK's combined request from eight threads, issue 30 item 6); b.N
// counts invocations, each call its own transaction and sync.
func BenchmarkSubmitEight(b *testing.B) {
	d := benchDriver(b)
	ctx := context.Background()
	ids := plane.NewIDGenerator()
	batch := make([]plane.SubmitParams, 8)
	b.ResetTimer()
	for n := 0; n < b.N; n += len(batch) {
		part := batch[:min(len(batch), b.N-n)]
		for i := range part {
			part[i] = plane.SubmitParams{ID: ids.New(time.Now()), Payload: []byte{0x81, 0xa1, 0x69, 0x01}}
		}
		if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "bench", Invocations: part}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
}

// BenchmarkLifecycle: the full lifecycle of no-op jobs from 64 goroutines — 32 producers
// each submit a job and wait for its result, 32 workers claim up to 16 jobs at a time
// (waiting when the queue is empty) and ack them in one settle call, as RunWorker does.
// b.N counts jobs.
func BenchmarkLifecycle(b *testing.B) {
	benchLifecycle(b, 1, 16)
}

// BenchmarkLifecycleProducerBatches: as BenchmarkLifecycle, but each of the 32 producers
// submits 16 jobs in one SubmitMany and then waits for their 16 results. b.N counts jobs.
func BenchmarkLifecycleProducerBatches(b *testing.B) {
	benchLifecycle(b, 16, 64)
}

// benchLifecycle runs 32 producers that submit perSubmit jobs in one call and wait for each
// result, against 32 workers that claim up to claimMax jobs at a time.
func benchLifecycle(b *testing.B, perSubmit, claimMax int) {
	d := benchDriver(b)
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	stopWorkers := startWorkers(b, d, 32, claimMax)
	b.ResetTimer()
	var producers sync.WaitGroup
	for range 32 {
		producers.Add(1)
		go func() {
			defer producers.Done()
			batch := make([]plane.SubmitParams, perSubmit)
			for i := range batch {
				batch[i].Payload = []byte{0x80}
			}
			for {
				n := min(int64(perSubmit), left.Add(-int64(perSubmit))+int64(perSubmit))
				if n <= 0 {
					return
				}
				res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "bench", Invocations: batch[:n]})
				if err != nil {
					b.Error(err)
					return
				}
				for _, r := range res {
					inv, err := d.InvocationWait(ctx, &plane.WaitParams{ID: r.ID, Timeout: 30 * time.Second})
					if err != nil || inv.State != plane.StateSucceeded {
						b.Error("result", err)
						return
					}
				}
			}
		}()
	}
	producers.Wait()
	b.StopTimer()
	stopWorkers()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// startWorkers starts n workers that claim up to max jobs of queue "bench" at a time
// (waiting when it is empty) and ack them in one settle call, as RunWorker does. The
// returned func stops them and waits for them.
func startWorkers(b *testing.B, d *Driver, n, max int) func() {
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "bench", Max: max, Wait: time.Second})
				if err != nil {
					return
				}
				settles := make([]plane.SettleParams, len(jobs))
				for i, j := range jobs {
					settles[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
				}
				if len(settles) > 0 {
					if _, err := d.InvocationSettleMany(context.Background(), settles); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	return func() {
		stop()
		wg.Wait()
	}
}

// BenchmarkLifecycleUnbatched: 64 goroutines each submit, claim one, ack one and read the
// result, one call at a time — the worst case for group commit, for comparison.
func BenchmarkLifecycleUnbatched(b *testing.B) {
	d := benchDriver(b)
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				id, err := submitOne(ctx, d, "bench")
				if err != nil {
					b.Error(err)
					return
				}
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "bench", Max: 1})
				if err != nil || len(jobs) != 1 {
					b.Error("claim", err, len(jobs))
					return
				}
				if _, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}}); err != nil {
					b.Error(err)
					return
				}
				if _, err := d.InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: 30 * time.Second}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkLatency measures, one job at a time on an otherwise idle plane, the time from
// Submit returning... to an idle claimer (already waiting) receiving the job, and from Ack
// to a waiting Result returning. b.N counts jobs; p50 and p99 are reported in µs.
func BenchmarkLatency(b *testing.B) {
	d := benchDriver(b)
	ctx := context.Background()
	claimed := make(chan *plane.Job)
	go func() {
		for {
			jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "lat", Wait: 10 * time.Second})
			if err != nil || len(jobs) == 0 {
				close(claimed)
				return
			}
			claimed <- jobs[0]
		}
	}()
	toClaim := make([]time.Duration, 0, b.N)
	toResult := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		id, err := submitOne(ctx, d, "lat")
		if err != nil {
			b.Fatal(err)
		}
		job := <-claimed
		toClaim = append(toClaim, time.Since(start))
		waited := make(chan time.Time)
		go func() {
			d.InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: 10 * time.Second})
			waited <- time.Now()
		}()
		// Let the waiter park on its notification before the ack: a waiter that finds the
		// job already done would measure a read, not a wake-up.
		time.Sleep(200 * time.Microsecond)
		acked := time.Now()
		if _, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: job.ID, Token: job.Token, Outcome: plane.OutcomeSucceeded}}); err != nil {
			b.Fatal(err)
		}
		toResult = append(toResult, (<-waited).Sub(acked))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(toClaim, 0.5).Microseconds()), "submit→claim-p50-µs")
	b.ReportMetric(float64(percentile(toClaim, 0.99).Microseconds()), "submit→claim-p99-µs")
	b.ReportMetric(float64(percentile(toResult, 0.5).Microseconds()), "ack→result-p50-µs")
	b.ReportMetric(float64(percentile(toResult, 0.99).Microseconds()), "ack→result-p99-µs")
}

// deepPlanes holds one plane per queue depth, filled once and shared by the claim and count
// benchmarks: depth jobs over 10 priority levels.
var deepPlanes sync.Map // depth → *Driver

func deepPlane(b *testing.B, depth int) *Driver {
	if d, ok := deepPlanes.Load(depth); ok {
		return d.(*Driver)
	}
	dir, err := os.MkdirTemp("", "lakeshore-bench-")
	if err != nil {
		b.Fatal(err)
	}
	d, err := Open(context.Background(), filepath.Join(dir, "deep.db"), &Config{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]plane.SubmitParams, 1000)
	for done := 0; done < depth; done += len(batch) {
		n := min(len(batch), depth-done)
		for i := range n {
			batch[i] = plane.SubmitParams{Payload: []byte{0x80}, Priority: float64((done + i) % 10)}
		}
		if _, err := d.InvocationSubmitMany(context.Background(), &plane.SubmitManyParams{Namespace: "default", Queue: "deep", Invocations: batch[:n]}); err != nil {
			b.Fatal(err)
		}
	}
	deepPlanes.Store(depth, d)
	return d
}

// BenchmarkClaimDepth: the cost of claiming one job (and acking it, so the queue keeps its
// depth) at 1,000 and 1,000,000 queued jobs, for each claim order. The claim should cost the
// same at both depths. Run with -benchtime 2000x so the 1,000-deep queue is not drained.
func BenchmarkClaimDepth(b *testing.B) {
	ctx := context.Background()
	for _, depth := range []int{1_000, 1_000_000} {
		for _, kind := range []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority, plane.KindBoltzmann} {
			b.Run(fmt.Sprintf("depth=%d/%s", depth, kind), func(b *testing.B) {
				d := deepPlane(b, depth)
				b.ResetTimer()
				for range b.N {
					jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "deep", Kind: kind, Temperature: 2})
					if err != nil || len(jobs) != 1 {
						b.Fatal("claim", err)
					}
					b.StopTimer() // put one back so the depth stays
					if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "deep",
						Invocations: []plane.SubmitParams{{Payload: []byte{0x80}, Priority: jobs[0].Priority}}}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkCount: Count of one state at 1,000,000 queued jobs.
func BenchmarkCount(b *testing.B) {
	d := deepPlane(b, 1_000_000)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "deep", State: plane.StateQueued}); err != nil {
			b.Fatal(err)
		}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

// delayedPlane returns a plane whose queue "delayed" holds depth invocations delayed by an
// hour (the shape of jobs waiting out a retry backoff), filled once per depth.
var delayedPlanes sync.Map // depth → *Driver

func delayedPlane(b *testing.B, depth int) *Driver {
	if d, ok := delayedPlanes.Load(depth); ok {
		return d.(*Driver)
	}
	dir, err := os.MkdirTemp("", "lakeshore-bench-")
	if err != nil {
		b.Fatal(err)
	}
	d, err := Open(context.Background(), filepath.Join(dir, "delayed.db"), &Config{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]plane.SubmitParams, 1000)
	for done := 0; done < depth; done += len(batch) {
		n := min(len(batch), depth-done)
		for i := range n {
			batch[i] = plane.SubmitParams{Payload: []byte{0x80}, Delay: time.Hour, Priority: float64((done + i) % 10)}
		}
		if _, err := d.InvocationSubmitMany(context.Background(), &plane.SubmitManyParams{Namespace: "default", Queue: "delayed", Invocations: batch[:n]}); err != nil {
			b.Fatal(err)
		}
	}
	delayedPlanes.Store(depth, d)
	return d
}

// BenchmarkClaimDelayed: claims on a queue holding 1,000 or 1,000,000 delayed invocations
// (issue 11: 547 ms per empty claim at 1,000,000 jobs in backoff). "empty" claims when
// nothing is claimable; "fresh" claims one job submitted behind the delayed ones (the
// submit is outside the timer). Both should cost what they cost on an empty queue.
func BenchmarkClaimDelayed(b *testing.B) {
	ctx := context.Background()
	for _, depth := range []int{1_000, 1_000_000} {
		for _, kind := range []plane.Kind{plane.KindFIFO, plane.KindPriority, plane.KindBoltzmann} {
			b.Run(fmt.Sprintf("depth=%d/empty/%s", depth, kind), func(b *testing.B) {
				d := delayedPlane(b, depth)
				b.ResetTimer()
				for range b.N {
					jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "delayed", Kind: kind, Temperature: 2})
					if err != nil || len(jobs) != 0 {
						b.Fatal("claim", err, len(jobs))
					}
				}
			})
			b.Run(fmt.Sprintf("depth=%d/fresh/%s", depth, kind), func(b *testing.B) {
				d := delayedPlane(b, depth)
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					if _, err := submitOne(ctx, d, "delayed"); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "delayed", Kind: kind, Temperature: 2})
					if err != nil || len(jobs) != 1 {
						b.Fatal("claim", err, len(jobs))
					}
				}
			})
		}
	}
}

// BenchmarkClaimBlockedKey: the cost of claiming (and acking) one job of a free concurrency
// key while 0 to 1,000,000 jobs of another key, all older than the free ones, wait at its
// limit (one running, limit 1). The claim should cost the same whatever the blocked
// backlog (issue 27: claim cost flat in the number of blocked jobs). Run with -benchtime
// 1000x; pick sizes with -bench 'ClaimBlockedKey/blocked=(10000|1000000)$'. The backlog is
// made once per size (the 1,000,000 takes a few minutes) and shared by the runs of that
// size; each run claims jobs it submitted itself.
func BenchmarkClaimBlockedKey(b *testing.B) {
	ctx := context.Background()
	parent := b
	for _, blocked := range []int{0, 10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("blocked=%d", blocked), func(b *testing.B) {
			d := blockedKeyDriver(parent, blocked)
			free := make([]plane.SubmitParams, b.N)
			for i := range free {
				free[i] = plane.SubmitParams{Payload: []byte{0x80}, ConcurrencyKey: fmt.Sprintf("free-%d", i%100)}
			}
			for done := 0; done < b.N; done += 1000 {
				if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "k", Invocations: free[done:min(done+1000, b.N)]}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "k"})
				if err != nil || len(jobs) != 1 || jobs[0].ConcurrencyKey == "busy" {
					b.Fatal("claim", err, len(jobs))
				}
				if _, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// blockedKeys holds the drivers of BenchmarkClaimBlockedKey by backlog size, made once.
var blockedKeys = map[int]*Driver{}

// blockedKeyDriver returns a plane whose queue k (concurrency limit 1) holds blocked jobs
// of key "busy", one of them running (leased for a day) so the rest wait at its limit.
// It is closed and removed when b (the whole benchmark) ends.
func blockedKeyDriver(b *testing.B, blocked int) *Driver {
	if d := blockedKeys[blocked]; d != nil {
		return d
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "lakeshore-blocked-")
	if err != nil {
		b.Fatal(err)
	}
	d, err := Open(ctx, filepath.Join(dir, "bench.db"), &Config{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "k",
		Admission: plane.Admission{ConcurrencyLimit: 1}}); err != nil {
		b.Fatal(err)
	}
	batch := make([]plane.SubmitParams, 1000)
	for i := range batch {
		batch[i] = plane.SubmitParams{Payload: []byte{0x80}, ConcurrencyKey: "busy"}
	}
	start := time.Now()
	for done := 0; done < blocked; done += len(batch) {
		if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "k", Invocations: batch}); err != nil {
			b.Fatal(err)
		}
	}
	if blocked > 0 { // the busy key takes its one slot and keeps it
		if jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "k", LeaseTTL: 24 * time.Hour}); err != nil || len(jobs) != 1 {
			b.Fatal("claim the busy key's slot", err)
		}
		b.Logf("%d blocked jobs submitted in %s", blocked, time.Since(start).Round(time.Millisecond))
	}
	blockedKeys[blocked] = d
	b.Cleanup(func() {
		d.Close()
		os.RemoveAll(dir)
		delete(blockedKeys, blocked)
	})
	return d
}

// BenchmarkMaintainActiveKeys: one maintenance pass (Maintain) over a queue of 100,000
// concurrency keys, each with a job queued and none kept for its rate state alone. The pass
// looks for counter rows that count nothing (planekit.DropSettledKeys, migration 017);
// what it costs should not grow with the keys that have work, since the writer (every
// submit, claim and settle) waits for it every MaintenanceInterval.
func BenchmarkMaintainActiveKeys(b *testing.B) {
	ctx := context.Background()
	d := benchDriver(b)
	const keys = 100_000
	for done := 0; done < keys; done += 1000 {
		batch := make([]plane.SubmitParams, 1000)
		for i := range batch {
			batch[i] = plane.SubmitParams{Payload: []byte{0x80}, ConcurrencyKey: fmt.Sprintf("k%06d", done+i)}
		}
		if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if err := d.Maintain(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
