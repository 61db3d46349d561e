package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQueueSetRefusalNamesTheFlag: a value `queue set` refuses names the flag the user
// typed before the field the plane names (the HTTP field, in snake_case for every field of
// the block: it was "max depth" for max_depth), which for the per-key overrides is spelt
// otherwise (--key-bucket sets key_bursts, --key-limit concurrency_limits), exits 2 and
// changes nothing; on the file plane and over HTTP.
func TestQueueSetRefusalNamesTheFlag(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			c.ok("queue", "set", "a", "--concurrency-limit", "2")
			for _, bad := range []struct {
				args []string
				want string
			}{
				{[]string{"--concurrency-limit", "-1"}, "lakeshore: --concurrency-limit: invalid concurrency_limit -1: use a number ≥ 0"},
				{[]string{"--key-limit", "acme=-3"}, "lakeshore: --key-limit: invalid concurrency_limits[acme] -3:"},
				{[]string{"--key-limit", strings.Repeat("k", 300) + "=1"}, "lakeshore: --key-limit: invalid concurrency_limits key \"kkk"},
				{[]string{"--key-weight", "acme=0"}, "lakeshore: --key-weight: invalid key_weights[acme] 0:"},
				{[]string{"--key-rate-limit", "-5"}, "lakeshore: --key-rate-limit: invalid key_rate_limit -5:"},
				{[]string{"--key-burst", "-1"}, "lakeshore: --key-burst: invalid key_burst -1:"},
				{[]string{"--key-rate", "big=-1"}, "lakeshore: --key-rate: invalid key_rate_limits[big] -1:"},
				{[]string{"--key-bucket", "big=0"}, "lakeshore: --key-bucket: invalid key_bursts[big] 0: use a bucket size ≥ 1"},
				{[]string{"--max-depth", "-1"}, "lakeshore: --max-depth: invalid max_depth -1: use a number ≥ 0"},
				{[]string{"--on-full", "sometimes"}, "lakeshore: --on-full: invalid on_full \"sometimes\": use reject|block"},
				{[]string{"--rate-limit", "-1"}, "lakeshore: --rate-limit: invalid rate_limit -1:"},
				{[]string{"--burst", "-1"}, "lakeshore: --burst: invalid burst -1:"},
				{[]string{"--deadline-cutoff", "-1s"}, "lakeshore: --deadline-cutoff: invalid deadline_cutoff -1s:"},
				// A per-key value that does not parse, or no KEY=: what the flag takes,
				// without the usage hint (a bad value; before: `"abc" is not a number` and
				// the hint).
				{[]string{"--key-weight", "acme=abc"}, `lakeshore: invalid --key-weight "acme=abc": use KEY=VALUE, VALUE a weight from 0.000001 to 1000000`},
				{[]string{"--key-limit", "acme=1.5"}, `lakeshore: invalid --key-limit "acme=1.5": use KEY=VALUE, VALUE a whole number ≥ 0`},
				{[]string{"--key-bucket", "acme"}, `lakeshore: invalid --key-bucket "acme": use KEY=VALUE, VALUE a bucket size`},
				{[]string{"--key-rate", "=3"}, `lakeshore: invalid --key-rate "=3": use KEY=VALUE, VALUE starts per second ≥ 0`},
			} {
				_, errs, code := c.run("", append([]string{"queue", "set", "a"}, bad.args...)...)
				require.Equal(t, exitUsage, code, "%v: %s", bad.args, errs)
				require.Contains(t, errs, bad.want, "%v", bad.args)
				require.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
			}
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "queue", "get", "a")), &got))
			a := got["admission"].(map[string]any)
			require.Equal(t, 2.0, a["concurrency_limit"], "a refused set changes nothing")
			require.Nil(t, a["concurrency_limits"])
			require.Nil(t, a["key_weights"])
			require.Nil(t, a["key_bursts"])
		})
	}
}

// TestQueueSetIntegerFlagRange: an integer flag of `queue set` given a value that does not
// parse says the range it allows, from 0 (it said from -9223372036854775808, and a negative
// value was then refused), exits 2 on one line; a flag that takes negatives (--since) keeps
// its type's range.
func TestQueueSetIntegerFlagRange(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, flag := range []string{"--max-depth", "--burst", "--concurrency-limit", "--key-burst", "--min-workers",
		"--max-workers", "--jobs-per-worker", "--buffer", "--scale-up-step", "--cpus", "--gpus"} {
		_, errs, code := c.run("", "queue", "set", "a", flag, "abc")
		require.Equal(t, exitUsage, code, "%s: %s", flag, errs)
		require.Equal(t, `lakeshore: invalid `+flag+` "abc": use a whole number (digits, no exponent or fraction) from 0 to 9223372036854775807`+"\n", errs)
	}
	_, errs, code := c.run("", "stream", "x", "--since", "abc")
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, `from -9223372036854775808 to 9223372036854775807`)
}

// TestSubmitDebounceExistingNote: a debounced resubmit of a key whose job still waits
// prints that job's id, and the note on standard error says the job took this payload and
// waits again, not only that nothing new was enqueued (which read as "your payload was
// dropped"); a plain keyed resubmit keeps the plain note.
func TestSubmitDebounceExistingNote(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	first := c.ok("submit", "q", `{"n": 1}`, "--key", "d", "--debounce", "1m")
	out, errs, code := c.run("", "submit", "q", `{"n": 2}`, "--key", "d", "--debounce", "1m")
	require.Equal(t, 0, code, errs)
	require.Equal(t, first, strings.TrimSpace(out))
	require.Contains(t, errs, `lakeshore: an existing job holds key "d": its id is printed, nothing new was enqueued; if it is a debounced job still waiting, it now carries this payload and waits 1m0s from now`)
	require.Contains(t, c.ok("get", first), `{"n":2}`, "the waiting job took the payload")

	c.ok("submit", "q", `1`, "--key", "plain")
	_, errs, code = c.run("", "submit", "q", `2`, "--key", "plain")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "lakeshore: an existing job holds key \"plain\": its id is printed, nothing new was enqueued\n", errs)
}

// TestScheduleAddShowsTheZonesHour: `schedule add "0 3 * * *" --time-zone Europe/Paris`
// prints its next fire in UTC and in the schedule's zone, where it reads 03:00 (in UTC alone
// it read 02:00 or 01:00, an hour a newcomer took for a bug); a UTC schedule keeps one time.
func TestScheduleAddShowsTheZonesHour(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out := c.ok("schedule", "add", "nightly", "0 3 * * *", "--queue", "eval", "--time-zone", "Europe/Paris")
	require.Regexp(t, `^schedule nightly \(0 3 \* \* \* \(Europe/Paris\)\) to eval: next fire \S+Z \(\S+T03:00:00\+0[12]:00 Europe/Paris\)$`, out)
	out = c.ok("schedule", "add", "utc", "0 3 * * *", "--queue", "eval")
	require.Regexp(t, `^schedule utc \(0 3 \* \* \*\) to eval: next fire \S+T03:00:00Z$`, out)
	c.ok("schedule", "pause", "nightly")
	require.Regexp(t, `^resumed nightly: next fire \S+Z \(\S+T03:00:00\+0[12]:00 Europe/Paris\)$`, c.ok("schedule", "resume", "nightly"))
}

// TestWorkerRateLimitedExit: an exec worker's command can give the "slow down" answer a
// Go or Python handler gives (it could not: every non-zero exit consumed an attempt): with
// --rate-limited-exit 75, a command exiting 75 hands its job back after
// --rate-limited-delay, its attempt kept, and its concurrency key is held back as long
// (queue get shows the key's wait); another exit code still fails the attempt; bad flags
// exit 2 before anything is claimed. On the file plane and over HTTP.
func TestWorkerRateLimitedExit(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			first := c.ok("submit", "api", "1", "--concurrency-key", "tenant", "--max-attempts", "1")
			c.ok("submit", "api", "2", "--concurrency-key", "tenant", "--max-attempts", "1")
			c.ok("worker", "api", "--once", "--rate-limited-exit", "75", "--rate-limited-delay", "1m", "--", "sh", "-c", "exit 75")
			var inv map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "get", first)), &inv))
			require.Equal(t, "queued", inv["state"], "handed back, not failed: %v", inv)
			require.EqualValues(t, 0, inv["attempt"], "its attempt kept")
			require.Equal(t, "rate_limited", inv["error"].(map[string]any)["type"])
			var q map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "queue", "get", "api")), &q))
			keys := q["keys"].([]any)
			require.Len(t, keys, 1)
			require.Greater(t, keys[0].(map[string]any)["rate_wait_s"], 50.0, "the key is held back: %v", keys)
			require.Equal(t, "2", c.ok("count", "api", "queued"))

			c.ok("submit", "other", "1", "--max-attempts", "1")
			c.ok("worker", "other", "--once", "--rate-limited-exit", "75", "--", "sh", "-c", "exit 3")
			require.Equal(t, "1", c.ok("count", "other", "failed"), "another exit code fails the attempt")

			for _, bad := range [][]string{
				{"--rate-limited-exit", "256"},
				{"--rate-limited-exit", "-1"},
				{"--rate-limited-delay", "5s"},
				{"--rate-limited-exit", "75", "--rate-limited-delay", "-1s"},
				{"--rate-limited-exit", "75", "--rate-limited-delay", "9000h"},
			} {
				_, errs, code := c.run("", append(append([]string{"worker", "other", "--once"}, bad...), "--", "true")...)
				require.Equal(t, exitUsage, code, "%v: %s", bad, errs)
				require.Contains(t, errs, "--rate-limited-", "%v", bad)
			}
		})
	}
}
