package planetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// OldBuildJobs are the invocation ids of a plane written by the lakeshore CLI of commit
// 6ab6e4ec (2026-12-05), the fixture of an upgrade test (plane/sqliteplane
// TestUpgradeFromSchema14, plane/pgplane TestUpgradeFromSchema11). The old CLI made, in
// namespace default: queue gpu with an admission block (max depth 100, a concurrency limit
// of 2 per key) and four queued jobs — Keyed (idempotency key k1), Delayed (by an hour),
// Tenant7 (concurrency key tenant-7) and Tenant8 (concurrency key tenant-8, idempotency key
// k4) —, queue slow with Running, the job of a worker SIGKILLed while it ran, and schedules
// nightly ("0 3 * * *", Europe/Paris) and every (1h) to queue eval.
type OldBuildJobs struct {
	Keyed, Delayed, Tenant7, Tenant8, Running string
}

// CheckUpgraded checks d, a plane this build opened (and so migrated) over such a fixture,
// with its clock after Running's lease ended and before Delayed is due: every job, key,
// admission block and schedule the old build stored is there and works — the idempotency
// key answers its job, claims take the three due jobs and leave the delayed one, new work
// of an old concurrency key runs under its limit, and maintain (the plane's maintenance
// pass) takes Running back for its second attempt.
func CheckUpgraded(t *testing.T, d plane.Driver, jobs OldBuildJobs, maintain func(context.Context) error) {
	t.Helper()
	ctx := t.Context()
	want := map[string]plane.State{jobs.Keyed: plane.StateQueued, jobs.Delayed: plane.StateQueued,
		jobs.Tenant7: plane.StateQueued, jobs.Tenant8: plane.StateQueued, jobs.Running: plane.StateRunning}
	for id, state := range want {
		inv, err := d.InvocationGet(ctx, id)
		require.NoError(t, err, id)
		require.Equal(t, state, inv.State, id)
	}
	res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "gpu",
		Invocations: []plane.SubmitParams{{Payload: []byte{1}, Key: "k1"}}})
	require.NoError(t, err)
	require.True(t, res[0].Existing)
	require.Equal(t, jobs.Keyed, res[0].ID)

	page, err := d.ScheduleList(ctx, &plane.ScheduleListParams{Namespace: "default"})
	require.NoError(t, err)
	require.Len(t, page.Schedules, 2)
	require.Equal(t, "every", page.Schedules[0].Name)
	require.Equal(t, "nightly", page.Schedules[1].Name)
	require.Equal(t, "0 3 * * *", page.Schedules[1].Cron)
	require.Equal(t, "Europe/Paris", page.Schedules[1].TimeZone)

	stats, err := d.QueueStatsList(ctx, "default")
	require.NoError(t, err)
	var gpu *plane.QueueStats
	for i := range stats {
		if stats[i].Queue == "gpu" {
			gpu = &stats[i]
		}
	}
	require.NotNil(t, gpu)
	require.NotNil(t, gpu.Admission)
	require.EqualValues(t, 2, gpu.Admission.ConcurrencyLimit)
	require.EqualValues(t, 100, gpu.Admission.MaxDepth)

	// Three due jobs (one plain, two keyed); the delayed one stays out.
	claimed, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "gpu", Max: 10})
	require.NoError(t, err)
	got := map[string]bool{}
	var settles []plane.SettleParams
	for _, j := range claimed {
		got[j.ID] = true
		settles = append(settles, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded})
	}
	require.Equal(t, map[string]bool{jobs.Keyed: true, jobs.Tenant7: true, jobs.Tenant8: true}, got)
	errs, err := d.InvocationSettleMany(ctx, settles)
	require.NoError(t, err)
	for _, e := range errs {
		require.NoError(t, e)
	}
	// New keyed work of an old key runs under the limit.
	_, err = d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "gpu",
		Invocations: []plane.SubmitParams{{Payload: []byte{2}, ConcurrencyKey: "tenant-7"},
			{Payload: []byte{3}, ConcurrencyKey: "tenant-7"}, {Payload: []byte{4}, ConcurrencyKey: "tenant-7"}}})
	require.NoError(t, err)
	claimed, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "gpu", Max: 10})
	require.NoError(t, err)
	require.Len(t, claimed, 2) // the concurrency limit of 2 per key

	// The job of the SIGKILLed worker: its lease ended long ago; maintenance takes it back.
	require.NoError(t, maintain(ctx))
	claimed, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "slow", Max: 10})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, jobs.Running, claimed[0].ID)
	require.Equal(t, 2, claimed[0].Attempt)
}
