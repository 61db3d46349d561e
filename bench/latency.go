package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// latencyMetrics are the figures of one open-loop run: enqueue→handler start percentiles
// and the rate the system actually sustained.
var latencyMetrics = []metric{
	{name: "handler start p50 (ms)"}, {name: "handler start p90 (ms)"}, {name: "handler start p99 (ms)"},
	{name: "handler start p99.9 (ms)"}, {name: "achieved (jobs/s)", higher: true},
	{name: "submit returned p50 (ms)"}, {name: "submit returned p99 (ms)"},
	{name: "submit returned → handler start p50 (ms)"}, {name: "submit returned → handler start p99 (ms)"},
	{name: "first job: handler start (ms)"},
	{name: "first 1 s: handler start p50 (ms)"}, {name: "first 1 s: handler start p99 (ms)"},
	{name: "after 1 s: handler start p50 (ms)"}, {name: "after 1 s: handler start p99 (ms)"},
}

// firstSpan is where the open loop's figures split its jobs: those enqueued in its first
// second (the start-up: connections opened, the worker registered, a fresh database's first
// plans) apart from the rest (the steady state), so the two causes of a tail show apart. A
// loop of 2 s or less (-quick) splits at its half, so both sides have jobs.
const firstSpan = time.Second

const (
	// peakPercent is the share of the measured peak the latency-80 workload offers.
	peakPercent = 80
	// peakBacklog bounds the jobs submitted but not started during the peak run, so the
	// run measures a sustained rate (not a backlog growing without end) and the drain
	// after it is short.
	peakBacklog = 2000
	// peakSeqBase offsets the seqs of the peak run's jobs so the open loop after it never
	// mistakes one for its own.
	peakSeqBase = int64(1) << 40
)

// openLoopResult is what one open-loop run measured.
type openLoopResult struct {
	start    []time.Duration // enqueue→handler start, one per job, sorted
	readable []time.Duration // enqueue→result readable, sorted; nil when not tracked
	// submit is enqueue→the submit call returned (the commit acknowledged), and woken is
	// submit returned→handler start (the wake-up path after the commit; negative when the
	// handler started before the producer saw its acknowledgement), both sorted.
	submit, woken []time.Duration
	// first is job 0's enqueue→handler start; early and late are enqueue→handler start of
	// the jobs enqueued in the first firstSpan of the loop (its first half when it lasts
	// 2 firstSpan or less) and of those enqueued after it, each sorted.
	first       time.Duration
	early, late []time.Duration
	achieved    float64 // jobs ÷ (last handler start − first submit), jobs/s
}

// startMetrics returns the latencyMetrics values of r.
func (r *openLoopResult) startMetrics() []float64 {
	out := append(percentiles(r.start, 0.50, 0.90, 0.99, 0.999), r.achieved)
	out = append(out, percentiles(r.submit, 0.50, 0.99)...)
	out = append(out, percentiles(r.woken, 0.50, 0.99)...)
	out = append(out, float64(r.first)/float64(time.Millisecond))
	out = append(out, percentilesOrNaN(r.early, 0.50, 0.99)...)
	return append(out, percentilesOrNaN(r.late, 0.50, 0.99)...)
}

// percentilesOrNaN is percentiles, with NaN for an empty set (a loop of one job has none
// after its split).
func percentilesOrNaN(sorted []time.Duration, qs ...float64) []float64 {
	if len(sorted) == 0 {
		out := make([]float64, len(qs))
		for i := range out {
			out[i] = nan
		}
		return out
	}
	return percentiles(sorted, qs...)
}

// openLoop offers rate jobs/s for d on s with concurrency workers: submit i is issued at
// begin + i/rate on its own goroutine whatever happened to earlier ones (an open loop: a
// slow system meets the same arrivals, it does not slow the producer down). With track, every
// handler stores a result and the producer waits for it (s must be a tracker for readable
// figures). Every job must start within a minute of the last submit.
func openLoop(ctx context.Context, s store, rate int, d time.Duration, concurrency int, track bool) (*openLoopResult, error) {
	total := max(1, int(float64(rate)*d.Seconds()))
	started := make([]atomic.Int64, total) // handler start, Unix ns
	enqueued := make([]int64, total)
	returned := make([]int64, total) // the submit call returned, Unix ns
	readable := make([]int64, total)
	var seen atomic.Int64
	stop, err := s.work(ctx, workParams{concurrency: concurrency, result: track, track: track,
		handle: func(ref jobRef) {
			if ref.Seq >= 0 && ref.Seq < int64(total) && started[ref.Seq].CompareAndSwap(0, time.Now().UnixNano()) {
				seen.Add(1)
			}
		}})
	if err != nil {
		return nil, err
	}
	tr, tracked := s.(tracker)
	tracked = tracked && track
	var wg sync.WaitGroup
	errs := make(chan error, total)
	interval := float64(time.Second) / float64(rate)
	begin := time.Now()
	for i := range total {
		// Sleep until submit i is due; when the loop runs late it issues every submit
		// already due at once (no tick is dropped, the rate holds on average).
		if wait := time.Until(begin.Add(time.Duration(float64(i) * interval))); wait > 0 {
			time.Sleep(wait)
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			ref := newRef(int64(i))
			enqueued[i] = ref.EnqueuedNS
			if !tracked {
				if err := s.enqueue(ctx, ref); err != nil {
					errs <- err
				}
				returned[i] = time.Now().UnixNano()
				return
			}
			wait, err := tr.enqueueTracked(ctx, ref)
			returned[i] = time.Now().UnixNano()
			if err != nil {
				errs <- err
				return
			}
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := wait(wctx); err != nil {
				errs <- fmt.Errorf("wait for result of job %d: %w", i, err)
				return
			}
			readable[i] = time.Now().UnixNano()
		})
	}
	wg.Wait()
	for deadline := time.Now().Add(time.Minute); seen.Load() < int64(total) && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(5 * time.Millisecond)
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	stopErr := stop(stopCtx)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	if stopErr != nil {
		return nil, fmt.Errorf("stop workers: %w", stopErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n := seen.Load(); n < int64(total) {
		return nil, fmt.Errorf("%d of %d jobs started within a minute", n, total)
	}
	out := &openLoopResult{start: make([]time.Duration, total), submit: make([]time.Duration, total),
		woken: make([]time.Duration, total)}
	last := int64(0)
	split := min(firstSpan, d/2)
	for i := range total {
		st := started[i].Load()
		last = max(last, st)
		out.start[i] = time.Duration(st - enqueued[i])
		out.submit[i] = time.Duration(returned[i] - enqueued[i])
		out.woken[i] = time.Duration(st - returned[i])
		if enqueued[i]-begin.UnixNano() < int64(split) {
			out.early = append(out.early, out.start[i])
		} else {
			out.late = append(out.late, out.start[i])
		}
	}
	out.first = out.start[0]
	slices.Sort(out.early)
	slices.Sort(out.late)
	slices.Sort(out.start)
	slices.Sort(out.submit)
	slices.Sort(out.woken)
	out.achieved = float64(total) / time.Duration(last-begin.UnixNano()).Seconds()
	if tracked {
		out.readable = make([]time.Duration, total)
		for i := range total {
			out.readable[i] = time.Duration(readable[i] - enqueued[i])
		}
		slices.Sort(out.readable)
	}
	return out, nil
}

// runLatency is the latency workload: the open loop at -rate for -latency-duration with
// results stored and awaited by the producer.
func runLatency(ctx context.Context, h *harness, sys system, e *env) ([]float64, error) {
	s, err := openWorking(ctx, sys, e, "results")
	if err != nil {
		return nil, err
	}
	defer s.close()
	r, err := openLoop(ctx, s, h.o.rate, h.o.latencyDuration, h.o.latencyConcurrency, true)
	if err != nil {
		return nil, err
	}
	out := r.startMetrics()
	if r.readable != nil {
		return append(out, percentiles(r.readable, 0.50, 0.90, 0.99)...), nil
	}
	return append(out, nan, nan, nan), nil
}

// runLatencyAtPeak is the latency-80 workload: the system's peak end-to-end rate (closed
// loop, or -peak), then the open loop at peakPercent of it on the same store once the peak
// run's jobs are drained.
func runLatencyAtPeak(ctx context.Context, h *harness, sys system, e *env) ([]float64, error) {
	s, err := openWorking(ctx, sys, e, "results")
	if err != nil {
		return nil, err
	}
	defer s.close()
	peak, given := h.o.peaks[sys.name()]
	if !given {
		if peak, err = closedLoopPeak(ctx, s, h.o.peakWorkers, h.o.peakDuration); err != nil {
			return nil, fmt.Errorf("peak: %w", err)
		}
	}
	rate := max(1, int(peak*peakPercent/100))
	r, err := openLoop(ctx, s, rate, h.o.latencyDuration, h.o.peakWorkers, false)
	if err != nil {
		return nil, fmt.Errorf("open loop at %d jobs/s: %w", rate, err)
	}
	return append([]float64{peak, float64(rate)}, r.startMetrics()...), nil
}

// openWorking opens sys's store for a workload whose jobs run on workers (latency, crash):
// one without workers, or a ceiling (a ceilingStore, which has no lacks: the results or
// the leases the workload measures), is not applicable to it.
func openWorking(ctx context.Context, sys system, e *env, lacks string) (store, error) {
	s, err := sys.open(ctx, e)
	if err != nil {
		return nil, err
	}
	if _, err := s.pending(ctx); errors.Is(err, errNoWorkers) {
		s.close()
		return nil, notApplicable("no workers")
	}
	if _, ok := s.(ceilingStore); ok {
		s.close()
		return nil, notApplicable("a ceiling: no " + lacks)
	}
	return s, nil
}

// closedLoopPeak measures the highest rate s sustains end to end: 64 producers submit as
// fast as they can while workers run, with at most peakBacklog jobs submitted but not
// started (a producer waits for a start before submitting beyond it), for d; the rate is
// the handler starts over the last three quarters of d. It returns once the workers
// stopped and nothing is pending, so the store is empty for the next measurement.
func closedLoopPeak(ctx context.Context, s store, workers int, d time.Duration) (float64, error) {
	credits := make(chan struct{}, peakBacklog)
	for range peakBacklog {
		credits <- struct{}{}
	}
	var starts atomic.Int64
	stop, err := s.work(ctx, workParams{concurrency: workers, handle: func(jobRef) {
		starts.Add(1)
		select {
		case credits <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		return 0, err
	}
	pctx, cancel := context.WithCancel(ctx)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for {
				select {
				case <-credits:
				case <-pctx.Done():
					return
				}
				if err := s.enqueue(pctx, newRef(peakSeqBase+next.Add(1))); err != nil {
					if pctx.Err() == nil {
						errs <- err
					}
					return
				}
			}
		})
	}
	warm := time.NewTimer(d / 4)
	select {
	case <-warm.C:
	case <-ctx.Done():
	}
	n0, t0 := starts.Load(), time.Now()
	select {
	case <-time.After(d - d/4):
	case <-ctx.Done():
	}
	n1, t1 := starts.Load(), time.Now()
	cancel()
	wg.Wait()
	close(errs)
	// Drain what the producers left, then stop the workers.
	for deadline := time.Now().Add(time.Minute); ctx.Err() == nil; {
		left, err := s.pending(ctx)
		if err != nil {
			return 0, err
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d jobs of the peak run still pending a minute after it", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer stopCancel()
	if err := stop(stopCtx); err != nil {
		return 0, fmt.Errorf("stop workers: %w", err)
	}
	if err := <-errs; err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(n1-n0) / t1.Sub(t0).Seconds(), nil
}

// percentiles returns the qs-quantiles of sorted, in milliseconds.
func percentiles(sorted []time.Duration, qs ...float64) []float64 {
	out := make([]float64, len(qs))
	for i, q := range qs {
		out[i] = float64(percentile(sorted, q)) / float64(time.Millisecond)
	}
	return out
}

// parsePeaks reads -peak: comma-separated system=jobs/s pairs.
func parsePeaks(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range splitList(s) {
		name, v, ok := strings.Cut(part, "=")
		rate, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || rate <= 0 {
			return nil, fmt.Errorf("-peak %q: want system=jobs/s pairs separated by commas, e.g. lakeshore=20000,river=3000", s)
		}
		out[strings.TrimSpace(name)] = rate
	}
	return out, nil
}
