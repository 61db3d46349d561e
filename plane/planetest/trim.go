package planetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

func (b *bundle) trim(t *testing.T, p plane.TrimParams) int64 {
	t.Helper()
	n, err := b.drv.InvocationTrim(b.ctx, &p)
	must(t, err, "trim")
	return n
}

// requireGone checks that invocation id and its journal are gone.
func (b *bundle) requireGone(t *testing.T, id string) {
	t.Helper()
	_, err := b.drv.InvocationGet(b.ctx, id)
	requireIs(t, err, plane.ErrNotFound, "get of a trimmed invocation")
	start := time.Now()
	_, err = b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id, Timeout: longWait})
	requireIs(t, err, plane.ErrNotFound, "result of a trimmed invocation")
	require.Less(t, time.Since(start), wakeLatency, "a trimmed id fails at once")
	_, err = b.drv.FrameRead(b.ctx, &plane.FrameReadParams{Journal: invJournal(id), Since: -1})
	requireIs(t, err, plane.ErrNotFound, "stream of a trimmed invocation")
}

func testTrim(t *testing.T, s *suite) {
	t.Run("TrimRemovesFinishedBeforeCutoff", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		old := b.submitOne(t, plane.SubmitParams{Key: "old-key"})
		recent := b.submitOne(t, plane.SubmitParams{Key: "recent-key"})
		queued := b.submitOne(t, plane.SubmitParams{Key: "queued-key"})
		running := b.submitOne(t, plane.SubmitParams{Key: "running-key"})
		j := b.claimID(t, old)
		b.post(t, j, "frame")
		b.ack(t, j, "old result")
		cutoff := b.advance(30 * time.Minute)
		b.advance(30 * time.Minute)
		b.ack(t, b.claimID(t, recent), "recent result")
		jr := b.claim(t, plane.ClaimParams{Kind: plane.KindFILO, LeaseTTL: 100 * time.Hour})[0]
		require.Equal(t, running, jr.ID)

		require.EqualValues(t, 1, b.trim(t, plane.TrimParams{FinishedBefore: cutoff}))
		b.requireGone(t, old)
		require.Equal(t, []byte("recent result"), b.requireState(t, recent, plane.StateSucceeded, 1).Result)
		frames, closed := b.frames(t, invJournal(recent))
		require.True(t, closed)
		require.Len(t, frames, 1, "a kept invocation keeps its journal")

		r := b.submit(t, plane.SubmitParams{Key: "old-key"})[0]
		require.False(t, r.Existing, "trimming frees the key")
		require.NotEqual(t, old, r.ID, "a freed key makes a new invocation")
		require.Equal(t, plane.SubmitResult{ID: recent, Existing: true}, b.submit(t, plane.SubmitParams{Key: "recent-key"})[0])

		require.EqualValues(t, 1, b.trim(t, plane.TrimParams{FinishedBefore: b.now().Add(100 * time.Hour)}), "only terminal invocations are trimmed")
		b.requireGone(t, recent)
		b.requireState(t, queued, plane.StateQueued, 0)
		b.requireState(t, running, plane.StateRunning, 1)
		b.requireState(t, r.ID, plane.StateQueued, 0)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2, plane.StateRunning: 1})
		b.ack(t, jr, "a live job is untouched by trim")
	})

	t.Run("TrimEveryTerminalState", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		var ended []string
		ok := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
		b.ack(t, ok, "ok")
		failed := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
		b.nack(t, failed, false, "no")
		killed := b.claimID(t, b.submitOne(t, plane.SubmitParams{}))
		require.True(t, b.kill(t, killed.ID))
		cancelled := b.submitOne(t, plane.SubmitParams{})
		require.True(t, b.cancel(t, cancelled))
		timedOut := b.submitOne(t, plane.SubmitParams{Deadline: b.now().Add(time.Second)})
		b.advance(2 * time.Second)
		b.maintain(t)
		b.requireState(t, timedOut, plane.StateTimeout, 0)
		ended = append(ended, ok.ID, failed.ID, killed.ID, cancelled, timedOut)
		b.advance(time.Second)
		require.EqualValues(t, 5, b.trim(t, plane.TrimParams{FinishedBefore: b.now()}))
		for _, id := range ended {
			b.requireGone(t, id)
		}
		b.requireCounts(t, map[plane.State]int64{})
	})

	t.Run("TrimScopedByNamespaceAndQueue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := map[string]string{}
		for _, nq := range [][2]string{{"default", "q1"}, {"default", "q2"}, {"team", "q1"}} {
			id := b.submitTo(t, nq[0], nq[1], plane.SubmitParams{})[0].ID
			require.True(t, b.cancel(t, id))
			ids[nq[0]+"/"+nq[1]] = id
		}
		later := b.advance(time.Minute)
		require.Zero(t, b.trim(t, plane.TrimParams{}), "a zero cutoff trims nothing")
		require.EqualValues(t, 1, b.trim(t, plane.TrimParams{Namespace: "default", Queue: "q1", FinishedBefore: later}))
		b.requireGone(t, ids["default/q1"])
		b.get(t, ids["default/q2"])
		b.get(t, ids["team/q1"])
		require.EqualValues(t, 1, b.trim(t, plane.TrimParams{Namespace: "team", FinishedBefore: later}))
		b.requireGone(t, ids["team/q1"])
		b.get(t, ids["default/q2"])
		require.EqualValues(t, 1, b.trim(t, plane.TrimParams{FinishedBefore: later}))
		b.requireGone(t, ids["default/q2"])
	})

	t.Run("RetentionTrimsAfterSevenDays", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		require.Equal(t, 7*24*time.Hour, plane.RetentionDefault, "the semantics page says 7 days")
		done := b.submitOne(t, plane.SubmitParams{Key: "done"})
		live := b.submitOne(t, plane.SubmitParams{Key: "live"})
		b.ack(t, b.claimID(t, done), "")
		b.advance(plane.RetentionDefault - time.Minute)
		b.maintain(t)
		require.Equal(t, plane.StateSucceeded, b.get(t, done).State, "kept for the retention period")
		b.advance(2 * time.Minute)
		b.maintain(t)
		b.requireGone(t, done)
		require.False(t, b.submit(t, plane.SubmitParams{Key: "done"})[0].Existing, "the key is free after retention")
		b.requireState(t, live, plane.StateQueued, 0)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2})
	})
}
