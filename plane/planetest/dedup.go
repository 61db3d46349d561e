package planetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// testDedup checks dedup windows (SubmitParams.UniqueFor, plane/dedup.go): within the window
// a second submit of the key returns the first invocation; once it has passed, the submit
// takes the key over (the earlier invocation's Key reads "") and enqueues a new one; a
// submit without a window still finds the key's current holder.
func testDedup(t *testing.T, s *suite) {
	t.Run("UniqueFor", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		window := 30 * time.Second
		first := b.submit(t, plane.SubmitParams{Key: "report", UniqueFor: window, Payload: []byte("1")})[0]
		require.False(t, first.Existing)
		b.advance(10 * time.Second)
		again := b.submit(t, plane.SubmitParams{Key: "report", UniqueFor: window, Payload: []byte("2")})[0]
		require.Equal(t, plane.SubmitResult{ID: first.ID, Existing: true}, again, "within the window: the first wins")

		b.advance(20 * time.Second) // 30 s since the first: the window has passed
		next := b.submit(t, plane.SubmitParams{Key: "report", UniqueFor: window, Payload: []byte("3")})[0]
		require.False(t, next.Existing, "after the window a new invocation")
		require.NotEqual(t, first.ID, next.ID)
		require.Equal(t, "report", b.get(t, next.ID).Key)
		require.Empty(t, b.get(t, first.ID).Key, "the earlier invocation gave its key up")
		require.Equal(t, []byte("1"), b.get(t, first.ID).Payload, "and is otherwise untouched")

		plain := b.submit(t, plane.SubmitParams{Key: "report"})[0]
		require.Equal(t, plane.SubmitResult{ID: next.ID, Existing: true}, plain, "without a window the key's holder answers")
		b.advance(time.Hour)
		plain = b.submit(t, plane.SubmitParams{Key: "report"})[0]
		require.Equal(t, next.ID, plain.ID, "a key without a window holds until trimmed")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2})
	})

	t.Run("OneBatch", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		res := b.submit(t, plane.SubmitParams{Key: "k", UniqueFor: time.Minute}, plane.SubmitParams{Key: "k", UniqueFor: time.Minute})
		require.False(t, res[0].Existing)
		require.Equal(t, plane.SubmitResult{ID: res[0].ID, Existing: true}, res[1], "one invocation per key and window in a batch")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for what, p := range map[string]plane.SubmitParams{
			"no key":   {UniqueFor: time.Minute},
			"negative": {Key: "k", UniqueFor: -time.Second},
			"too long": {Key: "k", UniqueFor: plane.UniqueForMax + time.Second},
		} {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{p}})
			requireIs(t, err, plane.ErrInvalid, what)
		}
	})
}
