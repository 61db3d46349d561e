package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// smokeParallel is how many of the smoke tests run at once unless -test.parallel says
// otherwise: all of them. They spend their time on timers and fsyncs, not CPU (the
// package took 163 s of wall time for 39 s of user CPU), and the default, GOMAXPROCS (2
// on CI's machine), ran them nearly one after another.
const smokeParallel = 8

func TestMain(m *testing.M) {
	if childMain() { // a crash-workload worker process started by the harness
		return
	}
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(smokeParallel)); err != nil {
			fmt.Fprintln(os.Stderr, "bench tests:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// smokeSystems are the systems of TestSmoke and TestSmokeCrash: every one but the
// PostgreSQL systems, which have their own, shorter smoke test (TestSmokePostgres).
func smokeSystems() []string {
	var names []string
	for _, s := range systems() {
		if _, ok := s.(postgresSystem); !ok {
			names = append(names, s.name())
		}
	}
	return names
}

// smokeWorkloads are TestSmoke's workloads: every one but crash (TestSmokeCrash's).
func smokeWorkloads() []workload {
	var out []workload
	for _, w := range workloads() {
		if w.name != "crash" {
			out = append(out, w)
		}
	}
	return out
}

// requireLakeshoreRows checks that table has a row for every metric of w for the
// lakeshore system, and that none of them is an error or n/a.
func requireLakeshoreRows(t *testing.T, table string, w workload) {
	t.Helper()
	if !strings.Contains(table, "| "+w.name+" | ") {
		t.Errorf("no row for workload %s", w.name)
	}
	for _, m := range w.metrics {
		row := "| " + w.name + " | " + m.name + " | lakeshore | "
		i := strings.Index(table, row)
		if i < 0 {
			t.Errorf("no lakeshore row for %s %s", w.name, m.name)
			continue
		}
		line := table[i:]
		line = line[:strings.IndexByte(line, '\n')]
		if strings.Contains(line, "error") || strings.Contains(line, "n/a") {
			t.Errorf("lakeshore %s %s: %s", w.name, m.name, line)
		}
	}
}

// TestSmoke runs the whole harness in quick mode, every system and every workload but
// crash (TestSmokeCrash runs that one beside it), and checks that it produces the table
// with a row for each. A system whose server is not installed (redis-server for asynq)
// must be skipped with a line saying so, not fail.
func TestSmoke(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "table.md")
	var stdout, stderr bytes.Buffer
	var wnames []string
	for _, w := range smokeWorkloads() {
		wnames = append(wnames, w.name)
	}
	code := runMain(context.Background(), []string{"-quick", "-out", out, "-systems", strings.Join(smokeSystems(), ","),
		"-workloads", strings.Join(wnames, ",")}, &stdout, &stderr)
	t.Log(stderr.String())
	if code != 0 {
		t.Fatalf("bench -quick exited %d", code)
	}
	table := stdout.String()
	t.Log(table)
	if !strings.Contains(table, "| workload | metric | system | median | min–max | Lakeshore ÷ system | note |") {
		t.Fatal("no table header in the output")
	}
	for _, w := range smokeWorkloads() {
		requireLakeshoreRows(t, table, w)
	}
	for _, s := range []string{"river", "goqite", "sqlite-raw", "lakeshore-http"} {
		if !strings.Contains(table, "| enqueue-1 | jobs/s | "+s+" | ") {
			t.Errorf("no enqueue-1 row for %s", s)
		}
	}
	if _, err := exec.LookPath("redis-server"); err != nil && !strings.Contains(table, "`asynq`: **skipped: redis-server not found") {
		t.Error("redis-server is missing but the table does not say asynq was skipped")
	}
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(written) != table {
		t.Error("-out file differs from the printed table")
	}
}

// TestSmokeCrash runs the crash workload in quick mode on every system of TestSmoke, each
// system in its own harness run and all of them at once, and checks every run succeeded
// and the lakeshore row. The peers recover on their own fixed timers, not the recovery
// window the harness gives them (asynq's recoverer looks every minute for leases expired
// more than 30 s ago: about 90 s; River's rescuer runs every 30 s): one after another,
// waiting out those timers took 115 of the smoke test's 168 s. Side by side, and beside
// the package's other tests, the waits overlap (they use no CPU); the systems' figures
// mean nothing in quick mode either way.
func TestSmokeCrash(t *testing.T) {
	t.Parallel()
	crash := slices.IndexFunc(workloads(), func(w workload) bool { return w.name == "crash" })
	if crash < 0 {
		t.Fatal("no crash workload")
	}
	names := smokeSystems()
	type result struct {
		code           int
		stdout, stderr bytes.Buffer
	}
	results := make([]result, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			r.code = runMain(context.Background(), []string{"-quick", "-systems", name, "-workloads", "crash"}, &r.stdout, &r.stderr)
		}()
	}
	wg.Wait()
	for i, name := range names {
		r := &results[i]
		t.Logf("%s:\n%s", name, r.stderr.String())
		if r.code != 0 {
			t.Errorf("bench -quick -systems %s -workloads crash exited %d", name, r.code)
		}
		table := r.stdout.String()
		if !strings.Contains(table, "| workload | metric | system | median | min–max | Lakeshore ÷ system | note |") {
			t.Errorf("%s: no table header in the output", name)
		}
		if name == "lakeshore" {
			requireLakeshoreRows(t, table, workloads()[crash])
		}
		if !strings.Contains(table, "| crash | jobs lost | "+name+" | ") && !strings.Contains(r.stderr.String(), name+": skipped: ") {
			t.Errorf("%s: neither a crash row nor a skip line:\n%s", name, table)
		}
	}
}

// TestSmokePostgres runs the PostgreSQL systems (lakeshore-pg, river-pg) on the harness's
// own PostgreSQL in quick mode on four short workloads (the crash workload waits out
// River's 30 s rescuer: run it by hand). Without PostgreSQL they are skipped with a line
// saying how to install it, and the test checks that line instead (fails with CI=true).
func TestSmokePostgres(t *testing.T) {
	t.Parallel()
	testSmokePostgres(t)
}

// TestSkipsPostgresWithoutIt: with no initdb anywhere, the PostgreSQL systems are skipped
// with the install hint and the rest of the run goes on.
func TestSkipsPostgresWithoutIt(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	defer func(g string) { pgLibGlob = g }(pgLibGlob)
	pgLibGlob = filepath.Join(t.TempDir(), "*", "initdb")
	testSmokePostgres(t)
}

func testSmokePostgres(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{"-quick", "-systems", "lakeshore,lakeshore-pg,river-pg",
		"-workloads", "enqueue-64,batch-100,burndown-8,latency"}, &stdout, &stderr)
	t.Log(stderr.String())
	if code != 0 {
		t.Fatalf("bench -quick exited %d", code)
	}
	table := stdout.String()
	if _, err := findPG(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is not installed (CI=true: the PostgreSQL peers must run): %v", err)
		}
		for _, s := range []string{"lakeshore-pg", "river-pg"} {
			if !strings.Contains(stderr.String(), s+": skipped: PostgreSQL not found: install it with `apt-get install postgresql`") {
				t.Errorf("no skip line for %s:\n%s", s, stderr.String())
			}
		}
		return
	}
	for _, s := range []string{"lakeshore-pg", "river-pg"} {
		for _, row := range []string{"| enqueue-64 | jobs/s | " + s + " | ", "| burndown-8 | jobs/s | " + s + " | ",
			"| batch-100 | jobs/s | " + s + " | ", "| latency | handler start p99 (ms) | " + s + " | "} {
			i := strings.Index(table, row)
			if i < 0 {
				t.Errorf("no row %q in:\n%s", row, table)
				continue
			}
			line := table[i:]
			if line = line[:strings.IndexByte(line, '\n')]; strings.Contains(line, "error") {
				t.Errorf("%s", line)
			}
		}
	}
}

// TestSkipsAsynqWithoutRedis checks the line printed when redis-server is not installed:
// it names the system, the reason and how to install it.
func TestSkipsAsynqWithoutRedis(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no redis-server on it
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{"-quick", "-systems", "lakeshore,asynq", "-workloads", "enqueue-1"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := "asynq: skipped: redis-server not found: install it with `apt-get install redis-server`"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	if !strings.Contains(stdout.String(), "| enqueue-1 | jobs/s | lakeshore | ") {
		t.Errorf("no lakeshore row:\n%s", stdout.String())
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-systems", "nosuch"},
		{"-workloads", "nosuch"},
		{"-sync", "OFF"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runMain(context.Background(), args, &stdout, &stderr); code == 0 {
			t.Errorf("%q: exit 0, want an error", args)
		}
	}
}

func TestStats(t *testing.T) {
	ds := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.5, 5 * time.Millisecond},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{ds(7), 0.99, 7 * time.Millisecond},
		{nil, 0.5, 0},
	} {
		if got := percentile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.sorted, tc.q, got, tc.want)
		}
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v", got)
	}
	if got := median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("median even = %v", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
	for v, want := range map[float64]string{1234567: "1,234,567", 123: "123", 12.34: "12.3", 1.234: "1.23", 0.1234: "0.123", 0: "0"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
	if got := ratio(2, 4); got != "0.50×" {
		t.Errorf("ratio = %q", got)
	}
	if got := ratio(2, 0); got != "—" {
		t.Errorf("ratio by zero = %q", got)
	}
}

func TestJobRef(t *testing.T) {
	r := jobRef{Seq: 42, EnqueuedNS: time.Now().UnixNano()}
	got, err := parseRef(r.bytes())
	if err != nil || got != r {
		t.Fatalf("parseRef(bytes(%v)) = %v, %v", r, got, err)
	}
	if _, err := parseRef([]byte{1, 2}); err == nil {
		t.Error("parseRef of 2 bytes: no error")
	}
}

// TestSmokeMemory runs `bench memory` at tiny sizes: a real `lakeshore serve` process built
// from ../cmd/lakeshore holding long-polls and queued jobs, and a worker process.
func TestSmokeMemory(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{"memory", "-quick", "-long-polls", "50", "-queued", "500",
		"-worker-jobs", "100", "-worker-concurrency", "4"}, &stdout, &stderr)
	t.Log(stderr.String())
	if code != 0 {
		t.Fatalf("bench memory -quick exited %d", code)
	}
	table := stdout.String()
	t.Log(table)
	for _, row := range []string{"| lakeshore serve | claim long-polls (empty queue) open | 50 |",
		"| lakeshore serve | result waits (queued jobs) open | 50 |", "| lakeshore serve | jobs queued (16-byte payloads) | 500 |",
		"| worker process | concurrency 4, working 100 no-op jobs | 3 |"} {
		if !strings.Contains(table, row) {
			t.Errorf("no row starting %q", row)
		}
	}
}

// TestSmokePostgresServe runs pgplane behind three real `lakeshore serve` processes
// (lakeshore-pg-serve3) in quick mode on one short workload, and checks the CPU line it
// prints at close. It builds ../cmd/lakeshore once. Skipped without PostgreSQL (the skip
// line is TestSmokePostgres's to check).
func TestSmokePostgresServe(t *testing.T) {
	t.Parallel()
	if _, err := findPG(); err != nil {
		t.Skip(err)
	}
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{"-quick", "-systems", "lakeshore,lakeshore-pg-serve3",
		"-workloads", "burndown-8"}, &stdout, &stderr)
	t.Log(stderr.String())
	if code != 0 {
		t.Fatalf("bench -quick exited %d", code)
	}
	table := stdout.String()
	row := "| burndown-8 | jobs/s | lakeshore-pg-serve3 | "
	i := strings.Index(table, row)
	if i < 0 {
		t.Fatalf("no row %q in:\n%s", row, table)
	}
	line := table[i:]
	line = line[:strings.IndexByte(line, '\n')]
	if strings.Contains(line, "error") || strings.Contains(line, "n/a") {
		t.Errorf("failed row: %s", line)
	}
}
