//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
}

// TestDaemonHandshakeOwnershipIdleExit: one daemon per run directory, the handshake, an
// attached client (clients.lock shared) keeps it up, and it exits when idle, removing its
// socket.
func TestDaemonHandshakeOwnershipIdleExit(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "run", "d.sock")
	// A client attaches as real clients do: start.lock held exclusively from before the
	// daemon starts until clients.lock is held shared, so the daemon cannot decide it is
	// idle in between, however late this goroutine runs.
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	start, err := flockFile(filepath.Join(dir, "run", DaemonStartLock), syscall.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	info, done := startDaemon(t, socket, 300*time.Millisecond)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl, err := flockFile(filepath.Join(dir, "run", DaemonClientsLock), syscall.LOCK_SH)
	if err != nil {
		t.Fatal(err)
	}
	start.Close()
	resp, err := unixClient(socket).Get("http://daemon/v1/daemon")
	if err != nil {
		t.Fatal(err)
	}
	var got DaemonInfo
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Protocol != DaemonProtocol || got.PID != os.Getpid() || got.Target != ":memory:" || got.Socket != info.Socket {
		t.Fatalf("handshake %+v", got)
	}
	if fi, err := os.Stat(socket); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}
	// A second daemon for the same directory is refused at once.
	err = RunDaemon(context.Background(), &DaemonOpts{Socket: socket, Target: ":memory:"}, logger, os.Getenv)
	if !errors.Is(err, errDaemonOwned) {
		t.Fatalf("second daemon: %v", err)
	}
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("exited with a client attached: %v", err)
	default:
	}
	cl.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit when idle")
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestDaemonSocketPathTooLong(t *testing.T) {
	long := "/tmp/" + strings.Repeat("x", MaxSocketPath) + "/d.sock"
	err := RunDaemon(context.Background(), &DaemonOpts{Socket: long, Target: ":memory:"}, slog.New(slog.NewTextHandler(io.Discard, nil)), os.Getenv)
	if err == nil || !strings.Contains(err.Error(), "unix socket paths hold at most") {
		t.Fatalf("err = %v", err)
	}
}

// TestDaemonExitsWhenItsDirectoryIsGone: a daemon whose socket directory was removed (a
// deleted home, a test's temporary directory) can never be found by a client again, so it
// exits when idle instead of running forever.
func TestDaemonExitsWhenItsDirectoryIsGone(t *testing.T) {
	dir := t.TempDir()
	_, done := startDaemon(t, filepath.Join(dir, "run", "d.sock"), 200*time.Millisecond)
	if err := os.RemoveAll(filepath.Join(dir, "run")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon of a removed directory did not exit when idle")
	}
}

// startDaemon runs a :memory: daemon on socket with the idle exit given, and returns once
// it is ready: its handshake and the channel its RunDaemon's result comes on.
func startDaemon(t *testing.T, socket string, idleExit time.Duration) (DaemonInfo, <-chan error) {
	t.Helper()
	ready := make(chan DaemonInfo, 1)
	done := make(chan error, 1)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		done <- RunDaemon(context.Background(), &DaemonOpts{Socket: socket, Target: ":memory:", IdleExit: idleExit,
			Ready: func(i DaemonInfo) { ready <- i }}, logger, os.Getenv)
	}()
	select {
	case info := <-ready:
		return info, done
	case err := <-done:
		t.Fatalf("daemon: %v", err)
		return DaemonInfo{}, nil
	}
}
