package main

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQueueKeyRateOverrides: `lakeshore queue set --key-rate KEY=R --key-bucket KEY=B`
// merges per-key rate-limit overrides into the admission block, KEY=- removes one, `queue
// get` shows each overridden key's rate and bucket, and a bad value is refused naming the
// field; on the file plane and over HTTP.
func TestQueueKeyRateOverrides(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			admission := func() map[string]any {
				t.Helper()
				var got map[string]any
				require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "queue", "get", "a")), &got))
				a, _ := got["admission"].(map[string]any)
				return a
			}
			c.ok("queue", "set", "a", "--key-rate-limit", "1", "--key-rate", "partner=20", "--key-rate", "free=0",
				"--key-bucket", "partner=40", "--key-bucket", "slow=3")
			a := admission()
			require.Equal(t, map[string]any{"partner": 20.0, "free": 0.0}, a["key_rate_limits"])
			require.Equal(t, map[string]any{"partner": 40.0, "slow": 3.0}, a["key_bursts"])
			text := c.ok("queue", "get", "a")
			require.Regexp(t, `key "partner" rate limit\s+20/s burst 40`, text)
			require.Regexp(t, `key "free" rate limit\s+none`, text)
			require.Regexp(t, `key "slow" rate limit\s+1/s burst 3`, text)

			// A key with "=" in it: the last "=" splits.
			c.ok("queue", "set", "a", "--key-rate", "x=y=3")
			require.Equal(t, 3.0, admission()["key_rate_limits"].(map[string]any)["x=y"])
			c.ok("queue", "set", "a", "--key-rate", "x=y=-")

			c.ok("queue", "set", "a", "--key-rate", "free=-", "--key-bucket", "slow=-")
			a = admission()
			require.Equal(t, map[string]any{"partner": 20.0}, a["key_rate_limits"], "KEY=- removes the override")
			require.Equal(t, map[string]any{"partner": 40.0}, a["key_bursts"])

			for _, bad := range []struct {
				args  []string
				field string
				code  int
			}{
				{[]string{"--key-rate", "k=-1"}, "key_rate_limits[k]", exitUsage},
				{[]string{"--key-bucket", "k=0"}, "key_bursts[k]", exitUsage},
				{[]string{"--key-rate", "k=fast"}, "--key-rate", exitUsage},
				{[]string{"--key-bucket", "nokey"}, "--key-bucket", exitUsage},
			} {
				_, errs, code := c.run("", append([]string{"queue", "set", "a"}, bad.args...)...)
				require.Equal(t, bad.code, code, "%v: %s", bad.args, errs)
				require.Contains(t, errs, bad.field, "%v", bad.args)
			}
			require.Equal(t, map[string]any{"partner": 20.0}, admission()["key_rate_limits"], "a refused set changes nothing")
		})
	}
}

// TestQueueSetConcurrent: `queue set` commands run at once on one queue, each with its own
// flag, all hold (each merges by a conditional write, read again when another came first;
// a trial as a new user saw 3 of 10 kept), on the file plane and over HTTP.
func TestQueueSetConcurrent(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			const n = 8
			codes := make([]int, n)
			errs := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					_, errs[i], codes[i] = c.run("", "queue", "set", "a", "--key-limit", fmt.Sprintf("t%d=%d", i, i+1))
				})
			}
			wg.Go(func() { c.ok("queue", "set", "a", "--max-depth", "100") })
			wg.Wait()
			for i := range n {
				require.Equal(t, 0, codes[i], errs[i])
			}
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "queue", "get", "a")), &got))
			a := got["admission"].(map[string]any)
			require.Len(t, a["concurrency_limits"], n, "every set's key limit holds: %v", a["concurrency_limits"])
			require.Equal(t, 100.0, a["max_depth"])
		})
	}
}

// TestWorkerExitWhenIdleWaitsForKeyRateLimit: `lakeshore worker --exit-when-idle` does not
// exit while jobs are queued behind a key's rate limit (its claims come back empty, but the
// jobs are due): it runs them all, then exits; on the file plane and over HTTP.
func TestWorkerExitWhenIdleWaitsForKeyRateLimit(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			c.ok("queue", "set", "kr", "--key-rate-limit", "4", "--key-burst", "1")
			ids := make([]string, 3)
			for i := range ids {
				ids[i] = c.ok("submit", "kr", "1", "--concurrency-key", "tenant", "--max-attempts", "1")
			}
			c.ok("worker", "kr", "--exit-when-idle", "--", "true")
			require.Equal(t, "0", c.ok("count", "kr", "queued"), "no job left with no worker")
			require.Equal(t, "3", c.ok("count", "kr", "succeeded"))
		})
	}
}

// TestQueueSetDefaultBurstFollowsRate: `queue set --rate-limit 10` then `--rate-limit 1000`
// makes the bucket 1000 (a burst never given follows the rate), while one given with
// --burst stays when the rate changes; on the file plane and over HTTP.
func TestQueueSetDefaultBurstFollowsRate(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			burst := func() any {
				t.Helper()
				var got map[string]any
				require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "queue", "get", "b")), &got))
				a, _ := got["admission"].(map[string]any)
				return a["burst"]
			}
			c.ok("queue", "set", "b", "--rate-limit", "10")
			require.Equal(t, 10.0, burst())
			c.ok("queue", "set", "b", "--rate-limit", "1000")
			require.Equal(t, 1000.0, burst(), "a burst never given follows the rate")
			c.ok("queue", "set", "b", "--burst", "5")
			c.ok("queue", "set", "b", "--rate-limit", "7")
			require.Equal(t, 5.0, burst(), "a burst given stays")
		})
	}
}
