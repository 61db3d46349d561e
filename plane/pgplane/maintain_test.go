package pgplane

import (
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestMaintenanceKeepsUp checks that one maintenance pass goes on while its steps find full
// batches and it has time left: it ends more passed deadlines and trims more rows than the
// 10,000 a pass the plane once stopped at; that a pass with a small budget stops early and
// says it left work behind, on which the leader runs the next pass at once instead of a
// MaintenanceInterval later (planekit's TestLeadPassesAgainAtOnceWhileBehind), so a leader
// takes a backlog up.
// LAKESHORE_TRIM_JOBS sets the number of jobs trimmed in one pass (default 11,000).
func TestMaintenanceKeepsUp(t *testing.T) {
	first, second := 11_000, 6_000
	if s := os.Getenv("LAKESHORE_TRIM_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		first = n
	}
	url := pgtest.Database(t)
	var clock atomic.Int64
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	// The timer's passes of these two never come (an hour apart): only explicit ones run.
	roomy := open(t, url, &Config{Now: now, MaintenanceInterval: time.Hour, LeaderTTL: 3 * time.Minute, Retention: time.Hour})
	require.Equal(t, time.Minute, roomy.maintainBudget())
	tight := open(t, url, &Config{Now: now, MaintenanceInterval: time.Hour, LeaderTTL: 9 * time.Millisecond, Retention: time.Hour})
	require.Equal(t, 3*time.Millisecond, tight.maintainBudget())

	submit := func(n int, deadline time.Time) {
		batch := make([]plane.SubmitParams, 1000)
		for i := range batch {
			batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, Deadline: deadline}
		}
		for submitted := 0; submitted < n; submitted += len(batch) {
			_, err := roomy.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
				Invocations: batch[:min(len(batch), n-submitted)]})
			require.NoError(t, err)
		}
	}
	submit(first, now().Add(time.Second))
	submit(second, now().Add(3*time.Hour))
	count := func(state plane.State) int64 {
		n, err := roomy.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: state})
		require.NoError(t, err)
		return n
	}
	admin := mustConn(t, url)
	rows := func() int64 {
		var n int64
		require.NoError(t, admin.QueryRow(t.Context(), `SELECT count(*) FROM lakeshore.invocations`).Scan(&n))
		return n
	}

	advance(2 * time.Second)
	began := time.Now()
	require.NoError(t, roomy.Maintain(t.Context()))
	t.Logf("one pass ended %d passed deadlines in %v", first, time.Since(began).Round(time.Millisecond))
	require.EqualValues(t, first, count(plane.StateTimeout), "one pass ends every passed deadline, not 1,000")

	advance(time.Hour + time.Second)
	began = time.Now()
	require.NoError(t, roomy.Maintain(t.Context()))
	took := time.Since(began)
	require.EqualValues(t, second, rows(), "one pass trims every row past retention, not 10,000")
	require.Zero(t, count(plane.StateTimeout), "the counters follow the trim")
	t.Logf("one pass trimmed %d rows in %v (%.0f rows/s)", first, took.Round(time.Millisecond), float64(first)/took.Seconds())

	advance(2 * time.Hour)
	behind, err := tight.maintain(t.Context())
	require.NoError(t, err)
	ended := count(plane.StateTimeout)
	t.Logf("a pass with a 3 ms budget ended %d deadlines", ended)
	require.GreaterOrEqual(t, ended, int64(maintainBatch), "a pass runs each step once at least")
	require.LessOrEqual(t, ended, int64(second-3*maintainBatch), "a pass with a small budget stops early")
	require.True(t, behind, "a pass that stopped early says it left work behind")

	// A leader whose passes run out of budget (10 ms) runs the next at once
	// (planekit.Lead; TestLeadPassesAgainAtOnceWhileBehind asserts that on beats of its
	// own, without a race against the timer): once its first pass has begun the backlog,
	// it takes up the rest. Once nothing is left, a pass says so.
	const interval = 5 * time.Second
	open(t, url, &Config{Now: now, MaintenanceInterval: interval, LeaderTTL: 30 * time.Millisecond, Retention: time.Hour})
	require.Eventually(t, func() bool { return count(plane.StateTimeout) > ended }, 30*time.Second, 5*time.Millisecond,
		"the new leader's first pass")
	began = time.Now()
	require.Eventually(t, func() bool { return count(plane.StateTimeout) == int64(second) }, time.Minute, 10*time.Millisecond,
		"the leader takes a backlog up")
	t.Logf("the leader ended the other %d deadlines %v after its first pass began", int64(second)-ended, time.Since(began).Round(time.Millisecond))
	behind, err = tight.maintain(t.Context())
	require.NoError(t, err)
	require.False(t, behind, "a pass that found no full batch left nothing behind")
}
