// Package localprovider is the "local" provider: it runs workers as processes on the
// supervisor's machine.
//
// Each launch is a process in its own process group, with its output appended to
// DIR/LAUNCH.log and a record DIR/LAUNCH.json (pid, process start time, queue), so a
// supervisor started later adopts the launches of one that died (List) instead of launching
// twice, and can stop them. Stop sends SIGTERM to the group (a Lakeshore worker drains: it
// finishes its running jobs and claims nothing new), then SIGKILL after the grace period.
package localprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// Provider runs workers as local processes. Create it with New.
type Provider struct {
	dir string

	mu      sync.Mutex
	exited  map[string]chan struct{} // launches this process started: closed when reaped
	started map[string]*os.Process
}

// New returns a local provider that keeps its launch records in dir (created if absent;
// conventionally $LAKESHORE_HOME/run/providers/local). Errors: dir cannot be created.
func New(dir string) (*Provider, error) {
	if dir == "" {
		return nil, plane.Invalid("local provider directory", dir, "give a directory for launch records, e.g. $LAKESHORE_HOME/run/providers/local")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	return &Provider{dir: dir, exited: map[string]chan struct{}{}, started: map[string]*os.Process{}}, nil
}

// Name implements provider.Provider: "local".
func (p *Provider) Name() string { return plane.ProviderLocal }

// record is a launch's file DIR/ID.json.
type record struct {
	ID        string   `json:"id"`
	Namespace string   `json:"namespace"`
	Queue     string   `json:"queue"`
	PID       int      `json:"pid"`
	StartTime uint64   `json:"start_time"` // /proc/PID/stat field 22: tells a reused pid apart
	Command   []string `json:"command"`
}

// Launch implements provider.Provider: it starts l.Command with l.Env added to this
// process's environment. Errors: the program is not found or cannot start.
func (p *Provider) Launch(ctx context.Context, l *provider.Launch) error {
	if len(l.Command) == 0 {
		return plane.Invalid("worker command", l.Command, "give the worker's command")
	}
	if !validID(l.ID) {
		return plane.Invalid("launch id", l.ID, "use letters and digits only")
	}
	path, err := exec.LookPath(l.Command[0])
	if err != nil {
		return fmt.Errorf("local provider: worker command %q not found on this machine (PATH=%s): %w", l.Command[0], os.Getenv("PATH"), errors.Unwrap(err))
	}
	logf, err := os.OpenFile(filepath.Join(p.dir, l.ID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(path, l.Command[1:]...)
	cmd.Env = os.Environ()
	keys := make([]string, 0, len(l.Env))
	for k := range l.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+l.Env[k])
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("local provider: start %s: %w", l.Command[0], err)
	}
	rec := record{ID: l.ID, Namespace: l.Namespace, Queue: l.Queue, PID: cmd.Process.Pid, StartTime: startTime(cmd.Process.Pid), Command: l.Command}
	done := make(chan struct{})
	p.mu.Lock()
	p.exited[l.ID], p.started[l.ID] = done, cmd.Process
	p.mu.Unlock()
	if err := p.write(rec); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return err
	}
	go func() {
		_ = cmd.Wait() // reap; the record goes with the process
		_ = os.Remove(filepath.Join(p.dir, l.ID+".json"))
		p.mu.Lock()
		delete(p.started, l.ID)
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func (p *Provider) write(rec record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	tmp := filepath.Join(p.dir, rec.ID+".json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, rec.ID+".json")); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	return nil
}

// List implements provider.Provider: the launches whose process still runs, this
// supervisor's and those of earlier ones (their records); records of ended processes are
// removed.
func (p *Provider) List(ctx context.Context) ([]provider.LaunchStatus, error) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	var out []provider.LaunchStatus
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		rec, ok := p.read(strings.TrimSuffix(name, ".json"))
		if !ok {
			continue
		}
		if !p.alive(rec) {
			_ = os.Remove(filepath.Join(p.dir, name))
			continue
		}
		out = append(out, provider.LaunchStatus{ID: rec.ID, Namespace: rec.Namespace, Queue: rec.Queue,
			State: provider.LaunchRunning, Detail: "pid " + strconv.Itoa(rec.PID)})
	}
	return out, nil
}

func (p *Provider) read(id string) (record, bool) {
	var rec record
	b, err := os.ReadFile(filepath.Join(p.dir, id+".json"))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.ID != id || rec.PID <= 0 {
		return rec, false
	}
	return rec, true
}

// alive reports whether rec's process still runs (the same process: its start time
// matches, so a reused pid is not mistaken for it; a zombie, ended but not yet reaped by
// its parent, has ended).
func (p *Provider) alive(rec record) bool {
	p.mu.Lock()
	done, ours := p.exited[rec.ID]
	p.mu.Unlock()
	if ours {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	if err := syscall.Kill(rec.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	state, st := procStat(rec.PID)
	if state == 'Z' || state == 'X' {
		return false
	}
	return st == 0 || rec.StartTime == 0 || st == rec.StartTime
}

// Stop implements provider.Provider: SIGTERM to the launch's process group, SIGKILL after
// grace (or when ctx ends first). A launch that already ended, or is unknown, is not an
// error.
func (p *Provider) Stop(ctx context.Context, id string, grace time.Duration) error {
	rec, ok := p.read(id)
	if !ok || !p.alive(rec) {
		return nil
	}
	_ = syscall.Kill(-rec.PID, syscall.SIGTERM)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for p.alive(rec) {
		select {
		case <-deadline.C:
			_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
			return p.waitGone(rec)
		case <-ctx.Done():
			_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
			return p.waitGone(rec)
		case <-tick.C:
		}
	}
	_ = os.Remove(filepath.Join(p.dir, id+".json"))
	return nil
}

// waitGone waits (briefly) for a killed process to go.
func (p *Provider) waitGone(rec record) error {
	for range 100 {
		if !p.alive(rec) {
			_ = os.Remove(filepath.Join(p.dir, rec.ID+".json"))
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("local provider: launch %s (pid %d) still runs after SIGKILL", rec.ID, rec.PID)
}

// startTime reads field 22 of /proc/PID/stat (clock ticks after boot); 0 when unknown
// (no /proc).
func startTime(pid int) uint64 {
	_, st := procStat(pid)
	return st
}

// procStat reads fields 3 (the state: R, S, Z…) and 22 (the start time, in clock ticks
// after boot) of /proc/PID/stat; 0 and 0 when unknown (no /proc, or no such process).
func procStat(pid int) (state byte, start uint64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64) // field 22 is the 20th after the name
	return f[0][0], v
}

func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}
