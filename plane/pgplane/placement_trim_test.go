package pgplane

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestPlacementTrimmed checks, as sqliteplane's, the rows maintenance trims (the conformance case
// PlacementTrim checks that no job is hidden by it): a shape's and a warm pair's rows stay
// while a job of theirs lives, get marked idle by the first pass after, are deleted by a
// pass planekit.PlacementIdleTrim later, and come back with the next submit.
func TestPlacementTrimmed(t *testing.T) {
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	d := open(t, pgtest.Database(t), &Config{Now: func() time.Time { return time.Unix(0, clock.Load()) }, MaintenanceInterval: time.Hour})
	advance := func(by time.Duration) { clock.Add(int64(by)) }
	rows := func() (shapes, warm int) {
		require.NoError(t, d.pool.QueryRow(ctx, `SELECT count(*) FROM `+d.sql.placementTrim[0].table).Scan(&shapes))
		require.NoError(t, d.pool.QueryRow(ctx, `SELECT count(*) FROM `+d.sql.placementTrim[1].table).Scan(&warm))
		return shapes, warm
	}
	hk := "hk1_" + strings.Repeat("b", 32)
	req := &plane.Requirement{GPUs: 1}
	submit := func() {
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: []plane.SubmitParams{
			{Payload: []byte("a"), Requirement: req, Metadata: map[string]string{plane.MetaHostKey: hk}},
			{Payload: []byte("b"), Metadata: map[string]string{plane.MetaHostKey: hk}}}})
		require.NoError(t, err)
	}
	submit()
	check := func(shapes, warm int, why string) {
		t.Helper()
		s, w := rows()
		require.Equal(t, [2]int{shapes, warm}, [2]int{s, w}, why)
	}
	check(1, 2, "one shape; two warm pairs (the shape's and the default shape's)")
	require.NoError(t, d.Maintain(ctx))
	advance(planekit.PlacementIdleTrim + time.Second)
	require.NoError(t, d.Maintain(ctx))
	check(1, 2, "queued jobs keep their rows")
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 5, Worker: "w", LeaseTTL: 24 * time.Hour, Offers: &plane.Offers{GPUs: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	advance(planekit.PlacementIdleTrim + time.Second)
	require.NoError(t, d.Maintain(ctx))
	check(1, 2, "running jobs keep their rows")
	for _, j := range jobs {
		errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
	}
	require.NoError(t, d.Maintain(ctx))
	check(1, 2, "marked idle, not yet removed")
	advance(planekit.PlacementIdleTrim - time.Second)
	require.NoError(t, d.Maintain(ctx))
	check(1, 2, "idle for less than PlacementIdleTrim")
	advance(2 * time.Second)
	require.NoError(t, d.Maintain(ctx))
	check(0, 0, "idle for PlacementIdleTrim: removed")
	submit()
	check(1, 2, "a submit re-creates the rows")
}
