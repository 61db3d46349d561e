package pgdb

import (
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

func TestMain(m *testing.M) { pgtest.VerifyMain(m) }

// TestConnect: Connect reaches a running server, and names each way of failing to
// (nothing listens, credentials refused, database missing) without the password.
func TestConnect(t *testing.T) {
	good, err := url.Parse(pgtest.Database(t))
	require.NoError(t, err)
	connect := func(u url.URL) error {
		pc, err := pgxpool.ParseConfig(u.String())
		require.NoError(t, err)
		pool, err := Connect(t.Context(), pc)
		if err == nil {
			pool.Close()
		}
		return err
	}
	require.NoError(t, connect(*good))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	refused := *good
	refused.Host = fmt.Sprintf("127.0.0.1:%d", port)
	err = connect(refused)
	require.ErrorIs(t, err, ErrConnectionRefused)
	require.ErrorIs(t, err, plane.ErrUnavailable)
	require.Contains(t, err.Error(), refused.Host)

	credentials := *good
	credentials.User = url.UserPassword(pgtest.Superuser, "wrong-password")
	err = connect(credentials)
	require.ErrorIs(t, err, ErrCredentials)
	require.ErrorIs(t, err, plane.ErrUnauthorized)
	require.Contains(t, err.Error(), pgtest.Superuser)
	require.NotContains(t, err.Error(), "wrong-password")

	missing := *good
	missing.Path = "/no_such_database"
	err = connect(missing)
	require.ErrorIs(t, err, ErrDatabaseMissing)
	require.Contains(t, err.Error(), "no_such_database")
}
