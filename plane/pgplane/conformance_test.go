package pgplane

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// TestConformance runs the whole conformance suite against PostgreSQL, each subtest on a
// fresh schema of one database of the test server (a schema per subtest costs milliseconds;
// a database per subtest, a copy of the template and a checkpoint each).
func TestConformance(t *testing.T) {
	planetest.Run(t, func(t *testing.T, opts planetest.Options) plane.Driver {
		url, schema := pgtest.Schema(t)
		d, err := Open(t.Context(), url, &Config{Schema: schema, Now: opts.Now, Seed: opts.Seed, Backoff: opts.Backoff,
			MaintenanceInterval: opts.MaintenanceInterval, MaxSchedulesPerNamespace: opts.MaxSchedulesPerNamespace,
			MaxTopicsPerQueue: opts.MaxTopicsPerQueue, MaxWorkersPerNamespace: opts.MaxWorkersPerNamespace, Retention: opts.Retention})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return d
	})
}
