package planetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// statsByQueue indexes QueueStatsList's answer by "namespace/queue", dropping zero counts.
func (b *bundle) statsByQueue(t *testing.T, namespace string) map[string]map[plane.State]int64 {
	t.Helper()
	stats, err := b.drv.QueueStatsList(b.ctx, namespace)
	must(t, err, "queue stats")
	out := map[string]map[plane.State]int64{}
	for _, qs := range stats {
		key := qs.Namespace + "/" + qs.Queue
		require.NotContains(t, out, key, "one entry per queue")
		counts := map[plane.State]int64{}
		for st, n := range qs.Counts {
			if n != 0 {
				counts[st] = n
			}
		}
		if len(counts) > 0 {
			out[key] = counts
		}
	}
	return out
}

func testCount(t *testing.T, s *suite) {
	t.Run("CountsFollowTheLifecycle", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "0", "1", "2", "3", "4")
		ids = append(ids, b.submitOne(t, plane.SubmitParams{MaxAttempts: 1}))
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 6})
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 4})
		require.Len(t, jobs, 4)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2, plane.StateRunning: 4})
		b.ack(t, jobs[0], "ok")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2, plane.StateRunning: 3, plane.StateSucceeded: 1})
		b.nack(t, jobs[1], false, "no")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2, plane.StateRunning: 2, plane.StateSucceeded: 1, plane.StateFailed: 1})
		b.nack(t, jobs[2], true, "again")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 3, plane.StateRunning: 1, plane.StateSucceeded: 1, plane.StateFailed: 1})
		require.True(t, b.kill(t, jobs[3].ID))
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 3, plane.StateSucceeded: 1, plane.StateFailed: 1, plane.StateKilled: 1})
		require.True(t, b.cancel(t, ids[4]))
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2, plane.StateSucceeded: 1, plane.StateFailed: 1, plane.StateKilled: 1, plane.StateCancelled: 1})
		// What counts as queued is exactly what a claimer gets.
		b.advance(pastBackoff)
		queued := b.count(t, plane.StateQueued)
		got := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 100, LeaseTTL: 10 * time.Second})
		require.Len(t, got, int(queued))
		b.requireCounts(t, map[plane.State]int64{plane.StateRunning: 2, plane.StateSucceeded: 1, plane.StateFailed: 1, plane.StateKilled: 1, plane.StateCancelled: 1})
		// Lease expiry: one goes back to queued (attempts left), one ends as timeout.
		b.advance(11 * time.Second)
		b.maintain(t)
		b.requireState(t, ids[2], plane.StateQueued, 2)
		b.requireState(t, ids[5], plane.StateTimeout, 1)
		want := map[plane.State]int64{plane.StateQueued: 1, plane.StateSucceeded: 1, plane.StateFailed: 1, plane.StateKilled: 1,
			plane.StateCancelled: 1, plane.StateTimeout: 1}
		b.requireCounts(t, want)
		require.Equal(t, map[string]map[plane.State]int64{b.ns + "/" + b.q: want}, b.statsByQueue(t, ""), "stats agree with counts")
	})

	t.Run("CountsScopedByNamespaceAndQueue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.submitTo(t, "default", "a", plane.SubmitParams{}, plane.SubmitParams{}, plane.SubmitParams{})
		b.submitTo(t, "default", "b", plane.SubmitParams{})
		b.submitTo(t, "team", "a", plane.SubmitParams{}, plane.SubmitParams{})
		b.claim(t, plane.ClaimParams{Namespace: "team", Queue: "a", Kind: plane.KindFIFO})
		require.EqualValues(t, 3, b.countIn(t, "default", "a", plane.StateQueued))
		require.EqualValues(t, 1, b.countIn(t, "default", "b", plane.StateQueued))
		require.EqualValues(t, 1, b.countIn(t, "team", "a", plane.StateQueued))
		require.EqualValues(t, 1, b.countIn(t, "team", "a", plane.StateRunning))
		require.EqualValues(t, 0, b.countIn(t, "default", "a", plane.StateRunning))
		require.EqualValues(t, 0, b.countIn(t, "nobody", "nothing", plane.StateQueued), "an unknown queue counts 0")

		require.Equal(t, map[string]map[plane.State]int64{
			"default/a": {plane.StateQueued: 3},
			"default/b": {plane.StateQueued: 1},
			"team/a":    {plane.StateQueued: 1, plane.StateRunning: 1},
		}, b.statsByQueue(t, ""), "stats of every namespace")
		require.Equal(t, map[string]map[plane.State]int64{
			"team/a": {plane.StateQueued: 1, plane.StateRunning: 1},
		}, b.statsByQueue(t, "team"), "stats of one namespace")
		require.Empty(t, b.statsByQueue(t, "nobody"))
	})

	t.Run("CountsMatchConcurrentClaims", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		var batch []plane.SubmitParams
		for range 100 {
			batch = append(batch, plane.SubmitParams{})
		}
		b.submit(t, batch...)
		const claimers = 4
		claimed := make([]int, claimers)
		errs := make([]error, claimers)
		var wg sync.WaitGroup
		for c := range claimers {
			wg.Go(func() {
				for range 10 {
					jobs, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindPriority, Max: 2})
					if err != nil {
						errs[c] = err
						return
					}
					claimed[c] += len(jobs)
				}
			})
		}
		submitErrs := make([]error, 2)
		for i := range submitErrs {
			wg.Go(func() {
				_, submitErrs[i] = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: batch[:25]})
			})
		}
		wg.Wait()
		for _, err := range submitErrs {
			must(t, err, "submit")
		}
		total := 0
		for c := range claimers {
			must(t, errs[c], "claim")
			total += claimed[c]
		}
		require.Equal(t, 80, total)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 150 - 80, plane.StateRunning: 80})
	})
}
