package lakeshore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
)

// The tests that set environment variables cannot run in parallel (t.Setenv); the rules
// themselves are tested in parallel through resolveTarget (dispatch_test.go).

func TestOpenProcessDefault(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	t.Setenv(lakeshore.EnvURL, "")
	t.Setenv(lakeshore.EnvHome, home)
	t.Setenv(lakeshore.EnvNamespace, "")

	d, err := lakeshore.Open(t.Context(), "", &lakeshore.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	q, err := d.Queue("q", nil)
	require.NoError(t, err)
	id, err := q.Submit(t.Context(), "kept", nil)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "Close is safe twice")

	fi, err := os.Stat(home)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.FileExists(t, filepath.Join(home, lakeshore.DefaultDBName))

	// The same default again: the job is still there.
	d, err = lakeshore.Open(t.Context(), "", &lakeshore.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	defer d.Close()
	q, err = d.Queue("q", nil)
	require.NoError(t, err)
	inv, err := q.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, lakeshore.StateQueued, inv.State)
	require.Equal(t, lakeshore.NamespaceDefault, q.Namespace())
}

func TestOpenLakeshoreURL(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	t.Setenv(lakeshore.EnvURL, "https://plane.example.com")
	t.Setenv(lakeshore.EnvHome, home)

	// The process default is the HTTP plane at $LAKESHORE_URL (no request is made yet).
	d, err := lakeshore.Open(t.Context(), "", nil)
	require.NoError(t, err)
	require.IsType(t, &httpplane.Driver{}, d.Driver())
	require.NoError(t, d.Close())
	require.NoDirExists(t, home, "the SQLite home is not touched")

	// An explicit target is not affected by LAKESHORE_URL.
	d, err = lakeshore.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	require.IsType(t, &sqliteplane.Driver{}, d.Driver())
	require.NoError(t, d.Close())

	t.Setenv(lakeshore.EnvURL, "redis://localhost")
	_, err = lakeshore.Open(t.Context(), "", nil)
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
	require.ErrorContains(t, err, "LAKESHORE_URL")
}

func TestOpenNamespace(t *testing.T) {
	t.Setenv(lakeshore.EnvNamespace, "team-a")

	d, err := lakeshore.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, "team-a", d.Namespace())
	q, err := d.Queue("q", nil)
	require.NoError(t, err)
	require.Equal(t, "team-a", q.Namespace())
	q, err = d.Queue("q", &lakeshore.QueueOptions{Namespace: "team-b"})
	require.NoError(t, err)
	require.Equal(t, "team-b", q.Namespace())

	d2, err := lakeshore.Open(t.Context(), ":memory:", &lakeshore.Config{Namespace: "explicit"})
	require.NoError(t, err)
	defer d2.Close()
	require.Equal(t, "explicit", d2.Namespace(), "Config.Namespace wins over the environment")

	_, err = lakeshore.Open(t.Context(), ":memory:", &lakeshore.Config{Namespace: "no spaces"})
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
	require.ErrorContains(t, err, "namespace")
}

func TestOpenFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "plane.db")

	a, err := lakeshore.Open(t.Context(), path, &lakeshore.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	defer a.Close()
	b, err := lakeshore.Open(t.Context(), "sqlite://"+path, &lakeshore.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	defer b.Close()

	qa, err := a.Queue("shared", nil)
	require.NoError(t, err)
	qb, err := b.Queue("shared", nil)
	require.NoError(t, err)
	_, err = qa.Submit(t.Context(), 1, nil)
	require.NoError(t, err)
	n, err := qb.Len(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "both targets name the same file")
}

func TestNew(t *testing.T) {
	t.Parallel()
	drv, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	defer drv.Close()

	d := lakeshore.New(drv, &lakeshore.Config{Namespace: "ns"})
	require.Same(t, drv, d.Driver())
	q, err := d.Queue("q", nil)
	require.NoError(t, err)
	_, err = q.Submit(t.Context(), "x", nil)
	require.NoError(t, err)

	require.NoError(t, d.Close())
	n, err := q.Len(t.Context())
	require.NoError(t, err, "Close of a Dispatch from New leaves the driver open")
	require.EqualValues(t, 1, n)

	bad := lakeshore.New(drv, &lakeshore.Config{Namespace: "-bad"})
	_, err = bad.Queue("q", nil)
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
	require.ErrorContains(t, err, "namespace")
}

func TestClosed(t *testing.T) {
	t.Parallel()
	d, err := lakeshore.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	q, err := d.Queue("q", nil)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	_, err = q.Submit(t.Context(), "late", nil)
	require.ErrorIs(t, err, lakeshore.ErrClosed)
}

// TestOpenRejectsOddTargets: targets that would silently become oddly named files are
// refused (run in a scratch directory, so a regression leaves nothing behind).
func TestOpenRejectsOddTargets(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, target := range []string{"  ", " plane.db", "plane.db\n", "sqlite::memory:", "sqlite:plane.db", "SQLite::memory:"} {
		d, err := lakeshore.Open(t.Context(), target, &lakeshore.Config{Logger: testLogger(t)})
		if d != nil {
			d.Close()
		}
		require.ErrorIs(t, err, lakeshore.ErrInvalid, "%q", target)
		var ie *lakeshore.InvalidError
		require.ErrorAs(t, err, &ie)
	}
	_, err := lakeshore.Open(t.Context(), "sqlite::memory:", nil)
	require.ErrorContains(t, err, "sqlite://", "a hint at the right form")
	_, err = lakeshore.Open(t.Context(), "  ", nil)
	require.ErrorContains(t, err, "white space")
	// A libpq keyword/value string would be a SQLite file named after it, password and
	// all; and no refusal shows a password (before, each printed the target whole).
	for _, target := range []string{"host=127.0.0.1 port=5432 user=lake password=Secret9 dbname=lake",
		"dbname=lake password='Secret9'", " postgres://lake:Secret9@db/lake", "postgres://lake:Secret9@db/lake\n",
		"sqlite:postgres://lake:Secret9@db/lake", "ftp://lake:Secret9@db/lake",
		// A URL without its "//": before, a SQLite file of that name was made in the
		// working directory (or its directory named, password and all, as missing).
		"postgres:lake:Secret9@db", "Postgres:/lake:Secret9@db/lake", "postgresql:lake:Secret9@db:5432",
		"http:127.0.0.1:7077", "HTTPS:/lake:Secret9@example.com", "postgres//lake:Secret9@db/lake"} {
		_, err := lakeshore.Open(t.Context(), target, nil)
		require.ErrorIs(t, err, lakeshore.ErrInvalid, "%q", target)
		require.NotContains(t, err.Error(), "Secret9", "%q", target)
	}
	t.Setenv(lakeshore.EnvURL, "ftp://lake:Secret9@db/lake")
	_, err = lakeshore.Open(t.Context(), "", nil)
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
	require.NotContains(t, err.Error(), "Secret9")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no file was created")

	// sqlite://:memory: is the in-process plane.
	d, err := lakeshore.Open(t.Context(), "sqlite://:memory:", &lakeshore.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	q, err := d.Queue("q", nil)
	require.NoError(t, err)
	_, err = q.Submit(t.Context(), 1, nil)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no file was created")

	// A directory is not a plane.
	_, err = lakeshore.Open(t.Context(), dir, nil)
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
	require.ErrorContains(t, err, "directory")
	_, err = lakeshore.Open(t.Context(), "sqlite://"+dir, nil)
	require.ErrorContains(t, err, "directory")
}
