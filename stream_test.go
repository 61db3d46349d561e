package lakeshore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// collect ranges over seq, returning the frames and the error that ended it (nil for END).
func collect(seq func(func(lakeshore.Frame, error) bool)) ([]lakeshore.Frame, error) {
	var frames []lakeshore.Frame
	for f, err := range seq {
		if err != nil {
			return frames, err
		}
		frames = append(frames, f)
	}
	return frames, nil
}

func values(frames []lakeshore.Frame) []any {
	out := make([]any, len(frames))
	for i, f := range frames {
		out[i] = f.Value
	}
	return out
}

// running submits a job to q and claims it.
func running(t *testing.T, q *lakeshore.Queue) (string, *lakeshore.Job) {
	t.Helper()
	id, err := q.Submit(t.Context(), nil, nil)
	require.NoError(t, err)
	job, err := q.Claim(t.Context(), nil)
	require.NoError(t, err)
	require.Equal(t, id, job.ID)
	return id, job
}

func TestStream(t *testing.T) {
	t.Parallel()

	t.Run("ValuesThenEnd", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, job := running(t, q)
		for _, v := range []any{"a", int64(2), map[string]any{"c": 3.5}} {
			_, err := q.Post(t.Context(), job, v)
			require.NoError(t, err)
		}
		require.NoError(t, q.Ack(t.Context(), job, "result, not a frame"))

		frames, err := collect(q.Stream(t.Context(), id, lakeshore.FromStart, nil))
		require.NoError(t, err, "END stops cleanly")
		require.Equal(t, []any{"a", int64(2), map[string]any{"c": 3.5}}, values(frames))
		for i, f := range frames {
			require.EqualValues(t, i, f.Seq)
			require.Equal(t, 1, f.Attempt)
			require.False(t, f.Time.IsZero())
			require.NotEmpty(t, f.Raw())
		}
		var m map[string]float64
		require.NoError(t, frames[2].Decode(&m))
		require.Equal(t, map[string]float64{"c": 3.5}, m)

		// Resume after a cursor: exactly the later frames.
		frames, err = collect(q.Stream(t.Context(), id, 1, nil))
		require.NoError(t, err)
		require.Equal(t, []any{map[string]any{"c": 3.5}}, values(frames))

		// A cursor at or past the END frame: nothing, cleanly.
		frames, err = collect(q.Stream(t.Context(), id, 3, nil))
		require.NoError(t, err)
		require.Empty(t, frames)
	})

	t.Run("Live", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, job := running(t, q)
		var wg sync.WaitGroup
		defer wg.Wait()
		next := make(chan struct{})
		wg.Go(func() {
			for i := range 3 {
				<-next // post only after the reader saw the previous frame
				if _, err := q.Post(t.Context(), job, i); err != nil {
					t.Error(err)
				}
			}
			<-next
			if err := q.Ack(t.Context(), job, nil); err != nil {
				t.Error(err)
			}
		})
		next <- struct{}{}
		var got []any
		for f, err := range q.Stream(t.Context(), id, lakeshore.FromStart, &lakeshore.StreamOptions{Timeout: 10 * time.Second}) {
			require.NoError(t, err)
			got = append(got, f.Value)
			next <- struct{}{}
		}
		require.Equal(t, []any{int64(0), int64(1), int64(2)}, got)
	})

	t.Run("BreakStops", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, job := running(t, q)
		for i := range 5 {
			_, err := q.Post(t.Context(), job, i)
			require.NoError(t, err)
		}
		seq := q.Stream(t.Context(), id, lakeshore.FromStart, nil)
		n := 0
		for f, err := range seq {
			require.NoError(t, err)
			n++
			if f.Seq == 1 {
				break // the iterator must not call yield again (it would panic)
			}
		}
		require.Equal(t, 2, n)

		// The job is live and silent: breaking out early never waited for it. Ranging the
		// same sequence again reads anew.
		var firstSeq int64 = -1
		for f, err := range seq {
			require.NoError(t, err)
			firstSeq = f.Seq
			break
		}
		require.EqualValues(t, 0, firstSeq)
	})

	t.Run("ErrorAfterValues", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, job := running(t, q)
		for i := range 2 {
			_, err := q.Post(t.Context(), job, i)
			require.NoError(t, err)
		}
		require.NoError(t, q.Nack(t.Context(), job, errors.New("diverged"), false))

		frames, err := collect(q.Stream(t.Context(), id, lakeshore.FromStart, nil))
		require.Len(t, frames, 2, "the values come first")
		require.ErrorIs(t, err, lakeshore.ErrFailed)
		var terr *lakeshore.TerminalError
		require.ErrorAs(t, err, &terr)
		require.Equal(t, id, terr.ID)
		require.Equal(t, "diverged", terr.Info.Message)
		require.Equal(t, 1, terr.Info.Attempt)

		// Resuming past the last value still ends with the job's error.
		frames, err = collect(q.Stream(t.Context(), id, 1, nil))
		require.Empty(t, frames)
		require.ErrorIs(t, err, lakeshore.ErrFailed)
		frames, err = collect(q.Stream(t.Context(), id, 2, nil))
		require.Empty(t, frames)
		require.ErrorIs(t, err, lakeshore.ErrFailed)
	})

	t.Run("Killed", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, job := running(t, q)
		_, err := q.Post(t.Context(), job, "before the kill")
		require.NoError(t, err)
		ok, err := q.Kill(t.Context(), id)
		require.NoError(t, err)
		require.True(t, ok)
		frames, err := collect(q.Stream(t.Context(), id, lakeshore.FromStart, nil))
		require.Len(t, frames, 1)
		require.ErrorIs(t, err, lakeshore.ErrCancelled)
	})

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		_, err = q.Cancel(t.Context(), id)
		require.NoError(t, err)
		frames, err := collect(q.Stream(t.Context(), id, lakeshore.FromStart, &lakeshore.StreamOptions{Timeout: 50 * time.Millisecond}))
		require.Empty(t, frames)
		require.ErrorIs(t, err, lakeshore.ErrCancelled, "a cancelled job's stream ends with its state, not a wait timeout")
	})

	t.Run("Silence", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, job := running(t, q)
		_, err := q.Post(t.Context(), job, "one")
		require.NoError(t, err)
		start := time.Now()
		frames, err := collect(q.Stream(t.Context(), id, lakeshore.FromStart, &lakeshore.StreamOptions{Timeout: 50 * time.Millisecond}))
		require.Len(t, frames, 1)
		require.ErrorIs(t, err, lakeshore.ErrTimeout)
		require.NotErrorIs(t, err, lakeshore.ErrTimedOut)
		require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	})

	t.Run("BadCursorAndID", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		id, _ := running(t, q)
		_, err := collect(q.Stream(t.Context(), id, -2, nil))
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.ErrorContains(t, err, "FromStart")
		_, err = collect(q.Stream(t.Context(), "01ARZ3NDEKTSV4RRFFQ69G5FAV", lakeshore.FromStart, nil))
		require.ErrorIs(t, err, lakeshore.ErrNotFound)
	})
}
