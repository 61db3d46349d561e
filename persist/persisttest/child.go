package persisttest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// A store's crash, kill and multi-process tests re-execute their test binary as a child
// process in a role: ChildEnv names the role, ChildDirEnv the queue's directory (or the
// server's URL) and ChildArgEnv the role's argument.
const (
	ChildEnv    = "PERSIST_TEST_CHILD"
	ChildDirEnv = "PERSIST_TEST_DIR"
	ChildArgEnv = "PERSIST_TEST_ARG"
)

// Main is the TestMain of a store's test package: in a child process (ChildEnv set) it
// exits with run(role)'s status; else it runs the tests, failing the run when a
// goroutine outlives them (goleak).
func Main(m *testing.M, run func(role string) int) {
	if role := os.Getenv(ChildEnv); role != "" {
		os.Exit(run(role))
	}
	goleak.VerifyTestMain(m)
}

// ChildCommand returns the command that re-executes the test binary, running no test,
// in role with dir and arg (Main then calls its run), env added to this process's
// environment.
func ChildCommand(role, dir, arg string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"="+role, ChildDirEnv+"="+dir, ChildArgEnv+"="+arg)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// StartChild starts cmd and returns its stdout as a scanner of lines (up to 1 MiB each)
// and what it writes to stderr, for the test's messages.
func StartChild(t testing.TB, cmd *exec.Cmd) (*bufio.Scanner, *strings.Builder) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return sc, &stderr
}

// StartTrainer starts cmd, a child process that runs Trainer, as the TrainerProcess
// TrainerCrash takes: its stdout by line, a SIGKILL, and a Wait whose error carries
// what the child wrote to stderr. A child still running when the test ends is killed.
func StartTrainer(t testing.TB, cmd *exec.Cmd) *TrainerProcess {
	t.Helper()
	lines, stderr := StartChild(t, cmd)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &TrainerProcess{
		Lines: lines,
		Kill:  func() error { return cmd.Process.Signal(syscall.SIGKILL) },
		Wait: func() error {
			if err := cmd.Wait(); err != nil {
				return fmt.Errorf("%w; stderr: %s", err, stderr.String())
			}
			return nil
		},
	}
}

// ChildFailed reports the failure err of a child's step what on stderr, where the
// parent shows it, and returns the child's exit status for a failure, 1.
func ChildFailed(what string, err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	return 1
}
