package lakeshore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
)

// TestSchedule: Queue.Schedule stores a schedule whose ticks the plane's maintenance fires
// once each; Schedules lists it with its last and next fire; PauseSchedule and
// RemoveSchedule act on it by name.
func TestSchedule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var mu sync.Mutex
	now := time.Date(2031, time.January, 1, 0, 0, 30, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	drv, err := sqliteplane.Open(ctx, ":memory:", &sqliteplane.Config{Logger: testLogger(t), Now: clock, MaintenanceInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, drv.Close()) })
	d := lakeshore.New(drv, &lakeshore.Config{Logger: testLogger(t)})
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	q, err := d.Queue("eval", nil)
	require.NoError(t, err)

	_, err = q.Schedule(ctx, "nightly", nil, &lakeshore.ScheduleOptions{Cron: "0 3 * * * *"})
	require.ErrorIs(t, err, lakeshore.ErrInvalid, "six fields")
	_, err = q.Schedule(ctx, "nightly", nil, nil)
	require.ErrorIs(t, err, lakeshore.ErrInvalid, "no rule")

	sc, err := q.Schedule(ctx, "minutely", map[string]any{"suite": "smoke"}, &lakeshore.ScheduleOptions{
		Every: time.Minute, Metadata: map[string]string{"owner": "eval"}})
	require.NoError(t, err)
	require.Equal(t, time.Date(2031, time.January, 1, 0, 1, 0, 0, time.UTC), sc.NextFire)

	advance(time.Minute)
	require.NoError(t, d.Admin().Maintain(ctx))
	page, err := q.List(ctx, &lakeshore.ListOptions{KeyPrefix: "schedule/minutely/"})
	require.NoError(t, err)
	require.Len(t, page.Invocations, 1)
	require.Equal(t, lakeshore.ScheduleKey("minutely", sc.NextFire), page.Invocations[0].Key)

	list, err := d.Schedules(ctx, "")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, sc.NextFire, list[0].LastFire)
	require.Equal(t, page.Invocations[0].ID, list[0].LastID)

	paused, changed, err := d.PauseSchedule(ctx, "minutely", true)
	require.NoError(t, err)
	require.True(t, paused.Paused)
	require.True(t, changed)
	paused, changed, err = d.PauseSchedule(ctx, "minutely", true)
	require.NoError(t, err)
	require.True(t, paused.Paused)
	require.False(t, changed, "it was already paused")
	advance(time.Hour)
	require.NoError(t, d.Admin().Maintain(ctx))
	page, err = q.List(ctx, &lakeshore.ListOptions{KeyPrefix: "schedule/minutely/"})
	require.NoError(t, err)
	require.Len(t, page.Invocations, 1, "no fire while paused")
	_, _, err = d.PauseSchedule(ctx, "missing", true)
	require.ErrorIs(t, err, lakeshore.ErrNotFound)

	removed, err := d.RemoveSchedule(ctx, "minutely")
	require.NoError(t, err)
	require.True(t, removed)
	list, err = d.Schedules(ctx, "")
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestSubmitUniqueFor: SubmitOptions.UniqueFor is the key's dedup window: within it the
// first id comes back, after it a new invocation takes the key.
func TestSubmitUniqueFor(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var mu sync.Mutex
	now := time.Date(2031, time.January, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	drv, err := sqliteplane.Open(ctx, ":memory:", &sqliteplane.Config{Logger: testLogger(t), Now: clock})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, drv.Close()) })
	d := lakeshore.New(drv, &lakeshore.Config{Logger: testLogger(t)})
	q, err := d.Queue("reports", nil)
	require.NoError(t, err)
	opts := &lakeshore.SubmitOptions{Key: "daily", UniqueFor: 30 * time.Second}
	first, err := q.Submit(ctx, 1, opts)
	require.NoError(t, err)
	again, err := q.Submit(ctx, 2, opts)
	require.NoError(t, err)
	require.Equal(t, first, again, "within the window")
	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	next, err := q.Submit(ctx, 3, opts)
	require.NoError(t, err)
	require.NotEqual(t, first, next, "after the window")
	_, err = q.Submit(ctx, 4, &lakeshore.SubmitOptions{UniqueFor: time.Second})
	require.ErrorIs(t, err, lakeshore.ErrInvalid, "a window needs a key")
}
