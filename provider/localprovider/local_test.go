package localprovider

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

func newProvider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(filepath.Join(t.TempDir(), "local"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // a failing test leaves no process behind
		ls, _ := p.List(context.Background())
		for _, l := range ls {
			_ = p.Stop(context.Background(), l.ID, 0)
		}
	})
	return p
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// runs reports whether pid is a running process (not a zombie).
func runs(pid int) bool {
	state, _ := procStat(pid)
	return syscall.Kill(pid, 0) == nil && state != 'Z' && state != 0
}

// worker is a stand-in worker: it writes its environment's LAKESHORE_LAUNCH_ID and X and
// its child's pid, then sleeps; on SIGTERM it writes "TERM" and, with drain, exits.
func worker(dir string, drain bool) []string {
	onTerm := `echo TERM > "$D/term"`
	if drain {
		onTerm += "; exit 0"
	}
	script := `D="$1"; trap '` + onTerm + `' TERM; echo out; echo "$LAKESHORE_LAUNCH_ID $X" > "$D/env.tmp"; mv "$D/env.tmp" "$D/env"; ` +
		`while :; do sleep 0.05; done`
	return []string{"sh", "-c", script, "worker", dir}
}

func list(t *testing.T, p *Provider) map[string]provider.LaunchStatus {
	t.Helper()
	ls, err := p.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	m := map[string]provider.LaunchStatus{}
	for _, l := range ls {
		m[l.ID] = l
	}
	return m
}

// TestLaunchListStop: a launch runs with its environment, is listed with its queue and pid,
// writes its output to its log, and on Stop gets SIGTERM and drains (exits by itself,
// before the grace); its record goes with it.
func TestLaunchListStop(t *testing.T) {
	p := newProvider(t)
	dir := t.TempDir()
	l := &provider.Launch{ID: "L1", Namespace: "team", Queue: "q", Command: worker(dir, true),
		Env: map[string]string{provider.EnvLaunchID: "L1", "X": "a b,c"}}
	if err := p.Launch(t.Context(), l); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitFor(t, "the worker starts", func() bool { return exists(filepath.Join(dir, "env")) })
	if env, _ := os.ReadFile(filepath.Join(dir, "env")); string(env) != "L1 a b,c\n" {
		t.Errorf("the worker's environment: %q", env)
	}
	s, ok := list(t, p)["L1"]
	if !ok || s.Namespace != "team" || s.Queue != "q" || s.State != provider.LaunchRunning || !strings.HasPrefix(s.Detail, "pid ") {
		t.Fatalf("List = %+v (found %v); want team/q running with its pid", s, ok)
	}
	pid, _ := strconv.Atoi(strings.TrimPrefix(s.Detail, "pid "))
	start := time.Now()
	if err := p.Stop(t.Context(), "L1", 30*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Stop of a draining worker took %s: it waited for the grace", d)
	}
	if !exists(filepath.Join(dir, "term")) {
		t.Error("the worker saw no SIGTERM")
	}
	if runs(pid) {
		t.Errorf("pid %d still runs after Stop", pid)
	}
	if _, ok := list(t, p)["L1"]; ok {
		t.Error("List shows the stopped launch")
	}
	if exists(filepath.Join(p.dir, "L1.json")) {
		t.Error("the stopped launch's record is left")
	}
	if log, _ := os.ReadFile(filepath.Join(p.dir, "L1.log")); !strings.HasPrefix(string(log), "out\n") {
		t.Errorf("the launch's log holds %q; want its output", log)
	}
	if err := p.Stop(t.Context(), "L1", time.Second); err != nil {
		t.Errorf("Stop of an ended launch: %v", err)
	}
	if err := p.Stop(t.Context(), "never-launched", time.Second); err != nil {
		t.Errorf("Stop of an unknown launch: %v", err)
	}
}

// TestExitStatus: a launch this process started that ended on its own reports its exit
// code, or the signal that ended it (provider.ExitReporter), once; one still running, one
// never launched, and one reported already report nothing.
func TestExitStatus(t *testing.T) {
	p := newProvider(t)
	for id, script := range map[string]string{"code": "exit 3", "signal": "kill -KILL $$", "running": "sleep 30"} {
		if err := p.Launch(t.Context(), &provider.Launch{ID: id, Queue: "q", Command: []string{"sh", "-c", script}}); err != nil {
			t.Fatalf("Launch %s: %v", id, err)
		}
	}
	t.Cleanup(func() { _ = p.Stop(context.Background(), "running", time.Second) })
	waitFor(t, "both launches end", func() bool {
		ls := list(t, p)
		_, code := ls["code"]
		_, signal := ls["signal"]
		return !code && !signal
	})
	if code, sig, ok := p.ExitStatus("code"); !ok || code != 3 || sig != "" {
		t.Errorf("ExitStatus(code) = %d, %q, %v; want 3, \"\", true", code, sig, ok)
	}
	if code, sig, ok := p.ExitStatus("signal"); !ok || code != -1 || sig != "SIGKILL" {
		t.Errorf("ExitStatus(signal) = %d, %q, %v; want -1, SIGKILL, true", code, sig, ok)
	}
	for _, id := range []string{"code", "running", "never-launched"} {
		if code, sig, ok := p.ExitStatus(id); ok {
			t.Errorf("ExitStatus(%s) = %d, %q, true; want nothing", id, code, sig)
		}
	}
}

// TestStopKillsAfterGrace: a worker that ignores SIGTERM, and its child, are SIGKILLed
// once the grace has passed (the whole process group).
func TestStopKillsAfterGrace(t *testing.T) {
	p := newProvider(t)
	dir := t.TempDir()
	script := `D="$1"; trap 'echo TERM > "$D/term"' TERM; sleep 30 & echo $! > "$D/child"; while :; do sleep 0.05; done`
	if err := p.Launch(t.Context(), &provider.Launch{ID: "L1", Command: []string{"sh", "-c", script, "w", dir}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the worker starts", func() bool { return exists(filepath.Join(dir, "child")) })
	child, _ := strconv.Atoi(strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dir, "child"))))))
	// The shell runs its TERM trap once its current `sleep 0.05` ends: 2 s leave a loaded
	// machine time to schedule it before the kill.
	grace := 2 * time.Second
	start := time.Now()
	if err := p.Stop(t.Context(), "L1", grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(start); d < grace {
		t.Errorf("Stop returned after %s, before the grace (%s), though the worker ignored SIGTERM", d, grace)
	}
	if !exists(filepath.Join(dir, "term")) {
		t.Error("the worker saw no SIGTERM before the kill")
	}
	waitFor(t, "the worker's child is killed with it", func() bool { return !runs(child) })
	if len(list(t, p)) != 0 {
		t.Error("List shows the killed launch")
	}
}

// TestStopWhenContextEnds: a caller that gives up during the grace kills the worker at
// once rather than leaving it behind.
func TestStopWhenContextEnds(t *testing.T) {
	p := newProvider(t)
	dir := t.TempDir()
	if err := p.Launch(t.Context(), &provider.Launch{ID: "L1", Command: worker(dir, false)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the worker starts", func() bool { return exists(filepath.Join(dir, "env")) })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.Stop(ctx, "L1", time.Hour); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Stop took %s with a context of 300ms", d)
	}
	if len(list(t, p)) != 0 {
		t.Error("the launch runs on after its Stop's context ended")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// startSleep starts a process the test owns (in its own group), as an earlier supervisor's
// launch would be, and returns it with its record.
func startSleep(t *testing.T, id string) (*exec.Cmd, record) {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, record{ID: id, Namespace: "default", Queue: "q", PID: cmd.Process.Pid, StartTime: startTime(cmd.Process.Pid),
		Command: []string{"sleep", "30"}}
}

// TestAdoptsRecords: a provider started later (a restarted supervisor) lists the launches
// of an earlier one from their records and stops them; records of ended processes, and
// unreadable ones, are dropped.
func TestAdoptsRecords(t *testing.T) {
	p := newProvider(t)
	cmd, rec := startSleep(t, "EARLIER")
	if err := p.write(rec); err != nil {
		t.Fatal(err)
	}
	// A launch of another provider value on the same directory, as a second supervisor
	// process would see it.
	other, err := New(p.dir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := other.Launch(t.Context(), &provider.Launch{ID: "OTHER", Queue: "q", Command: worker(dir, true)}); err != nil {
		t.Fatal(err)
	}
	// The record of a process that ended (and was reaped), and one that is not JSON.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := p.write(record{ID: "GONE", PID: gone.Process.Pid, StartTime: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "BROKEN.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}

	got := list(t, p)
	if s, ok := got["EARLIER"]; !ok || s.Queue != "q" || s.State != provider.LaunchRunning {
		t.Errorf("List = %v; want the earlier supervisor's launch, running", got)
	}
	if _, ok := got["OTHER"]; !ok {
		t.Errorf("List = %v; want the other provider's launch", got)
	}
	if _, ok := got["GONE"]; ok || exists(filepath.Join(p.dir, "GONE.json")) {
		t.Error("the record of an ended process is listed or left")
	}
	if len(got) != 2 {
		t.Errorf("List = %v; want exactly the two live launches", got)
	}

	if err := p.Stop(t.Context(), "EARLIER", 10*time.Second); err != nil {
		t.Fatalf("Stop of an adopted launch: %v", err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("the adopted process ended with %v; want SIGTERM", err)
	}
	if err := p.Stop(t.Context(), "OTHER", 10*time.Second); err != nil {
		t.Fatalf("Stop of the other provider's launch: %v", err)
	}
	if got := list(t, p); len(got) != 0 {
		t.Errorf("List after the stops = %v", got)
	}
}

// TestPIDReuse: a record whose pid now belongs to another process (its start time differs)
// is an ended launch: not listed, and Stop never signals that process.
func TestPIDReuse(t *testing.T) {
	p := newProvider(t)
	cmd, rec := startSleep(t, "REUSED")
	if rec.StartTime == 0 {
		t.Skip("no /proc: the start time is unknown")
	}
	rec.StartTime++ // the pid's process started at another time than the launch's
	if err := p.write(rec); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(t.Context(), "REUSED", 0); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !runs(cmd.Process.Pid) {
		t.Fatal("Stop signalled a process that reused the launch's pid")
	}
	if got := list(t, p); len(got) != 0 {
		t.Errorf("List = %v; a reused pid is not the launch", got)
	}
	if exists(filepath.Join(p.dir, "REUSED.json")) {
		t.Error("the stale record is left")
	}
}

// TestZombie: a launch whose process ended but was not reaped yet by its parent (a zombie)
// has ended.
func TestZombie(t *testing.T) {
	p := newProvider(t)
	cmd := exec.Command("sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	rec := record{ID: "ZOMBIE", PID: pid, StartTime: startTime(pid)}
	waitFor(t, "the process becomes a zombie", func() bool { state, _ := procStat(pid); return state == 'Z' })
	if err := p.write(rec); err != nil {
		t.Fatal(err)
	}
	if got := list(t, p); len(got) != 0 {
		t.Errorf("List = %v; a zombie has ended", got)
	}
}

// TestLaunchErrors: bad launches are clear errors and leave no record.
// TestLakeshoreIsTheSupervisorsBinary: with SetLakeshore, a worker command "lakeshore …"
// runs that program, not one looked up on PATH (where there may be none).
func TestLakeshoreIsTheSupervisorsBinary(t *testing.T) {
	p := newProvider(t)
	dir := t.TempDir()
	self := filepath.Join(dir, "built-here")
	if err := os.WriteFile(self, []byte("#!/bin/sh\necho \"$@\" > \"$1/args\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "/nonexistent")
	if err := p.Launch(t.Context(), &provider.Launch{ID: "L0", Command: []string{"lakeshore", dir}}); err == nil ||
		!strings.Contains(err.Error(), `worker command "lakeshore" not found`) {
		t.Fatalf("Launch without SetLakeshore = %v; want not found", err)
	}
	p.SetLakeshore(self)
	if err := p.Launch(t.Context(), &provider.Launch{ID: "L1", Command: []string{"lakeshore", dir, "worker", "q"}}); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	want := dir + " worker q\n"
	waitFor(t, "the program writes its arguments", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "args"))
		return string(b) == want
	})
}

func TestLaunchErrors(t *testing.T) {
	p := newProvider(t)
	err := p.Launch(t.Context(), &provider.Launch{ID: "L1", Command: []string{"lakeshore-no-such-worker"}})
	if err == nil || !strings.Contains(err.Error(), `worker command "lakeshore-no-such-worker" not found on this machine`) {
		t.Errorf("Launch of a missing command = %v", err)
	}
	if err := p.Launch(t.Context(), &provider.Launch{ID: "L1"}); !errors.Is(err, plane.ErrInvalid) {
		t.Errorf("Launch without a command = %v; want ErrInvalid", err)
	}
	if err := p.Launch(t.Context(), &provider.Launch{ID: "../x", Command: []string{"true"}}); !errors.Is(err, plane.ErrInvalid) {
		t.Errorf("Launch with an id holding a path = %v; want ErrInvalid", err)
	}
	if entries, _ := os.ReadDir(p.dir); len(entries) != 0 {
		t.Errorf("failed launches left %d files", len(entries))
	}
	if _, err := New(""); !errors.Is(err, plane.ErrInvalid) {
		t.Errorf("New(\"\") = %v; want ErrInvalid", err)
	}
}
