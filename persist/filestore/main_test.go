package filestore

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// childEnv selects a child-process role when the test binary is re-executed by a
// crash or multi-process test (see crash_test.go).
const childEnv = "PERSIST_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	goleak.VerifyTestMain(m)
}

// openTemp opens a queue in a fresh temporary directory and closes it at cleanup.
func openTemp(t testing.TB, cfg *persist.Config) *fileQueue {
	t.Helper()
	if cfg == nil {
		cfg = &persist.Config{}
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	q, err := openFile(context.Background(), "q", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Close(context.Background())) })
	return q
}

// reopen closes q and opens the same queue again.
func reopen(t testing.TB, q *fileQueue) *fileQueue {
	t.Helper()
	require.NoError(t, q.Close(context.Background()))
	cfg := q.cfg
	cfg.Logger = nil
	q2, err := openFile(context.Background(), q.name, &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q2.Close(context.Background())) })
	return q2
}
