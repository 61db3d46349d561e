package httpplane_test

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// testServer starts a server on a loopback listener over a fresh ":memory:" SQLite plane
// configured by opts, and returns an HTTP plane for it. Everything is closed by t.Cleanup.
func testServer(t *testing.T, opts planetest.Options, scfg *server.Config, pcfg *httpplane.Config) (*httpplane.Driver, *httptest.Server, plane.Driver) {
	t.Helper()
	back, err := sqliteplane.Open(t.Context(), ":memory:", &sqliteplane.Config{Now: opts.Now, Seed: opts.Seed,
		Backoff: opts.Backoff, MaintenanceInterval: opts.MaintenanceInterval, MaxSchedulesPerNamespace: opts.MaxSchedulesPerNamespace,
		MaxTopicsPerQueue: opts.MaxTopicsPerQueue, MaxWorkersPerNamespace: opts.MaxWorkersPerNamespace, Retention: opts.Retention})
	require.NoError(t, err)
	var c server.Config
	if scfg != nil {
		c = *scfg
	}
	// The conformance suite checks plane.Driver's contract, payloads as opaque bytes (it
	// submits raw strings); the server's default insists on msgpack values.
	c.RawValues = true
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	srv := server.New(back, &c)
	ts := httptest.NewServer(srv)
	var p httpplane.Config
	if pcfg != nil {
		p = *pcfg
	}
	if p.Token == "" {
		p.Token = "-" // not $LAKESHORE_TOKEN: the server runs open
	}
	drv, err := httpplane.New(ts.URL, &p)
	require.NoError(t, err)
	t.Cleanup(func() {
		drv.Close()
		srv.Stop()
		ts.Close()
		back.Close()
	})
	return drv, ts, back
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

func TestConformance(t *testing.T) {
	planetest.Run(t, func(t *testing.T, opts planetest.Options) plane.Driver {
		// The ids the HTTP plane makes carry the plane's (fake) clock, as the plane's own would.
		drv, _, _ := testServer(t, opts, nil, &httpplane.Config{Now: opts.Now})
		return drv
	})
}
