package pgplane

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/stretchr/testify/require"
)

// TestUpgradeFromSchema11 loads testdata/schema11.sql.gz — `pg_dump --schema=lakeshore
// --inserts` of a database written by the lakeshore CLI of commit 6ab6e4ec (2026-12-05,
// schema version 11, before migrations 0012–0019) — and opens it with this build: it
// migrates, and everything the old build stored is there and works. The old CLI made, in
// namespace default: queue gpu with an admission block (max depth 100, concurrency limit 2
// per key) and four queued jobs — 01M97HH1YK3RCET79NBM2S0ZZR (key k1),
// 01M97HH21GKM05VQBKVYMPWNT7 (delayed an hour), 01M97HH25DRQT8P50WB2086HP9 (concurrency key
// tenant-7), 01M97HH2856XPH2RD6WCTZZAJM (tenant-8, key k4) —, queue slow with job
// 01M97HH2Q7YQG9774E4KFP102R running under a worker SIGKILLed (its lease long expired), and
// schedules nightly ("0 3 * * *", Europe/Paris) and every (1h) to queue eval.
func TestUpgradeFromSchema11(t *testing.T) {
	ctx := t.Context()
	url := pgtest.Database(t)
	f, err := os.Open(filepath.Join("testdata", "schema11.sql.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	dump, err := io.ReadAll(zr)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, string(dump))
	require.NoError(t, err)
	var version int
	require.NoError(t, conn.QueryRow(ctx, `SELECT max(version) FROM lakeshore.schema_migrations`).Scan(&version))
	require.Equal(t, 11, version)

	// The plane's clock stands where the fixture was written (its jobs were submitted at
	// 06:02:17 UTC): 55 minutes on, the killed worker's lease is long over and the job
	// delayed by an hour is not yet due, whatever day the test runs.
	at := time.Date(2026, 12, 7, 6, 57, 17, 0, time.UTC)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour, Now: func() time.Time { return at }})
	require.NoError(t, conn.QueryRow(ctx, `SELECT max(version) FROM lakeshore.schema_migrations`).Scan(&version))
	require.Equal(t, SchemaVersion(), version)

	want := map[string]plane.State{
		"01M97HH1YK3RCET79NBM2S0ZZR": plane.StateQueued, "01M97HH21GKM05VQBKVYMPWNT7": plane.StateQueued,
		"01M97HH25DRQT8P50WB2086HP9": plane.StateQueued, "01M97HH2856XPH2RD6WCTZZAJM": plane.StateQueued,
		"01M97HH2Q7YQG9774E4KFP102R": plane.StateRunning,
	}
	for id, state := range want {
		inv, err := d.InvocationGet(ctx, id)
		require.NoError(t, err, id)
		require.Equal(t, state, inv.State, id)
	}
	res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "gpu",
		Invocations: []plane.SubmitParams{{Payload: []byte{1}, Key: "k1"}}})
	require.NoError(t, err)
	require.True(t, res[0].Existing)
	require.Equal(t, "01M97HH1YK3RCET79NBM2S0ZZR", res[0].ID)

	page, err := d.ScheduleList(ctx, &plane.ScheduleListParams{Namespace: "default"})
	require.NoError(t, err)
	require.Len(t, page.Schedules, 2)
	require.Equal(t, "every", page.Schedules[0].Name)
	require.Equal(t, "nightly", page.Schedules[1].Name)
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
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "gpu", Max: 10})
	require.NoError(t, err)
	got := map[string]bool{}
	var settles []plane.SettleParams
	for _, j := range jobs {
		got[j.ID] = true
		settles = append(settles, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded})
	}
	require.Equal(t, map[string]bool{"01M97HH1YK3RCET79NBM2S0ZZR": true, "01M97HH25DRQT8P50WB2086HP9": true,
		"01M97HH2856XPH2RD6WCTZZAJM": true}, got)
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
	jobs, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "gpu", Max: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 2) // the concurrency limit of 2 per key

	// The job of the SIGKILLed worker: its lease expired long ago; maintenance takes it back.
	require.NoError(t, d.Maintain(ctx))
	jobs, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "slow", Max: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, "01M97HH2Q7YQG9774E4KFP102R", jobs[0].ID)
	require.Equal(t, 2, jobs[0].Attempt)
}
