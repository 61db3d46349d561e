package main

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInterruptedSaysTheSignal: a one-shot verb stopped by SIGINT or SIGTERM (Ctrl-C
// during `result`, a `data put --block`) exits 130 saying "interrupted by SIGINT", not
// Go's "context canceled" (its text until 2026-12-07). The signal is in the channel before
// the verb starts, so the wait can end only by it (a job no worker runs, a 10-minute
// bound).
func TestInterruptedSaysTheSignal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	id := c.ok("submit", "q", `"x"`)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		signals := make(chan os.Signal, 1)
		signals <- sig
		var stdout, stderr bytes.Buffer
		code := runApp(t.Context(), []string{"--target", c.target, "result", id, "--timeout", "10m"}, strings.NewReader(""), &stdout, &stderr, signals)
		require.Equal(t, exitInterrupted, code, stderr.String())
		name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]
		require.Contains(t, stderr.String(), "interrupted by "+name)
		require.NotContains(t, stderr.String(), "context canceled")
	}
}
