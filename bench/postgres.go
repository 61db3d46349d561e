package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"syscall"

	"github.com/jackc/pgx/v5"
)

// pgInstallHint tells how to get PostgreSQL when it is missing.
const pgInstallHint = "install it with `apt-get install postgresql` (the harness looks for initdb and pg_ctl on PATH and under /usr/lib/postgresql/*/bin)"

// pgUser and pgPassword are the credentials of the harness's PostgreSQL superuser.
const (
	pgUser     = "bench"
	pgPassword = "bench-local"
)

// errPGNotInstalled: initdb and pg_ctl were not found.
var errPGNotInstalled = errors.New("PostgreSQL not found: " + pgInstallHint)

// pgServer is a PostgreSQL cluster the harness initialises in a temporary directory and
// runs on a free loopback port for the PostgreSQL systems (pgplane, River on pgx), with the
// durability every system gets: fsync=on, synchronous_commit=on. As root it runs as
// "nobody" (initdb refuses root). A minimal version of the main module's internal/pgtest,
// which cannot be imported from this module.
type pgServer struct {
	bin, dir, user string
	port           int
}

// pgLibGlob finds Debian's PostgreSQL binaries when initdb is not on PATH (a variable for
// the test of the missing-PostgreSQL skip).
var pgLibGlob = "/usr/lib/postgresql/*/bin/initdb"

// findPG returns the directory of initdb and pg_ctl.
func findPG() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "pg_ctl")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob(pgLibGlob)
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	if len(dirs) > 0 {
		return filepath.Dir(dirs[0]), nil
	}
	return "", errPGNotInstalled
}

// startPG initialises and starts a cluster in a fresh temporary directory (its own: as
// root the server's user must reach it), removed by stop.
func startPG() (*pgServer, error) {
	bin, err := findPG()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lakeshore-bench-pg-")
	if err != nil {
		return nil, err
	}
	s := &pgServer{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		s.user = "nobody"
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(pgPassword+"\n"), 0o600); err != nil {
		return nil, err
	}
	for _, p := range []string{dir, pwfile} {
		if err := s.chown(p); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", pgUser, "--pwfile", pwfile, "--auth", "scram-sha-256",
		"-E", "UTF8", "--locale", "C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if s.port, err = freePort(); err != nil {
		return nil, err
	}
	opts := strings.Join([]string{"-p " + strconv.Itoa(s.port), "-c listen_addresses=127.0.0.1",
		"-c unix_socket_directories=''", "-c fsync=on", "-c synchronous_commit=on", "-c max_connections=200",
		"-c shared_buffers=256MB", "-c max_wal_size=2GB"}, " ")
	if out, err := s.run("pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return nil, fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	ok = true
	return s, nil
}

// stop stops the cluster (fast shutdown) and removes its directory.
func (s *pgServer) stop() {
	s.run("pg_ctl", "stop", "-w", "-m", "fast", "-D", filepath.Join(s.dir, "data")) //nolint:errcheck // best effort
	os.RemoveAll(s.dir)
}

// url returns the URL of database name.
func (s *pgServer) url(name string) string {
	return pgURL(net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), name)
}

func pgURL(hostPort, name string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(pgUser, pgPassword), Host: hostPort, Path: "/" + name,
		RawQuery: "sslmode=disable"}
	return u.String()
}

func (s *pgServer) run(program string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, program)
	cmd := exec.Command(path, args...)
	if s.user != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.user, "--", path}, args...)...)
	}
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C to the harness does not reach it
	return cmd.CombinedOutput()
}

func (s *pgServer) chown(path string) error {
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

// runDatabase returns the URL of the database of the run whose files are in e.dir, creating
// it on first use (a crash-workload worker process reopens the same one) and dropping the
// databases of earlier runs, which have ended.
func runDatabase(ctx context.Context, e *env) (string, error) {
	if e.pgAddr == "" {
		return "", errPGNotInstalled
	}
	sum := sha256.Sum256([]byte(e.dir))
	name := "run_" + hex.EncodeToString(sum[:6])
	conn, err := pgx.Connect(ctx, pgURL(e.pgAddr, "postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'run\_%'`)
		if err != nil {
			return "", err
		}
		old, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", err
		}
		for _, o := range old {
			if _, err := conn.Exec(ctx, `DROP DATABASE `+pgx.Identifier{o}.Sanitize()+` WITH (FORCE)`); err != nil {
				return "", err
			}
		}
		if _, err := conn.Exec(ctx, `CREATE DATABASE `+name); err != nil {
			return "", err
		}
	}
	return pgURL(e.pgAddr, name), nil
}
