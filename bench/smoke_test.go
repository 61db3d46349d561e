package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if childMain() { // a crash-workload worker process started by the harness
		return
	}
	os.Exit(m.Run())
}

// TestSmoke runs the whole harness in quick mode, every system and workload, and checks
// that it produces the table with a row for each. A system whose server is not installed
// (redis-server for asynq) must be skipped with a line saying so, not fail.
func TestSmoke(t *testing.T) {
	out := filepath.Join(t.TempDir(), "table.md")
	var stdout, stderr bytes.Buffer
	// The PostgreSQL systems have their own, shorter smoke test (TestSmokePostgres).
	var names []string
	for _, s := range systems() {
		if _, ok := s.(postgresSystem); !ok {
			names = append(names, s.name())
		}
	}
	code := runMain(context.Background(), []string{"-quick", "-out", out, "-systems", strings.Join(names, ",")}, &stdout, &stderr)
	t.Log(stderr.String())
	if code != 0 {
		t.Fatalf("bench -quick exited %d", code)
	}
	table := stdout.String()
	t.Log(table)
	if !strings.Contains(table, "| workload | metric | system | median | min–max | Lakeshore ÷ system | note |") {
		t.Fatal("no table header in the output")
	}
	for _, w := range workloads() {
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

// TestSmokePostgres runs the PostgreSQL systems (lakeshore-pg, river-pg) on the harness's
// own PostgreSQL in quick mode on four short workloads (the crash workload waits out
// River's 30 s rescuer: run it by hand). Without PostgreSQL they are skipped with a line
// saying how to install it, and the test checks that line instead (fails with CI=true).
func TestSmokePostgres(t *testing.T) {
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
