//go:build unix

package main

// `lakeshore daemon`: a plane served over HTTP on a unix socket, for the clients of one
// machine that must not load the Go runtime themselves (the Python SDK, docs/python.md).
//
// The directory of the socket is the daemon's run directory. Three lock files there make
// one daemon per directory, started once however many clients race:
//
//   - daemon.lock: the daemon holds it exclusively for its whole life. A second daemon
//     for the same directory fails at once (exit code 5, "another daemon owns …").
//   - start.lock: a client holds it exclusively while it checks for a daemon, starts one
//     and attaches; the daemon holds it while it decides to exit when idle.
//   - clients.lock: every attached client process holds it shared. The daemon exits when
//     idle only when it can take it exclusively (no client attached), and a client
//     replaces a daemon of another version only then.
//
// flock(2) locks end with the process that holds them, even killed by SIGKILL, so a
// crashed daemon or client never leaves a lock behind; a socket file left by a killed
// daemon is removed by the next daemon, which owns daemon.lock.
//
// GET /v1/daemon answers the handshake (DaemonInfo, JSON); POST /v1/daemon/stop stops the
// daemon gracefully. Every other path is the HTTP API (docs/http-api.md) without
// authentication: the socket is mode 0600 in a directory of mode 0700, so only its owner
// reaches it.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// DaemonProtocol is the version of the daemon's handshake and of the HTTP API it serves.
// A client refuses a daemon of another protocol (and replaces it when no client is
// attached).
const DaemonProtocol = 1

// DaemonIdleExitDefault is how long a daemon stays up with no attached client and no
// request before it exits.
const DaemonIdleExitDefault = 60 * time.Second

// Names of the files in a daemon's run directory.
const (
	DaemonLockFile    = "daemon.lock"
	DaemonStartLock   = "start.lock"
	DaemonClientsLock = "clients.lock"
	DaemonLogFile     = "daemon.log"
)

// MaxSocketPath is the longest unix socket path, in bytes, the system takes (107 on Linux,
// 103 on macOS and the BSDs).
const MaxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// DaemonOpts are the options of `lakeshore daemon`.
type DaemonOpts struct {
	// Socket is the unix socket path to listen on (required); its directory is the run
	// directory, created with mode 0700.
	Socket string
	// Target is the plane to serve, as lakeshore.Open takes it (default: the embedded
	// $LAKESHORE_HOME/lakeshore.db).
	Target string
	// IdleExit is how long the daemon waits with no attached client and no request before
	// exiting; 0 never exits when idle.
	IdleExit time.Duration
	// Stdin, when set, is read until EOF; EOF stops the daemon (a private daemon whose
	// parent holds the other end of a pipe: it dies with its parent, even killed).
	Stdin io.Reader
	// Ready, when set, is called once the socket accepts connections (tests).
	Ready func(info DaemonInfo)
}

// DaemonInfo is the handshake a daemon answers on GET /v1/daemon.
type DaemonInfo struct {
	// Protocol is DaemonProtocol.
	Protocol int `json:"protocol"`
	// Version is the binary's module version and VCS revision ("devel" when unknown).
	Version string `json:"version"`
	// Binary identifies the executable file: "<size>-<mtime in ns>", the same a client
	// computes from the binary it would start, to notice a daemon of an older build.
	Binary string `json:"binary"`
	// PID is the daemon's process id.
	PID int `json:"pid"`
	// Target is the plane it serves.
	Target string `json:"target"`
	// Socket is the path it listens on.
	Socket string `json:"socket"`
	// StartedAt is when it started (UTC).
	StartedAt time.Time `json:"started_at"`
}

// CheckSocketPath returns a *plane.InvalidError when path cannot be a unix socket path
// (empty, or longer than MaxSocketPath bytes).
func CheckSocketPath(path string) error {
	if path == "" {
		return plane.Invalid("--socket", path, "name the unix socket path")
	}
	if len(path) > MaxSocketPath {
		return plane.Invalid("--socket", path, fmt.Sprintf("it is %d bytes; unix socket paths hold at most %d: choose a shorter directory (e.g. set %s)", len(path), MaxSocketPath, lakeshore.EnvHome))
	}
	return nil
}

// binaryIdentity identifies the running executable by size and modification time.
func binaryIdentity() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	return strconv.FormatInt(fi.Size(), 10) + "-" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// binaryVersion is the module version and VCS revision the binary was built from.
func binaryVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += "+" + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += "-dirty"
			}
		}
	}
	return v
}

// flockFile opens (creating, mode 0600) and flocks path; how is syscall.LOCK_EX or
// LOCK_SH, with LOCK_NB to fail at once. The lock lasts until the file is closed.
func flockFile(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// errDaemonOwned is returned when another daemon holds the run directory.
var errDaemonOwned = errors.New("another daemon owns this run directory")

// RunDaemon serves the plane o.Target on the unix socket o.Socket until ctx ends, o.Stdin
// reaches EOF, POST /v1/daemon/stop is called, or (o.IdleExit > 0) no client is attached
// and no request came for o.IdleExit. It removes its socket when it stops.
func RunDaemon(ctx context.Context, o *DaemonOpts, logger *slog.Logger, getenv func(string) string) error {
	if err := CheckSocketPath(o.Socket); err != nil {
		return err
	}
	if o.IdleExit < 0 {
		return plane.Invalid("--idle-exit", o.IdleExit.String(), "use a duration ≥ 0 (0: never)")
	}
	socket, err := filepath.Abs(o.Socket)
	if err != nil {
		return err
	}
	if err := CheckSocketPath(socket); err != nil {
		return err
	}
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the run directory: %w", err)
	}
	// startLock is held from the moment the daemon decides to exit when idle until it has
	// removed its socket and released the plane and daemon.lock (this defer runs last), so
	// no client attaches to a daemon that is going away.
	var startLock *os.File
	defer func() {
		if startLock != nil {
			startLock.Close()
		}
	}()
	owner, err := flockFile(filepath.Join(dir, DaemonLockFile), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		pid, _ := os.ReadFile(filepath.Join(dir, DaemonLockFile))
		return fmt.Errorf("%w: %s (pid %s); stop it (POST /v1/daemon/stop) or use another directory", errDaemonOwned, dir, cmp.Or(string(pid), "?"))
	}
	if err != nil {
		return fmt.Errorf("lock the run directory: %w", err)
	}
	defer owner.Close()
	_ = owner.Truncate(0)
	_, _ = owner.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)

	target, err := serveTarget(o.Target, getenv)
	if err != nil {
		return err
	}
	drv, err := lakeshore.OpenDriver(ctx, target, &lakeshore.Config{Logger: logger})
	if err != nil {
		return err
	}
	defer drv.Close()

	// We own the directory: a socket file here is a dead daemon's.
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the stale socket: %w", err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("chmod the socket: %w", err)
	}

	info := DaemonInfo{Protocol: DaemonProtocol, Version: binaryVersion(), Binary: binaryIdentity(), PID: os.Getpid(),
		Target: plane.RedactURL(target), Socket: socket, StartedAt: time.Now().UTC()}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	// Data queues: in data/ beside the plane's SQLite file (for the default
	// $LAKESHORE_HOME/lakeshore.db that is $LAKESHORE_HOME/data, as serve), so the data of a
	// file's plane goes with the file whichever client started its daemon; for a plane that
	// is not a file ($LAKESHORE_HOME/data, as serve), or for a private ":memory:" plane a
	// temporary directory that goes with the daemon.
	// The code archives (docs/fabric.md) live beside it, in code/.
	var dataDir, codeDir string
	switch {
	case target == ":memory:":
		if dataDir, err = os.MkdirTemp("", "lakeshore-daemon-data-"); err != nil {
			return fmt.Errorf("create the data directory: %w", err)
		}
		defer os.RemoveAll(dataDir)
		codeDir = filepath.Join(dataDir, ".code")
	case !strings.Contains(target, "://"):
		if dataDir, err = serveDataDir(filepath.Join(filepath.Dir(target), "data"), getenv); err != nil {
			return err
		}
		if codeDir, err = serveCodeDir(filepath.Join(filepath.Dir(target), "code"), getenv); err != nil {
			return err
		}
	default:
		if dataDir, err = serveDataDir("", getenv); err != nil {
			return err
		}
		if codeDir, err = serveCodeDir("", getenv); err != nil {
			return err
		}
	}
	srv := server.New(drv, &server.Config{Logger: logger, DataDir: dataDir, DataConfig: &persist.Config{Logger: logger}, CodeDir: codeDir})
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeoutDefault)
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			logger.Error("closing the data queues", "error", err)
		}
	}()
	var lastActive atomic.Int64
	lastActive.Store(time.Now().UnixNano())
	var inFlight atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(info)
	})
	mux.HandleFunc("POST /v1/daemon/stop", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"stopping":true}`+"\n")
		stop(errors.New("stopped by POST /v1/daemon/stop"))
	})
	mux.Handle("/", srv)
	hs := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer func() {
			inFlight.Add(-1)
			lastActive.Store(time.Now().UnixNano())
		}()
		mux.ServeHTTP(w, r)
	}), logger)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	logger.Info("daemon ready", "socket", socket, "pid", info.PID, "protocol", DaemonProtocol, "target", plane.RedactURL(target))
	if o.Ready != nil {
		o.Ready(info)
	}

	if o.Stdin != nil {
		go func() {
			_, _ = io.Copy(io.Discard, o.Stdin)
			stop(errors.New("stdin closed (the parent is gone)"))
		}()
	}
	var idleOnce sync.Once
	if o.IdleExit > 0 {
		go func() {
			tick := time.NewTicker(min(o.IdleExit/4+time.Millisecond, time.Second))
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if inFlight.Load() > 0 || time.Since(time.Unix(0, lastActive.Load())) < o.IdleExit {
					continue
				}
				sl, err := flockFile(filepath.Join(dir, DaemonStartLock), syscall.LOCK_EX|syscall.LOCK_NB)
				if errors.Is(err, fs.ErrNotExist) {
					// Its directory was removed: no client can find this daemon any more.
					stop(fmt.Errorf("idle for %s and its directory %s is gone", o.IdleExit, dir))
					return
				}
				if err != nil {
					continue // a client is attaching
				}
				cl, err := flockFile(filepath.Join(dir, DaemonClientsLock), syscall.LOCK_EX|syscall.LOCK_NB)
				if err != nil {
					sl.Close() // a client is attached
					lastActive.Store(time.Now().UnixNano())
					continue
				}
				cl.Close()
				idleOnce.Do(func() { startLock = sl })
				stop(fmt.Errorf("idle for %s with no client attached", o.IdleExit))
				return
			}
		}()
	}

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("daemon stopping", "reason", context.Cause(ctx))
	// Stop accepting first (the listener's close unlinks the socket), then end long-polls.
	srv.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeoutDefault)
	defer cancel()
	err = hs.Shutdown(sctx)
	if err != nil {
		hs.Close()
	}
	<-errc
	_ = os.Remove(socket)
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// DaemonSocketFor returns the socket path of the shared daemon serving target (a SQLite
// file path) under home: home/run/<name>-<hash>/daemon.sock, the path the Python SDK uses.
func DaemonSocketFor(home, target string) string {
	sum := sha256.Sum256([]byte(target))
	name := filepath.Base(target)
	name = name[:len(name)-len(filepath.Ext(name))]
	if len(name) > 16 {
		name = name[:16]
	}
	return filepath.Join(home, "run", name+"-"+hex.EncodeToString(sum[:])[:12], "daemon.sock")
}

// newDaemonCmd is `lakeshore daemon`.
func newDaemonCmd(a *app) *cobra.Command {
	o := &DaemonOpts{}
	var stdinEOF, printSocket bool
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Serve a plane on a unix socket for local clients (the Python SDK starts it)",
		Long: `Daemon serves a plane (the embedded default, or --target) over the HTTP API on a unix
socket, for the local clients that start it on first use (the Python SDK: docs/python.md).
One daemon owns the socket's directory (daemon.lock there); clients attach by holding
clients.lock shared, and the daemon exits after --idle-exit with no client attached and no
request. GET /v1/daemon answers its protocol and version; POST /v1/daemon/stop stops it.
Without --socket it listens on $LAKESHORE_HOME/run/<name>-<hash>/daemon.sock for the target
(--print-socket prints that path and exits).
--exit-on-stdin-eof stops it when its standard input closes (a private daemon that dies
with the process that started it).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			o.Target = cmp.Or(o.Target, a.target)
			if o.Socket == "" {
				target, err := serveTarget(o.Target, os.Getenv)
				if err != nil {
					return err
				}
				if target == ":memory:" {
					return plane.Invalid("--socket", "", "a :memory: daemon needs an explicit --socket")
				}
				home, err := lakeshoreHome(os.Getenv)
				if err != nil {
					return err
				}
				o.Socket = DaemonSocketFor(home, target)
			}
			if printSocket {
				_, err := fmt.Fprintln(a.stdout, o.Socket)
				return err
			}
			if stdinEOF {
				o.Stdin = a.stdin
			}
			return RunDaemon(cmd.Context(), o, logger, os.Getenv)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Socket, "socket", "", "unix socket path (default $LAKESHORE_HOME/run/<name>-<hash>/daemon.sock)")
	f.DurationVar(&o.IdleExit, "idle-exit", DaemonIdleExitDefault, "exit after this long with no client attached and no request (0: never)")
	f.BoolVar(&stdinEOF, "exit-on-stdin-eof", false, "exit when standard input closes")
	f.BoolVar(&printSocket, "print-socket", false, "print the socket path and exit")
	return cmd
}

// lakeshoreHome is $LAKESHORE_HOME, else ~/.lakeshore.
func lakeshoreHome(getenv func(string) string) (string, error) {
	if h := getenv(lakeshore.EnvHome); h != "" {
		return h, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the home directory: set %s: %w", lakeshore.EnvHome, err)
	}
	return filepath.Join(h, ".lakeshore"), nil
}
