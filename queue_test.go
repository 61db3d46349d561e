package lakeshore_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/wire"
)

func TestQueueOptions(t *testing.T) {
	t.Parallel()
	q, bundle := setup(t, nil)
	d := bundle.d

	require.Equal(t, lakeshore.KindFIFO, q.Kind())
	require.Equal(t, lakeshore.TemperatureDefault, q.Temperature())

	q, err := d.Queue("b", &lakeshore.QueueOptions{Kind: lakeshore.KindBoltzmann, Temperature: 0.25})
	require.NoError(t, err)
	require.Equal(t, lakeshore.KindBoltzmann, q.Kind())
	require.Equal(t, 0.25, q.Temperature())

	for _, tc := range []struct {
		name  string
		queue string
		opts  *lakeshore.QueueOptions
		field string // in the message
	}{
		{"EmptyName", "", nil, "queue name"},
		{"NameWithSlash", "a/b", nil, "queue name"},
		{"NameStartsWithDot", ".hidden", nil, "queue name"},
		{"NameTooLong", strings.Repeat("a", 129), nil, "queue name"},
		{"UnknownKind", "q", &lakeshore.QueueOptions{Kind: "lifo"}, "use fifo|priority|filo|boltzmann"},
		{"NegativeTemperature", "q", &lakeshore.QueueOptions{Kind: lakeshore.KindBoltzmann, Temperature: -1}, "temperature"},
		{"NaNTemperature", "q", &lakeshore.QueueOptions{Kind: lakeshore.KindBoltzmann, Temperature: math.NaN()}, "temperature"},
		{"InfTemperature", "q", &lakeshore.QueueOptions{Kind: lakeshore.KindBoltzmann, Temperature: math.Inf(1)}, "temperature"},
		{"NaNTemperatureAnyKind", "q", &lakeshore.QueueOptions{Temperature: math.NaN()}, "temperature"},
		{"NegativeLease", "q", &lakeshore.QueueOptions{LeaseTTL: -time.Second}, "lease"},
		{"BadNamespace", "q", &lakeshore.QueueOptions{Namespace: "a b"}, "namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := d.Queue(tc.queue, tc.opts)
			require.Nil(t, q)
			require.ErrorIs(t, err, lakeshore.ErrInvalid)
			var inv *lakeshore.InvalidError
			require.ErrorAs(t, err, &inv)
			require.ErrorContains(t, err, tc.field)
		})
	}

	t.Run("ClaimOptions", func(t *testing.T) {
		t.Parallel()
		_, err := q.Claim(t.Context(), &lakeshore.ClaimOptions{LeaseTTL: -1})
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		_, err = q.ClaimMany(t.Context(), 0, nil)
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.ErrorContains(t, err, "claim count")
	})

	t.Run("CountState", func(t *testing.T) {
		t.Parallel()
		_, err := q.Count(t.Context(), "done")
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.ErrorContains(t, err, "queued|running")
	})

	t.Run("Trim", func(t *testing.T) {
		t.Parallel()
		_, err := q.Trim(t.Context(), -time.Hour)
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
	})
}

func TestSubmitEncoding(t *testing.T) {
	t.Parallel()

	t.Run("UnencodablePayload", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		for _, payload := range []any{
			make(chan int),
			func() {},
			map[int]string{1: "non-string key"},
			complex(1, 2),
			map[string]any{"nested": []any{1, make(chan int)}},
		} {
			id, err := q.Submit(t.Context(), payload, nil)
			require.Empty(t, id)
			require.ErrorIs(t, err, lakeshore.ErrInvalid, "%T", payload)
			require.ErrorIs(t, err, wire.ErrUnsupported, "%T", payload)
			var inv *lakeshore.InvalidError
			require.ErrorAs(t, err, &inv)
			require.Equal(t, "payload", inv.Field)
		}
		n, err := q.Len(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "nothing submitted")
	})

	t.Run("BatchAllOrNothing", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		ids, err := q.SubmitMany(t.Context(), []lakeshore.Submission{
			{Payload: "fine"},
			{Payload: make(chan int)},
			{Payload: "fine too"},
		})
		require.Nil(t, ids)
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.ErrorContains(t, err, "payload [1]")
		n, err := q.Len(t.Context())
		require.NoError(t, err)
		require.Zero(t, n)

		ids, err = q.SubmitMany(t.Context(), nil)
		require.NoError(t, err)
		require.Empty(t, ids)
	})

	t.Run("TooLarge", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		_, err := q.Submit(t.Context(), make([]byte, lakeshore.MaxValueBytes+1), nil)
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.ErrorContains(t, err, "16 MiB")
	})

	t.Run("BadEnvelope", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		for _, opts := range []*lakeshore.SubmitOptions{
			{Priority: math.NaN()},
			{Key: "with\x00nul"},
			{MaxAttempts: -1},
			{ID: "not-a-ulid"},
		} {
			_, err := q.Submit(t.Context(), "x", opts)
			require.ErrorIs(t, err, lakeshore.ErrInvalid, "%+v", opts)
		}
		n, err := q.Len(t.Context())
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("BatchOrderAndKeys", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		first, err := q.Submit(t.Context(), 0, &lakeshore.SubmitOptions{Key: "k"})
		require.NoError(t, err)
		ids, err := q.SubmitMany(t.Context(), []lakeshore.Submission{
			{Payload: 1},
			{Payload: 2, SubmitOptions: lakeshore.SubmitOptions{Key: "k"}},
			{Payload: 3, SubmitOptions: lakeshore.SubmitOptions{Priority: 2, Metadata: map[string]string{"a": "b"}}},
		})
		require.NoError(t, err)
		require.Len(t, ids, 3)
		require.Equal(t, first, ids[1], "an existing key returns the existing id")
		inv, err := q.Get(t.Context(), ids[2])
		require.NoError(t, err)
		var v int
		require.NoError(t, inv.DecodePayload(&v))
		require.Equal(t, 3, v)
		require.Equal(t, 2.0, inv.Priority)
		require.Equal(t, map[string]string{"a": "b"}, inv.Metadata)
	})
}

// ackWith claims the next job of q and acks it with result.
func ackWith(t *testing.T, q *lakeshore.Queue, result any) *lakeshore.Job {
	t.Helper()
	job, err := q.Claim(t.Context(), nil)
	require.NoError(t, err)
	require.NotNil(t, job)
	require.NoError(t, q.Ack(t.Context(), job, result))
	return job
}

func TestResult(t *testing.T) {
	t.Parallel()

	type point struct {
		X, Y  float64
		Label string `msgpack:"label"`
	}

	t.Run("DecodeTyped", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		ctx := t.Context()
		id, err := q.Submit(ctx, nil, nil)
		require.NoError(t, err)
		ackWith(t, q, point{X: 1.5, Y: -2, Label: "p"})

		var p point
		require.NoError(t, q.Result(ctx, id, &p, nil))
		require.Equal(t, point{X: 1.5, Y: -2, Label: "p"}, p)

		var m map[string]any
		require.NoError(t, q.Result(ctx, id, &m, nil))
		require.Equal(t, map[string]any{"X": 1.5, "Y": -2.0, "label": "p"}, m)

		v, err := q.ResultValue(ctx, id, nil)
		require.NoError(t, err)
		require.Equal(t, m, v)

		require.NoError(t, q.Result(ctx, id, nil, nil), "nil into only waits")

		var wrong []string
		err = q.Result(ctx, id, &wrong, nil)
		require.ErrorIs(t, err, wire.ErrMismatch)
		require.ErrorContains(t, err, id)

		err = q.Result(ctx, id, p, nil)
		require.ErrorIs(t, err, wire.ErrUnsupported, "into must be a pointer")

		inv, err := q.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateSucceeded, inv.State)
		require.NoError(t, inv.Err())
		var p2 point
		require.NoError(t, inv.DecodeResult(&p2))
		require.Equal(t, p, p2)
	})

	t.Run("Tuple", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		ackWith(t, q, wire.Tuple{int64(1), "two"})
		v, err := q.ResultValue(t.Context(), id, nil)
		require.NoError(t, err)
		require.Equal(t, wire.Tuple{int64(1), "two"}, v)
	})

	t.Run("Failed", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		job, err := q.Claim(t.Context(), nil)
		require.NoError(t, err)
		require.NoError(t, q.Nack(t.Context(), job, errors.New("out of memory"), false))

		var v any
		err = q.Result(t.Context(), id, &v, nil)
		require.ErrorIs(t, err, lakeshore.ErrFailed)
		require.NotErrorIs(t, err, lakeshore.ErrCancelled)
		var terr *lakeshore.TerminalError
		require.ErrorAs(t, err, &terr)
		require.Equal(t, id, terr.ID)
		require.Equal(t, lakeshore.StateFailed, terr.State)
		require.Equal(t, "out of memory", terr.Info.Message)
		require.Equal(t, lakeshore.ErrorTypeDefault, terr.Info.Type)
		require.Equal(t, 1, terr.Info.Attempt)
		require.Nil(t, v, "nothing decoded")

		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.ErrorIs(t, inv.Err(), lakeshore.ErrFailed)
		require.ErrorIs(t, inv.DecodeResult(&v), lakeshore.ErrFailed)
	})

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		ok, err := q.Cancel(t.Context(), id)
		require.NoError(t, err)
		require.True(t, ok)
		_, err = q.ResultValue(t.Context(), id, nil)
		require.ErrorIs(t, err, lakeshore.ErrCancelled)
	})

	t.Run("Killed", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		job, err := q.Claim(t.Context(), nil)
		require.NoError(t, err)
		ok, err := q.Kill(t.Context(), id)
		require.NoError(t, err)
		require.True(t, ok)
		require.ErrorIs(t, q.Result(t.Context(), id, nil, nil), lakeshore.ErrCancelled)
		require.ErrorIs(t, q.Ack(t.Context(), job, "late"), lakeshore.ErrLeaseLost)
	})

	t.Run("WaitElapses", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)

		start := time.Now()
		err = q.Result(t.Context(), id, nil, &lakeshore.ResultOptions{Timeout: 50 * time.Millisecond})
		require.ErrorIs(t, err, lakeshore.ErrTimeout)
		require.NotErrorIs(t, err, lakeshore.ErrTimedOut, "the wait timed out, not the job")
		require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

		// ctx's deadline bounds the default wait, and also answers to ErrTimeout.
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		err = q.Result(ctx, id, nil, nil)
		require.ErrorIs(t, err, lakeshore.ErrTimeout)
		require.Less(t, time.Since(start), lakeshore.ResultTimeoutDefault)

		// A cancelled ctx is the caller giving up, not a timeout.
		ctx, cancel = context.WithCancel(t.Context())
		cancel()
		err = q.Result(ctx, id, nil, nil)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, lakeshore.ErrTimeout)

		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateQueued, inv.State, "waiting changes nothing")
	})

	t.Run("WaitsForAck", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		job, err := q.Claim(t.Context(), nil)
		require.NoError(t, err)

		done := make(chan error)
		var got string
		go func() { done <- q.Result(t.Context(), id, &got, &lakeshore.ResultOptions{Timeout: -1}) }()
		require.NoError(t, q.Ack(t.Context(), job, "late answer"))
		require.NoError(t, <-done)
		require.Equal(t, "late answer", got)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		err := q.Result(t.Context(), "01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, nil)
		require.ErrorIs(t, err, lakeshore.ErrNotFound)
		_, err = q.Get(t.Context(), "01ARZ3NDEKTSV4RRFFQ69G5FAV")
		require.ErrorIs(t, err, lakeshore.ErrNotFound)
	})

	t.Run("Call", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)

		// A Call whose wait ends returns the id to wait on again.
		id, err := q.Call(t.Context(), "ping", nil, &lakeshore.CallOptions{Timeout: time.Millisecond})
		require.ErrorIs(t, err, lakeshore.ErrTimeout)
		require.NotEmpty(t, id)
		ackWith(t, q, "pong")
		var got string
		require.NoError(t, q.Result(t.Context(), id, &got, nil))
		require.Equal(t, "pong", got)

		_, err = q.Call(t.Context(), make(chan int), nil, nil)
		require.ErrorIs(t, err, lakeshore.ErrInvalid)

		id, _, err = q.CallValue(t.Context(), 1, &lakeshore.CallOptions{
			SubmitOptions: lakeshore.SubmitOptions{Key: "once"},
			Timeout:       time.Millisecond,
		})
		require.ErrorIs(t, err, lakeshore.ErrTimeout)
		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, "once", inv.Key)
	})

	t.Run("Trim", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{Key: "k"})
		require.NoError(t, err)
		ackWith(t, q, "done")
		n, err := q.Trim(t.Context(), time.Hour)
		require.NoError(t, err)
		require.Zero(t, n, "finished just now: kept")
		n, err = q.Trim(t.Context(), 0)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		_, err = q.Get(t.Context(), id)
		require.ErrorIs(t, err, lakeshore.ErrNotFound)
	})
}

// TestDecodeTargets: decoding into something that is not a non-nil pointer, or reading the
// result of a live invocation, fails with ErrInvalid at once; Stream names a bad id.
func TestDecodeTargets(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, nil)
	id, err := q.Submit(t.Context(), 5, nil)
	require.NoError(t, err)

	start := time.Now()
	err = q.Result(t.Context(), id, 5, nil)
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
	require.ErrorContains(t, err, "into must be a non-nil pointer")
	require.Less(t, time.Since(start), 5*time.Second, "refused before waiting")
	var np *int
	require.ErrorIs(t, q.Result(t.Context(), id, np, nil), lakeshore.ErrInvalid)

	inv, err := q.Get(t.Context(), id)
	require.NoError(t, err)
	var n int
	err = inv.DecodeResult(&n)
	require.ErrorIs(t, err, lakeshore.ErrInvalid, "a live invocation has no result")
	require.ErrorContains(t, err, "no result until it succeeds")
	require.ErrorIs(t, inv.DecodePayload(n), lakeshore.ErrInvalid)
	require.NoError(t, inv.DecodePayload(&n))
	require.Equal(t, 5, n)

	job, err := q.Claim(t.Context(), nil)
	require.NoError(t, err)
	require.ErrorIs(t, job.Decode(n), lakeshore.ErrInvalid)

	for _, bad := range []string{"", "nope"} {
		var got error
		for _, err := range q.Stream(t.Context(), bad, lakeshore.FromStart, nil) {
			got = err
		}
		require.ErrorIs(t, got, lakeshore.ErrInvalid)
		require.ErrorContains(t, got, "invocation id")
		require.NotContains(t, got.Error(), "namespace")
	}
}
