package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGuardKillsMarkedProcesses: the guard's last resort finds a command and the child it
// started by the environment mark alone (no process group registered), and leaves a
// process with another mark running.
func TestGuardKillsMarkedProcesses(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("needs /proc (Linux)")
	}
	start := func(mark string) (*exec.Cmd, []int) {
		cmd := exec.Command("sh", "-c", `sleep 60 & echo "$$ $!"; wait`)
		cmd.Env = append(os.Environ(), guardEnv+"="+mark)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // in no group the test belongs to
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		var pids []int
		for _, f := range strings.Fields(line) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			pids = append(pids, pid)
		}
		require.Len(t, pids, 2)
		return cmd, pids
	}
	marked, markedPIDs := start("worker-a")
	_, otherPIDs := start("worker-b")
	killMarked("worker-a")
	_ = marked.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range markedPIDs {
		for alive(pid) {
			require.False(t, time.Now().After(deadline), "pid %d (of %v) outlived killMarked", pid, markedPIDs)
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, pid := range otherPIDs {
		require.True(t, alive(pid), "pid %d has another mark: left running", pid)
	}
	killMarked("") // no mark: kills nothing
	for _, pid := range otherPIDs {
		require.True(t, alive(pid))
	}
}
