package sqliteplane

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// TestConformance runs the conformance suite against a SQLite file and against ":memory:".
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, memory := range []bool{false, true} {
		name := map[bool]string{false: "File", true: "Memory"}[memory]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			planetest.Run(t, func(t *testing.T, opts planetest.Options) plane.Driver {
				path := ":memory:"
				if !memory {
					path = filepath.Join(t.TempDir(), "lakeshore.db")
				}
				d, err := Open(t.Context(), path, &Config{Now: opts.Now, Seed: opts.Seed, Backoff: opts.Backoff,
					MaintenanceInterval: opts.MaintenanceInterval})
				require.NoError(t, err)
				t.Cleanup(func() { d.Close() })
				return d
			})
		})
	}
}
