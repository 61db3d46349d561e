package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/server/ui"
)

// TestServeDashboard: `lakeshore serve` serves the dashboard at /ui/ by default, and not
// with --no-ui.
func TestServeDashboard(t *testing.T) {
	t.Parallel()
	for _, noUI := range []bool{false, true} {
		ctx, cancel := context.WithCancel(t.Context())
		ready := make(chan net.Addr, 1)
		done := make(chan error, 1)
		go func() {
			done <- RunServe(ctx, &ServeOpts{Addr: "127.0.0.1:0", Target: filepath.Join(t.TempDir(), "l.db"), NoUI: noUI,
				Ready: func(a net.Addr) { ready <- a }}, slog.New(slog.NewTextHandler(io.Discard, nil)), func(string) string { return "" })
		}()
		var addr net.Addr
		select {
		case addr = <-ready:
		case err := <-done:
			t.Fatal(err)
		}
		res, err := http.Get("http://" + addr.String() + "/ui/")
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if noUI {
			require.Equal(t, http.StatusNotFound, res.StatusCode)
		} else {
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.Equal(t, ui.ContentSecurityPolicy, res.Header.Get("Content-Security-Policy"))
			require.Contains(t, string(body), `<script src="app.js" defer></script>`)
		}
		http.DefaultClient.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
	}
}
