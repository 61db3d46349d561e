package main

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// newAuthedCLI runs the command line against an HTTP server with the admin token admin,
// serving a fresh SQLite plane.
func newAuthedCLI(t *testing.T, admin string) *cli {
	t.Helper()
	drv, err := sqliteplane.Open(t.Context(), filepath.Join(t.TempDir(), "plane.db"), nil)
	require.NoError(t, err)
	srv := server.New(drv, &server.Config{AdminToken: admin})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Stop(); drv.Close() })
	return &cli{t: t, target: ts.URL}
}

// tokenSecret is the secret of a `token create` answer.
func tokenSecret(t *testing.T, out string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "token:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no token line in %q", out)
	return ""
}

// TestWorkerWithoutConsumeSaysSoOnce: `lakeshore worker` run with a token that may submit
// and read but not consume failed with the claim's "forbidden" — and between the
// registration's warning and it, a second warning, "worker deregistration failed", about
// removing a registration the server had refused: nothing had been stored. Now a worker
// every registration of which was refused removes nothing and says nothing of it.
func TestWorkerWithoutConsumeSaysSoOnce(t *testing.T) {
	const admin = "an-admin-token-long-enough-for-the-server-0123456789"
	c := newAuthedCLI(t, admin)
	t.Setenv(lakeshore.EnvToken, admin)
	out := c.ok("token", "create", "--can", "submit,read", "--namespace", "default")
	t.Setenv(lakeshore.EnvToken, tokenSecret(t, out))
	c.ok("submit", "q", "1")

	_, errs, code := c.run("", "worker", "q", "--once", "--", "cat")
	require.Equal(t, exitError, code, errs)
	require.Contains(t, errs, "lakeshore: claim from q: forbidden: the token does not grant consume on queue default/q")
	require.NotContains(t, errs, "deregistration failed", "nothing was registered: nothing to remove")
}

// TestTokenCreateWithoutCanNamesEveryPermission: `token create` without --can said "name at
// least one of submit,consume,read,admin", leaving out data:put and data:read, which a
// bad --can value's message lists; both name the six now.
func TestTokenCreateWithoutCanNamesEveryPermission(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, args := range [][]string{{"token", "create"}, {"token", "create", "--can", "nope"}} {
		_, errs, code := c.run("", args...)
		require.Equal(t, exitUsage, code, errs)
		require.Contains(t, errs, "submit,consume,read,admin,data:put,data:read", "%v", args)
	}
}
