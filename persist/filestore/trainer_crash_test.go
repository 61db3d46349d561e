package filestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// childTrainer is the child role "trainer": persisttest.Trainer over the queue of dir,
// holding its lease at the batch arg.
func childTrainer(ctx context.Context, dir, arg string) int {
	holdAt, _ := strconv.Atoi(arg)
	q, err := persist.Open(ctx, "q", &persist.Config{Dir: dir}, Driver())
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer q.Close(ctx)
	return persisttest.Trainer(ctx, q, holdAt, os.Stdout, os.Stderr)
}

// TestTrainerSIGKILLBetweenReadAndCommit kills a trainer process (SIGKILL) holding a
// leased, uncommitted batch of the file store; the restarted trainer reads exactly that
// batch first (once the lease expires), and over both runs every sample is committed
// exactly once: none lost, none consumed twice (persisttest.TrainerCrash).
func TestTrainerSIGKILLBetweenReadAndCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q, err := persist.Open(ctx, "q", &persist.Config{Dir: dir}, Driver())
	require.NoError(t, err)
	defer q.Close(ctx)
	persisttest.TrainerCrash(t, q, func(holdAt int) *persisttest.TrainerProcess {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PERSIST_TEST_CHILD=trainer", "PERSIST_TEST_DIR="+dir, "PERSIST_TEST_ARG="+strconv.Itoa(holdAt))
		return startTrainer(t, cmd)
	})
}

// startTrainer starts cmd and returns it as a persisttest.TrainerProcess.
func startTrainer(t *testing.T, cmd *exec.Cmd) *persisttest.TrainerProcess {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	return &persisttest.TrainerProcess{
		Lines: bufio.NewScanner(stdout),
		Kill:  func() error { return cmd.Process.Signal(syscall.SIGKILL) },
		Wait: func() error {
			if err := cmd.Wait(); err != nil {
				return fmt.Errorf("%w; stderr: %s", err, stderr.String())
			}
			return nil
		},
	}
}
