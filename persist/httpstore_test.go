package persist_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// dataServer is a real `lakeshore serve` handler on loopback serving data queues from a
// temporary directory.
type dataServer struct {
	url    string
	dir    string
	srv    *server.Server
	client *http.Client
}

// startDataServer starts a server with cfg (DataDir set to a temporary directory when
// empty) and stops it at cleanup.
func startDataServer(t testing.TB, cfg *server.Config) *dataServer {
	t.Helper()
	back, err := sqliteplane.Open(context.Background(), ":memory:", nil)
	require.NoError(t, err)
	var c server.Config
	if cfg != nil {
		c = *cfg
	}
	if c.DataDir == "" {
		c.DataDir = t.TempDir()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv := server.New(back, &c)
	ts := httptest.NewServer(srv)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(func() {
		srv.Stop()
		ts.Close()
		require.NoError(t, srv.Close(context.Background()))
		client.CloseIdleConnections()
		back.Close()
	})
	return &dataServer{url: ts.URL, dir: c.DataDir, srv: srv, client: client}
}

// open opens queue name on the server with cfg's namespace and token.
func (d *dataServer) open(t testing.TB, name string, cfg *persist.Config) persist.Store {
	t.Helper()
	var c persist.Config
	if cfg != nil {
		c = *cfg
	}
	c.URL, c.HTTPClient = d.url, d.client
	s, err := persist.OpenHTTPStore(context.Background(), d.url, name, &c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// TestHTTPStoreConformance runs the Store conformance suite on the HTTP store against a
// real server on loopback, one queue per case.
func TestHTTPStoreConformance(t *testing.T) {
	t.Parallel()
	d := startDataServer(t, nil)
	n := 0
	persisttest.Run(t, func(t *testing.T) persist.Store {
		n++
		return d.open(t, "q"+string(rune('a'+n)), nil)
	})
}
