package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// serveEnv names the environment variable that turns this binary into a Lakeshore server
// process for lakeshore-http-proc; its value is a JSON serveSpec.
const serveEnv = "LAKESHORE_BENCH_SERVE"

// serveSpec tells a server process where its SQLite file is.
type serveSpec struct {
	Dir  string `json:"dir"`
	Sync string `json:"sync"`
}

// lakeshoreHTTPProcSystem is lakeshore-http with the server in a separate process: this
// binary started again as a server (server.New over the SQLite plane, the same code as
// `lakeshore serve --target FILE`) on a loopback listener, so the client and the server
// each have their own Go runtime, heap and garbage collector, as in production.
type lakeshoreHTTPProcSystem struct{}

func (lakeshoreHTTPProcSystem) name() string { return "lakeshore-http-proc" }
func (lakeshoreHTTPProcSystem) skip() string { return "" }

func (lakeshoreHTTPProcSystem) settings(e *env) string {
	return fmt.Sprintf("as `lakeshore-http`, but the server runs in a separate process (this binary re-executed as "+
		"`server.New` over the SQLite plane at synchronous=%s on a 127.0.0.1 listener, as `lakeshore serve` does)", e.sync)
}

// procHost is a server process.
type procHost struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func startProcHost(e *env) (*procHost, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(&serveSpec{Dir: e.dir, Sync: e.sync})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serveEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start server process: %w", err)
	}
	h := &procHost{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		urls <- strings.TrimSpace(line)
		io.Copy(io.Discard, out)
	}()
	go func() { cmd.Wait(); close(h.done) }()
	select {
	case h.url = <-urls:
		if !strings.HasPrefix(h.url, "http://") {
			h.stop()
			return nil, fmt.Errorf("server process: no URL (%q)", h.url)
		}
	case <-time.After(60 * time.Second):
		h.stop()
		return nil, errors.New("server process did not start within 60 s")
	}
	return h, nil
}

func (h *procHost) stop() error {
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		h.cmd.Process.Kill()
		<-h.done
	}
	return nil
}

// serveMain runs this process as a server when serveEnv is set, until SIGTERM; it reports
// whether it did.
func serveMain() bool {
	raw := os.Getenv(serveEnv)
	if raw == "" {
		return false
	}
	var spec serveSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "bench server:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	h, err := startHTTPHost(ctx, &env{dir: spec.Dir, sync: spec.Sync})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench server:", err)
		os.Exit(1)
	}
	fmt.Println(h.url)
	<-ctx.Done()
	if err := h.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench server:", err)
		os.Exit(1)
	}
	return true
}

func init() {
	if serveMain() {
		os.Exit(0)
	}
}

// host starts a server process for e's directory and records its URL in e.
func (lakeshoreHTTPProcSystem) host(ctx context.Context, e *env) (func() error, error) {
	h, err := startProcHost(e)
	if err != nil {
		return nil, err
	}
	e.httpURL = h.url
	return h.stop, nil
}

func (lakeshoreHTTPProcSystem) open(ctx context.Context, e *env) (store, error) {
	return openOverHTTP(e, func() (string, func() error, error) {
		h, err := startProcHost(e)
		if err != nil {
			return "", nil, err
		}
		return h.url, h.stop, nil
	})
}
