package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/slurmtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/slurmprovider"
)

// startSupervisor starts `lakeshore provider run ARGS…` on the plane's home as a child
// process, with env added to its environment; it is killed when the test ends.
func (p *providerPlane) startSupervisor(env []string, args ...string) (*exec.Cmd, *syncBuffer) {
	p.t.Helper()
	logs := &syncBuffer{}
	cmd := exec.Command(binary, append([]string{"provider", "run"}, args...)...)
	cmd.Env = append(append(os.Environ(), lakeshore.EnvHome+"="+p.home, lakeshore.EnvURL+"="), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd, logs
}

// kill SIGKILLs a supervisor started by startSupervisor and waits until it is gone.
func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for syscall.Kill(cmd.Process.Pid, 0) == nil {
		if state, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)); strings.Contains(string(state), ") Z ") {
			return // dead, waiting to be reaped
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServeProviders: `lakeshore serve --providers` runs the supervisor beside the server:
// a queue with a provider at zero workers gets workers for its backlog, every job runs,
// the idle workers are stopped, and the supervisor's metrics are on the server's /metrics.
func TestServeProviders(t *testing.T) {
	p := newProviderPlane(t)
	p.setProvider("srv", plane.LaunchPolicy{MaxWorkers: 2, JobsPerWorker: 10, IdleTimeout: time.Second,
		Cooldown: 200 * time.Millisecond, Command: workerCommand("srv", "true")})
	t.Setenv(lakeshore.EnvURL, "")
	t.Setenv(EnvAdminToken, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--target", filepath.Join(p.home, lakeshore.DefaultDBName), "serve", "--addr", "127.0.0.1:0",
			"--providers", "--providers-tick", "100ms", "--providers-lease-ttl", "2s", "--providers-stop-grace", "10s"},
			strings.NewReader(""), io.Discard, logs)
	}()
	addr := servedAddr(t, logs)
	waitOutputWithin(t, logs, "provider supervisor running", 30*time.Second)
	p.submit("srv", 30)
	waitFor(t, 2*time.Minute, "30 jobs succeeded on workers the server's supervisor launched", func() bool {
		return p.count("srv", lakeshore.StateSucceeded) == 30
	})
	waitFor(t, time.Minute, "the idle workers stopped", func() bool {
		ls, err := p.local.List(t.Context())
		return err == nil && len(ls) == 0
	})
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`lakeshore_provider_launches_total{namespace="default",provider="local",queue="srv",result="ok"}`,
		`lakeshore_provider_stops_total{namespace="default",provider="local",queue="srv",reason="idle"}`, "lakeshore_provider_tick_seconds_count"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the server's /metrics lacks %s", want)
		}
	}
	for _, want := range []string{`msg="provider supervisor: acting for the queue"`, `msg="provider supervisor: launched"`, "reason=idle"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the server's log lacks %s:\n%s", want, logs.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d", code)
	}
}

// TestProviderDryRunBesideReal: `lakeshore provider run --dry-run`, started first, logs what
// it would do but launches nothing and takes no lease, so the real supervisor started after
// it acts for the queue; every job runs on the real one's workers.
func TestProviderDryRunBesideReal(t *testing.T) {
	p := newProviderPlane(t)
	p.setProvider("dr", plane.LaunchPolicy{MaxWorkers: 2, JobsPerWorker: 10, IdleTimeout: time.Second,
		Cooldown: 200 * time.Millisecond, Command: workerCommand("dr", "true")})
	p.submit("dr", 30)
	_, dry := p.startSupervisor(nil, "--dry-run", "--tick", "100ms", "--lease-ttl", "2s")
	waitFor(t, 30*time.Second, "the dry run's decision", func() bool {
		return strings.Contains(dry.String(), `msg="provider supervisor: decision"`)
	})
	if want := "want=2 live=0 launch=2"; !strings.Contains(dry.String(), want) || !strings.Contains(dry.String(), "dry_run=true") {
		t.Errorf("the dry run's decision lacks %s dry_run=true:\n%s", want, dry.String())
	}
	time.Sleep(300 * time.Millisecond) // a few more dry-run ticks
	if ls, _ := p.local.List(t.Context()); len(ls) != 0 {
		t.Fatalf("the dry run launched %d workers", len(ls))
	}
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	s := p.supervisor(reg, &logs)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-stopped
	}()
	waitFor(t, 2*time.Minute, "30 jobs succeeded", func() bool { return p.count("dr", lakeshore.StateSucceeded) == 30 })
	waitFor(t, time.Minute, "the idle workers stopped", func() bool {
		ls, err := p.local.List(t.Context())
		return err == nil && len(ls) == 0
	})
	if n := launchCount(t, reg); n != 2 {
		t.Errorf("the real supervisor made %v launches; want 2\n%s", n, logs.String())
	}
	for _, unwanted := range []string{`msg="provider supervisor: launched"`, "acting for the queue", "failure=", `msg="provider supervisor: stopping"`} {
		if strings.Contains(dry.String(), unwanted) {
			t.Errorf("the dry run logged %s:\n%s", unwanted, dry.String())
		}
	}
	if !strings.Contains(dry.String(), "watching the queue (dry run: no lease taken") {
		t.Errorf("the dry run does not say it takes no lease:\n%s", dry.String())
	}
}

// TestProviderSubmitAtZeroLaunchesWithinOneTick: at zero workers, the first supervisor tick
// after a submit launches a worker (asserted by ticking by hand: before the submit no
// launch, the tick after it one); the test reports the time from the submit to the job's
// first claim by that worker (the invocation's StartedAt − CreatedAt, in the plane's clock:
// the launch, the worker's start and its first claim; a running supervisor adds up to one
// tick).
func TestProviderSubmitAtZeroLaunchesWithinOneTick(t *testing.T) {
	p := newProviderPlane(t)
	p.setProvider("zero", plane.LaunchPolicy{MaxWorkers: 1, IdleTimeout: time.Second, Command: workerCommand("zero", "true")})
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	s := p.supervisor(reg, &logs)
	if err := s.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := launchCount(t, reg); n != 0 {
		t.Fatalf("%v launches for an empty queue", n)
	}
	ids := p.submit("zero", 1)
	if err := s.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := launchCount(t, reg); n != 1 {
		t.Fatalf("the tick after a submit at zero workers made %v launches; want 1\n%s", n, logs.String())
	}
	q, _ := p.d.Queue("zero", nil)
	var result any
	if err := q.Result(t.Context(), ids[0], &result, &lakeshore.ResultOptions{Timeout: time.Minute}); err != nil {
		t.Fatalf("the job's result: %v\n%s", err, logs.String())
	}
	inv, err := q.Get(t.Context(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("submit → first claim at zero workers (local provider, launched by the tick after the submit): %s",
		inv.StartedAt.Sub(inv.CreatedAt).Round(time.Millisecond))
}

// midScale kills `lakeshore provider run` between the two launches of a queue that scales
// one launch a tick (its tick is long: 30 s, so the kill surely lands between its first
// launch and its second however slow the machine; its lease short: 1 s, so the next
// supervisor takes over while the queue still has work), starts another, and checks that the second
// adopts the first one's launch and makes exactly one more (no double launch), and that
// every worker is stopped once idle (no orphan). list returns the provider's live launches.
func midScale(t *testing.T, p *providerPlane, queue string, env []string, list func() []provider.LaunchStatus) {
	t.Helper()
	seen := map[string]bool{}
	most := 0
	sample := func() int {
		ls := list()
		for _, l := range ls {
			seen[l.ID] = true
		}
		most = max(most, len(ls))
		return len(ls)
	}
	p.submit(queue, 40)
	first, logs1 := p.startSupervisor(env, "--tick", "30s", "--lease-ttl", "1s", "--stop-grace", "10s")
	// The kill lands after the first launch is both live and logged: a launch the provider
	// lists a moment before the supervisor writes its "launched" line would otherwise be
	// a launch the killed supervisor made and never reported.
	waitFor(t, 2*time.Minute, "the first launch", func() bool {
		return sample() >= 1 && strings.Contains(logs1.String(), `msg="provider supervisor: launched"`)
	})
	kill(t, first)
	if n := sample(); n != 1 {
		t.Fatalf("%d launches when the supervisor was killed; the test wants it killed between the first and the second\n%s", n, logs1.String())
	}
	second, logs2 := p.startSupervisor(env, "--tick", "100ms", "--lease-ttl", "1s", "--stop-grace", "10s")
	waitFor(t, 3*time.Minute, "40 jobs succeeded", func() bool {
		sample()
		return p.count(queue, lakeshore.StateSucceeded) == 40
	})
	waitFor(t, 2*time.Minute, "every worker stopped once idle", func() bool { return sample() == 0 })
	_ = second.Process.Signal(syscall.SIGTERM)
	launched1 := strings.Count(logs1.String(), `msg="provider supervisor: launched"`)
	launched2 := strings.Count(logs2.String(), `msg="provider supervisor: launched"`)
	if len(seen) != 2 || most > 2 || launched1 != 1 || launched2 != 1 {
		t.Errorf("%d launches in all, %d at once, %d by the killed supervisor and %d by the next; want 2, ≤ 2, 1 and 1\nfirst:\n%s\nsecond:\n%s",
			len(seen), most, launched1, launched2, logs1.String(), logs2.String())
	}
}

// TestProviderSupervisorKilledMidScale: the local provider, supervisor SIGKILLed between
// two launches.
func TestProviderSupervisorKilledMidScale(t *testing.T) {
	p := newProviderPlane(t)
	p.setProvider("mid", plane.LaunchPolicy{MaxWorkers: 2, ScaleUpStep: 1, IdleTimeout: time.Second,
		Cooldown: 200 * time.Millisecond, Command: workerCommand("mid", "sh", "-c", "sleep 0.3")})
	midScale(t, p, "mid", nil, func() []provider.LaunchStatus {
		ls, _ := p.local.List(t.Context())
		return ls
	})
}

// TestWorkersShowsProviderAndLaunch: `lakeshore workers` shows who launched each worker
// (PROVIDER and LAUNCH; "-" for one started by hand), and --json carries both.
func TestWorkersShowsProviderAndLaunch(t *testing.T) {
	c := newCLI(t)
	drv, err := sqliteplane.Open(t.Context(), c.target, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	now := time.Now()
	for _, w := range []plane.WorkerInfo{
		{ID: "w-launched", Namespace: "default", Host: "node7", PID: 41, Queues: []string{"train"}, StartedAt: now,
			Provider: plane.ProviderSlurm, LaunchID: "01LAUNCHED", Running: 1},
		{ID: "w-by-hand", Namespace: "default", Host: "laptop", PID: 42, Queues: []string{"train"}, StartedAt: now, IdleSince: now},
	} {
		if err := drv.WorkerRegister(t.Context(), &w); err != nil {
			t.Fatal(err)
		}
	}
	out := c.ok("workers")
	lines := strings.Split(out, "\n")
	header := strings.Fields(lines[0])
	col := func(name string) int {
		for i, h := range header {
			if h == name {
				return i
			}
		}
		t.Fatalf("no %s column in %q", name, lines[0])
		return -1
	}
	prov, launch := col("PROVIDER"), col("LAUNCH")
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	if r := rows["w-launched"]; len(r) <= launch || r[prov] != "slurm" || r[launch] != "01LAUNCHED" {
		t.Errorf("the launched worker's row %q; want PROVIDER slurm and LAUNCH 01LAUNCHED\n%s", r, out)
	}
	if r := rows["w-by-hand"]; len(r) <= launch || r[prov] != "-" || r[launch] != "-" {
		t.Errorf("the hand-started worker's row %q; want - and -\n%s", r, out)
	}
	js := c.ok("--json", "workers")
	var launched, byHand map[string]any
	for _, line := range strings.Split(js, "\n") {
		var w map[string]any
		if err := json.Unmarshal([]byte(line), &w); err != nil {
			t.Fatalf("workers --json line %q: %v", line, err)
		}
		switch w["id"] {
		case "w-launched":
			launched = w
		case "w-by-hand":
			byHand = w
		}
	}
	if launched["provider"] != "slurm" || launched["launch_id"] != "01LAUNCHED" {
		t.Errorf("workers --json for the launched worker: %v", launched)
	}
	if _, ok := byHand["launch_id"]; ok {
		t.Errorf("workers --json for a hand-started worker has a launch id: %v", byHand)
	}
}

// slurmPlane is a provider plane whose queues use the shared private SLURM through a
// provider of the test's own (its own job-name prefix, so tests never adopt each other's
// jobs); its jobs are cancelled when the test ends.
func slurmPlane(t *testing.T, cfg slurmprovider.Config) (*providerPlane, *slurmprovider.Provider, *slurmtest.Cluster, slurmprovider.Config) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a private SLURM")
	}
	cluster := slurmtest.Shared(t)
	p := newProviderPlane(t)
	cfg.SlurmConf = cluster.Conf
	if cfg.LogDir == "" {
		cfg.LogDir = t.TempDir()
	}
	if cfg.JobNamePrefix == "" {
		cfg.JobNamePrefix = fmt.Sprintf("ls%d-%s-", os.Getpid()%100000, strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(t.Name(), "")))
	}
	slurm, err := slurmprovider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ls, _ := slurm.List(ctx)
		for _, l := range ls {
			_ = slurm.Stop(ctx, l.ID, 0)
		}
	})
	return p, slurm, cluster, cfg
}

// runSlurmSupervisor runs an in-process supervisor over slurm until the test ends.
func runSlurmSupervisor(t *testing.T, p *providerPlane, slurm *slurmprovider.Provider, reg prometheus.Registerer, logs io.Writer) {
	t.Helper()
	s, err := provider.NewSupervisor(provider.SupervisorConfig{Driver: p.drv,
		Resolve: func(string) (provider.Provider, error) { return slurm, nil }, Tick: 100 * time.Millisecond,
		StopGrace: 10 * time.Second, WorkerEnv: map[string]string{lakeshore.EnvHome: p.home}, Metrics: provider.NewMetrics(reg),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func (p *providerPlane) setSlurm(queue string, policy plane.LaunchPolicy) {
	p.t.Helper()
	if err := p.drv.QueueProviderSet(p.t.Context(), &plane.ProviderParams{Namespace: "default", Queue: queue,
		Provider: plane.ProviderRef{Name: plane.ProviderSlurm, Policy: policy}}); err != nil {
		p.t.Fatal(err)
	}
}

// TestProviderSlurmReplacesKilledJob: a SLURM worker killed from outside — its job
// cancelled with scancel, or its process SIGKILLed — is noticed (a failure of kind
// "ended"), replaced by a new launch, and the job it was running is retried and succeeds.
func TestProviderSlurmReplacesKilledJob(t *testing.T) {
	for _, how := range []string{"scancel", "SIGKILL"} {
		t.Run(how, func(t *testing.T) {
			p, slurm, cluster, _ := slurmPlane(t, slurmprovider.Config{})
			// The first attempt runs until killed; a retry ends at once.
			p.setSlurm("sk", plane.LaunchPolicy{MaxWorkers: 1, IdleTimeout: time.Second, Cooldown: 200 * time.Millisecond,
				Command:   workerCommand("sk", "sh", "-c", `[ "$LAKESHORE_ATTEMPT" = 1 ] && exec sleep 60; exit 0`),
				Resources: plane.Resources{CPUs: 1, TimeLimit: 10 * time.Minute}})
			reg := prometheus.NewRegistry()
			var logs syncBuffer
			runSlurmSupervisor(t, p, slurm, reg, &logs)
			ids := p.submit("sk", 1)
			var first plane.WorkerInfo
			waitFor(t, 2*time.Minute, "a SLURM worker running the job", func() bool {
				ws, err := p.drv.WorkerList(t.Context(), &plane.WorkerListParams{Namespace: "default"})
				if err != nil || len(ws) == 0 || ws[0].Running == 0 {
					return false
				}
				first = ws[0]
				return true
			})
			if first.Provider != plane.ProviderSlurm || first.LaunchID == "" {
				t.Fatalf("the worker registered as provider %q launch %q", first.Provider, first.LaunchID)
			}
			switch how {
			case "scancel":
				if out, err := cluster.Command(t.Context(), "scancel", "--name="+slurm.JobName(first.LaunchID)).CombinedOutput(); err != nil {
					t.Fatalf("scancel: %v: %s", err, out)
				}
			case "SIGKILL":
				if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			q, _ := p.d.Queue("sk", nil)
			// The replacement registers while it runs the job; once the job is done it may
			// be stopped as idle, so it is looked for while waiting, not after.
			replaced := false
			waitFor(t, 2*time.Minute, "the job's end after the kill", func() bool {
				replaced = replaced || sawReplacement(t, p, first)
				inv, err := q.Get(t.Context(), ids[0])
				return err == nil && inv.State.Terminal()
			})
			var result any
			if err := q.Result(t.Context(), ids[0], &result, &lakeshore.ResultOptions{Timeout: 2 * time.Minute}); err != nil {
				t.Fatalf("the job's result after the kill: %v\n%s", err, logs.String())
			}
			inv, err := q.Get(t.Context(), ids[0])
			if err != nil {
				t.Fatal(err)
			}
			if inv.State != lakeshore.StateSucceeded || inv.Attempt < 2 {
				t.Errorf("the job ended %s at attempt %d; want it retried (attempt ≥ 2) and succeeded", inv.State, inv.Attempt)
			}
			if !replaced {
				t.Errorf("no worker of another launch registered after the kill\n%s", logs.String())
			}
			if want := "launch=" + first.LaunchID + " failure=ended"; !strings.Contains(logs.String(), want) {
				t.Errorf("the supervisor did not log the killed job as failed (%s)\n%s", want, logs.String())
			}
			waitFor(t, 2*time.Minute, "every SLURM worker cancelled once idle", func() bool {
				ls, err := slurm.List(t.Context())
				return err == nil && len(ls) == 0
			})
		})
	}
}

// TestProviderSlurmNeverStarts: a SLURM job that never starts (submitted held, as a job
// pending on what the cluster never frees would be) is expired at the register timeout:
// cancelled, counted as failed, and replaced.
func TestProviderSlurmNeverStarts(t *testing.T) {
	p, slurm, _, _ := slurmPlane(t, slurmprovider.Config{ExtraArgs: []string{"--hold"}})
	p.setSlurm("held", plane.LaunchPolicy{MaxWorkers: 1, RegisterTimeout: 2 * time.Second, Command: workerCommand("held", "true")})
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	runSlurmSupervisor(t, p, slurm, reg, &logs)
	p.submit("held", 1)
	var first provider.LaunchStatus
	waitFor(t, time.Minute, "a pending SLURM job", func() bool {
		ls, _ := slurm.List(t.Context())
		if len(ls) == 0 {
			return false
		}
		first = ls[0]
		return true
	})
	if first.State != provider.LaunchPending || !strings.Contains(first.Detail, "PENDING") {
		t.Errorf("the held job is %s (%s); want pending", first.State, first.Detail)
	}
	waitFor(t, time.Minute, "the job expired at the register timeout", func() bool {
		return strings.Contains(logs.String(), "launch="+first.ID+" failure=register_timeout")
	})
	waitFor(t, time.Minute, "the expired job cancelled", func() bool {
		ls, err := slurm.List(t.Context())
		if err != nil {
			return false
		}
		for _, l := range ls {
			if l.ID == first.ID {
				return false
			}
		}
		return true
	})
	reasons := map[string]float64{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" || l.GetName() == "reason" {
					reasons[mf.GetName()+"/"+l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if reasons["lakeshore_provider_failures_total/register_timeout"] < 1 || reasons["lakeshore_provider_stops_total/register_timeout"] < 1 {
		t.Errorf("metrics %v; want failures{kind=register_timeout} and stops{reason=register_timeout}", reasons)
	}
	if !strings.Contains(logs.String(), "launch="+first.ID+" reason=register_timeout") {
		t.Errorf("no stop of the expired job logged\n%s", logs.String())
	}
	waitFor(t, time.Minute, "a replacement launched", func() bool { return launchCount(t, reg) >= 2 })
}

// TestProviderSlurmSupervisorKilledMidScale: `lakeshore provider run` on SLURM SIGKILLed
// between two launches; the next one adopts the SLURM job (SLURM's queue is the record).
func TestProviderSlurmSupervisorKilledMidScale(t *testing.T) {
	p, slurm, cluster, cfg := slurmPlane(t, slurmprovider.Config{})
	p.setSlurm("smid", plane.LaunchPolicy{MaxWorkers: 2, ScaleUpStep: 1, IdleTimeout: time.Second, Cooldown: 200 * time.Millisecond,
		Command: workerCommand("smid", "sh", "-c", "sleep 0.3"), Resources: plane.Resources{CPUs: 1}})
	env := []string{"SLURM_CONF=" + cluster.Conf, slurmprovider.EnvJobNamePrefix + "=" + cfg.JobNamePrefix,
		slurmprovider.EnvLogDir + "=" + cfg.LogDir}
	midScale(t, p, "smid", env, func() []provider.LaunchStatus {
		ls, _ := slurm.List(t.Context())
		return ls
	})
}

// TestProviderSlurmUnreachableAtStart: `lakeshore provider run` with a queue on SLURM whose
// controller does not answer says so in one error line at start-up and keeps running.
func TestProviderSlurmUnreachableAtStart(t *testing.T) {
	p, _, cluster, _ := slurmPlane(t, slurmprovider.Config{})
	conf, err := os.ReadFile(cluster.Conf)
	if err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(dead, regexp.MustCompile(`(?m)^SlurmctldPort=\d+$`).ReplaceAll(conf, []byte("SlurmctldPort=1")), 0o644); err != nil {
		t.Fatal(err)
	}
	p.setSlurm("down", plane.LaunchPolicy{Command: workerCommand("down", "true")})
	p.submit("down", 1)
	cmd, logs := p.startSupervisor([]string{"SLURM_CONF=" + dead}, "--tick", "100ms", "--call-timeout", "1s")
	waitFor(t, 30*time.Second, "the start-up check's error line", func() bool {
		return strings.Contains(logs.String(), "provider supervisor: the provider cannot work")
	})
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "the provider cannot work") {
			line = l
		}
	}
	for _, want := range []string{"level=ERROR", "provider=slurm", "SLURM is not reachable", "squeue", "scontrol ping"} {
		if !strings.Contains(line, want) {
			t.Errorf("the start-up line lacks %q: %s", want, line)
		}
	}
	waitFor(t, 30*time.Second, "the next tick's list fails too, logged", func() bool {
		return strings.Contains(logs.String(), "list launches failed")
	})
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Errorf("the supervisor exited: %v\n%s", err, logs.String())
	}
}
