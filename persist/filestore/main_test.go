package filestore

import (
	"context"
	"errors"
	"io"
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

// tailAndFragments runs test in two parallel subtests, each on a fresh queue with no
// background flush: Tail, where maybeFlush does nothing, so that what the test put is
// read from the tail, and Fragments, where maybeFlush flushes, so that it is read from
// fragments.
func tailAndFragments(t *testing.T, test func(t *testing.T, q *fileQueue, maybeFlush func())) {
	for _, flush := range []bool{false, true} {
		t.Run(map[bool]string{false: "Tail", true: "Fragments"}[flush], func(t *testing.T) {
			t.Parallel()
			q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
			test(t, q, func() {
				if flush {
					require.NoError(t, q.Flush(context.Background()))
				}
			})
		})
	}
}

// streamAll reads s to its end (io.EOF), checking that no batch holds more than
// batchSize rows, and returns the rows.
func streamAll(t *testing.T, s *persist.Stream, batchSize int) []persist.Row {
	t.Helper()
	var all []persist.Row
	for {
		rows, err := s.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return all
		}
		require.NoError(t, err)
		require.LessOrEqual(t, len(rows), batchSize)
		all = append(all, rows...)
	}
}
