package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestCutBodyAnswerNamesNoAddress: a request body that ends before its declared length, or
// stops arriving until the server's read deadline, is 400 invalid naming the request body
// and what happened in words. On the old code the answer carried the read's own error,
// "send a complete body: read tcp 127.0.0.1:7077->127.0.0.1:51234: i/o timeout": the
// server's address and port (behind a proxy, an internal one) and Go's net error, on every
// route that reads a body (the JSON and msgpack ones, an Arrow put, a code upload).
func TestCutBodyAnswerNamesNoAddress(t *testing.T) {
	t.Parallel()
	back, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	srv := server.New(back, &server.Config{DataDir: t.TempDir(), CodeDir: t.TempDir()})
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ReadTimeout = 500 * time.Millisecond // the deadline a stalled body runs into
	ts.Start()
	t.Cleanup(func() {
		srv.Stop()
		ts.Close()
		require.NoError(t, srv.Close(context.Background()))
		back.Close()
	})
	digest := strings.Repeat("a", 64)
	routes := []struct{ method, path, contentType string }{
		{"POST", Q + "/invocations", api.ContentTypeJSON},
		{"POST", "/v1/namespaces/default/data/rollouts/records", api.ContentTypeArrow},
		{"PUT", Q + "/code/" + digest, "application/gzip"},
	}
	for _, rt := range routes {
		for _, stall := range []bool{false, true} {
			conn, err := net.Dial("tcp", ts.Listener.Addr().String())
			require.NoError(t, err)
			_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: 100\r\n\r\n0123456789",
				rt.method, rt.path, rt.contentType)
			require.NoError(t, err)
			if !stall {
				require.NoError(t, conn.(*net.TCPConn).CloseWrite()) // the body ends after 10 of its 100 bytes
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "%s %s", rt.method, rt.path)
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			conn.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s: %s", rt.method, rt.path, raw)
			var eb api.ErrorBody
			require.NoError(t, json.Unmarshal(raw, &eb), "%s", raw)
			require.Equal(t, "invalid", eb.Code, "%s", raw)
			require.Equal(t, "request body", eb.Details.Field)
			for _, leak := range []string{"127.0.0.1", "tcp", "->", "EOF"} {
				require.NotContains(t, eb.Message, leak, "%s %s (stalled %v)", rt.method, rt.path, stall)
			}
			want := "ended before the length"
			if stall {
				want = "stopped arriving"
			}
			require.Contains(t, eb.Message, want, "%s %s", rt.method, rt.path)
		}
	}
}
