package pgplane

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestConformance runs the whole conformance suite against PostgreSQL, each subtest on a
// fresh database of the test server.
func TestConformance(t *testing.T) {
	planetest.Run(t, func(t *testing.T, opts planetest.Options) plane.Driver {
		d, err := Open(t.Context(), pgtest.Database(t), &Config{Now: opts.Now, Seed: opts.Seed, Backoff: opts.Backoff,
			MaintenanceInterval: opts.MaintenanceInterval})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	})
}
