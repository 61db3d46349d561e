package sqliteplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/stretchr/testify/require"
)

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestMaintainerRunOnce(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d, err := Open(ctx, ":memory:", &Config{Now: clock.Now, MaintenanceInterval: time.Hour, Retention: time.Hour})
	require.NoError(t, err)
	defer d.Close()
	runOnce := func() plane.MaintenanceReport {
		var r plane.MaintenanceReport
		require.NoError(t, d.do(ctx, func(t *wtx) error {
			var err error
			r, err = d.maintainer.runOnce(t)
			return err
		}))
		return r
	}
	_, err = d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "ns", Queue: "q", Invocations: []plane.SubmitParams{
		{Payload: []byte{1}, MaxAttempts: 1},
		{Payload: []byte{2}, Deadline: clock.Now().Add(time.Second)},
	}})
	require.NoError(t, err)
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "ns", Queue: "q", LeaseTTL: time.Second})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, plane.MaintenanceReport{}, runOnce(), "nothing is due yet")

	clock.Advance(2 * time.Second)
	require.Equal(t, plane.MaintenanceReport{LeasesExpired: 1, DeadlinesPassed: 1}, runOnce())
	inv, err := d.InvocationGet(ctx, jobs[0].ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateTimeout, inv.State, "the only attempt's lease expired")
	require.Equal(t, plane.ErrorTypeLeaseExpired, inv.Error.Type)

	clock.Advance(2 * time.Hour)
	require.Equal(t, plane.MaintenanceReport{Trimmed: 2}, runOnce(), "both ended more than the retention ago")
	_, err = d.InvocationGet(ctx, jobs[0].ID)
	require.ErrorIs(t, err, plane.ErrNotFound)
}
