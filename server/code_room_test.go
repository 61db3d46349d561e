package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// setupCountingCode is setup with a code directory whose listings of a namespace's
// archives are counted (server.CountCodeListings).
func setupCountingCode(t *testing.T, cfg *server.Config) (*testBundle, *atomic.Int64) {
	t.Helper()
	back, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	c := *cfg
	c.CodeDir = t.TempDir()
	b := &testBundle{back: back, logs: &syncBuffer{}}
	c.Logger = slog.New(slog.NewTextHandler(b.logs, nil))
	b.srv = server.New(back, &c)
	listings := server.CountCodeListings(b.srv)
	b.ts = httptest.NewServer(b.srv)
	t.Cleanup(func() {
		b.srv.Stop()
		b.ts.Close()
		back.Close()
	})
	return b, listings
}

// TestCodeUploadListsOnce: an upload of a new code archive lists its namespace's archives
// once, with a declared length (before its body is read, its room then held) and without
// one (chunked: once the body is read). The old code listed them twice an upload (before
// the body and again before keeping it): this test fails on it.
func TestCodeUploadListsOnce(t *testing.T) {
	t.Parallel()
	b, listings := setupCountingCode(t, &server.Config{})
	path := func(digest string) string { return "/v1/namespaces/default/queues/jobs/code/" + digest }
	digestA, a := codeArchive(t, map[string]string{"a.py": "a = 1\n"})
	r := b.do(t, "PUT", path(digestA), api.ContentTypeGzip, a, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, int64(1), listings.Swap(0), "declared length")

	digestB, bb := codeArchive(t, map[string]string{"b.py": "b = 2\n"})
	body, send := io.Pipe()
	go func() { _, _ = send.Write(bb); _ = send.Close() }()
	req, err := http.NewRequestWithContext(t.Context(), "PUT", b.ts.URL+path(digestB), body) // no length: chunked
	require.NoError(t, err)
	req.Header.Set("Content-Type", api.ContentTypeGzip)
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, int64(1), listings.Swap(0), "chunked")
}

// TestCodeRoomHeldWhileUploading: the room an upload was given before its body counts
// against the namespace's cap until it is kept: a second upload that both would take past
// the cap is refused at once, naming the bytes under way, while the first is still
// sending; the first is then kept. Nothing passes the cap.
func TestCodeRoomHeldWhileUploading(t *testing.T) {
	t.Parallel()
	digestA, a := codeArchive(t, map[string]string{"a.py": "a = 1\n"})
	digestB, bb := codeArchive(t, map[string]string{"b.py": "b = 2\n"})
	b, _ := setupCountingCode(t, &server.Config{MaxCodeBytesPerNamespace: int64(len(a) + len(bb) - 1)})
	path := func(digest string) string { return "/v1/namespaces/default/queues/jobs/code/" + digest }

	// The first upload asks to continue (Expect: 100-continue): its client sends a byte of
	// its body only once the server reads it, after its room was given.
	body, send := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), "PUT", b.ts.URL+path(digestA), body)
	require.NoError(t, err)
	req.ContentLength = int64(len(a))
	req.Header.Set("Content-Type", api.ContentTypeGzip)
	req.Header.Set("Expect", "100-continue")
	transport := &http.Transport{ExpectContinueTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	answered := make(chan int, 1)
	go func() {
		resp, err := (&http.Client{Transport: transport}).Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	_, err = send.Write(a[:1]) // returns once the server reads the body: its room is held
	require.NoError(t, err)
	eb := b.do(t, "PUT", path(digestB), api.ContentTypeGzip, bb, "").requireError(t, 409, "limit_exceeded")
	require.Contains(t, eb.Message, fmt.Sprintf("holds 0 code archives of 0 bytes, and this one of %d bytes would pass its maximum (%d bytes) (with %d bytes of uploads under way)",
		len(bb), len(a)+len(bb)-1, len(a)))
	_, err = send.Write(a[1:])
	require.NoError(t, err)
	require.NoError(t, send.Close())
	require.Equal(t, 200, <-answered)
	r := b.do(t, "GET", path(digestA), "", nil, "")
	require.Equal(t, 200, r.status)
	b.do(t, "GET", path(digestB), "", nil, "").requireError(t, 404, "not_found")
}
