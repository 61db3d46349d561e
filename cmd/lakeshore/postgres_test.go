package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
)

// newPGCLI runs the command line against a fresh PostgreSQL database of the test server
// (--target postgres://…). It skips where PostgreSQL is not installed (fails with CI=true).
func newPGCLI(t *testing.T) *cli {
	t.Helper()
	return &cli{t: t, target: pgtest.Database(t)}
}

// TestVerbsOnPostgres runs every verb of TestVerbs with --target postgres://….
func TestVerbsOnPostgres(t *testing.T) {
	t.Parallel()
	testVerbs(t, newPGCLI)
}

// TestIssue11VerbsOnPostgres runs the verbs of TestIssue11Verbs with --target postgres://….
func TestIssue11VerbsOnPostgres(t *testing.T) {
	t.Parallel()
	testIssue11Verbs(t, newPGCLI)
}

// TestPostgresFromURL: LAKESHORE_URL=postgres://… (and postgresql://) names the plane of
// every verb without --target.
func TestPostgresFromURL(t *testing.T) {
	db := pgtest.Database(t)
	t.Setenv("LAKESHORE_URL", "postgresql"+strings.TrimPrefix(db, "postgres"))
	c := &cli{t: t}
	run := func(args ...string) string {
		var out, errb strings.Builder
		code := run(t.Context(), args, strings.NewReader(""), &out, &errb)
		require.Equal(t, 0, code, "lakeshore %v: %s", args, errb.String())
		return strings.TrimSpace(out.String())
	}
	id := run("submit", "jobs", `{"x":1}`)
	require.Len(t, id, 26)
	require.Contains(t, run("count", "jobs"), "1")
	// The same job seen through --target: one plane.
	c.target = db
	require.Contains(t, c.ok("get", id), "queued")
}

// TestMigrate: migrate applies the schema, --check reports its version, and a schema of a
// newer build is refused by --check, by migrate and by every verb, with nothing written.
func TestMigrate(t *testing.T) {
	t.Parallel()
	c := newPGCLI(t)

	// A fresh database: --check reports pending migrations (exit 1) and writes nothing.
	out, errs, code := c.run("", "migrate", "--check")
	require.Equal(t, exitJobFailed, code, "stdout: %s stderr: %s", out, errs)
	require.Contains(t, out, "schema lakeshore: version 0")
	require.Contains(t, out, "migrations pending")

	require.Contains(t, c.ok("migrate"), "migrated from version 0")
	require.Contains(t, c.ok("migrate", "--check"), "up to date")
	require.Contains(t, c.ok("migrate"), "up to date", "migrate twice is a no-op")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "migrate", "--check")), &got))
	require.Equal(t, float64(pgplane.SchemaVersion()), got["version"])
	require.Equal(t, true, got["up_to_date"])

	// Another schema name coexists in the same database.
	require.Contains(t, c.ok("migrate", "--schema", "other_plane"), "schema other_plane")
	_, errs, code = c.run("", "migrate", "--schema", "Bad-Name")
	require.Equal(t, exitUsage, code, errs)

	// A newer build migrated it: everything refuses it.
	conn, err := pgx.Connect(context.Background(), c.target)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), `INSERT INTO lakeshore.schema_migrations (version) VALUES ($1)`, pgplane.SchemaVersion()+1)
	require.NoError(t, err)
	for _, args := range [][]string{{"migrate", "--check"}, {"migrate"}, {"submit", "jobs", "1"}} {
		out, errs, code = c.run("", args...)
		require.Equal(t, exitError, code, "%v: stdout %s", args, out)
		require.Contains(t, errs, "newer", "%v", args)
	}
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM lakeshore.invocations`).Scan(&n))
	require.Zero(t, n, "nothing written against a newer schema")

	// Other targets are refused with a usage error.
	sq := newCLI(t)
	_, errs, code = sq.run("", "migrate")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "postgres://")
}

// TestPostgresURLParameters: the plane's schema and poll-only mode are chosen in the URL
// (--target or LAKESHORE_URL: ?schema=…&poll_only=true), for every verb, worker and migrate;
// the parameters never reach PostgreSQL (which refuses parameters it does not know).
func TestPostgresURLParameters(t *testing.T) {
	db := pgtest.Database(t)
	c := &cli{t: t, target: db + "&schema=cli_plane&poll_only=true&poll_interval=100ms&retention=6h"}

	out, errs, code := c.run("", "migrate", "--check")
	require.Equal(t, exitJobFailed, code, "stdout: %s stderr: %s", out, errs)
	require.Contains(t, out, "schema cli_plane: version 0", "migrate reads the URL's schema")
	require.Contains(t, c.ok("migrate"), "schema cli_plane")
	require.Contains(t, c.ok("migrate", "--schema", "cli_plane", "--check"), "up to date", "a flag that agrees")
	_, errs, code = c.run("", "migrate", "--schema", "other")
	require.Equal(t, exitUsage, code, "a flag that contradicts the URL: %s", errs)
	require.Contains(t, errs, "schema")

	id := c.ok("submit", "jobs", `{"x":1}`)
	c.ok("worker", "jobs", "--once", "--", "cat")
	require.Contains(t, c.ok("get", id), "succeeded")

	conn, err := pgx.Connect(context.Background(), db)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM cli_plane.invocations WHERE id = $1`, id).Scan(&n))
	require.Equal(t, 1, n, "the job lives in the URL's schema")
	var other bool
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'lakeshore')`).Scan(&other))
	require.False(t, other, "nothing under the default schema")

	// The same through LAKESHORE_URL.
	t.Setenv("LAKESHORE_URL", c.target)
	env := &cli{t: t}
	require.Contains(t, env.ok("count", "jobs", "succeeded"), "1")

	// A value that does not parse: a usage error naming the parameter, nothing opened.
	bad := &cli{t: t, target: db + "&poll_only=sometimes"}
	_, errs, code = bad.run("", "count", "jobs")
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, "poll_only")
}
