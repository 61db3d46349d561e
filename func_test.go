package lakeshore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

type greetIn struct {
	Name  string `msgpack:"name"`
	Times int    `msgpack:"times"`
}

type greetOut struct {
	Text string `msgpack:"text"`
	N    int    `msgpack:"n"`
}

func TestFunc(t *testing.T) {
	t.Parallel()

	t.Run("Plain", func(t *testing.T) {
		t.Parallel()
		_, d, _ := setupWorker(t)
		f, err := lakeshore.NewFunc(d, "greet", func(ctx context.Context, in greetIn) (greetOut, error) {
			return greetOut{Text: strings.Repeat("hi "+in.Name+" ", in.Times), N: in.Times}, nil
		}, nil)
		require.NoError(t, err)
		id, err := f.Submit(t.Context(), greetIn{Name: "ada", Times: 2}, nil)
		require.NoError(t, err)
		require.NoError(t, lakeshore.RunWorker(t.Context(), d, []lakeshore.Handler{f}, &lakeshore.WorkerOptions{Once: true, Logger: testLogger(t)}))
		out, err := f.Result(t.Context(), id, nil)
		require.NoError(t, err)
		require.Equal(t, greetOut{Text: "hi ada hi ada ", N: 2}, out)
	})

	t.Run("Call", func(t *testing.T) {
		t.Parallel()
		_, d, _ := setupWorker(t)
		f, err := lakeshore.NewFunc(d, "double", func(ctx context.Context, in int) (int, error) { return 2 * in, nil }, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := runWorker(t, ctx, d, []lakeshore.Handler{f}, &lakeshore.WorkerOptions{Concurrency: 2})
		for i := range 5 {
			out, id, err := f.Call(t.Context(), i, nil)
			require.NoError(t, err)
			require.NotEmpty(t, id)
			require.Equal(t, 2*i, out)
		}
		cancel()
		require.ErrorIs(t, waitDone(t, done), context.Canceled)
	})

	t.Run("Stream", func(t *testing.T) {
		t.Parallel()
		_, d, _ := setupWorker(t)
		step := make(chan struct{})
		f, err := lakeshore.NewStreamFunc(d, "count", func(ctx context.Context, n int, emit func(string) error) (int, error) {
			for i := range n {
				if err := emit(strings.Repeat("x", i+1)); err != nil {
					return 0, err
				}
				<-step // the reader sees each frame before the next is emitted: live
			}
			return n, nil
		}, nil)
		require.NoError(t, err)
		id, err := f.Submit(t.Context(), 3, nil)
		require.NoError(t, err)
		done := runWorker(t, t.Context(), d, []lakeshore.Handler{f}, &lakeshore.WorkerOptions{Once: true})
		var got []string
		for fr, err := range f.Stream(t.Context(), id, lakeshore.FromStart, nil) {
			require.NoError(t, err)
			var s string
			require.NoError(t, fr.Decode(&s))
			got = append(got, s)
			step <- struct{}{}
		}
		require.Equal(t, []string{"x", "xx", "xxx"}, got)
		out, err := f.Result(t.Context(), id, nil)
		require.NoError(t, err)
		require.Equal(t, 3, out)
		require.NoError(t, waitDone(t, done))
	})

	t.Run("BadPayloadFailsWithoutRetry", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		var calls int
		f, err := lakeshore.NewFunc(d, "test", func(ctx context.Context, in greetIn) (greetOut, error) {
			calls++
			return greetOut{}, nil
		}, nil)
		require.NoError(t, err)
		id, err := q.Submit(t.Context(), map[string]any{"name": 42}, &lakeshore.SubmitOptions{MaxAttempts: 5})
		require.NoError(t, err)
		require.NoError(t, lakeshore.RunWorker(t.Context(), d, []lakeshore.Handler{f}, &lakeshore.WorkerOptions{Once: true, Logger: testLogger(t)}))
		_, err = f.Result(t.Context(), id, nil)
		require.ErrorIs(t, err, lakeshore.ErrFailed)
		var terr *lakeshore.TerminalError
		require.True(t, errors.As(err, &terr))
		require.Equal(t, lakeshore.ErrorTypeBadPayload, terr.Info.Type)
		require.Contains(t, terr.Info.Message, "lakeshore_test.greetIn")
		require.Contains(t, terr.Info.Message, "name")
		require.Equal(t, 1, state(t, q, id).Attempt, "no retry")
		require.Zero(t, calls, "the body never ran")
	})

	t.Run("BodyErrorRetries", func(t *testing.T) {
		t.Parallel()
		q, d, _ := setupWorker(t)
		f, err := lakeshore.NewFunc(d, "test", func(ctx context.Context, in int) (int, error) {
			return 0, errors.New("flaky")
		}, nil)
		require.NoError(t, err)
		id, err := f.Submit(t.Context(), 1, &lakeshore.SubmitOptions{MaxAttempts: 3})
		require.NoError(t, err)
		require.NoError(t, lakeshore.RunWorker(t.Context(), d, []lakeshore.Handler{f}, &lakeshore.WorkerOptions{Once: true, Logger: testLogger(t)}))
		inv := state(t, q, id)
		require.Equal(t, lakeshore.StateQueued, inv.State, "re-queued for retry")
		require.Contains(t, inv.Error.Message, "flaky")
	})

	t.Run("BadQueue", func(t *testing.T) {
		t.Parallel()
		_, d, _ := setupWorker(t)
		_, err := lakeshore.NewFunc(d, "no/slash", func(ctx context.Context, in int) (int, error) { return in, nil }, nil)
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
	})
}
