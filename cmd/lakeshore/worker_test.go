package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWorkerSignals runs `lakeshore worker` as a child process and signals it for real.
func TestWorkerSignals(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) (*cli, string, *exec.Cmd, *lockedBuffer) {
		c := newCLI(t)
		dir := t.TempDir()
		// Each job touches DIR/started-<payload>, waits for DIR/go, then prints.
		w := exec.Command(binary, "--target", c.target, "worker", "q", "--concurrency", "2", "--grace", "200ms", "--",
			"sh", "-c", `touch "$0/started-$1"; while [ ! -f "$0/go" ]; do sleep 0.02; done; echo "finished $1"`, dir, "{}")
		stderr := &lockedBuffer{}
		w.Stderr = stderr
		require.NoError(t, w.Start())
		t.Cleanup(func() { _ = w.Process.Kill(); _ = w.Wait() })
		return c, dir, w, stderr
	}

	t.Run("SIGTERMDrains", func(t *testing.T) {
		t.Parallel()
		c, dir, w, stderr := setup(t)
		a := c.ok("submit", "q", `"a"`)
		b := c.ok("submit", "q", `"b"`)
		waitFile(t, filepath.Join(dir, "started-a"))
		waitFile(t, filepath.Join(dir, "started-b"))
		require.NoError(t, w.Process.Signal(syscall.SIGTERM))
		waitOutput(t, stderr, "draining")
		later := c.ok("submit", "q", `"later"`)
		time.Sleep(200 * time.Millisecond) // a worker that still claimed would start it now
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o600))
		require.NoError(t, w.Wait(), stderr.String())
		require.JSONEq(t, `{"exit_code":0,"stderr":"","stdout":"finished a\n"}`, c.ok("result", a))
		require.JSONEq(t, `{"exit_code":0,"stderr":"","stdout":"finished b\n"}`, c.ok("result", b))
		require.Contains(t, c.ok("get", later), "queued", "nothing new was claimed")
		_, err := os.Stat(filepath.Join(dir, "started-later"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})

	t.Run("SecondSignalStopsAndRetries", func(t *testing.T) {
		t.Parallel()
		c, dir, w, stderr := setup(t)
		a := c.ok("submit", "q", `"a"`)
		waitFile(t, filepath.Join(dir, "started-a"))
		require.NoError(t, w.Process.Signal(syscall.SIGINT))
		// Signals do not queue: send the second once the first was seen.
		waitOutput(t, stderr, "draining")
		require.NoError(t, w.Process.Signal(syscall.SIGINT))
		waitOutput(t, stderr, "stopping running jobs")
		require.NoError(t, w.Wait(), stderr.String())
		out := c.ok("--json", "get", a)
		require.Contains(t, out, `"state":"queued"`, "nacked for retry")
		require.Contains(t, out, "running handlers cancelled", "the stored error says why the command stopped")
	})
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitOutput(t *testing.T, b *lockedBuffer, want string) {
	t.Helper()
	waitOutputWithin(t, b, want, 10*time.Second)
}

// servedAddr waits until b holds serve's start line and returns the address in it (its
// addr=): for a serve started with --addr 127.0.0.1:0, on the port the kernel picked. A
// port found free beforehand (a listener opened and closed) could be taken by another
// process before serve bound it.
func servedAddr(t *testing.T, b *lockedBuffer) string {
	t.Helper()
	waitOutputWithin(t, b, "msg=serving", 30*time.Second)
	m := regexp.MustCompile(`msg=serving addr=(\S+)`).FindStringSubmatch(b.String())
	require.NotNil(t, m, "serve's start line names no addr: %s", b.String())
	return m[1]
}

// waitOutputWithin waits up to d until b contains want, failing t after that.
func waitOutputWithin(t *testing.T, b *lockedBuffer, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %q", want, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestExecLimitsRefusedBeforeClaiming: a negative --stderr-tail, --stdout-cap, --timeout or
// --grace of `worker` and `map` exits 2 naming the flag, before anything is claimed. Before,
// they were taken: --stderr-tail -1 panicked the worker (slice bounds out of range) at the
// first stderr byte of a claimed job, which stayed running until its lease expired.
func TestExecLimitsRefusedBeforeClaiming(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.ok("submit", "q", `"x"`)
	for _, bad := range [][]string{
		{"--stderr-tail", "-1"},
		{"--stdout-cap", "-1"},
		{"--timeout", "-1s"},
		{"--grace", "-1s"},
	} {
		args := append(append([]string{"worker", "q", "--once"}, bad...), "--", "sh", "-c", "echo out; echo err >&2")
		_, errs, code := c.run("", args...)
		require.Equal(t, exitUsage, code, "worker %v: %s", bad, errs)
		require.Contains(t, errs, "invalid "+bad[0]+" ", "worker %v", bad)
		require.NotContains(t, errs, "panic", "worker %v", bad)
		require.Equal(t, "1", c.ok("count", "q", "queued"), "worker %v: nothing claimed", bad)

		args = append(append([]string{"map", "--queue", "m"}, bad...), "--", "sh", "-c", "echo err >&2")
		_, errs, code = c.run("a\n", args...)
		require.Equal(t, exitUsage, code, "map %v: %s", bad, errs)
		require.Contains(t, errs, "invalid "+bad[0]+" ", "map %v", bad)
	}
	c.ok("worker", "q", "--once", "--stderr-tail", "0", "--stdout-cap", "0", "--", "sh", "-c", "echo out; echo err >&2")
	require.Equal(t, "1", c.ok("count", "q", "succeeded"), "0 keeps nothing, and the job runs")
	require.Contains(t, c.ok("get", id), "succeeded")
}
