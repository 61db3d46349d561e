package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A workload is one experiment run identically against every system. run measures one run
// on a fresh store and returns one value per metric; errNotApplicable (wrapped) says the
// system cannot do it.
type workload struct {
	name    string
	params  func(o *options) string
	metrics []metric
	run     func(ctx context.Context, h *harness, sys system, e *env) ([]float64, error)
}

// errNotApplicable marks a workload a system cannot run (no batch insert, no workers).
var errNotApplicable = errors.New("n/a")

func notApplicable(why string) error { return fmt.Errorf("%w: %s", errNotApplicable, why) }

var throughput = []metric{{name: "jobs/s", higher: true}}

func workloads() []workload {
	return []workload{
		{
			name: "enqueue-1",
			params: func(o *options) string {
				return fmt.Sprintf("enqueue %s jobs one call at a time from 1 goroutine (each run stops at %s)", thousands(int64(o.n)), o.maxTime)
			},
			metrics: throughput,
			run: func(ctx context.Context, h *harness, sys system, e *env) ([]float64, error) {
				return enqueueOneAtATime(ctx, h, sys, e, 1)
			},
		},
		{
			name: "enqueue-64",
			params: func(o *options) string {
				return fmt.Sprintf("enqueue %s jobs one call at a time from 64 goroutines (each run stops at %s)", thousands(int64(o.n)), o.maxTime)
			},
			metrics: throughput,
			run: func(ctx context.Context, h *harness, sys system, e *env) ([]float64, error) {
				return enqueueOneAtATime(ctx, h, sys, e, 64)
			},
		},
		batchWorkload(100),
		batchWorkload(1000),
		burnDownWorkload(1),
		burnDownWorkload(8),
		burnDownWorkload(64),
		{
			name: "latency",
			params: func(o *options) string {
				return fmt.Sprintf("open loop: %d jobs/s offered for %s (submits scheduled on a fixed timetable, each on its own "+
					"goroutine, never waiting for earlier ones), %d workers; enqueue→handler start and enqueue→result "+
					"readable by the producer; achieved = jobs ÷ (last handler start − first submit)",
					o.rate, o.latencyDuration, o.latencyConcurrency)
			},
			metrics: append(slices.Clone(latencyMetrics), metric{name: "result readable p50 (ms)"},
				metric{name: "result readable p90 (ms)"}, metric{name: "result readable p99 (ms)"}),
			run: runLatency,
		},
		{
			name: "latency-80",
			params: func(o *options) string {
				return fmt.Sprintf("peak: a closed loop of 64 producers (at most %s jobs submitted but not started) and %d "+
					"workers for %s, handler starts counted over its last three quarters (or -peak); then, once drained, "+
					"the open loop of `latency` at %d%% of that peak for %s, no results stored; enqueue→handler start",
					thousands(peakBacklog), o.peakWorkers, o.peakDuration, peakPercent, o.latencyDuration)
			},
			metrics: append([]metric{{name: "peak (jobs/s)", higher: true}, {name: "offered (jobs/s)", higher: true}},
				latencyMetrics...),
			run: runLatencyAtPeak,
		},
		{
			name: "crash",
			params: func(o *options) string {
				return fmt.Sprintf("%s no-op jobs pre-inserted, a worker process (%d workers) SIGKILLed after a third "+
					"of them ran, a new worker process started at once; recovery window (lease) %s", thousands(int64(o.crashJobs)),
					o.crashConcurrency, o.leaseTTL)
			},
			metrics: []metric{{name: "jobs lost"}, {name: "jobs run twice"}, {name: "kill → all terminal (s)"}},
			run:     runCrash,
		},
	}
}

// enqueueOneAtATime enqueues up to o.n jobs, one call each, from g goroutines, until
// o.maxTime passes.
func enqueueOneAtATime(ctx context.Context, h *harness, sys system, e *env, g int) ([]float64, error) {
	s, err := sys.open(ctx, e)
	if err != nil {
		return nil, err
	}
	defer s.close()
	var next atomic.Int64
	deadline := time.Now().Add(h.o.maxTime)
	start := time.Now()
	errs := make(chan error, g)
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for {
				seq := next.Add(1) - 1
				if seq >= int64(h.o.n) || time.Now().After(deadline) {
					next.Add(-1)
					return
				}
				if err := s.enqueue(ctx, newRef(seq)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return []float64{float64(next.Load()) / elapsed.Seconds()}, nil
}

func batchWorkload(size int) workload {
	return workload{
		name: fmt.Sprintf("batch-%d", size),
		params: func(o *options) string {
			return fmt.Sprintf("enqueue %s jobs in batches of %s, one batch call at a time (each run stops at %s)",
				thousands(int64(o.n)), thousands(int64(size)), o.maxTime)
		},
		metrics: throughput,
		run: func(ctx context.Context, h *harness, sys system, e *env) ([]float64, error) {
			s, err := sys.open(ctx, e)
			if err != nil {
				return nil, err
			}
			defer s.close()
			deadline := time.Now().Add(h.o.maxTime)
			start := time.Now()
			done := 0
			for done < h.o.n && time.Now().Before(deadline) {
				refs := make([]jobRef, min(size, h.o.n-done))
				for i := range refs {
					refs[i] = newRef(int64(done + i))
				}
				if err := s.enqueueBatch(ctx, refs); errors.Is(err, errNoBatch) {
					return nil, notApplicable("no batch insert")
				} else if err != nil {
					return nil, err
				}
				done += len(refs)
			}
			return []float64{float64(done) / time.Since(start).Seconds()}, nil
		},
	}
}

// filler is a store with its own fastest way to pre-insert jobs 0..n-1 (untimed).
type filler interface {
	fill(ctx context.Context, n int) error
}

// fill inserts jobs 0..n-1 as fast as the system allows (its own filler, else batches of
// 1,000 where it has a batch insert, else one call at a time from 64 goroutines). It is not
// timed.
func fill(ctx context.Context, s store, n int) error {
	if f, ok := s.(filler); ok {
		if err := f.fill(ctx, n); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		return nil
	}
	for done := 0; done < n; {
		refs := make([]jobRef, min(1000, n-done))
		for i := range refs {
			refs[i] = newRef(int64(done + i))
		}
		err := s.enqueueBatch(ctx, refs)
		if errors.Is(err, errNoBatch) {
			break
		}
		if err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		done += len(refs)
		if done == n {
			return nil
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for seq := next.Add(1) - 1; seq < int64(n); seq = next.Add(1) - 1 {
				if err := s.enqueue(ctx, newRef(seq)); err != nil {
					errs <- fmt.Errorf("fill: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func burnDownWorkload(c int) workload {
	return workload{
		name: fmt.Sprintf("burndown-%d", c),
		params: func(o *options) string {
			return fmt.Sprintf("work %s pre-inserted no-op jobs with %d concurrent workers; the clock stops when every "+
				"job ran and the workers stopped gracefully (completions stored) (each run stops at %s)",
				thousands(int64(o.n)), c, o.maxTime)
		},
		metrics: throughput,
		run: func(ctx context.Context, h *harness, sys system, e *env) ([]float64, error) {
			s, err := sys.open(ctx, e)
			if err != nil {
				return nil, err
			}
			defer s.close()
			if _, err := s.pending(ctx); errors.Is(err, errNoWorkers) {
				return nil, notApplicable("no workers")
			}
			if err := fill(ctx, s, h.o.n); err != nil {
				return nil, err
			}
			var ran atomic.Int64
			all := make(chan struct{})
			n := int64(h.o.n)
			start := time.Now()
			stop, err := s.work(ctx, workParams{concurrency: c, handle: func(jobRef) {
				if ran.Add(1) == n {
					close(all)
				}
			}})
			if err != nil {
				return nil, err
			}
			capped := false
			select {
			case <-all:
			case <-time.After(h.o.maxTime):
				capped = true
			case <-ctx.Done():
			}
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := stop(stopCtx); err != nil {
				return nil, fmt.Errorf("stop workers: %w", err)
			}
			elapsed := time.Since(start)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if !capped {
				left, err := s.pending(ctx)
				if err != nil {
					return nil, err
				}
				if left != 0 {
					return nil, fmt.Errorf("%d jobs not terminal after every job ran and the workers stopped", left)
				}
			}
			return []float64{float64(ran.Load()) / elapsed.Seconds()}, nil
		},
	}
}
