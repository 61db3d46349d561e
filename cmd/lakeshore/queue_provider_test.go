package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQueueProvider: `lakeshore queue set --provider` attaches a provider with its policy,
// merges later flags into it, refuses bad policies naming the field, warns about a
// program not found here, and --provider none detaches it; on the file plane and over HTTP.
func TestQueueProvider(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			provider := func() map[string]any {
				t.Helper()
				var got map[string]any
				require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "queue", "get", "a")), &got))
				p, _ := got["provider"].(map[string]any)
				return p
			}
			require.Nil(t, provider(), "a queue starts without a provider")

			_, errs, code := c.run("", "queue", "set", "a", "--provider", "local", "--max-workers", "3", "--jobs-per-worker", "10",
				"--worker-command", `sh -c 'echo "a b"' x`, "--worker-env", "A=1", "--worker-env", "B=x=y",
				"--memory", "4GiB", "--cpus", "2", "--time-limit", "2h", "--idle-timeout", "30s")
			require.Zero(t, code, errs)
			require.Empty(t, errs, "sh exists here: no warning")
			p := provider()
			require.Equal(t, "local", p["name"])
			require.Equal(t, float64(3), p["max_workers"])
			require.Equal(t, float64(10), p["jobs_per_worker"])
			require.Equal(t, []any{"sh", "-c", `echo "a b"`, "x"}, p["command"], "split as a shell would")
			require.Equal(t, map[string]any{"A": "1", "B": "x=y"}, p["env"])
			require.Equal(t, float64(4096), p["memory_mb"])
			require.Equal(t, float64(2), p["cpus"])
			require.Equal(t, float64(7200), p["time_limit_s"])
			require.Equal(t, float64(30), p["idle_timeout_s"])

			text := c.ok("queue", "get", "a")
			require.Contains(t, text, "no admission block")
			require.Regexp(t, `provider\s+local`, text)
			require.Regexp(t, `worker command\s+sh -c 'echo "a b"' x`, text)

			// A later flag changes that field only; admission flags leave the provider alone.
			c.ok("queue", "set", "a", "--max-workers", "5")
			c.ok("queue", "set", "a", "--max-depth", "100")
			p = provider()
			require.Equal(t, float64(5), p["max_workers"])
			require.Equal(t, float64(10), p["jobs_per_worker"], "the earlier --jobs-per-worker stays")
			require.Equal(t, float64(4096), p["memory_mb"])

			for _, bad := range []struct {
				args  []string
				field string
			}{
				{[]string{"--min-workers", "6", "--max-workers", "2"}, "max workers"},
				{[]string{"--max-workers", "-1"}, "max workers"},
				{[]string{"--cooldown", "-1s"}, "cooldown"},
				{[]string{"--provider", "kubernetes"}, "local, slurm, exec:PROGRAM, ssh:NAME or kubernetes:NAME"},
				{[]string{"--worker-command", "run $HOME/x"}, "worker command"},
				{[]string{"--worker-command", "run 'unclosed"}, "worker command"},
				{[]string{"--worker-env", "NOEQUALS"}, "worker env"},
				{[]string{"--memory", "lots"}, "memory"},
			} {
				_, errs, code := c.run("", append([]string{"queue", "set", "a"}, bad.args...)...)
				require.Equal(t, exitUsage, code, "%v: %s", bad.args, errs)
				require.Contains(t, errs, bad.field, "%v", bad.args)
			}
			require.Equal(t, float64(5), provider()["max_workers"], "a refused set changes nothing")

			// A program not found here is accepted with a warning: it may exist where
			// workers are launched.
			_, errs, code = c.run("", "queue", "set", "a", "--worker-command", "/opt/nowhere/worker --flag")
			require.Zero(t, code, errs)
			require.Contains(t, errs, "warning")
			require.Contains(t, errs, "/opt/nowhere/worker")
			require.Equal(t, []any{"/opt/nowhere/worker", "--flag"}, provider()["command"])

			_, errs, code = c.run("", "queue", "set", "a", "--provider", "none", "--max-workers", "2")
			require.Equal(t, exitUsage, code, errs)
			c.ok("queue", "set", "a", "--provider", "none")
			require.Nil(t, provider(), "--provider none detaches it")
			_, errs, code = c.run("", "queue", "set", "a", "--max-workers", "2")
			require.Equal(t, exitUsage, code, "a policy flag without a provider: %s", errs)
			require.Contains(t, errs, "--provider")
		})
	}
}

// TestQueueProviderHidesSecretEnv: `lakeshore queue get` prints the worker env of a
// provider's policy without the values of secrets (a name with TOKEN, SECRET, PASSWORD,
// KEY… as a word), which land in terminals and CI logs; --json keeps them (what the
// supervisor's tooling reads). Before, `worker env  HF_TOKEN=hf_…` was printed in full.
func TestQueueProviderHidesSecretEnv(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("queue", "set", "a", "--provider", "local", "--worker-command", "sh -c true",
		"--worker-env", "HF_TOKEN=hf_sekret1", "--worker-env", "AWS_SECRET_ACCESS_KEY=sekret2",
		"--worker-env", "DB_PASSWORD=sekret3", "--worker-env", "TOKENIZERS_PARALLELISM=false",
		"--worker-env", "DATA=postgres://u:sekret4@db/x")
	text := c.ok("queue", "get", "a")
	require.NotContains(t, text, "sekret")
	require.Regexp(t, `worker env\s+HF_TOKEN=xxxxx`, text)
	require.Regexp(t, `worker env\s+AWS_SECRET_ACCESS_KEY=xxxxx`, text)
	require.Regexp(t, `worker env\s+TOKENIZERS_PARALLELISM=false`, text, "a word of the name, not a part of a word")
	require.Regexp(t, `worker env\s+DATA=postgres://u:xxxxx@db/x`, text)
	require.Contains(t, c.ok("--json", "queue", "get", "a"), "hf_sekret1")
}
