package planetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// PlacementRowsTrimmed checks, on a plane that keeps placement rows (the SQL planes: one row
// per queue and shape, one per warm host key and shape), the rows its maintenance trims
// (the conformance case PlacementTrim checks that no job is hidden by it): a shape's and a
// warm pair's rows stay while a job of theirs lives, get marked idle by the first pass
// after, are deleted by a pass idle later, and come back with the next submit. d is a
// fresh plane on a clock that advance moves, running maintenance only when asked
// (Driver.Maintain); rows counts its shape rows and its warm rows; idle is the plane's idle
// time before a trim (planekit.PlacementIdleTrim).
func PlacementRowsTrimmed(t *testing.T, d plane.Driver, advance func(by time.Duration), rows func() (shapes, warm int), idle time.Duration) {
	t.Helper()
	ctx := context.Background()
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
	advance(idle + time.Second)
	require.NoError(t, d.Maintain(ctx))
	check(1, 2, "queued jobs keep their rows")
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 5, Worker: "w", LeaseTTL: 24 * time.Hour, Offers: &plane.Offers{GPUs: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	advance(idle + time.Second)
	require.NoError(t, d.Maintain(ctx))
	check(1, 2, "running jobs keep their rows")
	for _, j := range jobs {
		errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
	}
	require.NoError(t, d.Maintain(ctx))
	check(1, 2, "marked idle, not yet removed")
	advance(idle - time.Second)
	require.NoError(t, d.Maintain(ctx))
	check(1, 2, "idle for less than PlacementIdleTrim")
	advance(2 * time.Second)
	require.NoError(t, d.Maintain(ctx))
	check(0, 0, "idle for PlacementIdleTrim: removed")
	submit()
	check(1, 2, "a submit re-creates the rows")
}
