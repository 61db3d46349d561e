package lakeshore

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestRefusedSettleFailsTheAttempt: when the plane refuses a handler's settle as invalid,
// the worker does not leave the job running until its lease expires: it settles the
// attempt as failed instead (error type settle_refused, the handler's error and the
// refusal in its message) — re-queued while attempts remain, else failed. The refusal is
// made by a real plane: the settle is sent with a delay it refuses.
func TestRefusedSettleFailsTheAttempt(t *testing.T) {
	t.Parallel()
	d, err := Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	q, err := d.Queue("refused", nil)
	require.NoError(t, err)
	for _, c := range []struct {
		maxAttempts int
		want        State
	}{{2, StateQueued}, {1, StateFailed}} {
		id, err := q.Submit(t.Context(), 1, &SubmitOptions{MaxAttempts: c.maxAttempts})
		require.NoError(t, err)
		job, err := q.Claim(t.Context(), &ClaimOptions{Wait: 5 * time.Second})
		require.NoError(t, err)
		require.Equal(t, id, job.ID)
		e := &execution{q: q, job: job, cancel: func(error) {}, logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
			fn: func(context.Context, *Job) (any, error) { return nil, errors.New("boom") },
			settleFn: func(ctx context.Context, p plane.SettleParams) error {
				p.RetryDelay = -time.Second // a settle the plane refuses
				return q.settle(ctx, p)
			}}
		runErr := e.run(t.Context(), t.Context())
		require.ErrorIs(t, runErr, ErrInvalid, "the refusal is reported")
		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, c.want, inv.State, "max attempts %d: not left running", c.maxAttempts)
		require.Equal(t, 1, inv.Attempt)
		require.Equal(t, ErrorTypeSettleRefused, inv.Error.Type)
		require.Contains(t, inv.Error.Message, "boom")
		require.Contains(t, inv.Error.Message, "retry_delay")
	}
}

// TestHeldUntilIsMonotonic: the end of a job's lease as the execution reckons it, from the
// claim and from each heartbeat the plane accepted, is on this process's monotonic clock
// (time.Time's "m=" reading), so a step of the machine's wall clock (NTP correcting a
// skewed clock) does not move it. Before, a renewal was kept as Unix nanoseconds, a wall
// clock reading only.
func TestHeldUntilIsMonotonic(t *testing.T) {
	t.Parallel()
	d, err := Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	q, err := d.Queue("held", nil)
	require.NoError(t, err)
	_, err = q.Submit(t.Context(), 1, nil)
	require.NoError(t, err)
	job, err := q.Claim(t.Context(), &ClaimOptions{Wait: 5 * time.Second, LeaseTTL: time.Minute})
	require.NoError(t, err)
	e := &execution{q: q, job: job, cancel: func(error) {}, logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	require.Contains(t, e.heldUntil().String(), " m=", "the claim's reckoning")
	sent := time.Now()
	e.renewed(sent)
	require.Contains(t, e.heldUntil().String(), " m=", "a renewal's reckoning")
	require.Equal(t, time.Minute, e.heldUntil().Sub(sent))
}

// TestStopWaitingOnAPanickingHostSetup: a Stop that is waiting for OnHostSetup (its stop
// recorded, seen here under the worker's lock: no timing) when the hook panics returns nil,
// and Start fails with the *PanicError. TestWorkerHooksThatPanic calls Stop from another
// goroutine without knowing whether it reached that wait before the panic, so it may test
// only a Stop after Start returned; this one holds the panic until it has.
func TestStopWaitingOnAPanickingHostSetup(t *testing.T) {
	t.Parallel()
	d, err := Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	handler := Handle("setup-panic", func(context.Context, *Job) (any, error) { return nil, nil })
	stopWaits, panicNow := make(chan struct{}), make(chan struct{})
	w, err := NewWorker(d, []Handler{handler}, &WorkerOptions{
		OnHostSetup: func(context.Context) error {
			close(stopWaits)
			<-panicNow
			panic("no model file")
		},
	})
	require.NoError(t, err)
	started := make(chan error, 1)
	go func() { started <- w.Start(t.Context()) }()
	<-stopWaits
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(t.Context()) }()
	for recorded := false; !recorded; {
		w.mu.Lock()
		recorded = w.stopCause != nil // Stop took the lock and is waiting for the set-up
		w.mu.Unlock()
		if !recorded {
			time.Sleep(time.Millisecond) // polling a condition, not a verdict
		}
	}
	close(panicNow)
	var pe *PanicError
	require.ErrorAs(t, <-started, &pe)
	require.NoError(t, <-stopped, "a Stop waiting on a set-up that panicked returns")
	require.Equal(t, PhaseSetup, w.Phase(), "the worker never started")
}

// TestHandedBackForgottenWhenClaimedAgain: an ExitWhenIdle worker's record of a job its
// handler answered "slow down" (Worker.handedBack) ends when the worker claims that job
// again, so a long-running worker whose claims never come back empty (the only time the
// idle check read and pruned the record) does not keep one entry for every job ever slowed
// down. Before, the entry stayed while the job ran again and after it ended.
func TestHandedBackForgottenWhenClaimedAgain(t *testing.T) {
	t.Parallel()
	d, err := Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	q, err := d.Queue("slowed", nil)
	require.NoError(t, err)
	id, err := q.Submit(t.Context(), 1, nil)
	require.NoError(t, err)
	var w *Worker
	runs := 0
	entries := -1 // Worker.handedBack's size while the job runs again
	fn := func(ctx context.Context, job *Job) (any, error) {
		if runs++; runs == 1 {
			return nil, RateLimited("", time.Millisecond)
		}
		w.mu.Lock()
		entries = len(w.handedBack)
		w.mu.Unlock()
		return "ok", nil
	}
	w, err = NewWorker(d, []Handler{Handle("slowed", fn)}, &WorkerOptions{ExitWhenIdle: true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	select {
	case <-w.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not return")
	}
	require.NoError(t, w.Err())
	require.Equal(t, 2, runs)
	require.Equal(t, 0, entries, "the entry of %s ended with its new claim", id)
}

// TestClaimRetryDelay: after a claim failed for a transient reason the worker waits a
// bounded exponential backoff with jitter (the Python worker's rule), never a fixed
// second nor a hot loop: a random half to all of claimRetryMin doubled per failure in a
// row, at most claimRetryMax.
func TestClaimRetryDelay(t *testing.T) {
	for n := 1; n < 80; n++ {
		full := min(claimRetryMin*time.Duration(1<<min(n-1, 30)), claimRetryMax)
		for range 20 {
			d := claimRetryDelay(n)
			require.GreaterOrEqual(t, d, full/2, "failure %d", n)
			require.LessOrEqual(t, d, full, "failure %d", n)
		}
	}
	require.LessOrEqual(t, claimRetryDelay(1<<40), claimRetryMax)
	require.GreaterOrEqual(t, claimRetryDelay(0), claimRetryMin/2)
}
