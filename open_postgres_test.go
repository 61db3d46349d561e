package lakeshore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
)

// TestOpenPostgres: postgres:// and postgresql:// targets (and LAKESHORE_URL) open the
// PostgreSQL plane; two Dispatches on one database share it.
func TestOpenPostgres(t *testing.T) {
	db := pgtest.Database(t)
	d, err := lakeshore.Open(t.Context(), db, &lakeshore.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	defer d.Close()
	require.IsType(t, &pgplane.Driver{}, d.Driver())
	q, err := d.Queue("jobs", nil)
	require.NoError(t, err)
	id, err := q.Submit(t.Context(), map[string]any{"x": 1}, nil)
	require.NoError(t, err)

	other := "postgresql" + strings.TrimPrefix(db, "postgres")
	t.Setenv(lakeshore.EnvURL, other)
	d2, err := lakeshore.Open(t.Context(), "", &lakeshore.Config{Logger: testLogger(t),
		Postgres: &pgplane.Config{MaintenanceInterval: 50 * time.Millisecond}})
	require.NoError(t, err)
	defer d2.Close()
	require.IsType(t, &pgplane.Driver{}, d2.Driver())
	q2, err := d2.Queue("jobs", nil)
	require.NoError(t, err)
	got, err := q2.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, id, got.ID, "one plane")
}

// TestOpenPostgresFaults: a refused connection and a missing database are clear errors.
func TestOpenPostgresFaults(t *testing.T) {
	db := pgtest.Database(t)
	s := pgtest.Shared(t)
	_, err := lakeshore.Open(t.Context(), "postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=2", nil)
	require.ErrorIs(t, err, pgplane.ErrConnectionRefused)
	require.ErrorIs(t, err, lakeshore.ErrUnavailable)
	_, err = lakeshore.Open(t.Context(), s.URL("no_such_database"), nil)
	require.ErrorIs(t, err, pgplane.ErrDatabaseMissing)
	_, err = lakeshore.Open(t.Context(), strings.Replace(db, pgtest.Password, "s3cr3t-guess", 1), nil)
	require.ErrorIs(t, err, pgplane.ErrCredentials)
	require.NotContains(t, err.Error(), "s3cr3t-guess", "the password is not echoed")
}

// TestNewOnPostgresPool runs the steps of ExampleNew_postgres on the test server: a plane
// made by pgplane.New on the caller's pool, under the Config's schema, wrapped by
// lakeshore.New; closing the driver leaves the pool open.
func TestNewOnPostgresPool(t *testing.T) {
	db := pgtest.Database(t)
	pool, err := pgxpool.New(t.Context(), db)
	require.NoError(t, err)
	defer pool.Close()

	_, err = pgplane.New(pool, &pgplane.Config{Schema: "Not-A-Schema"})
	require.ErrorIs(t, err, lakeshore.ErrInvalid, "a bad Config is refused before anything is written")

	drv, err := pgplane.New(pool, &pgplane.Config{Schema: "jobs", Logger: testLogger(t)})
	require.NoError(t, err)
	d := lakeshore.New(drv, &lakeshore.Config{Namespace: "examples"})
	q, err := d.Queue("embed", nil)
	require.NoError(t, err)
	id, err := q.Submit(t.Context(), map[string]any{"doc": 1}, nil)
	require.NoError(t, err)
	job, err := q.Claim(t.Context(), nil)
	require.NoError(t, err)
	require.Equal(t, id, job.ID)
	require.NoError(t, q.Ack(t.Context(), job, "done"))
	var result string
	require.NoError(t, q.Result(t.Context(), id, &result, nil))
	require.Equal(t, "done", result)

	require.NoError(t, d.Close())
	require.NoError(t, drv.Close())
	require.NoError(t, pool.Ping(t.Context()), "the pool stays the caller's")
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM jobs.invocations WHERE id = $1`, id).Scan(&n))
	require.Equal(t, 1, n, "under the Config's schema")
}
