package sqliteplane

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// TestConformance runs the conformance suite against a SQLite file and against ":memory:"
// (only the file under the race detector).
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, memory := range []bool{false, true} {
		name := map[bool]string{false: "File", true: "Memory"}[memory]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if memory && planetest.RaceDetector {
				// ":memory:" is a database file in a private directory on tmpfs
				// (internal/sqlitedb's Memory): the same Go code as File, so the race
				// detector has nothing more to find there, at half the package's time.
				t.Skip("the same code paths as File: checked in the run without the race detector")
			}
			planetest.Run(t, func(t *testing.T, opts planetest.Options) plane.Driver {
				path := ":memory:"
				if !memory {
					path = filepath.Join(t.TempDir(), "lakeshore.db")
				}
				d, err := Open(t.Context(), path, &Config{Now: opts.Now, Seed: opts.Seed, Backoff: opts.Backoff,
					MaintenanceInterval: opts.MaintenanceInterval, MaxSchedulesPerNamespace: opts.MaxSchedulesPerNamespace,
					MaxTopicsPerQueue: opts.MaxTopicsPerQueue, MaxWorkersPerNamespace: opts.MaxWorkersPerNamespace, Retention: opts.Retention})
				require.NoError(t, err)
				t.Cleanup(func() { d.Close() })
				return d
			})
		})
	}
}
