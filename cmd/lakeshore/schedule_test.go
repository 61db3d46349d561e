package main

import (
	"encoding/json"
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

			out = c.ok("schedule", "list")
			require.Contains(t, out, "nightly")
			require.Contains(t, out, "every 10m0s")
			require.Equal(t, "paused probe", c.ok("schedule", "pause", "probe"))
			var list []map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "schedule", "list")), &list))
			require.Len(t, list, 2)
			require.Equal(t, "nightly", list[0]["name"])
			require.Equal(t, true, list[1]["paused"])
			require.Equal(t, 600.0, list[1]["every"])
			require.True(t, strings.HasPrefix(c.ok("schedule", "resume", "probe"), "resumed probe: next fire "))

			_, errs, code = c.run("", "schedule", "pause", "missing")
			require.Equal(t, exitNotFound, code)
			require.Contains(t, errs, "schedule default/missing not found")
			require.Equal(t, "removed probe", c.ok("schedule", "remove", "probe"))
			require.Equal(t, "no schedule probe", c.ok("schedule", "remove", "probe"))
		})
	}
}
