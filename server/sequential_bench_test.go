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
		client := serveUnix(b, open(b))
		for b.Loop() {
			body, err := api.Msgpack.Marshal(&api.SubmitRequest{ID: ids.New(time.Now()), Payload: api.Value{Wire: []byte{0x01}}})
			if err != nil {
				b.Fatal(err)
			}
			postMsgpack(b, client, Q+"/invocations", body, nil)
		}
	})
}

// BenchmarkSettleAndClaimSequential is a worker of one slot burning down a queue over the
// daemon's transport: each op is one POST …/settle-and-claim that settles the job the last
// one claimed (succeeded) and claims the next, committed (synchronous=FULL, a file) before
// its answer, as the Python worker's turn. The queue holds enough jobs for every op.
// go test ./server -run '^$' -bench SettleAndClaimSequential -benchtime 3000x
func BenchmarkSettleAndClaimSequential(b *testing.B) {
	d, err := sqliteplane.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), &sqliteplane.Config{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	ctx := context.Background()
	n := b.N + 1
	for i := 0; i < n; i += 500 {
		params := &plane.SubmitManyParams{Namespace: "default", Queue: "jobs"}
		for j := i; j < min(n, i+500); j++ {
			params.Invocations = append(params.Invocations, plane.SubmitParams{Payload: []byte{0x01}})
		}
		if _, err := d.InvocationSubmitMany(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	client := serveUnix(b, d)
	claim := api.ClaimRequest{Kind: "fifo", Max: 1, Worker: "bench"}
	var ans api.SettleAndClaimResponse
	body, _ := api.Msgpack.Marshal(&api.SettleAndClaimRequest{Settles: []api.Settle{}, Claim: claim})
	postMsgpack(b, client, Q+"/settle-and-claim", body, &ans)
	b.ResetTimer()
	for range b.N { // not b.Loop: the queue is filled for b.N ops before the timer
		if len(ans.Jobs) != 1 {
			b.Fatalf("claimed %d jobs", len(ans.Jobs))
		}
		job := ans.Jobs[0]
		body, err := api.Msgpack.Marshal(&api.SettleAndClaimRequest{Claim: claim,
			Settles: []api.Settle{{ID: job.ID, Token: job.Token, Outcome: "succeeded", Result: api.Value{Wire: []byte{0x01}}}}})
		if err != nil {
			b.Fatal(err)
		}
		ans = api.SettleAndClaimResponse{}
		postMsgpack(b, client, Q+"/settle-and-claim", body, &ans)
	}
}

// serveUnix serves drv with server.Server on a unix socket (the daemon's transport) for
// the benchmark's length and returns a client of it.
func serveUnix(b *testing.B, drv plane.Driver) *http.Client {
	srv := server.New(drv, &server.Config{Logger: slog.New(slog.DiscardHandler)})
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
	return client
}

// postMsgpack posts a msgpack body on client and decodes the 200 answer into out (nil:
// discarded).
func postMsgpack(b *testing.B, client *http.Client, path string, body []byte, out any) {
	req, _ := http.NewRequest("POST", "http://lakeshore"+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", api.ContentTypeMsgpack)
	req.Header.Set("Accept", api.ContentTypeMsgpack)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b.Fatal(resp.Status, string(raw))
	}
	if out != nil {
		if err := api.Msgpack.Unmarshal(raw, out); err != nil {
			b.Fatal(err)
		}
	}
}
