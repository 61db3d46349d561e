package filestore

import (
	"context"
	"os"
	"strconv"
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
		return persisttest.ChildFailed("open", err)
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
		return persisttest.StartTrainer(t, persisttest.ChildCommand("trainer", dir, strconv.Itoa(holdAt)))
	})
}
