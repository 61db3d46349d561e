package provider_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/metrictest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/execprovider"
	"github.com/lakeshore-dev/lakeshore/provider/localprovider"
)

// The supervisor's tests run real providers (local processes, exec programs) on a real
// SQLite plane, ticking by hand on a clock of their own, so backoffs, cooldowns and register
// timeouts pass at once.

// execTimeout bounds each call of the tests' exec programs that hang (execProgram with
// "hang"): they sleep 30 s, so a bound far below that tells a cut-off from an answer. The
// programs that only answer get the provider's default bound (execprovider.TimeoutDefault,
// 30 s), and the rig's supervisor the default CallTimeout: they fork a shell and a few
// commands per call, which a loaded 2-core machine can take seconds to run (a 300 ms bound,
// then a 3 s one, failed such calls at load 25-39), so a short bound on them decides nothing
// but the machine's speed.
const execTimeout = 3 * time.Second

// hangingPrograms are the exec provider names of execProgram's programs with a call that
// hangs (to execTimeoutOf).
var hangingPrograms sync.Map

// execTimeoutOf is the call bound the tests give exec provider name: execTimeout for a
// program with a call that hangs, else the provider's default.
func execTimeoutOf(name string) time.Duration {
	if _, ok := hangingPrograms.Load(name); ok {
		return execTimeout
	}
	return 0
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type rig struct {
	t     *testing.T
	drv   plane.Driver
	local *localprovider.Provider
	// localDir is the local provider's directory (launch records and logs).
	localDir string
	clock    *clock
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigClocked(t, false)
}

// newRigClocked is newRig whose plane runs on the rig's clock too when planeClock (its
// leases end when the test advances the clock, not when real time passes).
func newRigClocked(t *testing.T, planeClock bool) *rig {
	t.Helper()
	dir := t.TempDir()
	clk := &clock{now: time.Now()}
	var cfg *sqliteplane.Config
	if planeClock {
		cfg = &sqliteplane.Config{Now: clk.Now}
	}
	drv, err := sqliteplane.Open(t.Context(), filepath.Join(dir, "lakeshore.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	localDir := filepath.Join(dir, "local")
	local, err := localprovider.New(localDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ls, _ := local.List(context.Background())
		for _, l := range ls {
			_ = local.Stop(context.Background(), l.ID, 0)
		}
		drv.Close()
	})
	return &rig{t: t, drv: drv, local: local, localDir: localDir, clock: clk}
}

// supervisor returns a supervisor on the rig's plane and clock, its metrics in reg and its
// log in logs; edit changes its configuration.
func (r *rig) supervisor(reg prometheus.Registerer, logs *logBuffer, edit func(*provider.SupervisorConfig)) *provider.Supervisor {
	r.t.Helper()
	resolve := func(name string) (provider.Provider, error) {
		switch {
		case name == plane.ProviderLocal:
			return r.local, nil
		case strings.HasPrefix(name, plane.ProviderExecPrefix):
			return execprovider.New(name, execTimeoutOf(name))
		}
		return nil, plane.Invalid("provider", name, "use local or exec:PROGRAM")
	}
	cfg := provider.SupervisorConfig{Driver: r.drv, Resolve: resolve, Tick: 50 * time.Millisecond, LeaseTTL: 5 * time.Second,
		StopGrace: 2 * time.Second, Metrics: provider.NewMetrics(reg), Now: r.clock.Now,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if edit != nil {
		edit(&cfg)
	}
	s, err := provider.NewSupervisor(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *rig) tick(s *provider.Supervisor) {
	r.t.Helper()
	if err := s.Tick(r.t.Context()); err != nil {
		r.t.Fatalf("Tick: %v", err)
	}
}

func (r *rig) setProvider(queue, name string, policy plane.LaunchPolicy) {
	r.t.Helper()
	if err := r.drv.QueueProviderSet(r.t.Context(), &plane.ProviderParams{Namespace: "default", Queue: queue,
		Provider: plane.ProviderRef{Name: name, Policy: policy}}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) submit(queue string, n int) {
	r.t.Helper()
	inv := make([]plane.SubmitParams, n)
	for i := range inv {
		inv[i].Payload = []byte{0xc0} // msgpack nil
	}
	if _, err := r.drv.InvocationSubmitMany(r.t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: queue,
		Invocations: inv}); err != nil {
		r.t.Fatal(err)
	}
}

// launches returns the local provider's live launch ids.
func (r *rig) launches() []string {
	r.t.Helper()
	ls, err := r.local.List(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.ID
	}
	return ids
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSupervisorDryRun: a dry run logs and counts what it would do and exports its gauges,
// launches nothing, and takes no lease, so a real supervisor started beside it (even after
// it) acts for the queue at its first tick. It logs a repeated decision once, and does not
// count as failures the launches the acting supervisor stops.
func TestSupervisorDryRun(t *testing.T) {
	r := newRig(t)
	r.setProvider("dry", plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 2, Command: []string{"sleep", "30"}})
	r.submit("dry", 2)
	dryReg, dryLogs := prometheus.NewRegistry(), &logBuffer{}
	dry := r.supervisor(dryReg, dryLogs, func(c *provider.SupervisorConfig) { c.DryRun = true })
	for range 3 {
		r.tick(dry)
		r.clock.add(100 * time.Millisecond)
	}
	if ls := r.launches(); len(ls) != 0 {
		t.Fatalf("a dry run launched %v", ls)
	}
	logs := dryLogs.String()
	if n := strings.Count(logs, `msg="provider supervisor: decision"`); n != 1 || !strings.Contains(logs, "launch=2") ||
		!strings.Contains(logs, "dry_run=true") {
		t.Errorf("the dry run logged %d decisions; want one, launch=2 dry_run=true, for three ticks of the same decision:\n%s", n, logs)
	}
	if !strings.Contains(logs, "watching the queue (dry run: no lease taken") {
		t.Errorf("the dry run does not say it watches the queue without a lease:\n%s", logs)
	}
	if n := metrictest.Sum(t, dryReg, "lakeshore_provider_decisions_total", "outcome", "dry_run"); n != 1 {
		t.Errorf("decisions_total{outcome=dry_run} = %v; want 1", n)
	}
	if n := metrictest.Sum(t, dryReg, "lakeshore_provider_workers_wanted", "queue", "dry"); n != 2 {
		t.Errorf("workers_wanted = %v; want 2", n)
	}
	if n := metrictest.Sum(t, dryReg, "lakeshore_provider_launches_total"); n != 0 {
		t.Errorf("launches_total = %v in a dry run", n)
	}

	// The real supervisor, started after the dry run, acts at its first tick.
	realReg := prometheus.NewRegistry()
	real := r.supervisor(realReg, &logBuffer{}, nil)
	r.tick(real)
	if ls := r.launches(); len(ls) != 2 {
		t.Fatalf("the real supervisor beside a dry run launched %v; want 2 launches at its first tick", ls)
	}
	// The dry run sees the real launches as live: nothing more to do, nothing launched.
	r.tick(dry)
	r.tick(dry)
	if ls := r.launches(); len(ls) != 2 {
		t.Errorf("launches after more dry-run ticks: %v", ls)
	}
	// The launches end (the acting supervisor stopped them): not the dry run's failures.
	for _, id := range r.launches() {
		if err := r.local.Stop(t.Context(), id, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	r.clock.add(time.Second)
	r.tick(dry)
	if n := metrictest.Sum(t, dryReg, "lakeshore_provider_failures_total"); n != 0 {
		t.Errorf("the dry run counted %v failures for launches another supervisor ran", n)
	}
	// It sees the need again: a new decision, logged.
	if n := strings.Count(dryLogs.String(), `msg="provider supervisor: decision"`); n != 2 {
		t.Errorf("the dry run logged %d decisions; want a second one once the launches ended:\n%s", n, dryLogs.String())
	}
	// Run of a dry run returns without a lease to release.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := dry.Run(ctx); err != nil {
		t.Errorf("Run of a dry run: %v", err)
	}
}

// TestSupervisorCommandNotFound: a worker command that does not exist fails the launch,
// logged and counted; launches back off (1 s, then 2 s…) rather than retrying every tick,
// and the queue keeps working with the workers it has (one started by hand).
func TestSupervisorCommandNotFound(t *testing.T) {
	r := newRig(t)
	r.setProvider("nf", plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 2, Command: []string{"lakeshore-no-such-worker-7"}})
	r.submit("nf", 4)
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	s := r.supervisor(reg, logs, nil)
	attempts := func() float64 { return metrictest.Sum(t, reg, "lakeshore_provider_launches_total", "result", "error") }
	for _, step := range []struct {
		after time.Duration
		want  float64
	}{{0, 1}, {500 * time.Millisecond, 1}, {600 * time.Millisecond, 2}, {time.Second, 2}, {1200 * time.Millisecond, 3}} {
		r.clock.add(step.after)
		r.tick(s)
		if n := attempts(); n != step.want {
			t.Fatalf("%v launch attempts after +%s; want %v (backoff 1s, then 2s)\n%s", n, step.after, step.want, logs.String())
		}
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_failures_total", "kind", "launch", "queue", "nf", "provider", "local"); n != 3 {
		t.Errorf("failures_total{kind=launch} = %v; want 3", n)
	}
	for _, want := range []string{`msg="provider supervisor: launch failed"`, "lakeshore-no-such-worker-7", "not found on this machine",
		"failure=launch", "next_launch_in=2s"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}

	// A worker started by hand runs the jobs; the supervisor leaves it alone.
	d := lakeshore.New(r.drv, nil)
	defer d.Close()
	var ran sync.WaitGroup
	ran.Go(func() {
		err := lakeshore.RunWorker(t.Context(), d, []lakeshore.Handler{lakeshore.Handle("nf", func(context.Context, *lakeshore.Job) (any, error) {
			return "done", nil
		})}, &lakeshore.WorkerOptions{ExitWhenIdle: true})
		if err != nil {
			t.Errorf("the hand-started worker: %v", err)
		}
	})
	done := make(chan struct{})
	go func() { ran.Wait(); close(done) }()
	for waiting := true; waiting; {
		r.clock.add(100 * time.Millisecond)
		r.tick(s)
		select {
		case <-done:
			waiting = false
		case <-time.After(50 * time.Millisecond):
		}
	}
	q, err := d.Queue("nf", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := q.Count(t.Context(), lakeshore.StateSucceeded); err != nil || n != 4 {
		t.Errorf("%d jobs succeeded (%v) on the hand-started worker; want 4", n, err)
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_stops_total"); n != 0 {
		t.Errorf("the supervisor stopped %v workers; it must leave hand-started ones alone", n)
	}
}

// TestSupervisorRegisterTimeout: a launch that never registers is expired at the register
// timeout: stopped, counted failed once (not again as "ended" when it goes, and never
// adopted back while it is being stopped), and replaced.
func TestSupervisorRegisterTimeout(t *testing.T) {
	r := newRig(t)
	r.setProvider("reg", plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 1, RegisterTimeout: time.Second,
		Command: []string{"sleep", "60"}})
	r.submit("reg", 1)
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	s := r.supervisor(reg, logs, nil)
	r.tick(s)
	first := r.launches()
	if len(first) != 1 {
		t.Fatalf("launches after the first tick: %v; want 1", first)
	}
	r.clock.add(1500 * time.Millisecond)
	r.tick(s)
	if n := metrictest.Sum(t, reg, "lakeshore_provider_failures_total", "kind", "register_timeout"); n != 1 {
		t.Errorf("failures_total{kind=register_timeout} = %v; want 1\n%s", n, logs.String())
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_stops_total", "reason", "register_timeout"); n != 1 {
		t.Errorf("stops_total{reason=register_timeout} = %v; want 1", n)
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_launches_total", "result", "ok"); n != 2 {
		t.Errorf("launches_total{ok} = %v; want 2 (the expired launch is replaced)", n)
	}
	waitUntil(t, "the expired launch is stopped", func() bool {
		for _, id := range r.launches() {
			if id == first[0] {
				return false
			}
		}
		return true
	})
	for range 5 {
		r.clock.add(100 * time.Millisecond)
		r.tick(s)
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_failures_total"); n != 1 {
		t.Errorf("failures_total = %v; want 1: the expired launch is counted once\n%s", n, logs.String())
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_launches_total"); n != 2 {
		t.Errorf("launches_total = %v; want 2", n)
	}
	if strings.Contains(logs.String(), "adopted") {
		t.Errorf("the supervisor adopted its own expired launch:\n%s", logs.String())
	}
	if want := "launch=" + first[0] + " failure=register_timeout"; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, logs.String())
	}
}

// TestSupervisorStopsOnceWhileDraining: an idle worker being stopped drains (here: ignores
// SIGTERM until the grace ends); meanwhile it counts as live, is not stopped again, and its
// end is not a failure.
func TestSupervisorStopsOnceWhileDraining(t *testing.T) {
	r := newRig(t)
	policy := plane.LaunchPolicy{MinWorkers: 1, IdleTimeout: time.Second, Cooldown: time.Millisecond,
		Command: []string{"sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"}}
	r.setProvider("drain", plane.ProviderLocal, policy)
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	s := r.supervisor(reg, logs, func(c *provider.SupervisorConfig) { c.StopGrace = 1500 * time.Millisecond })
	r.tick(s)
	ids := r.launches()
	if len(ids) != 1 {
		t.Fatalf("launches: %v; want the minimum, 1", ids)
	}
	// It registers, idle for a while.
	now := r.clock.Now()
	if err := r.drv.WorkerRegister(t.Context(), &plane.WorkerInfo{ID: "w1", Namespace: "default", Host: "h", PID: 1,
		Queues: []string{"drain"}, StartedAt: now, Provider: plane.ProviderLocal, LaunchID: ids[0], IdleSince: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	policy.MinWorkers = 0
	r.setProvider("drain", plane.ProviderLocal, policy)
	r.clock.add(10 * time.Millisecond)
	r.tick(s)
	if n := metrictest.Sum(t, reg, "lakeshore_provider_stops_total", "reason", "idle"); n != 1 {
		t.Fatalf("stops_total{reason=idle} = %v; want 1\n%s", n, logs.String())
	}
	for range 5 {
		r.clock.add(100 * time.Millisecond)
		r.tick(s)
		if n := metrictest.Sum(t, reg, "lakeshore_provider_stops_total"); n != 1 {
			t.Fatalf("stops_total = %v while the worker drains; want it stopped once\n%s", n, logs.String())
		}
		if len(r.launches()) == 1 {
			if n := metrictest.Sum(t, reg, "lakeshore_provider_workers_live", "queue", "drain"); n != 1 {
				t.Errorf("workers_live = %v while a stopped worker drains; want 1", n)
			}
		}
	}
	waitUntil(t, "the worker is killed after the grace", func() bool { return len(r.launches()) == 0 })
	r.clock.add(100 * time.Millisecond)
	r.tick(s)
	if n := metrictest.Sum(t, reg, "lakeshore_provider_failures_total"); n != 0 {
		t.Errorf("failures_total = %v; a worker the supervisor stopped did not fail\n%s", n, logs.String())
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_workers_live", "queue", "drain"); n != 0 {
		t.Errorf("workers_live = %v once the worker ended", n)
	}
}

// execProgram writes an exec provider for queue whose launch and stop behave as told:
// "ok", "hang" (sleeps past every timeout), "fail" (exit 4 or 5 with a message on stderr),
// or "garbage" (does its work, then prints what is not JSON, which launch and stop ignore).
// Its list answers the launches made and not stopped, as running.
func execProgram(t *testing.T, queue, launch, stop string) string {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
D=%s
req=$(cat)
id=$(printf '%%s' "$req" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
case "$1" in
launch)
  case %q in hang) sleep 30;; fail) echo 'cloud quota exceeded' >&2; exit 4;; esac
  touch "$D/launch-$id"
  [ %q = garbage ] && echo '<<< not json >>>'
  exit 0;;
stop)
  case %q in hang) sleep 30;; fail) echo 'cannot reach the cloud' >&2; exit 5;; esac
  rm -f "$D/launch-$id"
  [ %q = garbage ] && echo '<<< not json >>>'
  exit 0;;
list)
  printf '{"launches": ['
  sep=
  for f in "$D"/launch-*; do
    [ -e "$f" ] || continue
    printf '%%s{"id": "%%s", "namespace": "default", "queue": %q, "state": "running"}' "$sep" "${f##*/launch-}"
    sep=,
  done
  echo ']}';;
esac
`, strconv.Quote(dir), launch, launch, stop, stop, queue)
	path := filepath.Join(dir, "provider.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if launch == "hang" || stop == "hang" {
		hangingPrograms.Store("exec:"+path, true)
	}
	return "exec:" + path
}

// TestSupervisorExecLaunchAndStopFaults: an exec provider whose launch or stop hangs, exits
// non-zero or prints garbage is bounded (each call cut off at its timeout), logged and
// counted; the supervisor never crashes, and a launch whose stop failed is stopped again
// later rather than left running unmanaged.
func TestSupervisorExecLaunchAndStopFaults(t *testing.T) {
	policy := plane.LaunchPolicy{MaxWorkers: 1, RegisterTimeout: time.Second, Command: []string{"w"}}
	t.Run("launch", func(t *testing.T) {
		for _, c := range []struct {
			mode, log string
			ok        bool
		}{
			{"hang", "launch: no answer within " + execTimeout.String() + "; the program was killed", false},
			{"fail", "launch: exited with status 4: cloud quota exceeded", false},
			{"garbage", "", true}, // stdout is ignored: the launch is made
		} {
			t.Run(c.mode, func(t *testing.T) {
				r := newRig(t)
				name := execProgram(t, "x", c.mode, "ok")
				r.setProvider("x", name, policy)
				r.submit("x", 1)
				reg, logs := prometheus.NewRegistry(), &logBuffer{}
				s := r.supervisor(reg, logs, nil)
				start := time.Now()
				r.tick(s)
				if d := time.Since(start); d > execTimeout+5*time.Second {
					t.Errorf("a tick took %s; the launch is cut off at %s (the hanging program sleeps 30 s)", d, execTimeout)
				}
				result, kind := "error", 1.0
				if c.ok {
					result, kind = "ok", 0
				}
				if n := metrictest.Sum(t, reg, "lakeshore_provider_launches_total", "result", result, "provider", name); n != 1 {
					t.Errorf("launches_total{result=%s} = %v; want 1\n%s", result, n, logs.String())
				}
				if n := metrictest.Sum(t, reg, "lakeshore_provider_failures_total", "kind", "launch"); n != kind {
					t.Errorf("failures_total{kind=launch} = %v; want %v", n, kind)
				}
				if c.log != "" && (!strings.Contains(logs.String(), c.log) || !strings.Contains(logs.String(), `msg="provider supervisor: launch failed"`)) {
					t.Errorf("the log lacks the failed launch, %q:\n%s", c.log, logs.String())
				}
				r.clock.add(100 * time.Millisecond)
				r.tick(s) // and the supervisor goes on
			})
		}
	})
	t.Run("stop", func(t *testing.T) {
		for _, c := range []struct{ mode, log string }{
			{"hang", "stop: no answer within " + execTimeout.String() + "; the program was killed"},
			{"fail", "stop: exited with status 5: cannot reach the cloud"},
			{"garbage", ""}, // stdout is ignored: the stop is made
		} {
			t.Run(c.mode, func(t *testing.T) {
				r := newRig(t)
				name := execProgram(t, "x", "ok", c.mode)
				r.setProvider("x", name, policy)
				r.submit("x", 1)
				reg, logs := prometheus.NewRegistry(), &logBuffer{}
				s := r.supervisor(reg, logs, nil)
				r.tick(s)
				first := listOf(t, name)
				if len(first) != 1 {
					t.Fatalf("launches after the first tick: %v; want 1\n%s", first, logs.String())
				}
				// The launch never registers: at the register timeout it is stopped (and
				// replaced).
				r.clock.add(1500 * time.Millisecond)
				r.tick(s)
				if n := metrictest.Sum(t, reg, "lakeshore_provider_stops_total", "reason", "register_timeout"); n != 1 {
					t.Fatalf("stops_total{reason=register_timeout} = %v; want 1\n%s", n, logs.String())
				}
				if c.log == "" {
					waitUntil(t, "the stop is made", func() bool { return !slices.Contains(listOf(t, name), first[0]) })
					if n := metrictest.Sum(t, reg, "lakeshore_provider_errors_total"); n != 0 {
						t.Errorf("errors_total = %v for a stop that printed garbage and succeeded\n%s", n, logs.String())
					}
					return
				}
				waitUntil(t, "the failed stop is logged", func() bool {
					return metrictest.Sum(t, reg, "lakeshore_provider_errors_total", "operation", "stop") == 1
				})
				if !strings.Contains(logs.String(), `msg="provider supervisor: stop failed; the launch is considered again at the next tick"`) ||
					!strings.Contains(logs.String(), c.log) {
					t.Errorf("the log lacks the failed stop, %q:\n%s", c.log, logs.String())
				}
				// Considered again: still listed, so not a crash; expired again after another
				// register timeout, and stopped again.
				r.clock.add(100 * time.Millisecond)
				r.tick(s)
				if n := metrictest.Sum(t, reg, "lakeshore_provider_failures_total", "kind", "ended"); n != 0 {
					t.Errorf("failures_total{kind=ended} = %v for a launch still running", n)
				}
				r.clock.add(1500 * time.Millisecond)
				r.tick(s)
				if n := strings.Count(logs.String(), "launch="+first[0]+" reason=register_timeout"); n != 2 {
					t.Errorf("the launch whose stop failed was stopped %d times; want again after another register timeout (2)\n%s", n, logs.String())
				}
				// Every stop fails as the first did; the test ends once all have (a hand-ticked
				// supervisor has no Run to wait for its stops in flight).
				waitUntil(t, "every stop has failed", func() bool {
					out := logs.String()
					return strings.Count(out, `msg="provider supervisor: stop failed`) == strings.Count(out, `msg="provider supervisor: stopping"`)
				})
			})
		}
	})
}

// listOf returns the ids an exec provider lists.
func listOf(t *testing.T, name string) []string {
	t.Helper()
	p, err := execprovider.New(name, execTimeoutOf(name))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := p.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.ID
	}
	return ids
}

// TestSupervisorChecksProviderAtStart: a provider that cannot work (an exec program that
// does not exist) is one error line at the supervisor's first tick, counted once; its
// queues are skipped, and List (failing, logged) is the retry of later ticks.
func TestSupervisorChecksProviderAtStart(t *testing.T) {
	r := newRig(t)
	name := "exec:" + filepath.Join(t.TempDir(), "no-such-provider")
	r.setProvider("x", name, plane.LaunchPolicy{Command: []string{"w"}})
	r.submit("x", 1)
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	s := r.supervisor(reg, logs, nil)
	r.tick(s)
	if n := metrictest.Sum(t, reg, "lakeshore_provider_errors_total", "operation", "check", "provider", name); n != 1 {
		t.Errorf("errors_total{operation=check} = %v; want 1", n)
	}
	for _, want := range []string{"level=ERROR", "provider supervisor: the provider cannot work", "is not found or not executable on this machine"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	r.tick(s)
	if n := metrictest.Sum(t, reg, "lakeshore_provider_errors_total", "operation", "check"); n != 1 {
		t.Errorf("errors_total{operation=check} = %v after a second tick; the check runs once", n)
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_errors_total", "operation", "list"); n != 1 {
		t.Errorf("errors_total{operation=list} = %v; the second tick tries List", n)
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_launches_total"); n != 0 {
		t.Errorf("launches_total = %v through a provider that cannot work", n)
	}
}

// TestSupervisorResolveErrors: a name no provider answers to is logged as unknown; a
// provider that is declared but cannot be built (a bad known_hosts file, a broken project
// file) is logged as such, with its error, not as unknown.
func TestSupervisorResolveErrors(t *testing.T) {
	r := newRig(t)
	r.setProvider("x", "ssh:lab", plane.LaunchPolicy{Command: []string{"w"}})
	r.setProvider("y", "ssh:gone", plane.LaunchPolicy{Command: []string{"w"}})
	r.submit("x", 1)
	r.submit("y", 1)
	logs := &logBuffer{}
	s := r.supervisor(prometheus.NewRegistry(), logs, func(c *provider.SupervisorConfig) {
		c.Resolve = func(name string) (provider.Provider, error) {
			if name == "ssh:lab" {
				return nil, errors.New("read known_hosts /etc/kh: line 1: bad entry")
			}
			return nil, provider.UnknownProvider(errors.New(`no provider "gone" under providers:`))
		}
	})
	r.tick(s)
	for _, line := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(line, "provider=ssh:lab"):
			if !strings.Contains(line, "the provider cannot be built") || !strings.Contains(line, "bad entry") || strings.Contains(line, "unknown provider") {
				t.Errorf("a provider that cannot be built is logged as %q", line)
			}
		case strings.Contains(line, "provider=ssh:gone"):
			if !strings.Contains(line, "unknown provider") {
				t.Errorf("an unknown provider is logged as %q", line)
			}
		}
	}
	if !strings.Contains(logs.String(), "provider=ssh:lab") || !strings.Contains(logs.String(), "provider=ssh:gone") {
		t.Errorf("the log lacks a provider:\n%s", logs.String())
	}
	if !errors.Is(provider.UnknownProvider(plane.ErrInvalid), plane.ErrInvalid) {
		t.Error("UnknownProvider hides what its error matches")
	}
}

// TestSupervisorRepeatedFailureLoggedOnce: a provider that cannot be built, or whose List
// keeps failing, is logged once, not at every tick; again at once when its error changes,
// and after FailureRepeatLog with how many times it recurred. The errors metric still
// counts every tick's failure.
func TestSupervisorRepeatedFailureLoggedOnce(t *testing.T) {
	r := newRig(t)
	r.setProvider("x", "ssh:lab", plane.LaunchPolicy{Command: []string{"w"}})
	listing := "exec:" + filepath.Join(t.TempDir(), "no-such-provider")
	r.setProvider("y", listing, plane.LaunchPolicy{Command: []string{"w"}})
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	resolveErr := "project file lakeshore.yaml: not found"
	s := r.supervisor(reg, logs, func(c *provider.SupervisorConfig) {
		resolve := c.Resolve
		c.Resolve = func(name string) (provider.Provider, error) {
			if name == "ssh:lab" {
				return nil, errors.New(resolveErr)
			}
			return resolve(name)
		}
	})
	count := func(what string) int { return strings.Count(logs.String(), what) }
	const built, listed = "the provider cannot be built", "list launches failed"
	for range 10 {
		r.tick(s)
		r.clock.add(time.Second)
	}
	if n := count(built); n != 1 {
		t.Errorf("a provider that cannot be built is logged %d times in 10 ticks; want 1:\n%s", n, logs.String())
	}
	if n := count(listed); n != 1 {
		t.Errorf("a failing List is logged %d times in 9 ticks; want 1:\n%s", n, logs.String())
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_errors_total", "operation", "resolve"); n != 10 {
		t.Errorf("errors_total{operation=resolve} = %v; want 10, one per tick", n)
	}
	r.clock.add(provider.FailureRepeatLog)
	r.tick(s)
	if n := count(built); n != 2 || !strings.Contains(logs.String(), "repeated=10") {
		t.Errorf("after FailureRepeatLog the failure is logged %d times in all; want 2, the second with repeated=10:\n%s", n, logs.String())
	}
	resolveErr = "project file lakeshore.yaml: line 3: bad"
	r.tick(s)
	if n := count(built); n != 3 || !strings.Contains(logs.String(), "line 3: bad") {
		t.Errorf("a changed error is not logged at once (%d lines):\n%s", n, logs.String())
	}
}

// failedLaunchLog ticks a supervisor once over a queue whose exec provider fails every
// launch echoing its request (the launch, env included) to stderr, with policyEnv as the
// policy's env and workerEnv as the supervisor's; it returns the supervisor's log, which
// must hold the failed launch naming want, and the program's path.
func failedLaunchLog(t *testing.T, command []string, policyEnv, workerEnv map[string]string, want string) (out, program string) {
	t.Helper()
	r := newRig(t)
	program = filepath.Join(t.TempDir(), "echoing.sh")
	script := "#!/bin/sh\nreq=$(cat)\ncase \"$1\" in\nlaunch) printf '%s' \"$req\" >&2; exit 3;;\nlist) echo '{\"launches\": []}';;\nesac\n"
	if err := os.WriteFile(program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if command == nil {
		command = []string{"w"}
	}
	r.setProvider("x", "exec:"+program, plane.LaunchPolicy{MaxWorkers: 1, Command: command, Env: policyEnv})
	r.submit("x", 1)
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	s := r.supervisor(reg, logs, func(c *provider.SupervisorConfig) { c.WorkerEnv = workerEnv })
	r.tick(s)
	out = logs.String()
	if !strings.Contains(out, `msg="provider supervisor: launch failed"`) || !strings.Contains(out, want) {
		t.Fatalf("the log lacks the failed launch quoting its request (%s):\n%s", want, out)
	}
	return out, program
}

// TestSupervisorLaunchErrorHidesEnv: a provider program that fails a launch echoing its
// request (the launch, env included) to stderr has its error logged with the policy's env
// values and the supervisor's LAKESHORE_TOKEN as xxxxx; the names, the queue and the
// provider stay readable.
func TestSupervisorLaunchErrorHidesEnv(t *testing.T) {
	out, program := failedLaunchLog(t, nil,
		map[string]string{"HF_TOKEN": "hf_policysecret1", "AZURE_STORAGE_CONNECTION_STRING": "AccountKey=policysecret2", "SHORT": "1"},
		map[string]string{"LAKESHORE_TOKEN": "supervisortoken3"}, "HF_TOKEN")
	for _, secret := range []string{"policysecret", "supervisortoken3"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log quotes %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, `queue=x`) || !strings.Contains(out, program) {
		t.Errorf("the log lost the queue or the provider:\n%s", out)
	}
}

// TestSupervisorLaunchErrorHidesPlanePassword: the plane's URL the supervisor gives its
// workers (LAKESHORE_URL of a postgres:// plane, with its password) is in every launch's
// environment; a provider program that fails echoing its request has it logged as xxxxx.
// Before, only the policy's env and LAKESHORE_TOKEN were hidden, and the log quoted the
// database password.
func TestSupervisorLaunchErrorHidesPlanePassword(t *testing.T) {
	out, _ := failedLaunchLog(t, nil, nil,
		map[string]string{"LAKESHORE_URL": "postgres://lakeshore:dbpassword4@db.internal:5432/lakeshore"}, "LAKESHORE_URL")
	if strings.Contains(out, "dbpassword4") {
		t.Errorf("the log quotes the plane's password:\n%s", out)
	}
}

// TestSupervisorLaunchErrorHidesCommandSecrets: a provider program that fails echoing its
// request (the command included) has the secrets of the policy's command logged as xxxxx,
// as the server's view of that command shows them (plane.RedactCommand): a --token's
// value, an env assignment's, a URL's password. Before, only env values were hidden there.
func TestSupervisorLaunchErrorHidesCommandSecrets(t *testing.T) {
	out, _ := failedLaunchLog(t, []string{"env", "WANDB_API_KEY=cmdsecret1abc", "lakeshore", "worker",
		"--token", "cmdsecret2abc", "--url=postgres://u:cmdsecret3abc@db/x"}, nil, nil, "lakeshore")
	for _, secret := range []string{"cmdsecret1", "cmdsecret2", "cmdsecret3"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log quotes %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "WANDB_API_KEY") || !strings.Contains(out, "--token") {
		t.Errorf("the log lost the command's names:\n%s", out)
	}
}

// TestSupervisorRenewsLeaseBetweenLaunches: a tick whose launches outlast the queue's lease
// (four launches of 500 ms, a lease of 1.2 s; by default a launch may take the 30 s call
// timeout, twice the 15 s lease) renews the lease before each launch, so a second
// supervisor ticking meanwhile never takes the queue in the middle and launches beside it.
// Before, the lease was renewed only at the start of a tick: the second supervisor took
// the expired lease after two launches and launched two more while the first went on to
// its four, six workers for a max of four. The plane and both supervisors run on the rig's
// clock, which each launch advances by 500 ms before the second supervisor ticks: the
// lease ends by that clock, not by how late a loaded machine ran the first supervisor
// between a renewal and the second's tick (with real time, 700 ms of delay let the second
// take a lease the first had just renewed).
func TestSupervisorRenewsLeaseBetweenLaunches(t *testing.T) {
	r := newRigClocked(t, true)
	var second *provider.Supervisor
	var secondTicks []error
	slow := &clockedLaunches{Provider: r.local, clock: r.clock, step: 500 * time.Millisecond, during: func() {
		secondTicks = append(secondTicks, second.Tick(t.Context()))
	}}
	mk := func() *provider.Supervisor {
		return r.supervisor(nil, &logBuffer{}, func(c *provider.SupervisorConfig) {
			c.LeaseTTL = 1200 * time.Millisecond
			c.CallTimeout = 10 * time.Second
			c.Resolve = func(string) (provider.Provider, error) { return slow, nil }
		})
	}
	first := mk()
	second = mk()
	r.setProvider("q", plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 4, JobsPerWorker: 1, Command: []string{"sleep", "30"}})
	r.submit("q", 4)
	r.tick(first)
	for i, err := range secondTicks {
		if err != nil {
			t.Fatalf("the second supervisor's tick during launch %d: %v", i+1, err)
		}
	}
	if len(secondTicks) == 0 {
		t.Fatal("the second supervisor never ticked during a launch")
	}
	if n := slow.count(); n != 4 {
		t.Fatalf("%d launches for a queue of at most 4 workers: launches %v", n, r.launches())
	}
}

// clockedLaunches launches through Provider, each launch first advancing clock by step
// and then calling during (once at a time: a launch that during itself causes calls no
// during), so that the test's clock, not real time, says how long launches take.
type clockedLaunches struct {
	provider.Provider
	clock  *clock
	step   time.Duration
	during func()
	mu     sync.Mutex
	n      int
	inside bool
}

func (p *clockedLaunches) Launch(ctx context.Context, l *provider.Launch) error {
	p.clock.add(p.step)
	p.mu.Lock()
	p.n++
	nested := p.inside
	p.inside = true
	p.mu.Unlock()
	if !nested {
		p.during()
		p.mu.Lock()
		p.inside = false
		p.mu.Unlock()
	}
	return p.Provider.Launch(ctx, l)
}

func (p *clockedLaunches) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// TestSupervisorEndedNamesLog: a worker that exits on its own (unauthorized, a traceback)
// is logged "worker failed failure=ended" with where its cause is: the launch's log file
// and that file's last line, the launch's secrets (the policy's env, the supervisor's
// LAKESHORE_TOKEN) shown as xxxxx, and its exit code (the local provider's
// provider.ExitReporter). Before, the line named neither: the cause was only in a file the
// line did not point at. (Fails on the old code; the exit code failed before exit_code.)
func TestSupervisorEndedNamesLog(t *testing.T) {
	r := newRig(t)
	script := `echo starting; echo "PermissionError: unauthorized: token $LAKESHORE_TOKEN, key $HF_TOKEN" >&2; echo; exit 3`
	r.setProvider("crash", plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 1, Command: []string{"sh", "-c", script},
		Env: map[string]string{"HF_TOKEN": "hf_policysecret1"}})
	r.submit("crash", 1)
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	s := r.supervisor(reg, logs, func(c *provider.SupervisorConfig) {
		c.WorkerEnv = map[string]string{"LAKESHORE_TOKEN": "supervisortoken3"}
	})
	r.tick(s)
	ids := r.launches()
	launched := regexp.MustCompile(`msg="provider supervisor: launched".* launch=(\w+)`).FindStringSubmatch(logs.String())
	if launched == nil {
		t.Fatalf("no launch (live: %v):\n%s", ids, logs.String())
	}
	id := launched[1]
	waitUntil(t, "the worker exits", func() bool { return !slices.Contains(r.launches(), id) })
	r.clock.add(time.Second)
	r.tick(s)
	out := logs.String()
	line := ""
	for l := range strings.Lines(out) {
		if strings.Contains(l, "failure=ended") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no worker failed failure=ended line:\n%s", out)
	}
	for _, want := range []string{"launch=" + id, "log=" + filepath.Join(r.localDir, id+".log"),
		`log_last_line="PermissionError: unauthorized: token xxxxx, key xxxxx"`, "exit_code=3"} {
		if !strings.Contains(line, want) {
			t.Errorf("the failure=ended line lacks %q:\n%s", want, line)
		}
	}
	for _, secret := range []string{"policysecret1", "supervisortoken3"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log quotes %q:\n%s", secret, out)
		}
	}
}

// TestSupervisorSlowProviderDelaysNoOther: one provider whose list hangs (an exec program
// that sleeps past the call timeout) does not delay another provider's queues: a job
// submitted to a local queue while the hanging list runs gets its worker within a few
// ticks, and the hanging provider is not listed again while its list runs. Before, a tick
// listed every provider and then acted for every queue, one after another: the local queue
// waited for the hanging call's full timeout (here 20 s, by default 30 s, twice the lease).
func TestSupervisorSlowProviderDelaysNoOther(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	listed := filepath.Join(dir, "listed")
	script := fmt.Sprintf("#!/bin/sh\ncat >/dev/null\ncase \"$1\" in list) echo list >>%s; sleep 30;; esac\n", strconv.Quote(listed))
	program := filepath.Join(dir, "hanging.sh")
	if err := os.WriteFile(program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	hanging := "exec:" + program
	lists := func() int {
		b, _ := os.ReadFile(listed)
		return strings.Count(string(b), "list\n")
	}
	r.setProvider("slow", hanging, plane.LaunchPolicy{Command: []string{"w"}})
	r.setProvider("q", plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 1, JobsPerWorker: 1, Command: []string{"sleep", "30"}})
	s := r.supervisor(nil, &logBuffer{}, func(c *provider.SupervisorConfig) {
		c.Now = time.Now // Run ticks on the real clock, and the plane's leases run on it
		c.CallTimeout = 20 * time.Second
		resolve := c.Resolve
		c.Resolve = func(name string) (provider.Provider, error) {
			if name == hanging {
				return execprovider.New(name, time.Minute) // the supervisor's call timeout cuts it off
			}
			return resolve(name)
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitUntil(t, "the hanging provider's list runs", func() bool { return lists() > 0 })
	r.submit("q", 1)
	submitted := time.Now()
	for len(r.launches()) == 0 {
		if time.Since(submitted) > 10*time.Second {
			t.Fatalf("no worker launched for the local queue within 10 s of the submit (ticks of 50 ms) while another provider's list hangs")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the local queue's worker was launched %v after the submit", time.Since(submitted).Round(time.Millisecond))
	time.Sleep(300 * time.Millisecond) // several more ticks
	if n := len(r.launches()); n != 1 {
		t.Errorf("%d launches for a queue of at most 1 worker", n)
	}
	if n := lists(); n != 1 {
		t.Errorf("the hanging provider was listed %d times; once, its list still running", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15 s of its context's end: the hanging list was not cut off")
	}
}

// TestSupervisorLaunchErrorHidesJSONEscapedSecrets: a secret that a provider program echoes
// inside JSON, where it reads escaped (& as \u0026, " as \", as Go and Python encoders write
// them), is hidden as it is written unescaped: an env value with a quote, a command URL
// with a query. Before, RedactValuesIn replaced only the raw text, so the echoed request
// showed the password of postgres://u:…@db/x?a=1&b=2 and the env value p"w….
func TestSupervisorLaunchErrorHidesJSONEscapedSecrets(t *testing.T) {
	out, _ := failedLaunchLog(t, []string{"lakeshore", "worker", "--url=postgres://u:cmdsecret5abc@db/x?a=1&b=2"},
		map[string]string{"DB_PASSWORD": `envsecret6"abc<>`}, nil, "DB_PASSWORD")
	for _, secret := range []string{"cmdsecret5", "envsecret6"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log quotes %q:\n%s", secret, out)
		}
	}
}

// TestSupervisorStopsNoLaunchOfAnotherQueue: a registered worker counts as a launch only when
// the launch is of the worker's own namespace and queue. A registration in team-a/q naming
// the launch id of another queue's worker (launched by the same provider) — team-b/victim,
// or team-a/victim within q's own namespace, which a token scoped to team-a/q may do — does
// not count as that launch. On the old code it did (first across namespaces; then, comparing
// namespaces only, within one), and q, wanting no worker, had the supervisor stop the
// victim's worker as idle.
func TestSupervisorStopsNoLaunchOfAnotherQueue(t *testing.T) {
	stopsNoLaunchOfAnotherQueue(t, nil)
}

// TestSupervisorMatchesUnlabelledLaunchOnlyToItsOwnRecord: a provider whose List leaves a
// launch's namespace and queue empty (an exec program may; here the local provider with
// both cleared from its listing) does not say whose the launch is, so a registered worker
// naming its id counts as it only in the queue this supervisor launched it for (the record
// of its own launch, which knows the queue), never by the id alone. A registration in
// team-a/q naming the id of team-b/victim's launch (or team-a/victim's) does not count, and
// q, wanting no worker, stops nothing. On the old code the empty namespace and queue were
// left unchecked: the victim's worker was stopped as q's idle one.
func TestSupervisorMatchesUnlabelledLaunchOnlyToItsOwnRecord(t *testing.T) {
	stopsNoLaunchOfAnotherQueue(t, func(p provider.Provider) provider.Provider { return unlabelled{p} })
}

// stopsNoLaunchOfAnotherQueue is the rig of the two tests above: the victim's queue keeps
// one worker launched by the local provider (seen through wrap, when not nil); a worker
// registered in team-a/q names that launch's id; q, wanting no worker, must stop nothing.
func stopsNoLaunchOfAnotherQueue(t *testing.T, wrap func(provider.Provider) provider.Provider) {
	for _, victimNamespace := range []string{"team-b", "team-a"} {
		t.Run(victimNamespace+"/victim", func(t *testing.T) {
			r := newRig(t)
			setIn := func(ns, queue string, policy plane.LaunchPolicy) {
				t.Helper()
				if err := r.drv.QueueProviderSet(t.Context(), &plane.ProviderParams{Namespace: ns, Queue: queue,
					Provider: plane.ProviderRef{Name: plane.ProviderLocal, Policy: policy}}); err != nil {
					t.Fatal(err)
				}
			}
			command := []string{"sh", "-c", "while :; do sleep 0.05; done"}
			setIn(victimNamespace, "victim", plane.LaunchPolicy{MinWorkers: 1, RegisterTimeout: time.Hour, Command: command})
			setIn("team-a", "q", plane.LaunchPolicy{IdleTimeout: time.Second, Cooldown: time.Millisecond, Command: command})
			reg, logs := prometheus.NewRegistry(), &logBuffer{}
			var configure func(*provider.SupervisorConfig)
			if wrap != nil {
				configure = func(c *provider.SupervisorConfig) {
					c.Resolve = func(string) (provider.Provider, error) { return wrap(r.local), nil }
				}
			}
			s := r.supervisor(reg, logs, configure)
			r.tick(s)
			ids := r.launches()
			if len(ids) != 1 {
				t.Fatalf("launches: %v; want the victim's minimum, 1", ids)
			}
			now := r.clock.Now()
			if err := r.drv.WorkerRegister(t.Context(), &plane.WorkerInfo{ID: "impostor", Namespace: "team-a", Host: "h", PID: 1,
				Queues: []string{"q"}, StartedAt: now, Provider: plane.ProviderLocal, LaunchID: ids[0], IdleSince: now.Add(-time.Minute)}); err != nil {
				t.Fatal(err)
			}
			r.clock.add(10 * time.Millisecond)
			r.tick(s)
			if n := metrictest.Sum(t, reg, "lakeshore_provider_stops_total"); n != 0 {
				t.Fatalf("stops_total = %v; team-a/q's registration had the victim's launch stopped\n%s", n, logs.String())
			}
			if got := r.launches(); len(got) != 1 || got[0] != ids[0] {
				t.Fatalf("launches: %v; want the victim's %s still running", got, ids[0])
			}
		})
	}
}

// unlabelled is a provider whose List leaves every launch's namespace and queue empty, as an
// exec program may.
type unlabelled struct{ provider.Provider }

func (u unlabelled) List(ctx context.Context) ([]provider.LaunchStatus, error) {
	ls, err := u.Provider.List(ctx)
	for i := range ls {
		ls[i].Namespace, ls[i].Queue = "", ""
	}
	return ls, err
}

// TestSupervisorLaunchesNothingForAPausedQueue: a paused queue's backlog asks for no worker
// (no worker could claim it until the resume: plane.ShapeDemand.Paused); the resume
// launches for it at the next tick.
func TestSupervisorLaunchesNothingForAPausedQueue(t *testing.T) {
	r := newRig(t)
	r.setProvider("held", plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 2, Command: []string{"sleep", "30"}})
	r.submit("held", 2)
	pause := func(paused bool) {
		if _, err := r.drv.QueuePause(t.Context(), &plane.PauseParams{Namespace: "default", Queue: "held", Paused: paused}); err != nil {
			t.Fatal(err)
		}
	}
	pause(true)
	s := r.supervisor(prometheus.NewRegistry(), &logBuffer{}, nil)
	for range 3 {
		r.tick(s)
		r.clock.add(100 * time.Millisecond)
	}
	if ls := r.launches(); len(ls) != 0 {
		t.Fatalf("the supervisor launched %v for a paused queue", ls)
	}
	pause(false)
	r.tick(s)
	if ls := r.launches(); len(ls) != 2 {
		t.Fatalf("after the resume the supervisor launched %v; want 2", ls)
	}
}
