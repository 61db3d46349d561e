package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/slurmtest"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// binary is the lakeshore command built for the tests that run it as a child process.
var binary string

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == guardArg {
		os.Exit(runGuard(os.Stdin)) // this test binary, run as the exec worker's guard
	}
	dir, err := os.MkdirTemp("", "lakeshore-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "lakeshore")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build lakeshore: %v\n%s", err, out)
		os.Exit(1)
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		defer func() {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
			}
		}()
		defer slurmtest.StopShared() // stops the SLURM cluster of the provider tests, if one started
		code = pgtest.Main(m)        // stops the PostgreSQL server of the postgres tests, if one started
	}()
	os.Exit(code)
}

// cli runs the command line in-process against the plane file target.
type cli struct {
	t      *testing.T
	target string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	return &cli{t: t, target: filepath.Join(t.TempDir(), "plane.db")}
}

// newHTTPCLI runs the command line against an HTTP server on loopback serving a fresh
// SQLite plane.
func newHTTPCLI(t *testing.T) *cli {
	t.Helper()
	c, _ := newHTTPCLIWithDriver(t)
	return c
}

// newHTTPCLIWithDriver is newHTTPCLI, with the server's plane for a test to write to
// directly (a worker's registration).
func newHTTPCLIWithDriver(t *testing.T) (*cli, *sqliteplane.Driver) {
	t.Helper()
	drv, err := sqliteplane.Open(t.Context(), filepath.Join(t.TempDir(), "plane.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(drv, nil)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Stop()
		drv.Close()
	})
	return &cli{t: t, target: ts.URL}, drv
}

// run runs args with stdin and returns stdout, stderr and the exit code.
func (c *cli) run(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	return c.runCtx(c.t.Context(), stdin, args...)
}

func (c *cli) runCtx(ctx context.Context, stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{"--target", c.target}, args...), strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// ok runs args and fails the test unless they exit 0; it returns stdout, trimmed.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errs, code := c.run("", args...)
	if code != 0 {
		c.t.Fatalf("lakeshore %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return strings.TrimSpace(out)
}
