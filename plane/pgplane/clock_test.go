package pgplane

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestSkewedMachineClock: a process whose machine clock runs 45 s ahead of the others'
// does not end their leases early. Its plane reads the database's clock (the machine's
// corrected by the offset it measures against PostgreSQL), so its maintenance sees a 30 s
// lease granted by another process as running, and its claims do not take the job again.
// Before, the plane's clock was the machine's: 2 s into the lease the skewed process's
// maintenance expired it, another worker claimed the job while the first still ran it, and
// the first one's heartbeat answered lease_lost.
func TestSkewedMachineClock(t *testing.T) {
	url := pgtest.Database(t)
	a := open(t, url, &Config{MaintenanceInterval: time.Hour})
	id := submitOne(t, a, plane.SubmitParams{})
	jobs, err := a.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", LeaseTTL: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	ahead := func() time.Time { return time.Now().Add(45 * time.Second) }
	b := open(t, url, &Config{MaintenanceInterval: 50 * time.Millisecond, LeaderTTL: time.Second, machineClock: ahead})
	require.Eventually(t, func() bool {
		var leader string
		return b.pool.QueryRow(t.Context(), `SELECT holder FROM lakeshore.leases WHERE name = 'maintenance'`).Scan(&leader) == nil && leader == b.node
	}, 10*time.Second, 10*time.Millisecond, "the skewed process leads maintenance")
	require.NoError(t, b.Maintain(t.Context()))
	time.Sleep(500 * time.Millisecond) // more of its passes

	again, err := b.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", LeaseTTL: 30 * time.Second})
	require.NoError(t, err)
	require.Empty(t, again, "the job is not claimed a second time while its lease runs")
	inv, err := b.InvocationGet(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, plane.StateRunning, inv.State)
	require.Equal(t, 1, inv.Attempt)
	res, err := a.InvocationHeartbeatMany(t.Context(), []plane.HeartbeatParams{{ID: jobs[0].ID, Token: jobs[0].Token}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err, "the first worker still holds its lease")
	require.WithinDuration(t, time.Now().Add(plane.LeaseTTLDefault), res[0].LeaseExpiresAt, 5*time.Second)

	// b's clock, which a server over it stamps and checks tokens' expiries on
	// (plane.ClockOf), is the database's, not its machine's.
	require.WithinDuration(t, time.Now(), plane.ClockOf(b)(), 5*time.Second)

	// The times b stores are the database's, not its machine's.
	other := submitOne(t, b, plane.SubmitParams{})
	inv, err = a.InvocationGet(t.Context(), other)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), inv.CreatedAt, 5*time.Second)
}
