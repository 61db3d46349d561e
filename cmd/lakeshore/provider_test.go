package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/metrictest"
	"github.com/lakeshore-dev/lakeshore/internal/slurmtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/localprovider"
	"github.com/lakeshore-dev/lakeshore/provider/slurmprovider"
)

// providerPlane is an embedded plane in a fresh home that worker processes reach through
// LAKESHORE_HOME, with the local provider's directory under it.
type providerPlane struct {
	t     *testing.T
	home  string
	drv   plane.Driver
	d     *lakeshore.Dispatch
	local *localprovider.Provider
}

func newProviderPlane(t *testing.T) *providerPlane {
	t.Helper()
	home := t.TempDir()
	drv, err := lakeshore.OpenDriver(t.Context(), filepath.Join(home, lakeshore.DefaultDBName), nil)
	if err != nil {
		t.Fatal(err)
	}
	local, err := localprovider.New(filepath.Join(home, "run", "providers", "local"))
	if err != nil {
		t.Fatal(err)
	}
	p := &providerPlane{t: t, home: home, drv: drv, d: lakeshore.New(drv, nil), local: local}
	t.Cleanup(func() {
		p.stopAll()
		p.d.Close()
		drv.Close()
	})
	return p
}

// stopAll kills every launch left (a failing test must not leave workers behind).
func (p *providerPlane) stopAll() {
	ls, _ := p.local.List(context.Background())
	for _, l := range ls {
		_ = p.local.Stop(context.Background(), l.ID, 0)
	}
}

// workerCommand is a lakeshore worker on queue running argv per job, with a short lease so
// its registration (running jobs, idle time) refreshes every half second.
func workerCommand(queue string, argv ...string) []string {
	return append([]string{binary, "worker", queue, "--lease", "1500ms", "-c", "4", "--"}, argv...)
}

func (p *providerPlane) setProvider(queue string, policy plane.LaunchPolicy) {
	p.t.Helper()
	err := p.drv.QueueProviderSet(p.t.Context(), &plane.ProviderParams{Namespace: "default", Queue: queue,
		Provider: plane.ProviderRef{Name: plane.ProviderLocal, Policy: policy}})
	if err != nil {
		p.t.Fatal(err)
	}
}

func (p *providerPlane) supervisor(reg prometheus.Registerer, logs io.Writer) *provider.Supervisor {
	p.t.Helper()
	resolve := func(name string) (provider.Provider, error) {
		if name != plane.ProviderLocal {
			return nil, plane.Invalid("provider", name, "use local")
		}
		return p.local, nil
	}
	s, err := provider.NewSupervisor(provider.SupervisorConfig{Driver: p.drv, Resolve: resolve, Tick: 100 * time.Millisecond,
		LeaseTTL: 2 * time.Second, StopGrace: 10 * time.Second, Metrics: provider.NewMetrics(reg),
		WorkerEnv: map[string]string{lakeshore.EnvHome: p.home},
		Logger:    slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

func (p *providerPlane) submit(queue string, n int) []string {
	p.t.Helper()
	q, err := p.d.Queue(queue, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	batch := make([]lakeshore.Submission, n)
	for i := range batch {
		batch[i].Payload = strconv.Itoa(i)
	}
	ids, err := q.SubmitMany(p.t.Context(), batch)
	if err != nil {
		p.t.Fatal(err)
	}
	return ids
}

func (p *providerPlane) count(queue string, st lakeshore.State) int64 {
	q, _ := p.d.Queue(queue, nil)
	n, err := q.Count(p.t.Context(), st)
	if err != nil {
		p.t.Fatal(err)
	}
	return n
}

// watchLaunches samples the local provider's live launches until stop, recording the most
// seen at once and every launch id seen.
type launchWatch struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
	stop chan struct{}
	done chan struct{}
}

func (p *providerPlane) watch() *launchWatch {
	w := &launchWatch{seen: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			ls, err := p.local.List(context.Background())
			if err == nil {
				w.mu.Lock()
				w.max = max(w.max, len(ls))
				for _, l := range ls {
					w.seen[l.ID] = true
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *launchWatch) end() (int, int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.max, len(w.seen)
}

// sawReplacement reports whether a worker of another launch than first's (and another
// process) is registered now.
func sawReplacement(t *testing.T, p *providerPlane, first plane.WorkerInfo) bool {
	t.Helper()
	ws, err := p.drv.WorkerList(t.Context(), &plane.WorkerListParams{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.LaunchID != "" && w.LaunchID != first.LaunchID && w.PID != first.PID {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestProviderLocalBurstAndScaleToZero: a burst of 1,000 jobs on a queue at zero workers
// scales it to max (never above), every job runs, and once idle no worker is left running.
func TestProviderLocalBurstAndScaleToZero(t *testing.T) {
	p := newProviderPlane(t)
	p.setProvider("burst", plane.LaunchPolicy{MaxWorkers: 3, JobsPerWorker: 100, IdleTimeout: time.Second,
		Cooldown: 200 * time.Millisecond, Command: workerCommand("burst", "true")})
	var logs syncBuffer
	s := p.supervisor(nil, &logs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	w := p.watch()
	submitted := time.Now()
	p.submit("burst", 1000)
	waitFor(t, 30*time.Second, "a first job claimed at zero workers", func() bool {
		return p.count("burst", lakeshore.StateQueued) < 1000
	})
	t.Logf("submit → first claim at zero workers (local provider, tick 100 ms): %s", time.Since(submitted).Round(time.Millisecond))
	waitFor(t, 3*time.Minute, "1,000 jobs succeeded", func() bool { return p.count("burst", lakeshore.StateSucceeded) == 1000 })
	waitFor(t, time.Minute, "every worker stopped once idle", func() bool {
		ls, err := p.local.List(t.Context())
		return err == nil && len(ls) == 0
	})
	most, launched := w.end()
	if most != 3 {
		t.Errorf("at most %d workers ran at once; the policy wants 3 for 1,000 jobs at 100 per worker (max 3)\n%s", most, logs.String())
	}
	if launched != 3 {
		t.Errorf("%d launches for one burst; expected 3 (no crash, no double launch)\n%s", launched, logs.String())
	}
	if n := p.count("burst", lakeshore.StateFailed); n != 0 {
		t.Errorf("%d jobs failed", n)
	}
}

// TestProviderReplacesKilledWorker: a worker SIGKILLed mid-job is replaced, and its job is
// retried and succeeds.
func TestProviderReplacesKilledWorker(t *testing.T) {
	p := newProviderPlane(t)
	p.setProvider("slow", plane.LaunchPolicy{MaxWorkers: 1, IdleTimeout: time.Second, Cooldown: 200 * time.Millisecond,
		Command: workerCommand("slow", "sh", "-c", "sleep 1")})
	var logs syncBuffer
	s := p.supervisor(nil, &logs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	p.submit("slow", 3)
	var first plane.WorkerInfo
	waitFor(t, 30*time.Second, "a launched worker running a job", func() bool {
		ws, err := p.drv.WorkerList(t.Context(), &plane.WorkerListParams{Namespace: "default"})
		if err != nil || len(ws) == 0 || ws[0].Running == 0 {
			return false
		}
		first = ws[0]
		return true
	})
	if first.LaunchID == "" || first.Provider != plane.ProviderLocal {
		t.Fatalf("the worker registered as provider %q launch %q; expected local and a launch id", first.Provider, first.LaunchID)
	}
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The replacement registers while it runs the jobs; once they are done it may be
	// stopped as idle, so it is looked for while waiting, not after.
	replaced := false
	waitFor(t, 90*time.Second, "3 jobs succeeded after the kill", func() bool {
		replaced = replaced || sawReplacement(t, p, first)
		return p.count("slow", lakeshore.StateSucceeded) == 3
	})
	if !replaced {
		t.Errorf("no worker of another launch registered after the kill\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "failure=ended") {
		t.Errorf("the supervisor did not log the killed worker as failed\n%s", logs.String())
	}
	q, _ := p.d.Queue("slow", nil)
	retried := false
	for inv, err := range q.All(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		retried = retried || inv.Attempt == 2
	}
	if !retried {
		t.Error("no job ran a second attempt: the killed worker's job was not retried")
	}
}

// TestProviderSupervisorKilledAndRestarted: `lakeshore provider run` SIGKILLed mid-scale
// and started again adopts the running workers (no double launch), and the second one
// stops them once idle (no orphan).
func TestProviderSupervisorKilledAndRestarted(t *testing.T) {
	p := newProviderPlane(t)
	p.setProvider("restart", plane.LaunchPolicy{MaxWorkers: 2, JobsPerWorker: 10, IdleTimeout: time.Second,
		Cooldown: 200 * time.Millisecond, Command: workerCommand("restart", "sh", "-c", "sleep 0.1")})
	start := func() (*exec.Cmd, *syncBuffer) {
		var logs syncBuffer
		cmd := exec.Command(binary, "provider", "run", "--tick", "100ms", "--lease-ttl", "2s", "--stop-grace", "10s")
		cmd.Env = append(os.Environ(), lakeshore.EnvHome+"="+p.home, lakeshore.EnvURL+"=")
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &logs
	}
	w := p.watch()
	first, logs1 := start()
	p.submit("restart", 200)
	waitFor(t, 60*time.Second, "two workers launched", func() bool {
		ls, _ := p.local.List(t.Context())
		return len(ls) == 2
	})
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	second, logs2 := start()
	defer func() {
		_ = second.Process.Signal(syscall.SIGTERM)
		_ = second.Wait()
	}()
	waitFor(t, 3*time.Minute, "200 jobs succeeded", func() bool { return p.count("restart", lakeshore.StateSucceeded) == 200 })
	waitFor(t, time.Minute, "the workers stopped once idle", func() bool {
		ls, err := p.local.List(t.Context())
		return err == nil && len(ls) == 0
	})
	most, launched := w.end()
	if most > 2 || launched != 2 {
		t.Errorf("%d workers at once and %d launches in all; expected at most 2 and exactly 2 (the restarted supervisor adopts)\nfirst:\n%s\nsecond:\n%s",
			most, launched, logs1.String(), logs2.String())
	}
	if strings.Contains(logs2.String(), "msg=\"provider supervisor: launched\"") {
		t.Errorf("the second supervisor launched workers while the first one's ran\n%s", logs2.String())
	}
}

// TestProviderTwoSupervisorsOneActs: two supervisors on one queue: one holds the lease and
// launches; the other launches nothing.
func TestProviderTwoSupervisorsOneActs(t *testing.T) {
	p := newProviderPlane(t)
	p.setProvider("two", plane.LaunchPolicy{MaxWorkers: 2, JobsPerWorker: 10, IdleTimeout: time.Second,
		Cooldown: 200 * time.Millisecond, Command: workerCommand("two", "true")})
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var logs syncBuffer
	for _, reg := range regs {
		s := p.supervisor(reg, &logs)
		wg.Go(func() { _ = s.Run(ctx) })
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	w := p.watch()
	p.submit("two", 300)
	waitFor(t, 2*time.Minute, "300 jobs succeeded", func() bool { return p.count("two", lakeshore.StateSucceeded) == 300 })
	most, _ := w.end()
	launches := []float64{launchCount(t, regs[0]), launchCount(t, regs[1])}
	if most > 2 || (launches[0] > 0) == (launches[1] > 0) {
		t.Errorf("launches per supervisor %v, %d workers at once; expected one supervisor to launch, at most 2 at once\n%s", launches, most, logs.String())
	}
}

func launchCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	return metrictest.Sum(t, reg, "lakeshore_provider_launches_total")
}

// TestProviderExecProgramFaults: an exec provider that hangs, prints garbage or exits
// non-zero is bounded and logged; the supervisor keeps ticking and never crashes.
func TestProviderExecProgramFaults(t *testing.T) {
	p := newProviderPlane(t)
	dir := t.TempDir()
	programs := map[string]string{
		"hang":    "#!/bin/sh\nsleep 30\n",
		"garbage": "#!/bin/sh\necho 'this is not JSON'\n",
		"fails":   "#!/bin/sh\necho 'cloud quota exceeded' >&2\nexit 3\n",
		"state":   "#!/bin/sh\necho '{\"launches\": [{\"id\": \"x\", \"state\": \"sideways\"}]}'\n",
	}
	for name, body := range programs {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		err := p.drv.QueueProviderSet(t.Context(), &plane.ProviderParams{Namespace: "default", Queue: "q-" + name,
			Provider: plane.ProviderRef{Name: "exec:" + path, Policy: plane.LaunchPolicy{Command: []string{"w"}}}})
		if err != nil {
			t.Fatal(err)
		}
		p.submit("q-"+name, 1)
	}
	var logs syncBuffer
	// The programs that answer fork a shell, which a loaded 2-core machine can take well over
	// 300 ms to run (a bound that tight would log them as hanging): 3 s per call is far
	// below the hanging program's 30 s sleep, so a cut-off is still told from an answer.
	const timeout = 3 * time.Second
	s, err := provider.NewSupervisor(provider.SupervisorConfig{Driver: p.drv, Resolve: newResolver(p.home, timeout, os.Getenv),
		CallTimeout: timeout, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 3 {
		if err := s.Tick(t.Context()); err != nil {
			t.Fatalf("a tick returned %v; provider faults must be logged, not returned", err)
		}
	}
	if d := time.Since(start); d > 6*timeout+10*time.Second {
		t.Errorf("3 ticks took %s with a hanging provider; each call is bounded by %s", d, timeout)
	}
	for _, want := range []string{"no answer within " + timeout.String(), "is not {\\\"launches\\\": [...]} JSON", "exited with status 3: cloud quota exceeded",
		"has state \\\"sideways\\\""} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "*") && strings.Contains(logs.String(), "json.") {
		t.Errorf("a Go type name leaked into the log:\n%s", logs.String())
	}
	// The queues keep working with the workers they have: a hand-started claim succeeds.
	q, _ := p.d.Queue("q-fails", nil)
	job, err := q.Claim(t.Context(), &lakeshore.ClaimOptions{Wait: time.Second})
	if err != nil || job == nil {
		t.Fatalf("claim on a queue whose provider fails: %v, %v", job, err)
	}
	_ = fmt.Sprint(job.ID)
}

// TestProviderExecExample: the exec provider of examples/providers/exec_local.py (the
// protocol's documented example) launches real workers that run the jobs, and the
// supervisor stops them once idle.
func TestProviderExecExample(t *testing.T) {
	program, err := filepath.Abs("../../examples/providers/exec_local.py")
	if err != nil {
		t.Fatal(err)
	}
	runExecProvider(t, program)
}

// runExecProvider runs the Python exec provider program through a supervisor: 20 jobs on a
// queue at zero workers run on the workers it launches, which are stopped once idle.
func runExecProvider(t *testing.T, program string) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: apt-get install python3")
	}
	p := newProviderPlane(t)
	t.Setenv("EXEC_PROVIDER_DIR", t.TempDir())
	name := "exec:" + program
	err := p.drv.QueueProviderSet(t.Context(), &plane.ProviderParams{Namespace: "default", Queue: "ex",
		Provider: plane.ProviderRef{Name: name, Policy: plane.LaunchPolicy{MaxWorkers: 2, JobsPerWorker: 5,
			IdleTimeout: time.Second, Cooldown: 200 * time.Millisecond, Command: workerCommand("ex", "true")}}})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	resolve := newResolver(p.home, 10*time.Second, os.Getenv)
	s, err := provider.NewSupervisor(provider.SupervisorConfig{Driver: p.drv, Resolve: resolve, Tick: 100 * time.Millisecond,
		StopGrace: 10 * time.Second, WorkerEnv: map[string]string{lakeshore.EnvHome: p.home},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	p.submit("ex", 20)
	waitFor(t, 2*time.Minute, "20 jobs succeeded through the exec provider", func() bool {
		return p.count("ex", lakeshore.StateSucceeded) == 20
	})
	ex, err := resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the exec provider's workers stopped once idle", func() bool {
		ls, err := ex.List(t.Context())
		return err == nil && len(ls) == 0
	})
	for _, want := range []string{"provider supervisor: launched", "reason=idle"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %q logged:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the provider's calls failed:\n%s", logs.String())
	}
}

// TestProviderDocsExecExample: the Python exec provider shown in docs/providers.md works as
// shown.
func TestProviderDocsExecExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```python\n(#!/usr/bin/env python3\n\"\"\"An exec provider.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/providers.md has no Python exec provider block")
	}
	program := filepath.Join(t.TempDir(), "provider.py")
	if err := os.WriteFile(program, m[1], 0o755); err != nil {
		t.Fatal(err)
	}
	runExecProvider(t, program)
}

// TestProviderSlurmScale: on a real single-node SLURM, a queue at zero workers scales to
// its max under a burst of 1,000 no-op jobs (never above), every job runs, and once idle
// the supervisor cancels every SLURM job it launched.
func TestProviderSlurmScale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private SLURM")
	}
	cluster := slurmtest.Shared(t)
	p := newProviderPlane(t)
	slurm, err := slurmprovider.New(slurmprovider.Config{SlurmConf: cluster.Conf, LogDir: t.TempDir(),
		JobNamePrefix: "lakeshore-test-"})
	if err != nil {
		t.Fatal(err)
	}
	err = p.drv.QueueProviderSet(t.Context(), &plane.ProviderParams{Namespace: "default", Queue: "sq",
		Provider: plane.ProviderRef{Name: plane.ProviderSlurm, Policy: plane.LaunchPolicy{MaxWorkers: 2, JobsPerWorker: 10,
			IdleTimeout: time.Second, Cooldown: 200 * time.Millisecond, Command: workerCommand("sq", "true"),
			Resources: plane.Resources{CPUs: 1, TimeLimit: 10 * time.Minute}}}})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	s, err := provider.NewSupervisor(provider.SupervisorConfig{Driver: p.drv,
		Resolve: func(string) (provider.Provider, error) { return slurm, nil }, Tick: 100 * time.Millisecond,
		StopGrace: 10 * time.Second, WorkerEnv: map[string]string{lakeshore.EnvHome: p.home},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		ls, _ := slurm.List(context.Background())
		for _, l := range ls {
			_ = slurm.Stop(context.Background(), l.ID, 0)
		}
	}()
	most := 0
	sample := func() {
		if ls, err := slurm.List(t.Context()); err == nil {
			most = max(most, len(ls))
		}
	}
	submitted := time.Now()
	p.submit("sq", 1000)
	waitFor(t, 2*time.Minute, "a first job claimed at zero workers", func() bool {
		sample()
		return p.count("sq", lakeshore.StateQueued) < 1000
	})
	t.Logf("submit → first claim at zero workers (slurm provider, tick 100 ms): %s", time.Since(submitted).Round(time.Millisecond))
	waitFor(t, 3*time.Minute, "1,000 jobs succeeded on SLURM workers", func() bool {
		sample()
		return p.count("sq", lakeshore.StateSucceeded) == 1000
	})
	waitFor(t, 2*time.Minute, "every SLURM worker cancelled once idle", func() bool {
		ls, err := slurm.List(t.Context())
		return err == nil && len(ls) == 0
	})
	if n := strings.Count(logs.String(), "msg=\"provider supervisor: launched\""); most > 2 || n != 2 {
		t.Errorf("%d SLURM workers at once and %d launches; the policy wants 2 for 1,000 jobs at 10 per worker (max 2)\n%s", most, n, logs.String())
	}
	if !strings.Contains(logs.String(), "reason=idle") {
		t.Errorf("no idle stop logged:\n%s", logs.String())
	}
}

// TestProviderWorkersGetLakeshoreBin: over the embedded plane, `lakeshore provider run`
// without LAKESHORE_BIN in its environment gives its launches LAKESHORE_BIN = its own
// executable: a Python worker needs the binary to start the plane's daemon, and found none
// unless the user had exported it. A LAKESHORE_BIN the supervisor has is the worker's
// (inherited), not replaced. Before, the worker saw none. (Fails on the old code.)
func TestProviderWorkersGetLakeshoreBin(t *testing.T) {
	self, err := filepath.EvalSymlinks(binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, parent, want string }{
		{"unset", "", self},
		{"set", "/opt/lakeshore-of-the-user", "/opt/lakeshore-of-the-user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProviderPlane(t)
			out := filepath.Join(t.TempDir(), "bin")
			p.setProvider("bin", plane.LaunchPolicy{MaxWorkers: 1, RegisterTimeout: time.Minute,
				Command: []string{"sh", "-c", `printf '%s|' "$LAKESHORE_BIN" > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 60`, out}})
			p.submit("bin", 1)
			env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "LAKESHORE_BIN=") })
			env = append(env, lakeshore.EnvHome+"="+p.home, lakeshore.EnvURL+"=")
			if tc.parent != "" {
				env = append(env, "LAKESHORE_BIN="+tc.parent)
			}
			var logs syncBuffer
			cmd := exec.Command(binary, "provider", "run", "--tick", "100ms")
			cmd.Env, cmd.Stdout, cmd.Stderr = env, &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			var got []byte
			waitFor(t, 30*time.Second, "the worker wrote its LAKESHORE_BIN", func() bool {
				got, err = os.ReadFile(out)
				return err == nil
			})
			if string(got) != tc.want+"|" {
				t.Errorf("the launched worker's LAKESHORE_BIN = %q; want %q\n%s", strings.TrimSuffix(string(got), "|"), tc.want, logs.String())
			}
		})
	}
}
