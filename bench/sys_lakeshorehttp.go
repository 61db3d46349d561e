package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// lakeshoreHTTPSystem is Lakeshore's SDK over the HTTP plane: server.New on the SQLite
// plane, served on a loopback listener of the harness process, and httpplane as the
// client's driver. In the crash workload the server stays in the harness process while
// the worker processes, its clients, are killed and restarted.
type lakeshoreHTTPSystem struct{}

func (lakeshoreHTTPSystem) name() string { return "lakeshore-http" }
func (lakeshoreHTTPSystem) skip() string { return "" }

func (lakeshoreHTTPSystem) settings(e *env) string {
	return fmt.Sprintf("the same SDK calls as `lakeshore`, through `httpplane.New` (default client: keep-alive "+
		"connections, no auth token) to `server.New` (defaults, open: no admin token) on a 127.0.0.1 listener in "+
		"the harness process, over the SQLite plane at synchronous=%s; claims long-poll the server", e.sync)
}

// httpHost is a Lakeshore server on a loopback listener over one SQLite file.
type httpHost struct {
	plane *sqliteplane.Driver
	srv   *server.Server
	http  *http.Server
	url   string
	done  chan struct{}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// host starts a server for e's directory and records its URL in e.
func (lakeshoreHTTPSystem) host(ctx context.Context, e *env) (func() error, error) {
	h, err := startHTTPHost(ctx, e)
	if err != nil {
		return nil, err
	}
	e.httpURL = h.url
	return h.stop, nil
}

func startHTTPHost(ctx context.Context, e *env) (*httpHost, error) {
	logger := quietLogger()
	drv, err := sqliteplane.Open(ctx, filepath.Join(e.dir, "lakeshore.db"), &sqliteplane.Config{Synchronous: e.sync, Logger: logger})
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		drv.Close()
		return nil, err
	}
	h := &httpHost{plane: drv, srv: server.New(drv, &server.Config{Logger: logger}), done: make(chan struct{})}
	h.http = &http.Server{Handler: h.srv, ReadHeaderTimeout: 10 * time.Second}
	h.url = "http://" + l.Addr().String()
	go func() {
		defer close(h.done)
		h.http.Serve(l)
	}()
	return h, nil
}

func (h *httpHost) stop() error {
	h.srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.http.Shutdown(ctx)
	<-h.done
	return errors.Join(err, h.plane.Close())
}

func (lakeshoreHTTPSystem) open(ctx context.Context, e *env) (store, error) {
	return openOverHTTP(e, func() (string, func() error, error) {
		h, err := startHTTPHost(ctx, e)
		if err != nil {
			return "", nil, err
		}
		return h.url, h.stop, nil
	})
}

// openOverHTTP opens a store on the HTTP plane at e.httpURL, or, when the harness gave
// none, on a server that start starts and the store's close stops.
func openOverHTTP(e *env, start func() (url string, stop func() error, err error)) (store, error) {
	url, stop := e.httpURL, func() error { return nil }
	if url == "" {
		var err error
		if url, stop, err = start(); err != nil {
			return nil, err
		}
	}
	drv, err := httpplane.New(url, nil)
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	s, err := newLakeshoreStore(lakeshore.New(drv, &lakeshore.Config{Logger: quietLogger()}), e)
	if err != nil {
		return nil, errors.Join(err, drv.Close(), stop())
	}
	return &lakeshoreHTTPStore{lakeshoreStore: s, drv: drv, stop: stop}, nil
}

type lakeshoreHTTPStore struct {
	*lakeshoreStore
	drv  *httpplane.Driver
	stop func() error // stops the server the store started; a no-op for someone else's
}

func (s *lakeshoreHTTPStore) close() error { return errors.Join(s.drv.Close(), s.stop()) }
