package filestore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// TestMain runs a child role of a crash or multi-process test (child_test.go) when
// asked to, else the tests, under goleak (persisttest.Main).
func TestMain(m *testing.M) { persisttest.Main(m, runChild) }

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
