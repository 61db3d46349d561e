package lakeshore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/wire"
)

func TestClaim(t *testing.T) {
	t.Parallel()

	t.Run("EmptyIsNil", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		job, err := q.Claim(t.Context(), nil)
		require.NoError(t, err)
		require.Nil(t, job)
		jobs, err := q.ClaimMany(t.Context(), 5, &lakeshore.ClaimOptions{Wait: 10 * time.Millisecond})
		require.NoError(t, err)
		require.Empty(t, jobs)
	})

	t.Run("Job", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, &lakeshore.QueueOptions{LeaseTTL: time.Minute})
		type args struct {
			Prompt string `msgpack:"prompt"`
			N      int    `msgpack:"n"`
		}
		id, err := q.Submit(t.Context(), args{Prompt: "hi", N: 2}, &lakeshore.SubmitOptions{
			Key: "k", Priority: 1.5, MaxAttempts: 5, AttemptTimeout: time.Hour,
			Metadata: map[string]string{"trace": "abc"},
		})
		require.NoError(t, err)

		before := time.Now()
		job, err := q.Claim(t.Context(), nil)
		require.NoError(t, err)
		require.Equal(t, id, job.ID)
		require.Equal(t, "test", job.Queue)
		require.Equal(t, lakeshore.NamespaceDefault, job.Namespace)
		require.Equal(t, "k", job.Key)
		require.Equal(t, 1, job.Attempt)
		require.Equal(t, 5, job.MaxAttempts)
		require.Equal(t, 1.5, job.Priority)
		require.Equal(t, time.Hour, job.AttemptTimeout)
		require.Equal(t, map[string]string{"trace": "abc"}, job.Metadata)
		require.WithinDuration(t, before.Add(time.Minute), job.LeaseExpiresAt, 5*time.Second, "the handle's lease")

		var a args
		require.NoError(t, job.Decode(&a))
		require.Equal(t, args{Prompt: "hi", N: 2}, a)
		v, err := job.Payload()
		require.NoError(t, err)
		require.Equal(t, map[string]any{"prompt": "hi", "n": int64(2)}, v)
		raw, err := wire.Marshal(a)
		require.NoError(t, err)
		require.Equal(t, raw, job.RawPayload())
		require.ErrorIs(t, job.Decode(&[]int{}), wire.ErrMismatch)

		exp, err := q.Heartbeat(t.Context(), job)
		require.NoError(t, err)
		require.False(t, exp.Before(job.LeaseExpiresAt))
	})

	t.Run("LeaseOverride", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		_, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		before := time.Now()
		job, err := q.Claim(t.Context(), &lakeshore.ClaimOptions{LeaseTTL: time.Hour})
		require.NoError(t, err)
		require.WithinDuration(t, before.Add(time.Hour), job.LeaseExpiresAt, 5*time.Second)
	})

	t.Run("WaitsForSubmit", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		got := make(chan *lakeshore.Job)
		go func() {
			job, err := q.Claim(t.Context(), &lakeshore.ClaimOptions{Wait: -1})
			if err != nil {
				t.Error(err)
			}
			got <- job
		}()
		id, err := q.Submit(t.Context(), "wake up", nil)
		require.NoError(t, err)
		job := <-got
		require.NotNil(t, job)
		require.Equal(t, id, job.ID)
	})

	t.Run("WaitEndsWithCtx", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		job, err := q.Claim(ctx, &lakeshore.ClaimOptions{Wait: -1})
		require.Nil(t, job)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})

	t.Run("Many", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, &lakeshore.QueueOptions{Kind: lakeshore.KindFILO})
		ids, err := q.SubmitMany(t.Context(), []lakeshore.Submission{{Payload: 0}, {Payload: 1}, {Payload: 2}})
		require.NoError(t, err)
		jobs, err := q.ClaimMany(t.Context(), 2, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 2)
		require.Equal(t, ids[2], jobs[0].ID, "the handle's order")
		require.Equal(t, ids[1], jobs[1].ID)
	})
}

func TestSettle(t *testing.T) {
	t.Parallel()

	t.Run("AckUnencodable", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		job, err := q.Claim(t.Context(), nil)
		require.NoError(t, err)

		err = q.Ack(t.Context(), job, make(chan int))
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.ErrorIs(t, err, wire.ErrUnsupported)
		require.ErrorContains(t, err, "result")
		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateRunning, inv.State, "nothing settled")

		_, err = q.Post(t.Context(), job, func() {})
		require.ErrorIs(t, err, lakeshore.ErrInvalid)

		require.NoError(t, q.Ack(t.Context(), job, "fine"))
	})

	t.Run("StaleToken", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		_, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		job, err := q.Claim(t.Context(), nil)
		require.NoError(t, err)
		require.NoError(t, q.Nack(t.Context(), job, nil, false))

		require.ErrorIs(t, q.Ack(t.Context(), job, nil), lakeshore.ErrLeaseLost)
		require.ErrorIs(t, q.Nack(t.Context(), job, nil, true), lakeshore.ErrLeaseLost)
		_, err = q.Heartbeat(t.Context(), job)
		require.ErrorIs(t, err, lakeshore.ErrLeaseLost)
		_, err = q.Post(t.Context(), job, 1)
		require.Error(t, err)
	})

	t.Run("NackMessageAndType", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		job, err := q.Claim(t.Context(), nil)
		require.NoError(t, err)
		require.NoError(t, q.Nack(t.Context(), job, fmt.Errorf("load weights: %w", typedError{}), false))
		err = q.Result(t.Context(), id, nil, nil)
		var terr *lakeshore.TerminalError
		require.ErrorAs(t, err, &terr)
		require.Equal(t, "cuda", terr.Info.Type, "the ErrorType of an error in the chain")
		require.Equal(t, "load weights: device lost", terr.Info.Message)
	})

	t.Run("PostFinal", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		job, err := q.Claim(t.Context(), nil)
		require.NoError(t, err)
		seq, err := q.Post(t.Context(), job, "partial")
		require.NoError(t, err)
		require.EqualValues(t, 0, seq)
		seq, err = q.PostFinal(t.Context(), job, "whole")
		require.NoError(t, err)
		require.EqualValues(t, 1, seq)
		var got string
		require.NoError(t, q.Result(t.Context(), id, &got, nil))
		require.Equal(t, "whole", got)
		_, err = q.Post(t.Context(), job, "after the end")
		require.Error(t, err)
	})
}

type typedError struct{}

func (typedError) Error() string     { return "device lost" }
func (typedError) ErrorType() string { return "cuda" }

func TestWorking(t *testing.T) {
	t.Parallel()

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		handled, err := q.Working(t.Context(), func(context.Context, *lakeshore.Job) (any, error) {
			t.Fatal("no job to run")
			return nil, nil
		}, nil)
		require.NoError(t, err)
		require.False(t, handled)
	})

	t.Run("InvalidBeforeClaim", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, &lakeshore.QueueOptions{LeaseTTL: time.Second})
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		fn := func(context.Context, *lakeshore.Job) (any, error) {
			t.Error("an invalid call must not run the handler")
			return nil, nil
		}

		handled, err := q.Working(t.Context(), nil, nil)
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.ErrorContains(t, err, "handler")
		require.False(t, handled)

		for _, o := range []*lakeshore.WorkingOptions{
			{ClaimOptions: lakeshore.ClaimOptions{LeaseTTL: 500 * time.Millisecond}, HeartbeatInterval: 10 * time.Second},
			{ClaimOptions: lakeshore.ClaimOptions{LeaseTTL: 500 * time.Millisecond}, HeartbeatInterval: 500 * time.Millisecond},
			{HeartbeatInterval: time.Second}, // the queue's lease
			{ClaimOptions: lakeshore.ClaimOptions{LeaseTTL: -1}},
		} {
			handled, err := q.Working(t.Context(), fn, o)
			require.ErrorIs(t, err, lakeshore.ErrInvalid, "%+v", o)
			require.False(t, handled)
		}
		_, err = q.Working(t.Context(), nil, &lakeshore.WorkingOptions{HeartbeatInterval: time.Hour})
		require.ErrorContains(t, err, "handler")

		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateQueued, inv.State, "nothing was claimed")
		require.Equal(t, 0, inv.Attempt, "no attempt burnt")

		// A heartbeat shorter than the lease, or none, is fine.
		handled, err = q.Working(t.Context(), func(context.Context, *lakeshore.Job) (any, error) { return 1, nil },
			&lakeshore.WorkingOptions{HeartbeatInterval: 900 * time.Millisecond})
		require.NoError(t, err)
		require.True(t, handled)
	})

	t.Run("Ack", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), 20, nil)
		require.NoError(t, err)
		handled, err := q.Working(t.Context(), func(ctx context.Context, job *lakeshore.Job) (any, error) {
			var n int
			if err := job.Decode(&n); err != nil {
				return nil, err
			}
			return n + 1, nil
		}, nil)
		require.NoError(t, err)
		require.True(t, handled)
		var got int
		require.NoError(t, q.Result(t.Context(), id, &got, nil))
		require.Equal(t, 21, got)
	})

	t.Run("ErrorRetries", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		boom := errors.New("flaky")
		handled, err := q.Working(t.Context(), func(context.Context, *lakeshore.Job) (any, error) {
			return nil, boom
		}, nil)
		require.True(t, handled)
		require.ErrorIs(t, err, boom)
		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateQueued, inv.State, "nacked with retry: queued again")
		require.Equal(t, 1, inv.Attempt)
	})

	t.Run("PermanentFails", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{MaxAttempts: 5})
		require.NoError(t, err)
		bad := errors.New("bad input")
		handled, err := q.Working(t.Context(), func(context.Context, *lakeshore.Job) (any, error) {
			return nil, fmt.Errorf("parse: %w", lakeshore.Permanent(bad))
		}, nil)
		require.True(t, handled)
		require.ErrorIs(t, err, bad)
		require.True(t, lakeshore.IsPermanent(err))
		err = q.Result(t.Context(), id, nil, nil)
		require.ErrorIs(t, err, lakeshore.ErrFailed, "no retry although attempts remain")
		require.ErrorContains(t, err, "parse: bad input")
		require.Nil(t, lakeshore.Permanent(nil))
	})

	t.Run("PanicNacks", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{MaxAttempts: 2})
		require.NoError(t, err)
		handled, err := q.Working(t.Context(), func(context.Context, *lakeshore.Job) (any, error) {
			panic("kaboom")
		}, nil)
		require.True(t, handled)
		var perr *lakeshore.PanicError
		require.ErrorAs(t, err, &perr)
		require.Equal(t, "kaboom", perr.Value)
		require.Contains(t, string(perr.Stack), "worker_test.go")

		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateQueued, inv.State, "a panic is retried like an error")

		// The second attempt panics with an error value; no attempts remain: failed.
		cause := errors.New("nil map")
		_, err = q.Working(t.Context(), func(context.Context, *lakeshore.Job) (any, error) {
			panic(cause)
		}, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{Wait: 10 * time.Second}})
		require.ErrorIs(t, err, cause, "PanicError unwraps a panicked error")
		err = q.Result(t.Context(), id, nil, nil)
		require.ErrorIs(t, err, lakeshore.ErrFailed)
		var terr *lakeshore.TerminalError
		require.ErrorAs(t, err, &terr)
		require.Equal(t, lakeshore.ErrorTypePanic, terr.Info.Type)
		require.Contains(t, terr.Info.Message, "panic: nil map")
		require.Contains(t, terr.Info.Message, "worker_test.go", "the stack is kept")
		require.Equal(t, 2, terr.Info.Attempt)
	})

	t.Run("UnencodableResultFails", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		handled, err := q.Working(t.Context(), func(context.Context, *lakeshore.Job) (any, error) {
			return make(chan int), nil
		}, nil)
		require.True(t, handled)
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.ErrorIs(t, q.Result(t.Context(), id, nil, nil), lakeshore.ErrFailed, "a bug a retry would not fix")
	})

	t.Run("KillCancelsHandler", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		running := make(chan struct{})
		var cause error
		var wg sync.WaitGroup
		wg.Go(func() {
			<-running
			ok, err := q.Kill(t.Context(), id)
			if err != nil || !ok {
				t.Errorf("kill: %v %v", ok, err)
			}
		})
		handled, err := q.Working(t.Context(), func(ctx context.Context, job *lakeshore.Job) (any, error) {
			close(running)
			<-ctx.Done() // ends at the first heartbeat after the kill
			cause = context.Cause(ctx)
			return nil, ctx.Err()
		}, &lakeshore.WorkingOptions{HeartbeatInterval: 5 * time.Millisecond})
		wg.Wait()
		require.True(t, handled)
		require.ErrorIs(t, cause, lakeshore.ErrLeaseLost)
		require.ErrorIs(t, err, lakeshore.ErrLeaseLost, "the nack after a kill is refused")
		require.ErrorIs(t, q.Result(t.Context(), id, nil, nil), lakeshore.ErrCancelled)
	})

	t.Run("HeartbeatKeepsLease", func(t *testing.T) {
		t.Parallel()
		// The handler runs until the plane shows its lease extended past the end of the one
		// the claim granted, so it outlived that lease, however late a loaded machine runs it.
		// Heartbeats every 50 ms keep a 3 s lease: only a process not run for ~3 s loses it.
		// (A handler of a fixed 1.5 s with a 500 ms lease failed when the heartbeat's ticker
		// ran 450 ms late.)
		const lease, interval = 3 * time.Second, 50 * time.Millisecond
		q, b := setup(t, &lakeshore.QueueOptions{LeaseTTL: lease})
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		handled, err := q.Working(t.Context(), func(ctx context.Context, job *lakeshore.Job) (any, error) {
			granted := job.LeaseExpiresAt
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			giveUp := time.After(30 * time.Second)
			for {
				inv, err := b.d.Driver().InvocationGet(ctx, job.ID)
				if err != nil {
					return nil, err
				}
				if inv.LeaseExpiresAt.After(granted.Add(lease)) {
					return "kept", nil // extended by a heartbeat sent after the granted lease's end
				}
				select {
				case <-tick.C:
				case <-giveUp:
					return nil, errors.New("the lease was not extended past the granted one's end in 30 s")
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			}
		}, &lakeshore.WorkingOptions{HeartbeatInterval: interval})
		require.True(t, handled)
		require.NoError(t, err)
		var got string
		require.NoError(t, q.Result(t.Context(), id, &got, nil))
		require.Equal(t, "kept", got)
	})

	t.Run("AttemptTimeoutCancelsHandler", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		_, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{AttemptTimeout: 20 * time.Millisecond})
		require.NoError(t, err)
		_, err = q.Working(t.Context(), func(ctx context.Context, job *lakeshore.Job) (any, error) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}, nil)
		require.ErrorContains(t, err, "attempt timeout")
	})

	t.Run("SettlesAfterCtxCancel", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{MaxAttempts: 1})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		_, err = q.Working(ctx, func(ctx context.Context, job *lakeshore.Job) (any, error) {
			cancel() // shutdown while the job runs
			<-ctx.Done()
			return nil, ctx.Err()
		}, nil)
		require.ErrorIs(t, err, context.Canceled)
		err = q.Result(t.Context(), id, nil, nil)
		require.ErrorIs(t, err, lakeshore.ErrFailed, "nacked at once, not left to its lease")
	})

	t.Run("GoexitNacks", func(t *testing.T) {
		// runtime.Goexit in a handler (t.FailNow) used to end Working's goroutine with the
		// job left running.
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{MaxAttempts: 1})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := q.Working(t.Context(), func(ctx context.Context, job *lakeshore.Job) (any, error) {
				runtime.Goexit()
				return nil, nil
			}, nil)
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorContains(t, err, "runtime.Goexit")
		case <-time.After(10 * time.Second):
			t.Fatal("Working did not return after its handler called runtime.Goexit")
		}
		err = q.Result(t.Context(), id, nil, nil)
		require.ErrorIs(t, err, lakeshore.ErrFailed)
		require.ErrorContains(t, err, "runtime.Goexit")
	})

	t.Run("EmitInWorking", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		handled, err := q.Working(t.Context(), func(ctx context.Context, job *lakeshore.Job) (any, error) {
			_, err := lakeshore.Emit(ctx, "progress")
			return "done", err
		}, nil)
		require.True(t, handled)
		require.NoError(t, err)
		var values []any
		for f, err := range q.Stream(t.Context(), id, lakeshore.FromStart, nil) {
			require.NoError(t, err)
			values = append(values, f.Value)
		}
		require.Equal(t, []any{"progress"}, values, "Emit works in a Working handler")
	})
}

// TestNilPointers: exported calls given a nil pointer return an *InvalidError instead of
// panicking.
func TestNilPointers(t *testing.T) {
	t.Parallel()
	q, bundle := setup(t, nil)
	ctx := t.Context()
	isInvalid := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		var ie *lakeshore.InvalidError
		require.ErrorAs(t, err, &ie)
	}
	isInvalid(t, q.Ack(ctx, nil, 1))
	isInvalid(t, q.Nack(ctx, nil, errors.New("x"), true))
	_, err := q.Post(ctx, nil, 1)
	isInvalid(t, err)
	_, err = q.PostFinal(ctx, nil, 1)
	isInvalid(t, err)
	_, err = q.Heartbeat(ctx, nil)
	isInvalid(t, err)

	body := func(context.Context, int) (int, error) { return 0, nil }
	_, err = lakeshore.NewFunc(nil, "q", body, nil)
	isInvalid(t, err)
	_, err = lakeshore.NewFunc[int, int](bundle.d, "q", nil, nil)
	isInvalid(t, err)
	_, err = lakeshore.NewStreamFunc(nil, "q", func(context.Context, int, func(int) error) (int, error) { return 0, nil }, nil)
	isInvalid(t, err)
	_, err = lakeshore.NewStreamFunc[int, int, int](bundle.d, "q", nil, nil)
	isInvalid(t, err)

	h := lakeshore.Handle("q", func(context.Context, *lakeshore.Job) (any, error) { return nil, nil })
	isInvalid(t, lakeshore.RunWorker(ctx, nil, []lakeshore.Handler{h}, nil))
	isInvalid(t, lakeshore.RunWorker(ctx, bundle.d, []lakeshore.Handler{nil}, nil))
	var f *lakeshore.Func[int, int]
	isInvalid(t, lakeshore.RunWorker(ctx, bundle.d, []lakeshore.Handler{f}, nil))
}

// explode panics with a runtime error (a nil map write) one frame below the handler.
func explode(m map[string]int) { m["x"] = 1 }

// TestPanicMessage: a panic's stored ErrorInfo message is the panic value and the panicking
// frame, not the goroutine's stack and not prefixed with the job and attempt (the
// TerminalError says those once); the whole stack goes to the configured logger.
func TestPanicMessage(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, q *lakeshore.Queue, id, value string, logs *syncBuffer) {
		t.Helper()
		err := q.Result(t.Context(), id, nil, nil)
		var terr *lakeshore.TerminalError
		require.ErrorAs(t, err, &terr)
		msg := terr.Info.Message
		require.Equal(t, lakeshore.ErrorTypePanic, terr.Info.Type)
		require.True(t, strings.HasPrefix(msg, "panic: "+value), msg)
		require.Contains(t, msg, "lakeshore_test.explode (worker_test.go:", "the panicking frame")
		require.NotContains(t, msg, "goroutine")
		require.NotContains(t, msg, "\n")
		require.NotContains(t, msg, "job "+id, "no duplicated prefix")
		require.Equal(t, 1, strings.Count(err.Error(), id), err.Error())
		require.Equal(t, 1, strings.Count(err.Error(), "attempt"), err.Error())
		require.Contains(t, logs.String(), "handler panicked")
		require.Contains(t, logs.String(), "goroutine", "the stack is logged")
	}
	fn := func(context.Context, *lakeshore.Job) (any, error) {
		explode(nil)
		return nil, nil
	}

	t.Run("Working", func(t *testing.T) {
		t.Parallel()
		var logs syncBuffer
		d, err := lakeshore.Open(t.Context(), ":memory:", &lakeshore.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, d.Close()) })
		q, err := d.Queue("test", nil)
		require.NoError(t, err)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{MaxAttempts: 1})
		require.NoError(t, err)
		handled, err := q.Working(t.Context(), fn, nil)
		require.True(t, handled)
		require.ErrorContains(t, err, "job "+id+" (attempt 1): panic:", "the caller of Working learns the job")
		check(t, q, id, "assignment to entry in nil map", &logs)
	})

	t.Run("RunWorker", func(t *testing.T) {
		t.Parallel()
		var logs syncBuffer
		d, err := lakeshore.Open(t.Context(), ":memory:", &lakeshore.Config{Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, d.Close()) })
		q, err := d.Queue("test", nil)
		require.NoError(t, err)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{MaxAttempts: 1})
		require.NoError(t, err)
		require.NoError(t, lakeshore.RunWorker(t.Context(), d, []lakeshore.Handler{lakeshore.Handle("test", fn)},
			&lakeshore.WorkerOptions{Once: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
		check(t, q, id, "assignment to entry in nil map", &logs)
	})
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
