package lakestore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// TestMain runs the tests, stops the PostgreSQL server of the binary, and fails the run
// when a goroutine the store started outlives its Close (goleak).
func TestMain(m *testing.M) { pgtest.VerifyMain(m) }

// openTest opens queue name on a fresh catalog database with the bucket blobURL.
func openTest(t testing.TB, catalog, blobURL, name string, cfg *Config) *Store {
	t.Helper()
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	c.Catalog, c.Blob = catalog, blobURL
	if c.FlushInterval == 0 {
		c.FlushInterval = -1
	}
	s, err := Open(context.Background(), name, &c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func fileBucket(t testing.TB) string { return "file://" + t.TempDir() }

func TestConformanceFile(t *testing.T) {
	persisttest.Run(t, func(t *testing.T) persist.Store {
		return openTest(t, pgtest.Database(t), fileBucket(t), "q", nil)
	})
}

func TestConformanceMem(t *testing.T) {
	persisttest.Run(t, func(t *testing.T) persist.Store {
		return openTest(t, pgtest.Database(t), "mem://", "q", nil)
	})
}

// TestConformanceFlushed runs the suite with a flush after every put, so reads come
// from fragments (row and field fragments) instead of the tail.
func TestConformanceFlushed(t *testing.T) {
	persisttest.Run(t, func(t *testing.T) persist.Store {
		return openTest(t, pgtest.Database(t), fileBucket(t), "q", &Config{FlushRows: 1})
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
