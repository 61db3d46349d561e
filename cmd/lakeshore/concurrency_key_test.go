package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcurrencyKeyShown: the CLI shows a job's concurrency key (`get`, `jobs`, text and
// --json), the live keys of a queue without an admission block (`queue get`), the per-key
// rules in `queues`' ADMISSION column, and says when a submit's key was already held (on
// standard error; `existing` in --json), on the file plane and over HTTP.
func TestConcurrencyKeyShown(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			out, errs, code := c.run("", "submit", "a", "--concurrency-key", "tenant-7", "--key", "once", `"x"`)
			require.Equal(t, 0, code, errs)
			id := strings.TrimSpace(out)
			require.NotContains(t, errs, "existing job")
			again, errs, code := c.run("", "submit", "a", "--key", "once", `"y"`)
			require.Equal(t, 0, code, errs)
			require.Equal(t, id, strings.TrimSpace(again), "the existing job's id, alone on standard output")
			require.Contains(t, errs, `an existing job holds key "once"`)
			var sub map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "submit", "a", "--key", "once", `"z"`)), &sub))
			require.Equal(t, map[string]any{"id": id, "existing": true}, sub)

			require.Regexp(t, `concurrency key\s+tenant-7`, c.ok("get", id))
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "get", id)), &got))
			require.Equal(t, "tenant-7", got["concurrency_key"])
			jobs := c.ok("jobs", "a")
			require.Contains(t, jobs, "CONCURRENCY KEY")
			require.Regexp(t, id+`\s+queued\s+0/\d+\s+once\s+tenant-7`, jobs)
			require.Contains(t, c.ok("--json", "jobs", "a"), `"concurrency_key":"tenant-7"`)

			// No admission block: the key's live counts are still listed.
			get := c.ok("queue", "get", "a")
			require.Contains(t, get, "no admission block")
			require.Regexp(t, `key "tenant-7"\s+0 running \(no limit\), 1 queued`, get)

			c.ok("queue", "set", "a", "--concurrency-limit", "2", "--key-limit", "tenant-7=1", "--key-weight", "tenant-7=3",
				"--key-rate-limit", "5", "--key-burst", "2", "--key-bucket", "slow=4")
			queues := c.ok("queues")
			for _, want := range []string{"concurrency-limit=2", "key-rate-limit=5/s key-burst=2", "key-limit=1 keys", "key-rate=1 keys", "key-weight=1 keys"} {
				require.Contains(t, queues, want)
			}
		})
	}
}

// TestEmptyConcurrencyKeyIsNone: --concurrency-key "" is no key (plane.ConcurrencyKeyRule:
// one rule for Go's zero value, HTTP's "", Python's "" and the CLI), on the file plane and
// over HTTP: the job has no key and no key row shows.
func TestEmptyConcurrencyKeyIsNone(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			id := c.ok("submit", "a", "--concurrency-key", "", `"x"`)
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "get", id)), &got))
			require.NotContains(t, got, "concurrency_key")
			var q map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "queue", "get", "a")), &q))
			require.Empty(t, q["keys"])
		})
	}
}
