package pgdb

import (
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/porttest"
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

	// A port held by a socket that never listens (porttest.Refused), not a closed
	// listener's: another process (a parallel package's server) could take that port before
	// the dial, which then reached it instead of being refused.
	refused := *good
	refused.Host = porttest.Refused(t)
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

// TestParseConfigHidesPassword: a database URL that does not parse is refused naming the
// URL and pgx's reason, never its password, even one holding "@", "/", "?" or "#"
// unescaped. On the old code pgx's own masking of the URL in its reason showed the part
// of a password after its first "@", and the URL of a password with '/' or '?' was shown
// whole (this test fails on the old code).
// TestParseConfigRefusesACutAuthority: a URL whose password holds '/', '?' or '#' unescaped
// after digits parses (host and port from inside the password, the rest as a database
// name, a parameter or a fragment), so pgx took it and its errors named part of the
// password as host and port; it is refused as invalid without any part of the password
// (the old code returned a config). A user given as a parameter with an "@" is accepted.
func TestParseConfigRefusesACutAuthority(t *testing.T) {
	for _, u := range []string{
		"postgres://lake:9731#Secret9@localhost/lake",
		"postgres://lake:9731/Secret9@localhost/lake",
		"postgres://lake:9731?Secret9@localhost/lake",
		"postgres://lake:#Secret9@localhost:5432/lake?sslmode=disable",
		"postgres://lake:pw@9731#Secret9@localhost/lake",
	} {
		_, err := ParseConfig("database URL", u)
		require.Error(t, err, u)
		require.True(t, errors.Is(err, plane.ErrInvalid), "%s: %v", u, err)
		require.NotContains(t, err.Error(), "Secret9", u)
		require.NotContains(t, err.Error(), "9731", u)
		require.Contains(t, err.Error(), "%23", u)
	}
	// A database name holding an "@" reads as a password cut short: refused, asking for it
	// escaped; escaped it is the database's name.
	_, err := ParseConfig("database URL", "postgres://app:pw@db:5432/team@prod")
	require.ErrorIs(t, err, plane.ErrInvalid)
	require.Contains(t, err.Error(), "an '@' in the database name")
	pc, err := ParseConfig("database URL", "postgres://app:pw@db:5432/team%40prod")
	require.NoError(t, err)
	require.Equal(t, "team@prod", pc.ConnConfig.Database)
	pc, err = ParseConfig("database URL", "postgres://localhost:5432/lake?user=me@example")
	require.NoError(t, err)
	require.Equal(t, "me@example", pc.ConnConfig.User)
	pc, err = ParseConfig("database URL", "postgres://lake:9731%23Secret9@localhost/lake")
	require.NoError(t, err)
	require.Equal(t, "9731#Secret9", pc.ConnConfig.Password)
}

func TestParseConfigHidesPassword(t *testing.T) {
	for _, u := range []string{
		"postgres://lake:pw@Secret9@localhost/lake?sslmode=bogus",
		"postgres://lake:pw@Secret9@localhost/lake?connect_timeout=abc",
		"postgres://lake:pw/Secret9@localhost/lake?sslmode=bogus",
		"postgres://lake:pw?Secret9@localhost/lake?sslmode=bogus",
		"postgres://lake:pw#Secret9@localhost:5432/lake?sslmode=bogus",
		"postgres://lake:pwSecret9@localhost/lake?sslmode=bogus",
		"postgres://localhost/lake?password=pwSecret9&sslmode=bogus",
	} {
		_, err := ParseConfig("database URL", u)
		require.Error(t, err, u)
		require.NotContains(t, err.Error(), "Secret9", u)
		require.True(t, errors.Is(err, plane.ErrInvalid), "%s: %v", u, err)
	}
}

// TestParseConfigRefusesAPasswordCutAtQuestionMark: a password holding '?' unescaped
// ("postgres://u:12?a=b@h/db") puts the rest of the URL in a parameter's value, which pgx
// took (host u, port 12, parameter a = "b@h/db"); it is refused as invalid, asking for the
// password percent-escaped, without any part of the password (the old code returned a
// config). Escaped, it is the password.
func TestParseConfigRefusesAPasswordCutAtQuestionMark(t *testing.T) {
	for _, u := range []string{
		"postgres://lake:9731?a=Secret9@localhost/lake",
		"postgres://lake:9731?a=Secret9@localhost",
		"postgres://lake:9731/x?a=Secret9@localhost/lake?sslmode=disable", // pgx refused it for its two "?" only
	} {
		_, err := ParseConfig("database URL", u)
		require.Error(t, err, u)
		var invalid *plane.InvalidError
		require.ErrorAs(t, err, &invalid, u)
		require.ErrorIs(t, err, plane.ErrInvalid, u)
		require.NotContains(t, err.Error(), "Secret9", u)
		require.NotContains(t, err.Error(), "9731", u)
		require.Contains(t, err.Error(), "percent-escaped", u)
		require.Contains(t, err.Error(), "%3F", u)
	}
	pc, err := ParseConfig("database URL", "postgres://lake:9731%3Fa=Secret9@localhost/lake")
	require.NoError(t, err)
	require.Equal(t, "9731?a=Secret9", pc.ConnConfig.Password)
	require.Equal(t, "localhost", pc.ConnConfig.Host)
}
