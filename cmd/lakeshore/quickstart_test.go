package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQuickstart runs scripts/quickstart.sh, the README's first command, over the first
// 150 .go files of GOROOT and checks every result against a direct computation; a second
// run re-executes nothing.
func TestQuickstart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the command and runs 150 jobs")
	}
	home := t.TempDir()
	script, err := filepath.Abs("../../scripts/quickstart.sh")
	require.NoError(t, err)
	runScript := func() string {
		cmd := exec.Command("sh", script)
		cmd.Env = append(os.Environ(), "LAKESHORE_HOME="+home, "LAKESHORE_QUICKSTART_LIMIT=150")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	out := runScript()
	require.Contains(t, out, "map: 150 jobs, 150 succeeded, 0 failed (0 already done before this run), ran 150 in")
	require.Regexp(t, `[0-9.]+ jobs/s`, out)

	inputs := strings.Fields(string(must(os.ReadFile(filepath.Join(home, "goroot-files.txt")))))
	require.Len(t, inputs, 150)
	recs := parseMapOutput(t, must(os.ReadFile(filepath.Join(home, "goroot-digests.jsonl"))))
	require.Len(t, recs, 150)
	for i, r := range recs {
		require.Equal(t, inputs[i], r.Input)
		b := must(os.ReadFile(r.Input))
		sum := sha256.Sum256(b)
		require.Equal(t, fmt.Sprintf("%s\n%d\n", hex.EncodeToString(sum[:]), bytes.Count(b, []byte("\n"))), r.Result["stdout"], r.Input)
	}

	out = runScript()
	require.Contains(t, out, "map: 150 jobs, 150 succeeded, 0 failed (150 already done before this run), ran 0 in",
		"the rate counts only what this run executed")
	require.Regexp(t, `ran 0 in \S+, 0\.0 jobs/s`, out)
}

// TestQuickstartInterrupted: after Ctrl-C the script prints the exact command that
// finishes the run, with its LAKESHORE_HOME (a fresh temporary one otherwise) and the
// user's LAKESHORE_QUICKSTART_LIMIT and LAKESHORE_QUICKSTART_WORKERS (before 2026-12-06 it
// dropped them, so the resumed run mapped every file).
func TestQuickstartInterrupted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the command")
	}
	tmp := t.TempDir()
	script, err := filepath.Abs("../../scripts/quickstart.sh")
	require.NoError(t, err)
	cmd := exec.Command("sh", script)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "LAKESHORE_QUICKSTART_WORKERS=1", "LAKESHORE_QUICKSTART_LIMIT=5000", "LAKESHORE_HOME=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	// The script first builds the command: on a cold build cache or a loaded machine that
	// alone can take minutes.
	waitOutputWithin(t, out, "lakeshore.db\n", 3*time.Minute)
	m := regexp.MustCompile(`plane (\S+/lakeshore\.db)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	// map is running its jobs: its first progress line ("map: N/5000 done ...", every 2 s)
	// comes from the loop that starts once its worker is installed, so the first signal
	// drains that worker (before it, a signal would cancel the submission instead).
	waitOutputWithin(t, out, "/5000 done (", time.Minute)
	// Ctrl-C: SIGINT to the foreground process group, twice (drain, then stop). Signals do
	// not queue: the second is sent once map said it handled the first.
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	waitOutputWithin(t, out, "draining", time.Minute)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	_ = cmd.Wait()
	home := regexp.MustCompile(`LAKESHORE_HOME=(\S+) scripts/quickstart\.sh`).FindStringSubmatch(out.String())
	require.NotNil(t, home, "the exact command to finish: %s", out.String())
	require.True(t, strings.HasPrefix(home[1], tmp), home[1])
	require.Regexp(t, `\n  LAKESHORE_QUICKSTART_LIMIT=5000 LAKESHORE_QUICKSTART_WORKERS=1 LAKESHORE_HOME=\S+ scripts/quickstart\.sh\n`, out.String(),
		"the user's limit and workers are kept")
	require.FileExists(t, filepath.Join(home[1], "lakeshore.db"))
}
