package pgplane

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestScheduleLeaderHandover: three planes share one database; the maintenance lease
// holder fires a schedule's ticks; the holder is killed (no lease release) mid-run and
// another takes over. Every tick fires exactly once — none missed (catch-up all), none
// twice — while every plane also runs explicit maintenance passes concurrently at each
// tick but the hand-over ones, racing the leader for the same rows.
func TestScheduleLeaderHandover(t *testing.T) {
	url := pgtest.Database(t)
	var clock atomic.Int64
	start := time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	cfg := Config{Now: now, MaintenanceInterval: 20 * time.Millisecond, LeaderTTL: 600 * time.Millisecond}
	planes := []*Driver{open(t, url, &cfg), open(t, url, &cfg), open(t, url, &cfg)}
	conn := mustConn(t, url)
	leader := func() *Driver {
		var found *Driver
		require.Eventually(t, func() bool {
			holder := leaseHolder(t, conn)
			for _, d := range planes {
				if d.node == holder {
					found = d
					return true
				}
			}
			return false
		}, 20*time.Second, 20*time.Millisecond, "a live plane holds the maintenance lease")
		return found
	}
	_, err := planes[0].ScheduleSet(t.Context(), &plane.Schedule{Namespace: "default", Name: "minutely", Queue: "q",
		Every: time.Minute, CatchUp: plane.CatchUpAll})
	require.NoError(t, err)
	fires := func() []*plane.Invocation {
		page, err := planes[len(planes)-1].InvocationList(t.Context(), &plane.ListParams{Namespace: "default", Queue: "q",
			Oldest: true, Limit: plane.ListLimitMax})
		require.NoError(t, err)
		return page.Invocations
	}

	const ticks = 12
	killed := false
	for i := 1; i <= ticks; i++ {
		clock.Add(int64(time.Minute))
		if i == 4 || i == 8 { // kill the leader twice: only the next leader's timer can fire this tick
			dead := leader()
			abandon(dead)
			for j, d := range planes {
				if d == dead {
					planes = append(planes[:j], planes[j+1:]...)
					break
				}
			}
			killed = true
		} else {
			var wg sync.WaitGroup
			for _, d := range planes { // every replica races the leader for the due row
				wg.Go(func() { require.NoError(t, d.Maintain(t.Context())) })
			}
			wg.Wait()
		}
		require.Eventually(t, func() bool { return len(fires()) >= i }, 20*time.Second, 20*time.Millisecond,
			"tick %d fired (after the hand-over too)", i)
	}
	require.True(t, killed)
	for _, d := range planes {
		require.NoError(t, d.Maintain(t.Context()))
	}
	got := fires()
	require.Len(t, got, ticks, "each tick fired once: none missed, none twice")
	for i, inv := range got {
		require.Equal(t, plane.ScheduleKey("minutely", start.Add(time.Duration(i+1)*time.Minute-30*time.Second)), inv.Key)
	}
	list, err := plane.ListSchedules(t.Context(), planes[0], "default")
	require.NoError(t, err)
	require.Equal(t, start.Add(ticks*time.Minute-30*time.Second), list[0].LastFire)
	require.Equal(t, got[len(got)-1].ID, list[0].LastID)
}

// TestScheduleCapConcurrent: three planes on one database create 24 schedules of distinct
// names in one namespace capped at 10, all at once. Creations serialize on the namespace's
// advisory lock and each counts the ones committed before it, so exactly 10 are stored and
// the other 14 are refused with ErrLimitExceeded (without the lock, READ COMMITTED counts
// let concurrent creations all pass at 9).
func TestScheduleCapConcurrent(t *testing.T) {
	url := pgtest.Database(t)
	cfg := Config{MaxSchedulesPerNamespace: 10}
	planes := []*Driver{open(t, url, &cfg), open(t, url, &cfg), open(t, url, &cfg)}
	var wg sync.WaitGroup
	var stored, refused atomic.Int64
	errs := make(chan error, 24)
	for i := range 24 {
		wg.Go(func() {
			_, err := planes[i%len(planes)].ScheduleSet(t.Context(), &plane.Schedule{Namespace: "team", Name: fmt.Sprintf("s%02d", i),
				Queue: "q", Every: time.Hour})
			switch {
			case err == nil:
				stored.Add(1)
			case errors.Is(err, plane.ErrLimitExceeded):
				refused.Add(1)
			default:
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Equal(t, int64(10), stored.Load(), "exactly the cap stored")
	require.Equal(t, int64(14), refused.Load())
	list, err := plane.ListSchedules(t.Context(), planes[0], "team")
	require.NoError(t, err)
	require.Len(t, list, 10)
}
