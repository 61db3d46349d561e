package lakeshore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// spyDriver records what a worker asks of the plane and can make heartbeats fail.
type spyDriver struct {
	plane.Driver

	mu         sync.Mutex
	claimSizes []int
	settles    map[string]int
	// settleAndClaims counts InvocationSettleAndClaim calls; chained, the jobs they claimed.
	settleAndClaims, chained int
	// settleBatches are the settle counts of the InvocationSettleAndClaim calls.
	settleBatches []int
	// noSettleAndClaim makes InvocationSettleAndClaim answer ErrNotImplemented.
	noSettleAndClaim atomic.Bool

	heartbeatsFail atomic.Bool
	heartbeats     atomic.Int64

	// claimQueues are the queues of every claim (claim and settle-and-claim), sorted.
	claimQueues [][]string
}

func (s *spyDriver) noteClaim(p *plane.ClaimParams) {
	qs := p.QueueNames()
	slices.Sort(qs)
	s.mu.Lock()
	s.claimQueues = append(s.claimQueues, qs)
	s.mu.Unlock()
}

func (s *spyDriver) InvocationClaimMany(ctx context.Context, p *plane.ClaimParams) ([]*plane.Job, error) {
	s.noteClaim(p)
	jobs, err := s.Driver.InvocationClaimMany(ctx, p)
	if len(jobs) > 0 {
		s.mu.Lock()
		s.claimSizes = append(s.claimSizes, len(jobs))
		s.mu.Unlock()
	}
	return jobs, err
}

func (s *spyDriver) InvocationSettleMany(ctx context.Context, ps []plane.SettleParams) ([]error, error) {
	s.mu.Lock()
	for _, p := range ps {
		s.settles[p.ID]++
	}
	s.mu.Unlock()
	return s.Driver.InvocationSettleMany(ctx, ps)
}

func (s *spyDriver) InvocationSettleAndClaim(ctx context.Context, ps []plane.SettleParams, p *plane.ClaimParams) ([]error, []*plane.Job, error) {
	if s.noSettleAndClaim.Load() {
		return nil, nil, plane.ErrNotImplemented
	}
	s.noteClaim(p)
	s.mu.Lock()
	s.settleBatches = append(s.settleBatches, len(ps))
	for _, p := range ps {
		s.settles[p.ID]++
	}
	s.mu.Unlock()
	errs, jobs, err := s.Driver.InvocationSettleAndClaim(ctx, ps, p)
	s.mu.Lock()
	s.settleAndClaims++
	if len(jobs) > 0 {
		s.claimSizes = append(s.claimSizes, len(jobs))
		s.chained += len(jobs)
	}
	s.mu.Unlock()
	return errs, jobs, err
}

func (s *spyDriver) InvocationHeartbeatMany(ctx context.Context, ps []plane.HeartbeatParams) ([]plane.HeartbeatResult, error) {
	s.heartbeats.Add(1)
	if s.heartbeatsFail.Load() {
		return nil, errors.New("spy: heartbeat unavailable")
	}
	return s.Driver.InvocationHeartbeatMany(ctx, ps)
}

func (s *spyDriver) settleCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settles[id]
}

func (s *spyDriver) maxClaim() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := 0
	for _, n := range s.claimSizes {
		m = max(m, n)
	}
	return m
}

// setupWorker opens a ":memory:" plane behind a spyDriver and a queue "test" on it.
func setupWorker(t *testing.T) (*lakeshore.Queue, *lakeshore.Dispatch, *spyDriver) {
	t.Helper()
	return setupWorkerBackoff(t, plane.Backoff{})
}

// setupWorkerBackoff is setupWorker with the plane's retry backoff (zero: the default).
func setupWorkerBackoff(t *testing.T, backoff plane.Backoff) (*lakeshore.Queue, *lakeshore.Dispatch, *spyDriver) {
	t.Helper()
	drv, err := sqliteplane.Open(t.Context(), ":memory:", &sqliteplane.Config{
		Logger:              testLogger(t),
		MaintenanceInterval: 20 * time.Millisecond,
		Backoff:             backoff,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, drv.Close()) })
	spy := &spyDriver{Driver: drv, settles: map[string]int{}}
	d := lakeshore.New(spy, &lakeshore.Config{Logger: testLogger(t)})
	q, err := d.Queue("test", nil)
	require.NoError(t, err)
	return q, d, spy
}

// claimAgain claims q's job once its lease expired and the plane re-queued it (a lease of
// a minute), waiting for it.
func claimAgain(t *testing.T, q *lakeshore.Queue) *lakeshore.Job {
	t.Helper()
	var job *lakeshore.Job
	waitFor(t, "the job to be claimable again", func() bool {
		j, err := q.Claim(t.Context(), &lakeshore.ClaimOptions{LeaseTTL: time.Minute, Wait: 50 * time.Millisecond})
		require.NoError(t, err)
		job = j
		return j != nil
	})
	return job
}

// runWorker runs RunWorker on a goroutine and returns a channel with its result.
func runWorker(t *testing.T, ctx context.Context, d *lakeshore.Dispatch, h []lakeshore.Handler, o *lakeshore.WorkerOptions) <-chan error {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	done := make(chan error, 1)
	go func() { done <- lakeshore.RunWorker(ctx, d, h, o) }()
	return done
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("RunWorker did not return")
		return nil
	}
}

func submitN(t *testing.T, q *lakeshore.Queue, n int, opts *lakeshore.SubmitOptions) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		id, err := q.Submit(t.Context(), i, opts)
		require.NoError(t, err)
		ids[i] = id
	}
	return ids
}

func state(t *testing.T, q *lakeshore.Queue, id string) *lakeshore.Invocation {
	t.Helper()
	inv, err := q.Get(t.Context(), id)
	require.NoError(t, err)
	return inv
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunWorker(t *testing.T) {
	t.Parallel()

	t.Run("SeveralQueuesOneClaim", func(t *testing.T) {
		t.Parallel()
		for _, concurrency := range []int{1, 4} {
			_, d, spy := setupWorker(t)
			qc, err := d.Queue("c", nil)
			require.NoError(t, err)
			var ran atomic.Int64
			fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
				if job.Queue != "c" {
					return nil, fmt.Errorf("job %s of queue %s ran on c's handler", job.ID, job.Queue)
				}
				ran.Add(1)
				return nil, nil
			}
			none := func(ctx context.Context, job *lakeshore.Job) (any, error) {
				return nil, fmt.Errorf("job %s of queue %s: no work was submitted there", job.ID, job.Queue)
			}
			// Work only on the last queue: the one claim waiting on all three gets it as
			// soon as it is submitted, not after a wait on each empty queue in turn.
			done := runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("a", none), lakeshore.Handle("b", none),
				lakeshore.Handle("c", fn)}, &lakeshore.WorkerOptions{MaxJobs: 10, Concurrency: concurrency, ClaimWait: time.Minute})
			time.Sleep(20 * time.Millisecond) // most likely waiting by now; either way it must get the jobs
			ids := submitN(t, qc, 10, nil)
			require.NoError(t, waitDone(t, done))
			require.EqualValues(t, 10, ran.Load())
			for _, id := range ids {
				require.Equal(t, lakeshore.StateSucceeded, state(t, qc, id).State)
			}
			spy.mu.Lock()
			require.NotEmpty(t, spy.claimQueues)
			for _, qs := range spy.claimQueues {
				require.Equal(t, []string{"a", "b", "c"}, qs, "concurrency %d: every claim waits on all three queues", concurrency)
			}
			spy.mu.Unlock()
		}
	})

	t.Run("MoreQueuesThanOneClaimNames", func(t *testing.T) {
		t.Parallel()
		// A claim names at most plane.ClaimQueuesLimit queues (the plane refuses more): a
		// worker of 150 queues of one order claims them in groups, and takes the job of the
		// last. Before, its one claim named all 150 and was refused at every turn.
		_, d, spy := setupWorker(t)
		names := make([]string, 150)
		handlers := make([]lakeshore.Handler, len(names))
		var ran atomic.Int64
		for i := range names {
			names[i] = fmt.Sprintf("q%03d", i)
			handlers[i] = lakeshore.Handle(names[i], func(ctx context.Context, job *lakeshore.Job) (any, error) {
				if job.Queue != names[len(names)-1] {
					return nil, fmt.Errorf("job %s of queue %s: no work was submitted there", job.ID, job.Queue)
				}
				ran.Add(1)
				return nil, nil
			})
		}
		last, err := d.Queue(names[len(names)-1], nil)
		require.NoError(t, err)
		ids := submitN(t, last, 1, nil)
		require.NoError(t, waitDone(t, runWorker(t, t.Context(), d, handlers, &lakeshore.WorkerOptions{MaxJobs: 1})))
		require.EqualValues(t, 1, ran.Load())
		require.Equal(t, lakeshore.StateSucceeded, state(t, last, ids[0]).State)
		spy.mu.Lock()
		defer spy.mu.Unlock()
		require.NotEmpty(t, spy.claimQueues)
		for _, qs := range spy.claimQueues {
			require.LessOrEqual(t, len(qs), plane.ClaimQueuesLimit, "a claim names at most the limit")
		}
	})

	t.Run("SequentialAcksAndClaimsInOneCall", func(t *testing.T) {
		t.Parallel()
		// Seven is re-queued with an hour's backoff: under the default (one second) a slow
		// run claimed it again as its twentieth job and left another job queued.
		q, d, spy := setupWorkerBackoff(t, plane.Backoff{Base: time.Hour, Max: time.Hour})
		ids := submitN(t, q, 20, nil)
		var order []int
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			var i int
			if err := job.Decode(&i); err != nil {
				return nil, err
			}
			order = append(order, i) // concurrency 1: one handler at a time
			if i == 7 {
				return nil, errors.New("seven fails")
			}
			return i * 2, nil
		}
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{ExitWhenIdle: true, MaxJobs: 20}))
		require.NoError(t, err)
		require.Len(t, order, 20, "MaxJobs bounds the jobs claimed with a settle too")
		for i, id := range ids {
			inv := state(t, q, id)
			if i == 7 {
				require.Equal(t, lakeshore.StateQueued, inv.State, "the nack re-queued it with a backoff")
				continue
			}
			require.Equal(t, lakeshore.StateSucceeded, inv.State)
			require.Equal(t, 1, spy.settleCount(id))
		}
		spy.mu.Lock()
		defer spy.mu.Unlock()
		require.Equal(t, 19, spy.chained, "every job after the first came with the settle of the one before")
		require.Equal(t, 19, spy.settleAndClaims, "every settle went through settle-and-claim but the last (MaxJobs reached: a plain settle)")
	})

	t.Run("ExitWhenIdleWaitsForQueuedJobs", func(t *testing.T) {
		// Jobs due but held back by their concurrency key — its rate limit, a "slow down"
		// hold on it — are work: an ExitWhenIdle worker runs them all before it returns,
		// rather than exit at the first empty claim and leave them with no worker. A
		// delayed job still is not (the worker returns with it queued).
		t.Parallel()
		for _, concurrency := range []int{1, 4} {
			q, d, _ := setupWorker(t)
			require.NoError(t, q.SetAdmission(t.Context(), lakeshore.Admission{KeyRateLimit: 4, KeyBurst: 1}))
			keyed := submitN(t, q, 3, &lakeshore.SubmitOptions{ConcurrencyKey: "k", MaxAttempts: 1})
			held := submitN(t, q, 2, &lakeshore.SubmitOptions{ConcurrencyKey: "h", MaxAttempts: 1})
			later := submitN(t, q, 1, &lakeshore.SubmitOptions{Delay: time.Hour})[0]
			var limited atomic.Bool
			fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
				if job.ConcurrencyKey == "h" && limited.CompareAndSwap(false, true) {
					return nil, lakeshore.RateLimited("h", 300*time.Millisecond) // holds h's other job back
				}
				return "ok", nil
			}
			err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
				&lakeshore.WorkerOptions{ExitWhenIdle: true, Concurrency: concurrency}))
			require.NoError(t, err)
			for _, id := range keyed {
				require.Equal(t, lakeshore.StateSucceeded, state(t, q, id).State, "concurrency %d: job %s ran", concurrency, id)
			}
			ran := 0
			for _, id := range held {
				if state(t, q, id).State == lakeshore.StateSucceeded {
					ran++
				}
			}
			require.Equal(t, 2, ran, "concurrency %d: the job the key's hold kept back ran, and so did the one handed back", concurrency)
			require.Equal(t, lakeshore.StateQueued, state(t, q, later).State)
		}
	})

	t.Run("ExitWhenIdleWaitsForItsSlowDown", func(t *testing.T) {
		// A job the handler answered "slow down" (RateLimited, with a key or without) is
		// only delayed: it is the worker's unfinished work, so an ExitWhenIdle worker runs
		// it again when its delay ends before it returns. Before, it returned at its next
		// empty claim and left the job queued with no worker (a delayed job it never ran
		// still does not keep it: ExitWhenIdleWaitsForQueuedJobs).
		t.Parallel()
		for _, key := range []string{"", "k"} {
			q, d, _ := setupWorker(t)
			id := submitN(t, q, 1, &lakeshore.SubmitOptions{ConcurrencyKey: "k", MaxAttempts: 1})[0]
			var runs atomic.Int32
			fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
				if runs.Add(1) == 1 {
					return nil, lakeshore.RateLimited(key, 300*time.Millisecond)
				}
				return "ok", nil
			}
			err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
				&lakeshore.WorkerOptions{ExitWhenIdle: true}))
			require.NoError(t, err)
			require.Equal(t, int32(2), runs.Load(), "key %q: the job ran again after its slow down", key)
			require.Equal(t, lakeshore.StateSucceeded, state(t, q, id).State, "key %q", key)
		}

		// In a queue paused meanwhile the job does not keep the worker, as no other job of a
		// paused queue does: nothing claims it until the queue is resumed.
		q, d, _ := setupWorker(t)
		id := submitN(t, q, 1, &lakeshore.SubmitOptions{MaxAttempts: 1})[0]
		var runs atomic.Int32
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			runs.Add(1)
			if _, err := q.Pause(ctx); err != nil {
				return nil, err
			}
			return nil, lakeshore.RateLimited("", 300*time.Millisecond)
		}
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{ExitWhenIdle: true}))
		require.NoError(t, err)
		require.Equal(t, int32(1), runs.Load())
		require.Equal(t, lakeshore.StateQueued, state(t, q, id).State, "left for a resume")

		// A job cancelled while it waits out a long "slow down" is no work: the worker
		// returns without waiting for the delay's end. Before, it did not read the job
		// until its due time and so claimed for the hour it was told to slow down for.
		q, d, _ = setupWorker(t)
		ids := submitN(t, q, 2, &lakeshore.SubmitOptions{MaxAttempts: 1}) // FIFO: 0 runs first
		var slowed atomic.Int32
		fn = func(ctx context.Context, job *lakeshore.Job) (any, error) {
			var n int
			if err := job.Decode(&n); err != nil {
				return nil, err
			}
			if n == 0 {
				slowed.Add(1)
				return nil, lakeshore.RateLimited("", time.Hour)
			}
			_, err := q.Cancel(ctx, ids[0]) // the slowed-down job, handed back by now
			return "ok", err
		}
		err = waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{ExitWhenIdle: true}))
		require.NoError(t, err)
		require.Equal(t, int32(1), slowed.Load(), "the first job was handed back before the second ran")
		require.Equal(t, lakeshore.StateCancelled, state(t, q, ids[0]).State)
	})

	t.Run("ExitWhenIdleClaimsAfterItsCheck", func(t *testing.T) {
		// A fire that lands between an empty claim and the idle check (the plane's
		// maintenance firing a due tick just then) is claimable, yet the check cannot see
		// it: the tick is no longer due and the job is held by no key. Before, the worker
		// stopped with the fire queued (python/tests/test_worker_limits.py's
		// test_exit_when_idle_runs_a_due_schedule_tick failed so under load); it now claims
		// once more after an empty check and runs it. The wrapper submits the "fire" at the
		// first check, exactly in that window.
		t.Parallel()
		back, err := sqliteplane.Open(t.Context(), ":memory:", &sqliteplane.Config{Logger: testLogger(t)})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, back.Close()) })
		drv := &fireAtFirstCheck{Driver: back, ns: plane.NamespaceDefault, queue: "eval"}
		d := lakeshore.New(drv, &lakeshore.Config{Logger: testLogger(t)})
		var ran []string
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			var p string
			if err := job.Decode(&p); err != nil {
				return nil, err
			}
			ran = append(ran, p) // concurrency 1
			return nil, nil
		}
		require.NoError(t, waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("eval", fn)},
			&lakeshore.WorkerOptions{ExitWhenIdle: true})))
		require.True(t, drv.fired.Load(), "the check ran")
		require.Equal(t, []string{"fire"}, ran, "the fire that landed between the empty claim and the check ran")
	})

	t.Run("ExitWhenIdleWaitsForDueScheduleTicks", func(t *testing.T) {
		// A schedule of a served queue whose tick is due is work: the plane's maintenance
		// submits its fire within an interval, and an ExitWhenIdle worker runs it before it
		// returns. Before, a worker started after a tick came (the embedded plane with no
		// server running: `lakeshore worker --exit-when-idle` from a timer) found its first
		// claim empty and returned before its own plane's maintenance fired the tick, so
		// such workers never ran a schedule's jobs. A paused schedule, one of another
		// queue and a tick still to come are not work.
		t.Parallel()
		var mu sync.Mutex
		now := time.Date(2031, time.January, 1, 0, 0, 0, 500_000_000, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		drv, err := sqliteplane.Open(t.Context(), ":memory:", &sqliteplane.Config{Logger: testLogger(t), Now: clock,
			MaintenanceInterval: 300 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, drv.Close()) })
		d := lakeshore.New(drv, &lakeshore.Config{Logger: testLogger(t), Now: clock})
		q, err := d.Queue("eval", nil)
		require.NoError(t, err)
		other, err := d.Queue("other", nil)
		require.NoError(t, err)
		_, err = q.Schedule(t.Context(), "every-second", "tick", &lakeshore.ScheduleOptions{Every: time.Second})
		require.NoError(t, err)
		_, err = q.Schedule(t.Context(), "paused", "paused", &lakeshore.ScheduleOptions{Every: time.Second, Paused: true})
		require.NoError(t, err)
		_, err = q.Schedule(t.Context(), "hourly", "hourly", &lakeshore.ScheduleOptions{Every: time.Hour})
		require.NoError(t, err)
		_, err = other.Schedule(t.Context(), "elsewhere", "elsewhere", &lakeshore.ScheduleOptions{Every: time.Second})
		require.NoError(t, err)
		mu.Lock()
		now = now.Add(2 * time.Second) // every-second's tick is due; maintenance fires it at its next pass
		mu.Unlock()
		var ran []string
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			var p string
			if err := job.Decode(&p); err != nil {
				return nil, err
			}
			ran = append(ran, p) // concurrency 1
			return nil, nil
		}
		require.NoError(t, waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("eval", fn)},
			&lakeshore.WorkerOptions{ExitWhenIdle: true})))
		require.Equal(t, []string{"tick"}, ran, "the due tick's fire ran; nothing else was waited for")
	})

	t.Run("OnceWithMaxJobsAboveOneRefused", func(t *testing.T) {
		// Once runs one job: a MaxJobs above 1 with it contradicts it and is refused before
		// anything is claimed (lakeshore worker --once --max-jobs 5, Python's run_worker
		// refuses it too); before, it was set to 1 without a word. MaxJobs 1 or 0 is fine.
		t.Parallel()
		q, d, _ := setupWorker(t)
		ids := submitN(t, q, 2, nil)
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) { return "ok", nil }
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Once: true, MaxJobs: 2}))
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.Equal(t, lakeshore.StateQueued, state(t, q, ids[0]).State, "nothing claimed")
		require.NoError(t, waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Once: true, MaxJobs: 1})))
		require.Equal(t, lakeshore.StateSucceeded, state(t, q, ids[0]).State)
		require.Equal(t, lakeshore.StateQueued, state(t, q, ids[1]).State, "one job")
	})

	t.Run("ConcurrencyAboveOneClaim", func(t *testing.T) {
		// A concurrency above plane.ClaimMaxLimit claims at most that many jobs at once;
		// before, its claims asked for Concurrency jobs and the plane refused every one
		// ("invalid max 1001"), so the worker stopped at its first claim. A lease or batch
		// size the plane would refuse is refused before anything is claimed.
		t.Parallel()
		q, d, _ := setupWorker(t)
		ids := submitN(t, q, 3, nil)
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) { return "ok", nil }
		require.NoError(t, waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{ExitWhenIdle: true, Concurrency: plane.ClaimMaxLimit + 1})))
		for _, id := range ids {
			require.Equal(t, lakeshore.StateSucceeded, state(t, q, id).State)
		}
		later := submitN(t, q, 1, nil)[0]
		for _, o := range []lakeshore.WorkerOptions{
			{ExitWhenIdle: true, BatchSize: plane.ClaimMaxLimit + 1},
			{ExitWhenIdle: true, LeaseTTL: plane.LeaseTTLMax + time.Second},
		} {
			err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)}, &o))
			require.ErrorIs(t, err, lakeshore.ErrInvalid, "%+v", o)
			require.Equal(t, lakeshore.StateQueued, state(t, q, later).State, "%+v: nothing claimed", o)
		}
	})

	t.Run("BatchClaimingUnderConcurrency", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		ids := submitN(t, q, 40, nil)

		const concurrency = 4
		var active, peak atomic.Int64
		allIn := make(chan struct{})
		var once sync.Once
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			n := active.Add(1)
			defer active.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			if n == concurrency {
				once.Do(func() { close(allIn) })
			}
			select { // the first handlers wait until the pool is full
			case <-allIn:
			case <-time.After(5 * time.Second):
			}
			var i int
			if err := job.Decode(&i); err != nil {
				return nil, err
			}
			return i * 2, nil
		}
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Concurrency: concurrency, ExitWhenIdle: true}))
		require.NoError(t, err)
		require.Equal(t, int64(concurrency), peak.Load(), "the pool filled and never overflowed")
		require.Greater(t, spy.maxClaim(), 1, "claims were batched")
		for i, id := range ids {
			var got int
			require.NoError(t, q.Result(t.Context(), id, &got, nil))
			require.Equal(t, i*2, got)
		}
	})

	t.Run("Once", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		ids := submitN(t, q, 3, nil)
		var calls atomic.Int64
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) { calls.Add(1); return "ok", nil }
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Once: true, Concurrency: 8}))
		require.NoError(t, err)
		require.Equal(t, int64(1), calls.Load())
		require.Equal(t, lakeshore.StateSucceeded, state(t, q, ids[0]).State)
		n, err := q.Len(t.Context())
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
	})

	t.Run("OnceWaitsForAJob", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		done := runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test",
			func(ctx context.Context, job *lakeshore.Job) (any, error) { return "late", nil })},
			&lakeshore.WorkerOptions{Once: true})
		select {
		case err := <-done:
			t.Fatalf("Once returned before any job: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		id := submitN(t, q, 1, nil)[0]
		require.NoError(t, waitDone(t, done))
		require.Equal(t, lakeshore.StateSucceeded, state(t, q, id).State)
	})

	t.Run("MaxJobs", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		submitN(t, q, 10, nil)
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test",
			func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })},
			&lakeshore.WorkerOptions{MaxJobs: 7, Concurrency: 3}))
		require.NoError(t, err)
		n, err := q.Count(t.Context(), lakeshore.StateSucceeded)
		require.NoError(t, err)
		require.Equal(t, int64(7), n)
		n, err = q.Len(t.Context())
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
	})

	t.Run("ErrorsAndPanicsNackWithRetry", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		panicky := submitN(t, q, 1, &lakeshore.SubmitOptions{MaxAttempts: 2})[0]
		failing := submitN(t, q, 1, &lakeshore.SubmitOptions{MaxAttempts: 1})[0]
		permanent := submitN(t, q, 1, &lakeshore.SubmitOptions{MaxAttempts: 5})[0]
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			switch job.ID {
			case panicky:
				if job.Attempt == 1 {
					panic("boom")
				}
				return "recovered", nil
			case failing:
				return nil, errors.New("bad day")
			default:
				return nil, lakeshore.Permanent(errors.New("never"))
			}
		}
		// The retry backoff is 1 s or more: let the worker wait for it.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := runWorker(t, ctx, d, []lakeshore.Handler{lakeshore.Handle("test", fn)}, &lakeshore.WorkerOptions{Concurrency: 2})
		var got string
		require.NoError(t, q.Result(t.Context(), panicky, &got, &lakeshore.ResultOptions{Timeout: 15 * time.Second}))
		require.Equal(t, "recovered", got)
		require.Equal(t, 2, state(t, q, panicky).Attempt, "the panic was retried")

		var terr *lakeshore.TerminalError
		err := q.Result(t.Context(), failing, nil, nil)
		require.ErrorAs(t, err, &terr)
		require.Contains(t, terr.Info.Message, "bad day")
		err = q.Result(t.Context(), permanent, nil, nil)
		require.ErrorAs(t, err, &terr)
		require.Equal(t, 1, state(t, q, permanent).Attempt, "a permanent error is not retried")
		cancel()
		require.ErrorIs(t, waitDone(t, done), context.Canceled)
	})

	t.Run("PanicRecorded", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		id := submitN(t, q, 1, &lakeshore.SubmitOptions{MaxAttempts: 1})[0]
		err := waitDone(t, runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test",
			func(ctx context.Context, job *lakeshore.Job) (any, error) { panic(fmt.Sprintf("boom %d", job.Attempt)) })},
			&lakeshore.WorkerOptions{Once: true}))
		require.NoError(t, err)
		inv := state(t, q, id)
		require.Equal(t, lakeshore.StateFailed, inv.State)
		require.Equal(t, lakeshore.ErrorTypePanic, inv.Error.Type)
		require.Contains(t, inv.Error.Message, "boom 1")
	})

	t.Run("KillCancelsContext", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		id := submitN(t, q, 1, nil)[0]
		started := make(chan struct{})
		cause := make(chan error, 1)
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return "too late", nil // must not be acked
		}
		// A lease of a minute beaten every 100 ms: the kill is learnt at a heartbeat, not at
		// the lease's end. (A 600 ms lease beaten every 200 ms, with "within 500 ms" as the
		// bound, failed whenever a loaded machine ran the worker's ticker late.)
		const lease, interval = time.Minute, 100 * time.Millisecond
		done := runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Once: true, LeaseTTL: lease, HeartbeatInterval: interval})
		<-started
		killed, err := q.Kill(t.Context(), id)
		require.NoError(t, err)
		require.True(t, killed)
		select {
		case err := <-cause:
			require.ErrorIs(t, err, lakeshore.ErrLeaseLost)
		case <-time.After(lease / 2):
			t.Fatal("the handler's context was not cancelled after the kill (by a heartbeat, well before the lease's end)")
		}
		require.NoError(t, waitDone(t, done))
		require.Zero(t, spy.settleCount(id), "a killed job is not settled")
		require.Equal(t, lakeshore.StateKilled, state(t, q, id).State)
	})

	t.Run("LeaseLost", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		id := submitN(t, q, 1, nil)[0]
		started := make(chan struct{})
		cause := make(chan error, 1)
		spy.heartbeatsFail.Store(true) // the worker cannot extend its lease
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return "stale", nil
		}
		done := runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Once: true, LeaseTTL: 300 * time.Millisecond})
		<-started
		// The lease expires, the plane re-queues the job, and another worker claims it.
		other := claimAgain(t, q)
		require.Equal(t, 2, other.Attempt)
		spy.heartbeatsFail.Store(false) // the next heartbeat learns the lease is gone
		select {
		case err := <-cause:
			require.ErrorIs(t, err, lakeshore.ErrLeaseLost)
		case <-time.After(5 * time.Second):
			t.Fatal("the handler's context was not cancelled after its lease was lost")
		}
		require.NoError(t, waitDone(t, done))
		require.Zero(t, spy.settleCount(id), "the stale worker settled nothing")
		require.NoError(t, q.Ack(t.Context(), other, "fresh"))
		var got string
		require.NoError(t, q.Result(t.Context(), id, &got, nil))
		require.Equal(t, "fresh", got)
	})

	// A worker whose heartbeats cannot reach the plane stops its handler (cause
	// ErrLeaseLost) before the lease it could not extend ends: the plane re-queues the job
	// then and another worker runs it, and nothing the stale handler does can be settled.
	// Before, the handler ran on until a heartbeat reached the plane again (for ever, in an
	// outage), beside the next attempt.
	t.Run("LeaseEndsWhileThePlaneIsUnreachable", func(t *testing.T) {
		t.Parallel()
		q, d, spy := setupWorker(t)
		id := submitN(t, q, 1, nil)[0]
		started := make(chan time.Time, 1)
		cause := make(chan error, 1)
		spy.heartbeatsFail.Store(true)
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			started <- time.Now()
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return "stale", nil
		}
		// The handler stops a heartbeat before the lease's end. No heartbeat reaches the plane
		// and nothing kills the job, so a cause of ErrLeaseLost is that rule's
		// (execution.unrenewed); how soon it came is not asserted, which a loaded machine
		// running the worker's ticker late failed (the bound was the lease plus 500 ms).
		// The rule's absence ran the handler for ever.
		const lease = 900 * time.Millisecond
		done := runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Once: true, LeaseTTL: lease})
		<-started
		select {
		case err := <-cause:
			require.ErrorIs(t, err, lakeshore.ErrLeaseLost, "stopped by the lease's end")
		case <-time.After(30 * time.Second):
			t.Fatal("the handler ran on past its lease while the plane did not answer its heartbeats")
		}
		require.NoError(t, waitDone(t, done))
		require.Zero(t, spy.settleCount(id), "the stale worker settled nothing")
		// Queue.Working's own heartbeat does the same.
		spy.heartbeatsFail.Store(false)
		require.NoError(t, q.Nack(t.Context(), claimAgain(t, q), errors.New("again"), true))
		spy.heartbeatsFail.Store(true)
		handled, err := q.Working(t.Context(), func(ctx context.Context, job *lakeshore.Job) (any, error) {
			select {
			case <-ctx.Done():
				require.ErrorIs(t, context.Cause(ctx), lakeshore.ErrLeaseLost, "stopped by the lease's end")
			case <-time.After(30 * time.Second):
				t.Error("Working's handler ran on past its lease while the plane did not answer its heartbeats")
			}
			return "stale", nil
		}, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{LeaseTTL: lease, Wait: 5 * time.Second}})
		require.True(t, handled)
		require.ErrorIs(t, err, lakeshore.ErrLeaseLost)
	})

	t.Run("StopDrains", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		first := submitN(t, q, 2, nil)
		started := make(chan string, 10)
		release := make(chan struct{})
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			started <- job.ID
			<-release
			return "finished", ctx.Err()
		}
		w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Concurrency: 4, ClaimWait: 20 * time.Millisecond, Logger: testLogger(t)})
		require.NoError(t, err)
		require.NoError(t, w.Start(t.Context()))
		<-started
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- w.Stop(t.Context()) }()
		// Jobs submitted once the worker says it stopped claiming (its claim loops ended)
		// stay queued, though two slots are free and a settle could claim for them.
		require.Eventually(t, func() bool { return w.Phase() == lakeshore.PhaseDraining }, 10*time.Second, time.Millisecond)
		later := submitN(t, q, 2, nil)
		time.Sleep(100 * time.Millisecond)
		select {
		case <-w.Done():
			t.Fatal("Stop returned before the running handlers finished")
		default:
		}
		close(release)
		require.NoError(t, waitDone(t, stopped))
		require.NoError(t, w.Err())
		for _, id := range first {
			require.Equal(t, lakeshore.StateSucceeded, state(t, q, id).State, "running jobs finish")
		}
		for _, id := range later {
			require.Equal(t, lakeshore.StateQueued, state(t, q, id).State, "nothing new is claimed")
		}
		require.Len(t, started, 0)
	})

	t.Run("StopAndCancel", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		ids := submitN(t, q, 2, nil)
		started := make(chan struct{}, 2)
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Concurrency: 2, Logger: testLogger(t)})
		require.NoError(t, err)
		require.NoError(t, w.Start(t.Context()))
		<-started
		<-started
		require.NoError(t, w.StopAndCancel(t.Context()))
		for _, id := range ids {
			inv := state(t, q, id)
			require.Equal(t, lakeshore.StateQueued, inv.State, "nacked for retry")
			require.NotNil(t, inv.Error)
			require.Contains(t, inv.Error.Message, "running handlers cancelled")
		}
	})

	t.Run("StopAfterDrainTimesOutThenCancel", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		id := submitN(t, q, 1, nil)[0]
		started := make(chan struct{}, 1)
		fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("test", fn)}, &lakeshore.WorkerOptions{Logger: testLogger(t)})
		require.NoError(t, err)
		require.NoError(t, w.Start(t.Context()))
		<-started
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, w.Stop(ctx), context.DeadlineExceeded, "the drain outlives Stop's ctx")
		require.NoError(t, w.StopAndCancel(t.Context()))
		require.Equal(t, lakeshore.StateQueued, state(t, q, id).State)
	})

	t.Run("Lifecycle", func(t *testing.T) {
		t.Parallel()
		_, d, _ := setupWorker(t)
		w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("test",
			func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })}, &lakeshore.WorkerOptions{Logger: testLogger(t)})
		require.NoError(t, err)
		require.NoError(t, w.Stop(t.Context()), "stopping a worker never started does nothing")
		require.NotEmpty(t, w.ID())
		require.NoError(t, w.Start(t.Context()))
		require.Error(t, w.Start(t.Context()), "a worker starts once")
		require.NoError(t, w.Stop(t.Context()))
		<-w.Done()
		require.NoError(t, w.Err())
		require.NoError(t, w.Stop(t.Context()), "stopping twice is harmless")
	})

	t.Run("StartCtxEnds", func(t *testing.T) {
		t.Parallel()
		_, d, _ := setupWorker(t)
		w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("test",
			func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })}, &lakeshore.WorkerOptions{Logger: testLogger(t)})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		require.NoError(t, w.Start(ctx))
		cancel()
		<-w.Done()
		require.ErrorIs(t, w.Err(), context.Canceled)
	})

	t.Run("GoexitReleasesJob", func(t *testing.T) {
		// A handler that ends its goroutine with runtime.Goexit (t.FailNow in a handler)
		// used to leave its job running forever, heartbeated by the worker.
		t.Parallel()
		q, d, _ := setupWorker(t)
		id := submitN(t, q, 1, nil)[0]
		calls := 0
		done := runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test",
			func(ctx context.Context, job *lakeshore.Job) (any, error) {
				calls++
				if calls == 1 {
					runtime.Goexit()
				}
				return "second attempt", nil
			})}, &lakeshore.WorkerOptions{MaxJobs: 1, Logger: testLogger(t)})
		require.NoError(t, waitDone(t, done))
		inv := state(t, q, id)
		require.Equal(t, lakeshore.StateQueued, inv.State, "nacked with retry, not left running")
		require.NotNil(t, inv.Error)
		require.Contains(t, inv.Error.Message, "runtime.Goexit")
	})

	t.Run("Registry", func(t *testing.T) {
		t.Parallel()
		// Each heartbeat refreshes the registration: one every 50 ms of a minute's lease
		// refreshes it soon, and the held job's lease cannot run out while the test reads.
		// (A 300 ms lease did when a loaded machine ran the heartbeat 200 ms late; the
		// job's ack was then refused.)
		q, d, _ := setupWorker(t)
		id := submitN(t, q, 1, nil)[0]
		release := make(chan struct{})
		started := make(chan struct{})
		done := runWorker(t, t.Context(), d, []lakeshore.Handler{
			lakeshore.Handle("test", func(ctx context.Context, job *lakeshore.Job) (any, error) {
				close(started)
				<-release
				return nil, nil
			}),
			lakeshore.Handle("other", func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil }),
		}, &lakeshore.WorkerOptions{Once: true, ID: "w1", LeaseTTL: time.Minute, HeartbeatInterval: 50 * time.Millisecond})
		<-started
		ws, err := d.Driver().WorkerList(t.Context(), &plane.WorkerListParams{})
		require.NoError(t, err)
		require.Len(t, ws, 1)
		require.Equal(t, "w1", ws[0].ID)
		require.Equal(t, os.Getpid(), ws[0].PID)
		require.ElementsMatch(t, []string{"test", "other"}, ws[0].Queues)
		first := ws[0].LastSeen
		waitFor(t, "a refresh of the registration", func() bool {
			ws, err := d.Driver().WorkerList(t.Context(), &plane.WorkerListParams{})
			require.NoError(t, err)
			return len(ws) == 1 && ws[0].LastSeen.After(first)
		})
		close(release)
		require.NoError(t, waitDone(t, done))
		require.Equal(t, lakeshore.StateSucceeded, state(t, q, id).State)
		ws, err = d.Driver().WorkerList(t.Context(), &plane.WorkerListParams{})
		require.NoError(t, err)
		require.Empty(t, ws, "a clean stop deregisters")
	})

	t.Run("ContextCancelNacks", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		id := submitN(t, q, 1, nil)[0]
		started := make(chan struct{})
		ctx, cancel := context.WithCancel(t.Context())
		done := runWorker(t, ctx, d, []lakeshore.Handler{lakeshore.Handle("test",
			func(ctx context.Context, job *lakeshore.Job) (any, error) {
				close(started)
				<-ctx.Done()
				return nil, ctx.Err()
			})}, &lakeshore.WorkerOptions{})
		<-started
		cancel()
		require.ErrorIs(t, waitDone(t, done), context.Canceled)
		require.Equal(t, lakeshore.StateQueued, state(t, q, id).State)
	})

	t.Run("PlaneClosed", func(t *testing.T) {
		t.Parallel()
		drv, err := sqliteplane.Open(t.Context(), ":memory:", &sqliteplane.Config{Logger: testLogger(t)})
		require.NoError(t, err)
		d := lakeshore.New(drv, &lakeshore.Config{Logger: testLogger(t)})
		done := runWorker(t, t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test",
			func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })}, &lakeshore.WorkerOptions{ClaimWait: 20 * time.Millisecond})
		require.NoError(t, drv.Close())
		require.ErrorIs(t, waitDone(t, done), lakeshore.ErrClosed)
	})

	t.Run("BadOptions", func(t *testing.T) {
		t.Parallel()
		_, d, _ := setupWorker(t)
		noop := lakeshore.Handle("test", func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })
		for name, tc := range map[string]struct {
			h []lakeshore.Handler
			o *lakeshore.WorkerOptions
		}{
			"NoHandlers":     {nil, nil},
			"TwiceOneQueue":  {[]lakeshore.Handler{noop, noop}, nil},
			"BadQueue":       {[]lakeshore.Handler{lakeshore.Handle("../x", noop.Func)}, nil},
			"NilFunc":        {[]lakeshore.Handler{lakeshore.Handle("test", nil)}, nil},
			"Concurrency":    {[]lakeshore.Handler{noop}, &lakeshore.WorkerOptions{Concurrency: -1}},
			"HeartbeatLease": {[]lakeshore.Handler{noop}, &lakeshore.WorkerOptions{LeaseTTL: time.Second, HeartbeatInterval: 2 * time.Second}},
		} {
			err := lakeshore.RunWorker(t.Context(), d, tc.h, tc.o)
			require.ErrorIs(t, err, lakeshore.ErrInvalid, name)
		}
	})
}

// TestRunWorkerRefusedByThePlane: a worker whose token may not consume from its queue stops
// at once with ErrForbidden instead of retrying forever (a real server with auth on loopback).
func TestRunWorkerRefusedByThePlane(t *testing.T) {
	t.Parallel()
	drv, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { drv.Close() })
	srv := server.New(drv, &server.Config{AdminToken: "lks_admin-secret"})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Stop()
	})
	const producer = "lks_producer-secret"
	require.NoError(t, drv.TokenCreate(t.Context(), &plane.TokenInfo{ID: "producer", Hash: server.HashToken(producer),
		Namespace: "*", Queue: "*", Permissions: []plane.Permission{plane.PermissionSubmit}}))
	d, err := lakeshore.Open(t.Context(), ts.URL, &lakeshore.Config{HTTP: &httpplane.Config{Token: producer}})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	noop := lakeshore.Handle("train", func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err = lakeshore.RunWorker(ctx, d, []lakeshore.Handler{noop}, &lakeshore.WorkerOptions{Once: true})
	require.ErrorIs(t, err, lakeshore.ErrForbidden)
	require.NoError(t, ctx.Err(), "it stopped at once, not when the test gave up")
}

// fireAtFirstCheck is a plane whose first QueueStatsList (an ExitWhenIdle worker's idle
// check, after an empty claim) first submits a job to queue, as the plane's maintenance
// firing a schedule's due tick in that window would.
type fireAtFirstCheck struct {
	plane.Driver
	ns, queue string
	fired     atomic.Bool
}

func (f *fireAtFirstCheck) QueueStatsList(ctx context.Context, namespace string) ([]plane.QueueStats, error) {
	if f.fired.CompareAndSwap(false, true) {
		payload, err := wire.Marshal("fire")
		if err != nil {
			return nil, err
		}
		if _, err := f.Driver.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: f.ns, Queue: f.queue,
			Invocations: []plane.SubmitParams{{Payload: payload}}}); err != nil {
			return nil, err
		}
	}
	return f.Driver.QueueStatsList(ctx, namespace)
}
