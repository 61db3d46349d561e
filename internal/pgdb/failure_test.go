package pgdb

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestFailure: a statement whose session was terminated is a lost connection (Lost),
// which Failure names as plane.ErrUnavailable with the server's host and port and
// without the password; so is a reconnect the server refuses; a statement's own error and
// a caller's cancel are not.
func TestFailure(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Database(t)
	pc, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	pool, err := Connect(ctx, pc)
	require.NoError(t, err)
	defer pool.Close()
	cc := pool.Config().ConnConfig
	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer admin.Close(context.Background())

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend($1, 10000)`, conn.Conn().PgConn().PID())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT 1`)
	conn.Release()
	require.True(t, Lost(err), "%v", err)
	f := Failure(ctx, cc, err)
	require.ErrorIs(t, f, plane.ErrUnavailable)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	require.Contains(t, f.Error(), u.Host)
	require.NotContains(t, f.Error(), pgtest.Password)

	_, err = pool.Exec(ctx, `SELECT 1 / 0`)
	require.False(t, Lost(err), "a statement's own error")
	require.Equal(t, err, Failure(ctx, cc, err))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = pool.Exec(cancelled, `SELECT 1`)
	require.Error(t, err)
	require.Equal(t, context.Canceled, Failure(cancelled, cc, err), "the caller's own cancel, not a lost connection")

	// A reconnect the server refuses (the password changed under a running pool) is the
	// storage unreachable for the call, not its caller refused.
	wrong := *u
	wrong.User = url.UserPassword(pgtest.Superuser, "rotated-s3cr3t")
	_, err = pgx.Connect(ctx, wrong.String())
	require.ErrorIs(t, Classify(cc, err), plane.ErrUnauthorized)
	f = Failure(ctx, cc, err)
	require.ErrorIs(t, f, plane.ErrUnavailable)
	require.NotErrorIs(t, f, plane.ErrUnauthorized)
	require.NotContains(t, f.Error(), "rotated-s3cr3t")

	require.NoError(t, Failure(ctx, cc, nil))
}

// TestFailureDiskFull: a statement PostgreSQL refused for a full disk (SQLSTATE 53100,
// disk_full: its transaction rolled back) is plane.DiskFull, limit_exceeded naming the
// server, as a full SQLite file is, not an internal error; over HTTP its answer leaves the
// server's address out (server TestDiskFullAnswerNamesNoPath). A server's full disk cannot
// be made on this machine without mounting a file system, so the server's error is built.
func TestFailureDiskFull(t *testing.T) {
	cc, err := pgx.ParseConfig("postgres://u:secret-password@db.example:5433/d")
	require.NoError(t, err)
	full := &pgconn.PgError{Code: "53100", Message: `could not extend file "base/16384/16385": No space left on device`}
	f := Failure(t.Context(), cc, fmt.Errorf("insert: %w", full))
	var disk *plane.DiskFullError
	require.ErrorAs(t, f, &disk)
	require.ErrorIs(t, f, plane.ErrLimitExceeded)
	require.Equal(t, "limit_exceeded", plane.Code(f))
	require.Contains(t, f.Error(), "the disk holding the PostgreSQL database is full (db.example:5433)")
	require.NotContains(t, f.Error(), "secret-password")
	require.NotContains(t, disk.PublicMessage(), "db.example")

	other := &pgconn.PgError{Code: "23505", Message: "duplicate key"}
	require.Same(t, error(other), Failure(t.Context(), cc, other), "a statement's other errors are its own")
}
