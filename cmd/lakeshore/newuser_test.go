package main

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/porttest"
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

// TestSubmitAndScheduleRefusalsNameTheFlag: a value `submit` or `schedule add` passes to the
// plane and the plane refuses named the plane's field (`invalid time_zone "Mars/Olympus"`,
// `invalid catch_up "x"`, `invalid max_attempts -1`), not the flag the user typed, as `queue
// set` already does; exit 2 and nothing written, on the file plane and over HTTP.
func TestSubmitAndScheduleRefusalsNameTheFlag(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			for _, bad := range []struct {
				args []string
				want string
			}{
				{[]string{"submit", "q", "1", "--max-attempts", "-1"}, "lakeshore: --max-attempts: invalid max_attempts -1:"},
				{[]string{"submit", "q", "1", "--attempt-timeout", "-1s"}, "lakeshore: --attempt-timeout: invalid attempt_timeout -1s:"},
				{[]string{"submit", "q", "1", "--debounce", "1s"}, "lakeshore: --debounce: invalid debounce 1s: a debounce window needs"},
				{[]string{"submit", "q", "1", "--key", "k", "--unique-for", "-1s"}, "lakeshore: --unique-for: invalid unique_for -1s:"},
				{[]string{"schedule", "add", "s", "0 3 * * *", "--queue", "q", "--time-zone", "Mars/Olympus"}, "lakeshore: --time-zone: invalid time_zone \"Mars/Olympus\":"},
				{[]string{"schedule", "add", "s", "--every", "1m", "--queue", "q", "--catch-up", "x"}, "lakeshore: --catch-up: invalid catch_up \"x\":"},
				{[]string{"schedule", "add", "s", "--every", "100ms", "--queue", "q"}, "lakeshore: --every: invalid every \"100ms\":"},
				{[]string{"schedule", "add", "s", "--every", "1m", "--queue", "q", "--max-attempts", "-4"}, "lakeshore: --max-attempts: invalid max_attempts -4:"},
			} {
				_, errs, code := c.run("", bad.args...)
				require.Equal(t, exitUsage, code, "%v: %s", bad.args, errs)
				require.True(t, strings.HasPrefix(errs, bad.want), "%v:\n got %q\nwant %q…", bad.args, errs, bad.want)
			}
			require.Equal(t, "0", c.ok("count", "q", "queued"), "nothing was submitted")
			out := c.ok("--json", "schedule", "list")
			require.Equal(t, "[]", out, "nothing was scheduled")
		})
	}
}

// TestWrongArgumentCountShowsTheUsage: `lakeshore stream` without its id said only
// "lakeshore: accepts 1 arg(s), received 0", naming neither the verb nor what it takes.
func TestWrongArgumentCountShowsTheUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, bad := range []struct {
		args []string
		want string
		verb string // whose --help the hint names
	}{
		{[]string{"stream"}, "lakeshore: usage: lakeshore stream ID [flags] (accepts 1 arg(s), received 0)\n", "lakeshore stream"},
		{[]string{"jobs", "a", "b"}, "lakeshore: usage: lakeshore jobs QUEUE [flags] (accepts 1 arg(s), received 2)\n", "lakeshore jobs"},
		{[]string{"data", "get"}, "lakeshore: usage: lakeshore data get QUEUE [flags] (accepts 1 arg(s), received 0)\n", "lakeshore data get"},
	} {
		_, errs, code := c.run("", bad.args...)
		require.Equal(t, exitUsage, code, errs)
		require.True(t, strings.HasPrefix(errs, bad.want), "%v: %q", bad.args, errs)
		require.Contains(t, errs, "\nRun '"+bad.verb+" --help' for usage.\n")
	}
}

// TestKillWaitFailsAsAOneShotVerb: `kill --wait` against a server that refuses connections
// skipped the reachability check (as a verb that waits) and then failed after about half a
// second anyway (the kill request is retried only briefly), with the raw dial error ("POST
// /v1/…/kill: plane unavailable (Post …: dial tcp …: connection refused)"). It now fails as
// `kill` does: the notice, then the error naming the URL, within about two seconds.
func TestKillWaitFailsAsAOneShotVerb(t *testing.T) {
	t.Parallel()
	url := refusedURL(t)
	c := &cli{t: t, target: url}
	start := time.Now()
	_, errs, code := c.run("", "kill", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--wait")
	require.Equal(t, exitError, code, errs)
	require.Contains(t, errs, "retrying…")
	require.Contains(t, errs, "refuses connections (tried for")
	require.NotContains(t, errs, "dial tcp")
	require.Less(t, time.Since(start), 5*time.Second)
}

// TestQueueSetLocalLakeshoreWorkerNeedsNoPath: docs/providers.md's first example (`queue set
// thumbnails --provider local … --worker-command 'lakeshore worker thumbnails -- ./thumb.sh
// {}'`, with the binary built in place as the README does, on no PATH) warned that "lakeshore"
// is not found on this machine and must exist where workers are launched, while the local
// provider runs the supervisor's own executable for it and every launch worked. The warning
// stays for another program, and for SLURM.
func TestQueueSetLocalLakeshoreWorkerNeedsNoPath(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no lakeshore, nothing at all
	c := newCLI(t)
	_, errs, code := c.run("", "queue", "set", "thumbnails", "--provider", "local",
		"--worker-command", "lakeshore worker thumbnails -- ./thumb.sh {}")
	require.Zero(t, code, errs)
	require.NotContains(t, errs, "not found on this machine")
	_, errs, code = c.run("", "queue", "set", "other", "--provider", "local", "--worker-command", "python3 worker.py")
	require.Zero(t, code, errs)
	require.Contains(t, errs, `the worker command "python3" is not found on this machine`)
	_, errs, code = c.run("", "queue", "set", "gpu", "--provider", "slurm", "--worker-command", "lakeshore worker gpu -- ./t.sh")
	require.Zero(t, code, errs)
	require.Contains(t, errs, `the worker command "lakeshore" is not found on this machine`, "a SLURM node runs its own")
}

// TestSubmitWaitRefusedSaysNothingAnswers: `submit --wait` against a server that refuses
// connections rides the outage out (the submit is repeated for 30 s) and then printed the
// raw error ("POST /v1/…/invocations/batch: plane unavailable (Post …: dial tcp …:
// connection refused)"); it now fails as a one-shot verb does, naming the server and that
// nothing answers there, still after the ride-out.
func TestSubmitWaitRefusedSaysNothingAnswers(t *testing.T) {
	t.Parallel()
	url := refusedURL(t)
	c := &cli{t: t, target: url}
	start := time.Now()
	_, errs, code := c.run("", "submit", "q", "1", "--wait")
	require.Equal(t, exitError, code, errs)
	require.GreaterOrEqual(t, time.Since(start), 25*time.Second, "the submit still rides the outage out: %s", errs)
	require.Contains(t, errs, "lakeshore: nothing answers at "+url+": it refuses connections (gave up after ")
	require.Contains(t, errs, "is 'lakeshore serve' running?")
	require.NotContains(t, errs, "dial tcp")
	require.NotContains(t, errs, "/v1/")
	require.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
}

// refusedURL is the http:// URL of a local port nothing listens on while the test runs:
// connections to it are refused (porttest.Refused).
func refusedURL(t *testing.T) string {
	t.Helper()
	return "http://" + porttest.Refused(t)
}

// TestDataVerbsRefusedSayNothingAnswers: the data verbs against a server that refuses
// connections printed the raw dial error ("… Get \"http://…\": dial tcp …: connection
// refused"); they now fail as the job verbs do (the same reachability check before the
// queue is opened): the notice, then one line naming the server and that nothing answers
// there.
func TestDataVerbsRefusedSayNothingAnswers(t *testing.T) {
	t.Parallel()
	url := refusedURL(t)
	for _, args := range [][]string{
		{"data", "put", "d"}, {"data", "get", "d"}, {"data", "stats", "d"}, {"data", "flush", "d"},
		{"data", "partitions", "d"}, {"data", "consumption", "d"}, {"data", "export", "d", t.TempDir()},
	} {
		t.Run(args[1], func(t *testing.T) {
			t.Parallel()
			c := &cli{t: t, target: url}
			start := time.Now()
			_, errs, code := c.run(`{"a":1}`+"\n", args...)
			require.Equal(t, exitError, code, errs)
			require.Contains(t, errs, "retrying…")
			require.Contains(t, errs, "nothing answers at "+url+": it refuses connections (tried for ")
			require.Contains(t, errs, "is 'lakeshore serve' running?")
			require.NotContains(t, errs, "dial tcp")
			require.Less(t, time.Since(start), 10*time.Second)
		})
	}
}
