package lakestore

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/porttest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestOpenCatalogFaults: a catalog that cannot be reached is named as pgplane names it
// (nothing listens, the password refused, the database missing), through Open, the
// server's Stores (`lakeshore serve --data postgres://…?blob=…`) and ListQueues, and the
// password never shows. (Before, Open gave pgx's own error, through the migration's
// first statement.) The server's Stores answer each as unavailable, whatever refused
// the server (see serving; this part fails on the code before serving: the password
// refused was plane.ErrUnauthorized, the database missing no plane code at all).
func TestOpenCatalogFaults(t *testing.T) {
	good, err := url.Parse(pgtest.Database(t))
	require.NoError(t, err)
	const secret = "wrong-password-s3cr3t"

	refused := *good
	refused.User = url.UserPassword(pgtest.Superuser, secret)
	refused.Host = porttest.Refused(t) // nothing listens there

	credentials := *good
	credentials.User = url.UserPassword(pgtest.Superuser, secret)

	missing := *good
	missing.Path = "/no_such_catalog"

	// A catalog URL that does not parse: invalid, named, without the password.
	_, err = Open(context.Background(), "q", &Config{Catalog: "postgres://user:" + secret + "@host:notaport/db", Blob: "mem://"})
	require.ErrorIs(t, err, plane.ErrInvalid)
	require.Contains(t, err.Error(), "Config.Catalog")
	require.NotContains(t, err.Error(), secret)

	for _, c := range []struct {
		name, catalog string
		is            []error
		says          string
	}{
		{"ConnectionRefused", refused.String(), []error{pgdb.ErrConnectionRefused, plane.ErrUnavailable}, refused.Host},
		{"WrongCredentials", credentials.String(), []error{pgdb.ErrCredentials, plane.ErrUnauthorized}, pgtest.Superuser},
		{"MissingDatabase", missing.String(), []error{pgdb.ErrDatabaseMissing}, "no_such_catalog"},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := func(err error) {
				t.Helper()
				for _, want := range c.is {
					require.ErrorIs(t, err, want)
				}
				require.Contains(t, err.Error(), c.says)
				require.Contains(t, err.Error(), "catalog")
				require.NotContains(t, err.Error(), secret, "the password never shows")
			}
			_, err := Open(context.Background(), "q", &Config{Catalog: c.catalog, Blob: "mem://"})
			check(err)

			target, err := url.Parse(c.catalog)
			require.NoError(t, err)
			target.RawQuery = url.Values{"blob": {"mem://"}}.Encode()
			stores, err := NewStores(target.String(), nil)
			require.NoError(t, err)
			_, err = stores.Open(context.Background(), "default", "q", true)
			checkServing(t, err, c.says, secret)
			_, err = stores.List(context.Background(), "default")
			checkServing(t, err, c.says, secret)

			_, err = ListQueues(context.Background(), c.catalog, "default")
			check(err)
		})
	}
}

// TestListQueuesBadCatalogHidesPassword: ListQueues given a catalog URL that does not parse
// answers invalid naming the catalog, without the password; on the old code it returned
// pgx's own error, whose masking of the URL shows the part of a password after its first
// "@" (this test fails on the old code).
func TestListQueuesBadCatalogHidesPassword(t *testing.T) {
	_, err := ListQueues(context.Background(), "postgres://lake:pw@Secret9@localhost/lake?sslmode=bogus", "default")
	require.ErrorIs(t, err, plane.ErrInvalid)
	require.Contains(t, err.Error(), "catalog")
	require.NotContains(t, err.Error(), "Secret9")
}

// checkServing checks err, an error of the server's Stores for a catalog it cannot connect
// to: named as Open names it (says, "catalog"), without the password, and unavailable
// and nothing else, so the server answers 502 and not 401 (the caller's token refused)
// nor 500.
func checkServing(t *testing.T, err error, says, secret string) {
	t.Helper()
	require.ErrorIs(t, err, plane.ErrUnavailable)
	require.NotErrorIs(t, err, plane.ErrUnauthorized, "the catalog refused the server, not its caller")
	require.Equal(t, plane.ErrUnavailable.Code, plane.Code(err))
	require.Contains(t, err.Error(), says)
	require.Contains(t, err.Error(), "catalog")
	require.NotContains(t, err.Error(), secret, "the password never shows")
}
