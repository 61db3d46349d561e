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

// TestQueueGetSaysNoneForNoLimit: after `queue set q --rate-limit 5`, `queue get q` showed
// "max depth 0", "deadline cutoff 0s" (and with keys "concurrency limit 0 per key"): limits
// the block does not have, read as a queue that admits nothing. A zero limit reads "none"
// now, as the per-key rate overrides already did; a set one is shown as before.
func TestQueueGetSaysNoneForNoLimit(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("queue", "set", "q", "--rate-limit", "5", "--key-weight", "a=2")
	get := c.ok("queue", "get", "q")
	for _, line := range []string{"max depth          none", "rate limit         5/s", "burst              5",
		"deadline cutoff    none", "concurrency limit  none"} {
		require.Contains(t, get, line)
	}
	c.ok("queue", "set", "q", "--max-depth", "3", "--deadline-cutoff", "1m", "--concurrency-limit", "2", "--rate-limit", "0")
	get = c.ok("queue", "get", "q")
	for _, line := range []string{"max depth          3", "rate limit         none", "burst              none",
		"deadline cutoff    1m0s", "concurrency limit  2 per key"} {
		require.Contains(t, get, line)
	}
	// A key's own limit of 0 is no limit too (the key runs unbounded under a queue-wide
	// limit of 2): it read 'key "big" limit 0', a key that runs nothing.
	c.ok("queue", "set", "q", "--concurrency-limit", "2", "--key-limit", "big=0", "--key-limit", "small=1")
	get = c.ok("queue", "get", "q")
	require.Regexp(t, `key "big" limit\s+none\n`, get)
	require.Regexp(t, `key "small" limit\s+1\n`, get)
}

// TestDataVerbsCountInGoodEnglish: `data put` of one record printed "put 1 records: indexes
// 0–0" and `data export` of it "exported 1 records into 1 files"; one is singular now.
func TestDataVerbsCountInGoodEnglish(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dataDir := t.TempDir()
	out, errs, code := c.run(`{"step": 1}`+"\n", "data", "put", "events", "--data-dir", dataDir)
	require.Zero(t, code, errs)
	require.Equal(t, "put 1 record: index 0\n", out)
	out, errs, code = c.run(`{"step": 2}`+"\n"+`{"step": 3}`+"\n", "data", "put", "events", "--data-dir", dataDir)
	require.Zero(t, code, errs)
	require.Equal(t, "put 2 records: indexes 1–2\n", out)

	_, errs, code = c.run("", "data", "export", "events", t.TempDir(), "--data-dir", dataDir, "--rows-per-file", "3")
	require.Zero(t, code, errs)
	require.Equal(t, "exported 3 records into 1 file\n", errs)
	_, errs, code = c.run("", "data", "export", "events", t.TempDir(), "--data-dir", dataDir, "--rows-per-file", "1")
	require.Zero(t, code, errs)
	require.Equal(t, "exported 3 records into 3 files\n", errs)
}

// TestBadInputLinesGetNoUsageHint: a data line that is not JSON (`data put`) or an input
// line that is not UTF-8 (`map`) exits 2 naming the line, and then said "Run 'lakeshore
// --help' for usage.", which cannot help with what is in the input. Only the line's
// error is printed now; a payload argument that is not JSON keeps the hint.
func TestBadInputLinesGetNoUsageHint(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	_, errs, code := c.run("{\"a\": 1}\nnotjson\n", "data", "put", "events", "--data-dir", t.TempDir())
	require.Equal(t, exitUsage, code)
	require.Equal(t, "lakeshore: line 2: not JSON by the mapping of docs/http-api.md: invalid character 'o' in literal null (expecting 'u')\n", errs)

	_, errs, code = c.run("a.go\n\xff.go\n", "map", "--", "true")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "line 2 is not valid UTF-8")
	require.NotContains(t, errs, "for usage")

	_, errs, code = c.run("", "submit", "q", "not json")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "\nRun 'lakeshore submit --help' for usage.\n", "an argument keeps the hint")
}

// TestForbiddenSaysWhatTheTokenGrants: the README's `token create --can submit,read
// --namespace team-a`, then a submit without --namespace, answered "forbidden: the token
// does not grant submit on queue default/gpu" — the user had to guess that the namespace
// was the mismatch. The 403 now says what the token grants, and where (its own scope,
// which its bearer was shown at creation).
func TestForbiddenSaysWhatTheTokenGrants(t *testing.T) {
	const admin = "an-admin-token-long-enough-for-the-server-0123456789"
	c := newAuthedCLI(t, admin)
	t.Setenv(lakeshore.EnvToken, admin)
	out := c.ok("token", "create", "--can", "submit,read", "--namespace", "team-a")
	t.Setenv(lakeshore.EnvToken, tokenSecret(t, out))

	_, errs, code := c.run("", "submit", "gpu", "1")
	require.Equal(t, exitError, code, errs)
	require.Equal(t, "lakeshore: forbidden: the token does not grant submit on queue default/gpu (it grants submit,read on team-a/*)\n", errs)
	c.ok("--namespace", "team-a", "submit", "gpu", "1")
}

// TestUnknownVerbSuggestsOne: `lakeshore watch ID` (the verb is stream), `lakeshore status
// ID` (get) and a typo (`sumbit`) said only "unknown command"; cobra's suggestions were
// never computed on this path. The error now names the verbs meant, when there are any.
func TestUnknownVerbSuggestsOne(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for args, want := range map[string]string{
		"watch 01ARZ3NDEKTSV4RRFFQ69G5FAV":  `unknown command "watch" for "lakeshore"; did you mean stream?`,
		"status 01ARZ3NDEKTSV4RRFFQ69G5FAV": `unknown command "status" for "lakeshore"; did you mean get?`,
		"sumbit q 1":                        `unknown command "sumbit" for "lakeshore"; did you mean submit?`,
		"queue sett q":                      `unknown command "sett" for "lakeshore queue"; did you mean set or get?`,
		"frobnicate":                        `unknown command "frobnicate" for "lakeshore"` + "\n",
	} {
		_, errs, code := c.run("", strings.Fields(args)...)
		require.Equal(t, exitUsage, code, args)
		require.Contains(t, errs, "lakeshore: "+want, args)
	}
}

// TestUsageHintNamesTheVerb: every usage error ended "Run 'lakeshore --help' for usage.",
// the list of verbs, where the user needed the flags of the verb that refused (`queue set`
// without a flag, an unknown flag of submit). The hint names that verb's help now; an
// unknown verb still gets its parent's.
func TestUsageHintNamesTheVerb(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for args, want := range map[string]string{
		"queue set q":       "lakeshore queue set",
		"submit q 1 --nope": "lakeshore submit",
		"queue sett q":      "lakeshore queue",
		"watch x":           "lakeshore",
	} {
		_, errs, code := c.run("", strings.Fields(args)...)
		require.Equal(t, exitUsage, code, args)
		require.True(t, strings.HasSuffix(errs, "\nRun '"+want+" --help' for usage.\n"), "%s: %q", args, errs)
	}
	// A group without its subcommand: the hint once, not once in the message and again
	// in the line after it (both named 'lakeshore queue --help' once the hint named the verb).
	_, errs, code := c.run("", "queue")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "lakeshore: lakeshore queue needs a subcommand\nRun 'lakeshore queue --help' for usage.\n", errs)
}
