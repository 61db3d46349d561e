package lakeshore_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

func TestTopic(t *testing.T) {
	t.Parallel()

	t.Run("AutoName", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		a, err := q.Topic("")
		require.NoError(t, err)
		b, err := q.Topic("")
		require.NoError(t, err)
		require.NotEqual(t, a.Name(), b.Name())
		for _, tp := range []*lakeshore.Topic{a, b} {
			ulid, ok := strings.CutPrefix(tp.Name(), "topic-")
			require.True(t, ok, tp.Name())
			require.NoError(t, plane.ValidateID(ulid), tp.Name())
			require.NoError(t, plane.ValidateName("topic name", tp.Name()))
			require.Same(t, q, tp.Queue())
		}

		// Auto-named topics are separate journals.
		_, err = a.Post(t.Context(), "to a")
		require.NoError(t, err)
		_, ok, err := b.Listen(t.Context(), lakeshore.FromStart, &lakeshore.ListenOptions{Timeout: time.Millisecond})
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("BadName", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		for _, name := range []string{"-x", "a b", strings.Repeat("t", 129)} {
			tp, err := q.Topic(name)
			require.Nil(t, tp)
			require.ErrorIs(t, err, lakeshore.ErrInvalid)
			require.ErrorContains(t, err, "topic name")
		}
	})

	t.Run("ScopedByQueue", func(t *testing.T) {
		t.Parallel()
		q, bundle := setup(t, nil)
		other, err := bundle.d.Queue("other", nil)
		require.NoError(t, err)
		t1, err := q.Topic("news")
		require.NoError(t, err)
		t2, err := other.Topic("news")
		require.NoError(t, err)
		_, err = t1.Post(t.Context(), "only in test")
		require.NoError(t, err)
		_, ok, err := t2.Listen(t.Context(), lakeshore.FromStart, &lakeshore.ListenOptions{Timeout: time.Millisecond})
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("Listen", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		tp, err := q.Topic("events")
		require.NoError(t, err)

		start := time.Now()
		f, ok, err := tp.Listen(t.Context(), lakeshore.FromStart, &lakeshore.ListenOptions{Timeout: 30 * time.Millisecond})
		require.NoError(t, err, "a timeout is not an error")
		require.False(t, ok)
		require.Zero(t, f)
		require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)

		for _, v := range []string{"a", "b"} {
			_, err := tp.Post(t.Context(), v)
			require.NoError(t, err)
		}
		f, ok, err = tp.Listen(t.Context(), lakeshore.FromStart, nil)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "a", f.Value)
		require.EqualValues(t, 0, f.Seq)
		require.Zero(t, f.Attempt)
		f, ok, err = tp.Listen(t.Context(), f.Seq, nil)
		require.NoError(t, err)
		require.True(t, ok)
		var s string
		require.NoError(t, f.Decode(&s))
		require.Equal(t, "b", s)

		// Listen wakes for a value posted while it waits.
		var wg sync.WaitGroup
		wg.Go(func() {
			f, ok, err := tp.Listen(t.Context(), 1, &lakeshore.ListenOptions{Timeout: -1})
			if err != nil || !ok || f.Value != "c" {
				t.Errorf("listen: %v %v %v", f.Value, ok, err)
			}
		})
		_, err = tp.Post(t.Context(), "c")
		require.NoError(t, err)
		wg.Wait()

		require.NoError(t, tp.Close(t.Context()))
		_, ok, err = tp.Listen(t.Context(), 2, nil)
		require.ErrorIs(t, err, lakeshore.ErrJournalClosed, "no value will ever come")
		require.False(t, ok)
		_, err = tp.Post(t.Context(), "late")
		require.ErrorIs(t, err, lakeshore.ErrJournalClosed)
		require.ErrorIs(t, tp.Close(t.Context()), lakeshore.ErrJournalClosed)

		_, _, err = tp.Listen(t.Context(), -5, nil)
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
	})

	t.Run("Stream", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		tp, err := q.Topic("")
		require.NoError(t, err)

		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			for i := range 3 {
				if _, err := tp.Post(t.Context(), i); err != nil {
					t.Error(err)
				}
			}
			if err := tp.Close(t.Context()); err != nil {
				t.Error(err)
			}
		})
		frames, err := collect(tp.Stream(t.Context(), lakeshore.FromStart, &lakeshore.StreamOptions{Timeout: 10 * time.Second}))
		require.NoError(t, err, "END ends the stream cleanly")
		require.Equal(t, []any{int64(0), int64(1), int64(2)}, values(frames))

		frames, err = collect(tp.Stream(t.Context(), 1, nil))
		require.NoError(t, err)
		require.Equal(t, []any{int64(2)}, values(frames))
	})

	t.Run("StreamSilence", func(t *testing.T) {
		t.Parallel()
		q, _ := setup(t, nil)
		tp, err := q.Topic("quiet")
		require.NoError(t, err)
		_, err = tp.Post(t.Context(), "only one")
		require.NoError(t, err)
		frames, err := collect(tp.Stream(t.Context(), lakeshore.FromStart, &lakeshore.StreamOptions{Timeout: 30 * time.Millisecond}))
		require.Len(t, frames, 1)
		require.ErrorIs(t, err, lakeshore.ErrTimeout)
		require.ErrorContains(t, err, "topic quiet")
	})
}
