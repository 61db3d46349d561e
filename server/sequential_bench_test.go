package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// BenchmarkSubmitSequential is one caller submitting one invocation at a time, each
// committed (synchronous=FULL, a file in b.TempDir()) before the next, as the Python SDK's
// one-thread enqueue does against `lakeshore daemon`: Driver calls the plane directly,
// UnixSocket sends the msgpack request of the SDK to server.Server on a unix socket (the
// daemon's transport) over one keep-alive connection. The difference of the two is the
// request's cost (HTTP, routing, decoding, validation, the answer) on the server side.
// go test ./server -run '^$' -bench SubmitSequential -benchtime 3000x
func BenchmarkSubmitSequential(b *testing.B) {
	open := func(b *testing.B) plane.Driver {
		d, err := sqliteplane.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), &sqliteplane.Config{Synchronous: "FULL"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		return d
	}
	ids := plane.NewIDGenerator()
	b.Run("Driver", func(b *testing.B) {
		d := open(b)
		for b.Loop() {
			if _, err := d.InvocationSubmitMany(context.Background(), &plane.SubmitManyParams{Namespace: "default", Queue: "bench",
				Invocations: []plane.SubmitParams{{ID: ids.New(time.Now()), Payload: []byte{0x01}}}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UnixSocket", func(b *testing.B) {
		d := open(b)
		srv := server.New(d, &server.Config{Logger: slog.New(slog.DiscardHandler)})
		socket := filepath.Join(b.TempDir(), "d.sock")
		ln, err := net.Listen("unix", socket)
		if err != nil {
			b.Fatal(err)
		}
		hs := &http.Server{Handler: srv}
		go hs.Serve(ln) //nolint:errcheck
		b.Cleanup(func() { srv.Stop(); hs.Close() })
		client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
		b.Cleanup(client.CloseIdleConnections)
		for b.Loop() {
			body, err := api.Msgpack.Marshal(&api.SubmitRequest{ID: ids.New(time.Now()), Payload: api.Value{Wire: []byte{0x01}}})
			if err != nil {
				b.Fatal(err)
			}
			req, _ := http.NewRequest("POST", "http://lakeshore"+Q+"/invocations", bytes.NewReader(body))
			req.Header.Set("Content-Type", api.ContentTypeMsgpack)
			req.Header.Set("Accept", api.ContentTypeMsgpack)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body) //nolint:errcheck
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	})
}
