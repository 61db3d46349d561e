package lakeshore_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgMain{m})
}

// pgMain runs the tests and then stops the PostgreSQL server of the postgres tests, if one
// started.
type pgMain struct{ m *testing.M }

func (p pgMain) Run() int { return pgtest.Main(p.m) }

// testBundle is what setup returns besides the queue under test.
type testBundle struct {
	d *lakeshore.Dispatch
}

// setup opens a fresh ":memory:" plane, closed when the test ends, and a queue on it.
func setup(t *testing.T, opts *lakeshore.QueueOptions) (*lakeshore.Queue, *testBundle) {
	t.Helper()
	d, err := lakeshore.Open(t.Context(), ":memory:", &lakeshore.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	q, err := d.Queue("test", opts)
	require.NoError(t, err)
	return q, &testBundle{d: d}
}

// testLogger logs to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
