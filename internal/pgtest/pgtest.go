// Package pgtest starts a private PostgreSQL server for the tests of one test binary: initdb
// into a temporary directory, pg_ctl start on a free loopback port, a fresh database per
// test, and the server stopped when the binary's tests end. Nothing depends on a system
// service; when the test process runs as root (CI does), the server runs as an unprivileged
// user through runuser, because initdb refuses to run as root.
//
// A package that uses it calls Main from TestMain and Database from each test:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		url := pgtest.Database(t) // postgres://… of a fresh, empty database
//		…
//	}
//
// Where PostgreSQL is not installed the tests skip with a line saying how to install it; with
// CI=true in the environment a missing server fails them instead.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/lakeshore-dev/lakeshore/internal/porttest"
)

// Superuser and Password are the credentials of the test server's superuser.
const (
	Superuser = "lakeshore"
	Password  = "lakeshore-test"
)

// InstallHint is what a skipped test says when PostgreSQL is missing.
const InstallHint = "PostgreSQL is not installed: install it with `apt-get install postgresql` (the tests look for initdb and pg_ctl on PATH and under /usr/lib/postgresql/*/bin)"

// Server is a running test server.
type Server struct {
	// Host and Port are where it listens (loopback only).
	Host string
	Port int
	dir  string // the temporary directory holding the data directory and the log
	opts string // the server's options (pg_ctl start -o), for Resume
	bin  string // the directory of initdb and pg_ctl
	user string // the unprivileged user running it when the tests run as root; "" otherwise

	watchdog *os.Process // stops the server if this process dies first
}

var (
	mu        sync.Mutex
	server    *Server
	startErr  error
	started   bool
	databases atomic.Int64
)

// Main runs the tests of m and then stops the server if one was started. Use it from
// TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	cancelDrops()
	dropping.Wait()
	mu.Lock()
	defer mu.Unlock()
	if server != nil {
		if err := server.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop: %v\n", err)
		}
		server = nil
	}
	return code
}

// VerifyMain is the TestMain of a package whose code starts goroutines (LISTEN loops,
// groupers, flushers, servers): it runs the tests and stops the server (Main), then fails
// the run when a goroutine outlived the tests (goleak; only when they passed). It does not
// return.
func VerifyMain(m *testing.M) { goleak.VerifyTestMain(runner{m}) }

// runner is m run through Main, for goleak.
type runner struct{ m *testing.M }

func (r runner) Run() int { return Main(r.m) }

// Shared returns the server of this test binary, starting it on first use. Where PostgreSQL
// is missing it skips t (fails it with CI=true); a server that does not start fails t.
func Shared(t testing.TB) *Server {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		server, startErr = Start()
	}
	if errors.Is(startErr, ErrNotInstalled) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: %v (CI=true: a missing server fails the run)", startErr)
		}
		t.Skip(InstallHint)
	}
	if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	return server
}

// Database creates a fresh, empty database on the shared server and returns its URL
// (postgres://lakeshore:…@127.0.0.1:port/name?sslmode=disable). The database is dropped
// in the background when t ends (dropLater).
func Database(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), databases.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() { dropLater(s, name) })
	return s.URL(name)
}

// Databases dropped after their tests: dropping is the clean-up's, running in the
// background; Main cancels the drops still running and waits for them before it stops the
// server (whose directory goes with it).
var (
	dropping             sync.WaitGroup
	dropCtx, cancelDrops = context.WithCancel(context.Background())
)

// dropLater drops database name in the background. PostgreSQL 15's DROP DATABASE waits
// for a checkpoint, which with fsync on and the package's other databases dirty took more
// than a minute on a loaded machine: all of it was the clean-up of one test, which the
// next test waited for. A failed drop costs disk space until the server stops, nothing else.
func dropLater(s *Server, name string) {
	dropping.Add(1)
	go func() {
		defer dropping.Done()
		if err := s.exec(dropCtx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil && dropCtx.Err() == nil {
			fmt.Fprintf(os.Stderr, "pgtest: drop database %s: %v\n", name, err)
		}
	}()
}

// Refused returns two URLs of the shared server that it refuses, for tests of how a
// refusal is named: the superuser's with password instead of the right one (which the
// message must never show), and the right one's of a database that does not exist,
// "no_such_catalog".
func Refused(t testing.TB, password string) (wrongPassword, missingDatabase string) {
	t.Helper()
	s := Shared(t)
	u := url.URL{Scheme: "postgres", User: url.UserPassword(Superuser, password),
		Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String(), s.URL("no_such_catalog")
}

// Schema returns the URL of a database shared by the tests of this binary and the name of
// a fresh, empty schema in it (dropped with everything in it when t ends), for a plane
// configured with that schema. A schema costs a few milliseconds where a database costs a
// copy of its template and a checkpoint, so suites that make a plane per subtest (the
// conformance suite: hundreds) use Schema; tests that need a database to themselves (one
// they restart, or count connections of) use Database.
func Schema(t testing.TB) (url, schema string) {
	t.Helper()
	s := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mu.Lock()
	if !sharedMade {
		if err := s.exec(ctx, "CREATE DATABASE "+sharedDatabase); err != nil {
			mu.Unlock()
			t.Fatalf("pgtest: create database: %v", err)
		}
		sharedMade = true
	}
	mu.Unlock()
	schema = fmt.Sprintf("t_%d_%d", os.Getpid(), databases.Add(1))
	url = s.URL(sharedDatabase)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Logf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return url, schema
}

// sharedDatabase is the database of Schema's schemas; sharedMade says it exists.
const sharedDatabase = "shared"

var sharedMade bool

// URL returns the URL of database name on s as the superuser.
func (s *Server) URL(name string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(Superuser, Password),
		Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), Path: "/" + name, RawQuery: "sslmode=disable"}
	return u.String()
}

func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// ErrNotInstalled is returned by Start when initdb or pg_ctl cannot be found.
var ErrNotInstalled = errors.New("initdb and pg_ctl not found on PATH nor under /usr/lib/postgresql/*/bin")

// FindBinaries returns the directory holding initdb and pg_ctl: PATH first, then the
// newest /usr/lib/postgresql/*/bin. Errors: ErrNotInstalled.
func FindBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", ErrNotInstalled
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises a new cluster in a temporary directory and starts it on a free loopback
// port, with fsync and synchronous_commit on, password authentication for Superuser, and
// no Unix socket. As root it runs initdb and the server as the user "nobody". Stop it with
// Stop. Errors: ErrNotInstalled, or what initdb or pg_ctl said.
func Start() (*Server, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", bin: bin}
	if os.Geteuid() == 0 {
		s.user = "nobody"
		if _, err := user.Lookup(s.user); err != nil {
			return nil, fmt.Errorf("running as root, the server needs an unprivileged user: %w", err)
		}
	}
	if s.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, err
	}
	if err := s.chown(s.dir); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	pwfile := filepath.Join(s.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(Password+"\n"), 0o600); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	if err := s.chown(pwfile); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", Superuser, "--pwfile", pwfile,
		"--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync"); err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	var lastErr error
	for range 5 { // the free port may be taken between our probe and the server's bind
		if s.Port, err = freePort(); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
		s.opts = strings.Join([]string{
			"-p " + strconv.Itoa(s.Port),
			"-c listen_addresses=127.0.0.1",
			"-c unix_socket_directories=''",
			"-c fsync=on",
			"-c synchronous_commit=on",
			"-c max_connections=400",
			"-c shared_buffers=64MB",
		}, " ")
		out, err := s.start()
		if err == nil {
			s.watch()
			return s, nil
		}
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		lastErr = fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, tail(string(log), 2000))
		if !strings.Contains(string(log), "in use") {
			break
		}
	}
	os.RemoveAll(s.dir)
	return nil, lastErr
}

// Stop stops the server (fast shutdown) and removes its directory.
func (s *Server) Stop() error {
	out, err := s.run("pg_ctl", "stop", "-w", "-m", "fast", "-D", filepath.Join(s.dir, "data"))
	os.RemoveAll(s.dir)
	if s.watchdog != nil {
		s.watchdog.Kill()
	}
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// Restart restarts the server in place (fast shutdown, same port), for tests of a dropped
// connection.
func (s *Server) Restart() error {
	out, err := s.run("pg_ctl", "restart", "-w", "-t", "60", "-m", "fast", "-D", filepath.Join(s.dir, "data"),
		"-l", filepath.Join(s.dir, "log"))
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %v: %s", err, out)
	}
	return nil
}

// Crash stops the server as a crash would (pg_ctl stop -m immediate: every server process
// exits at once, without a checkpoint, and open sessions are cut), keeping its data; until
// Resume, connections are refused. For tests of what callers see while PostgreSQL is down.
func (s *Server) Crash() error {
	out, err := s.run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", filepath.Join(s.dir, "data"))
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %v: %s", err, out)
	}
	return nil
}

// Resume starts a server that Crash stopped, on the same port: it runs crash recovery first.
func (s *Server) Resume() error {
	if out, err := s.start(); err != nil {
		return fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	return nil
}

// start starts the server of s.dir with s.opts, waiting until it accepts connections.
func (s *Server) start() ([]byte, error) {
	return s.run("pg_ctl", "start", "-w", "-t", "60", "-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-o", s.opts)
}

// watch starts a watchdog process that stops the server and removes its directory when
// this test process dies without calling Stop (a panic, a timeout, a kill), so no server
// outlives its tests. It runs in its own process group, out of reach of a signal to ours.
func (s *Server) watch() {
	pgCtl := filepath.Join(s.bin, "pg_ctl")
	stop := fmt.Sprintf("%q stop -m immediate -D %q", pgCtl, filepath.Join(s.dir, "data"))
	if s.user != "" {
		stop = fmt.Sprintf("runuser -u %s -- %s", s.user, stop)
	}
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done; [ -d %q ] && { %s >/dev/null 2>&1; rm -rf %q; }`,
		os.Getpid(), s.dir, stop, s.dir)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err == nil {
		go cmd.Wait() //nolint:errcheck // reaped when it exits
		s.watchdog = cmd.Process
	}
}

// run runs one of the server's programs, as the unprivileged user when there is one.
func (s *Server) run(program string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, program)
	var cmd *exec.Cmd
	if s.user != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.user, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

func (s *Server) chown(path string) error {
	if s.user == "" {
		return nil
	}
	u, err := user.Lookup(s.user)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}

// freePort is a port free now, below the system's ephemeral range
// (porttest.RestartableAddr): Restart and Crash then Resume start the server again on its
// port, and while it is down no listener on port 0 or outgoing connection of this machine
// is given that port (one from a closed listener on port 0 could be).
func freePort() (int, error) {
	addr, err := porttest.RestartableAddr()
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
