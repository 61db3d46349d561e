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
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
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

	planetest.CheckUpgraded(t, d, planetest.OldBuildJobs{Keyed: "01M97HH1YK3RCET79NBM2S0ZZR", Delayed: "01M97HH21GKM05VQBKVYMPWNT7",
		Tenant7: "01M97HH25DRQT8P50WB2086HP9", Tenant8: "01M97HH2856XPH2RD6WCTZZAJM", Running: "01M97HH2Q7YQG9774E4KFP102R"}, d.Maintain)
}
