package pgplane

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestConformanceOverHTTP runs the conformance suite through httpplane → server → pgplane:
// a client on the HTTP plane, a server on loopback, PostgreSQL behind it, each subtest on a
// fresh schema of one database.
func TestConformanceOverHTTP(t *testing.T) {
	planetest.Run(t, func(t *testing.T, opts planetest.Options) plane.Driver {
		url, schema := pgtest.Schema(t)
		back, err := Open(t.Context(), url, &Config{Schema: schema, Now: opts.Now, Seed: opts.Seed, Backoff: opts.Backoff,
			MaintenanceInterval: opts.MaintenanceInterval, MaxSchedulesPerNamespace: opts.MaxSchedulesPerNamespace,
			MaxTopicsPerQueue: opts.MaxTopicsPerQueue, MaxWorkersPerNamespace: opts.MaxWorkersPerNamespace, Retention: opts.Retention})
		require.NoError(t, err)
		// The suite submits raw bytes as payloads; the server's default insists on msgpack.
		srv := server.New(back, &server.Config{RawValues: true,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		ts := httptest.NewServer(srv)
		drv, err := httpplane.New(ts.URL, &httpplane.Config{Token: "-", Now: opts.Now})
		require.NoError(t, err)
		t.Cleanup(func() {
			drv.Close()
			srv.Stop()
			ts.Close()
			back.Close()
		})
		return drv
	})
}
