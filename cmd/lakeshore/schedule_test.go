package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScheduleVerbs: schedule add, list, pause, resume and remove, on the embedded plane and
// over HTTP; a bad rule exits 2 naming it, an unknown name exits 3.
func TestScheduleVerbs(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]*cli{"embedded": newCLI(t), "http": newHTTPCLI(t)} {
		t.Run(name, func(t *testing.T) {
			c.t = t
			out := c.ok("schedule", "add", "nightly", "0 3 * * *", "--queue", "eval", "--payload", `{"suite": "full"}`,
				"--time-zone", "Europe/Paris")
			require.Contains(t, out, "schedule nightly (0 3 * * * (Europe/Paris)) to eval: next fire ")
			c.ok("schedule", "add", "probe", "--every", "10m", "--queue", "probes", "--catch-up", "skip")

			_, errs, code := c.run("", "schedule", "add", "bad", "0 3 * *", "--queue", "eval")
			require.Equal(t, exitUsage, code)
			require.Contains(t, errs, `invalid cron "0 3 * *": use five fields`)
			_, errs, code = c.run("", "schedule", "add", "bad", "--every", "10m", "--queue", "eval", "--catch-up", "never")
			require.Equal(t, exitUsage, code)
			require.Contains(t, errs, "catch_up")
			// --every 0s was given, not left out: its answer names it and its bound, as
			// --every -5s's does.
			// A cron expression and --every: the answer says so once, without the interval
			// re-formatted (before: `--every: invalid every "1h0m0s": …`).
			_, errs, code = c.run("", "schedule", "add", "both", "0 3 * * *", "--every", "1h", "--queue", "eval")
			require.Equal(t, exitUsage, code)
			require.Equal(t, "lakeshore: --every: invalid every: give a cron expression or an interval, not both\n", errs)
			for _, every := range []string{"0s", "0", "-5s"} {
				_, errs, code = c.run("", "schedule", "add", "bad", "--every", every, "--queue", "eval")
				require.Equal(t, exitUsage, code, "--every %s", every)
				require.Contains(t, errs, "invalid every", "--every %s", every)
				require.Contains(t, errs, "use at least 1s", "--every %s", every)
			}

			out = c.ok("schedule", "list")
			require.Contains(t, out, "nightly")
			require.Contains(t, out, "every 10m0s")
			require.Equal(t, "paused probe", c.ok("schedule", "pause", "probe"))
			// A second pause says it changed nothing, as queue pause does (--json: changed).
			require.Equal(t, "probe was already paused", c.ok("schedule", "pause", "probe"))
			var again map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "schedule", "pause", "probe")), &again))
			require.Equal(t, false, again["changed"])
			require.Equal(t, true, again["paused"])
			var list []map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "schedule", "list")), &list))
			require.Len(t, list, 2)
			require.Equal(t, "nightly", list[0]["name"])
			require.Equal(t, true, list[1]["paused"])
			require.Equal(t, 600.0, list[1]["every"])
			require.True(t, strings.HasPrefix(c.ok("schedule", "resume", "probe"), "resumed probe: next fire "))
			require.True(t, strings.HasPrefix(c.ok("schedule", "resume", "probe"), "probe was not paused: next fire "))
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "schedule", "resume", "probe")), &again))
			require.Equal(t, false, again["changed"])
			require.Equal(t, false, again["paused"])

			_, errs, code = c.run("", "schedule", "pause", "missing")
			require.Equal(t, exitNotFound, code)
			require.Contains(t, errs, "schedule default/missing not found")
			require.Equal(t, "removed probe", c.ok("schedule", "remove", "probe"))
			require.Equal(t, "no schedule probe", c.ok("schedule", "remove", "probe"))

			// A payload from a file (one too large for an argument) or stdin.
			file := filepath.Join(t.TempDir(), "payload.json")
			require.NoError(t, os.WriteFile(file, []byte(`{"big": "`+strings.Repeat("x", 300_000)+`"}`), 0o600))
			c.ok("schedule", "add", "large", "--every", "1h", "--queue", "eval", "--file", file)
			_, errs, code = c.run(`"from stdin"`, "schedule", "add", "stdin", "--every", "1h", "--queue", "eval", "--file", "-")
			require.Equal(t, 0, code, errs)
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "schedule", "list")), &list))
			payloads := map[string]any{}
			for _, sc := range list {
				payloads[sc["name"].(string)] = sc["payload"]
			}
			require.Len(t, payloads["large"].(map[string]any)["big"], 300_000)
			require.Equal(t, "from stdin", payloads["stdin"])
			_, errs, code = c.run("", "schedule", "add", "both", "--every", "1h", "--queue", "eval", "--file", file, "--payload", "1")
			require.Equal(t, exitUsage, code)
			require.Contains(t, errs, "not both")
		})
	}
}

// TestScheduleAddKeepState: a deploy script that declares its schedule at every release
// (`schedule add … --keep-state`, what Python's @lakeshore.schedule does at import) keeps an
// operator's pause and, with the same rule, the next fire; a plain add replaces it all and
// resumes it. Before, the CLI had no --keep-state: every re-run of the deploy's `schedule add`
// undid the pause. `schedule list --json` shows the options of every fire that were set.
func TestScheduleAddKeepState(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]*cli{"embedded": newCLI(t), "http": newHTTPCLI(t)} {
		t.Run(name, func(t *testing.T) {
			c.t = t
			listed := func() map[string]any {
				var list []map[string]any
				require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "schedule", "list")), &list))
				require.Len(t, list, 1)
				return list[0]
			}
			// Created by the declaration: --paused applies.
			require.Equal(t, "schedule nightly (0 3 * * * (Europe/Paris)) to eval: paused",
				c.ok("schedule", "add", "nightly", "0 3 * * *", "--queue", "eval", "--time-zone", "Europe/Paris",
					"--keep-state", "--paused"))
			require.Equal(t, "resumed nightly", strings.SplitN(c.ok("schedule", "resume", "nightly"), ":", 2)[0])
			next := listed()["next_fire"]
			require.NotNil(t, next)

			// Declared again with a new payload and options: not paused (the stored flag wins
			// over --paused), the same next fire, the new payload and options.
			c.ok("schedule", "add", "nightly", "0 3 * * *", "--queue", "eval", "--time-zone", "Europe/Paris",
				"--keep-state", "--paused", "--payload", `{"suite": "full"}`, "--priority", "2", "--max-attempts", "5",
				"--attempt-timeout", "90s")
			got := listed()
			require.Equal(t, false, got["paused"])
			require.Equal(t, next, got["next_fire"])
			require.Equal(t, map[string]any{"suite": "full"}, got["payload"])
			require.Equal(t, 2.0, got["priority"])
			require.Equal(t, 5.0, got["max_attempts"])
			require.Equal(t, 90.0, got["attempt_timeout"])

			// The operator pauses it; the next release's declaration keeps the pause.
			c.ok("schedule", "pause", "nightly")
			require.Equal(t, "schedule nightly (0 3 * * * (Europe/Paris)) to eval: paused",
				c.ok("schedule", "add", "nightly", "0 3 * * *", "--queue", "eval", "--time-zone", "Europe/Paris",
					"--keep-state"))
			require.Equal(t, true, listed()["paused"])

			// A plain add replaces it all: resumed.
			require.True(t, strings.HasPrefix(c.ok("schedule", "add", "nightly", "0 3 * * *", "--queue", "eval",
				"--time-zone", "Europe/Paris"), "schedule nightly (0 3 * * * (Europe/Paris)) to eval: next fire "))
			got = listed()
			require.Equal(t, false, got["paused"])
			require.NotContains(t, got, "priority")
		})
	}
}

// TestScheduleAddConcurrencyKey: `schedule add --concurrency-key` stores a key that every
// fire carries (a schedule per tenant, each under its key's limit); it is listed with the
// schedule, and a bad key exits 2 naming the flag. Before 2026-12-07 there was no such
// flag: a schedule's fires had no key.
func TestScheduleAddConcurrencyKey(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]*cli{"embedded": newCLI(t), "http": newHTTPCLI(t)} {
		t.Run(name, func(t *testing.T) {
			c.t = t
			var added map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "schedule", "add", "tenant-a", "--every", "1h",
				"--queue", "eval", "--concurrency-key", "tenant-a")), &added))
			require.Equal(t, "tenant-a", added["concurrency_key"])
			var list []map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "schedule", "list")), &list))
			require.Len(t, list, 1)
			require.Equal(t, "tenant-a", list[0]["concurrency_key"])
			table := c.ok("schedule", "list")
			require.Contains(t, table, "CONCURRENCY KEY", "the column appears when a schedule has a key")
			require.Regexp(t, `tenant-a\s+every 1h0m0s\s+eval\s+tenant-a\s+once`, table)
			_, stderr, code := c.run("", "schedule", "add", "bad", "--every", "1h", "--queue", "eval",
				"--concurrency-key", strings.Repeat("k", 257))
			require.Equal(t, 2, code, stderr)
			require.Contains(t, stderr, "--concurrency-key")
		})
	}
}
