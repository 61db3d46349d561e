package main

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestTokenCreateOnAnOpenServerSaysItChecksNothing: the README's flow — `lakeshore serve`
// (no admin token), then `lakeshore token create --can submit,read --namespace team-a` over
// HTTP — printed a scoped token and nothing else, while that server checks no token at all
// (the team-a token, or any string, may submit to every namespace). Now a create that the
// server took without a token says so on stderr; a create with the admin token on a server
// with authentication, and one on the plane's file, say nothing of it.
func TestTokenCreateOnAnOpenServerSaysItChecksNothing(t *testing.T) {
	t.Setenv(lakeshore.EnvToken, "")
	const note = "runs without authentication and checks no token"

	open := newHTTPCLI(t)
	out, errs, code := open.run("", "token", "create", "--can", "submit,read", "--namespace", "team-a")
	require.Zero(t, code, errs)
	require.Contains(t, out, "scope:   team-a/*")
	require.Contains(t, errs, note)
	require.Contains(t, errs, "LAKESHORE_ADMIN_TOKEN")

	file := newCLI(t)
	_, errs, code = file.run("", "token", "create", "--can", "submit", "--namespace", "team-a")
	require.Zero(t, code, errs)
	require.NotContains(t, errs, note, "the plane's file: tokens for a server to come")

	drv, err := sqliteplane.Open(t.Context(), filepath.Join(t.TempDir(), "plane.db"), nil)
	require.NoError(t, err)
	const admin = "an-admin-token-long-enough-for-the-server-0123456789"
	srv := server.New(drv, &server.Config{AdminToken: admin})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Stop(); drv.Close() })
	authed := &cli{t: t, target: ts.URL}
	_, errs, code = authed.run("", "token", "create", "--can", "submit", "--namespace", "team-a")
	require.Equal(t, exitError, code, "no token: refused")
	require.NotContains(t, errs, note)
	t.Setenv(lakeshore.EnvToken, admin)
	_, errs, code = authed.run("", "token", "create", "--can", "submit", "--namespace", "team-a")
	require.Zero(t, code, errs)
	require.NotContains(t, errs, note)
}

// TestResultTimeoutNamesTheVerbOnce: `lakeshore result ID --timeout 0` on a queued job said
// "lakeshore: result: result ID: waited 0s: wait timed out"; the verb is named once now.
func TestResultTimeoutNamesTheVerbOnce(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.ok("submit", "q", "1")
	_, errs, code := c.run("", "result", id, "--timeout", "0")
	require.Equal(t, exitWaitTimeout, code)
	require.Equal(t, "lakeshore: result "+id+": waited 0s: wait timed out\n", errs)
}
