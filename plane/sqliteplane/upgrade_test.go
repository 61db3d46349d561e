package sqliteplane

import (
	"compress/gzip"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
	"github.com/stretchr/testify/require"
)

// schema14 writes testdata/schema14.db.gz, unpacked, to a new file and returns its path: a
// plane file written by the lakeshore CLI of commit 6ab6e4ec (2026-12-05, schema version 14,
// before migrations 015–017), holding in namespace default: queue gpu with an admission
// block (max depth 100, concurrency limit 2 per key) and four queued jobs — 01M97GPECXN61CH7E27VHA2XMS
// (key k1), 01M97GPEDRWKS7VWH80PYQGQZM (delayed by an hour), 01M97GPEEFC7BNNKA8NW2PA4KX
// (concurrency key tenant-7), 01M97GPEFA92PQ2XHA35H085RW (tenant-8, key k4) —; queue done with
// one succeeded job; queue slow with one job running under a worker SIGKILLed (its lease long
// expired); schedules nightly ("0 3 * * *", Europe/Paris) and every (1h) to queue eval. It was
// made with the old binary: submit, queue set, schedule add, worker --once, a worker killed
// with SIGKILL, then `sqlite3 lakeshore.db "VACUUM INTO 'schema14.db'"`.
func schema14(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "schema14.db.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "lakeshore.db")
	out, err := os.Create(path)
	require.NoError(t, err)
	_, err = io.Copy(out, zr)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return path
}

func userVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var v int
	require.NoError(t, db.QueryRow("PRAGMA user_version").Scan(&v))
	return v
}

// A file written by an older Lakeshore opens in this one: it migrates, and every job,
// key, admission block and schedule the old build stored is there and works (claims honour
// the keys, the delayed job stays out, the job of the killed worker is taken back).
func TestUpgradeFromSchema14(t *testing.T) {
	ctx := context.Background()
	path := schema14(t)
	require.Equal(t, 14, userVersion(t, path))
	// The plane's clock stands where the fixture was written (its jobs were submitted at
	// 05:47:45 UTC): 55 minutes on, the killed worker's lease is long over and the job
	// delayed by an hour is not yet due, whatever day the test runs.
	at := time.Date(2026, 12, 7, 6, 42, 45, 0, time.UTC)
	d, err := Open(ctx, path, &Config{Now: func() time.Time { return at }})
	require.NoError(t, err)
	defer d.Close()
	files, _ := migrations.ReadDir("migrations")
	require.Equal(t, len(files), userVersion(t, path))

	planetest.CheckUpgraded(t, d, planetest.OldBuildJobs{Keyed: "01M97GPECXN61CH7E27VHA2XMS", Delayed: "01M97GPEDRWKS7VWH80PYQGQZM",
		Tenant7: "01M97GPEEFC7BNNKA8NW2PA4KX", Tenant8: "01M97GPEFA92PQ2XHA35H085RW", Running: "01M97GPENBJXGDWTCVAQAWXKF9"}, d.Maintain)
}

// A file migrated by a newer build is refused, naming the file and both versions, and left
// as it was: before, Open skipped every migration and this build ran against tables and
// triggers it did not know (a downgrade that wrote).
func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := schema14(t)
	d, err := Open(ctx, path, nil)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec("PRAGMA user_version = 99")
	require.NoError(t, err)
	var before int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM invocations").Scan(&before))
	require.NoError(t, db.Close())

	_, err = Open(ctx, path, nil)
	require.ErrorIs(t, err, ErrSchemaNewer)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "schema version 99")
	files, _ := migrations.ReadDir("migrations")
	require.ErrorContains(t, err, fmt.Sprintf("up to %d", len(files)))
	require.Equal(t, 99, userVersion(t, path))
}

// A newer build migrating the file while this one has it open (an old daemon or server
// still running beside a new one): this process's next write is refused with
// ErrSchemaNewer (and plane.ErrUnavailable: another process may serve it) and writes
// nothing; before, it went on writing with its own statements beside the newer triggers.
func TestNewerBuildMigratedWhileOpen(t *testing.T) {
	ctx := context.Background()
	path := schema14(t)
	d, err := Open(ctx, path, nil)
	require.NoError(t, err)
	defer d.Close()
	submit := func() error {
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "late",
			Invocations: []plane.SubmitParams{{Payload: []byte{1}}}})
		return err
	}
	require.NoError(t, submit())
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	files, _ := migrations.ReadDir("migrations")
	_, err = db.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(files)+1)) // the newer build's migration
	require.NoError(t, err)

	err = submit()
	require.ErrorIs(t, err, ErrSchemaNewer)
	require.ErrorIs(t, err, plane.ErrUnavailable)
	require.ErrorContains(t, err, path)
	require.ErrorIs(t, submit(), ErrSchemaNewer, "every later write too")
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM invocations WHERE queue = 'late'`).Scan(&n))
	require.Equal(t, 1, n, "nothing written after the newer migration")
	_, err = d.InvocationGet(ctx, "01M97GPECXN61CH7E27VHA2XMS")
	require.NoError(t, err, "reads go on")
}
