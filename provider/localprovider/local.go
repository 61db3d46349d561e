// Package localprovider is the "local" provider: it runs workers as processes on the
// supervisor's machine.
//
// Each launch is a process in its own process group, with its output appended to
// DIR/LAUNCH.log and a record DIR/LAUNCH.json (pid, process start time, queue), so a
// supervisor started later adopts the launches of one that died (List) instead of launching
// twice, and can stop them. Stop sends SIGTERM to the group (a Lakeshore worker drains: it
// finishes its running jobs and claims nothing new), then SIGKILL after the grace period.
//
// GPUs: a launch for a shape that asks for GPUs gets CUDA_VISIBLE_DEVICES set to as many of
// the machine's GPUs as it asks, none held by another live launch (the records keep which
// each holds, so a restarted supervisor never hands one out twice). The GPUs are
// $LAKESHORE_LOCAL_GPUS (a count, or a comma-separated device list), else the supervisor's
// own CUDA_VISIBLE_DEVICES, else one per /proc/driver/nvidia/gpus entry; their type is
// $LAKESHORE_LOCAL_GPU_TYPE ("" for none named).
package localprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"golang.org/x/sys/unix"
)

// Provider runs workers as local processes. Create it with New.
type Provider struct {
	dir     string
	gpus    []string // device ids CUDA_VISIBLE_DEVICES may name
	gpuType string

	lakeshore string // the program a worker command "lakeshore" runs ("": looked up on PATH)

	mu      sync.Mutex
	exited  map[string]chan struct{} // launches this process started: closed when reaped
	started map[string]*os.Process
	// ends are how the reaped launches of exited ended, until ExitStatus reports them or
	// endsKept later ones have ended (a launch stopped, or ended while nobody asks);
	// endOrder their ids, oldest first.
	ends     map[string]launchEnd
	endOrder []string
}

// endsKept is how many reaped launches' ends a Provider keeps for ExitStatus: far more
// than end between two ticks of a supervisor.
const endsKept = 1024

// launchEnd is how a launch's process ended: its exit code, or -1 and the signal's name.
type launchEnd struct {
	code   int
	signal string
}

// New returns a local provider that keeps its launch records in dir (created if absent;
// conventionally $LAKESHORE_HOME/run/providers/local). Errors: dir cannot be created; a
// bad EnvGPUs (*plane.InvalidError, ParseGPUs).
func New(dir string) (*Provider, error) {
	if dir == "" {
		return nil, plane.Invalid("local provider directory", dir, "give a directory for launch records, e.g. $LAKESHORE_HOME/run/providers/local")
	}
	gpus, err := gpusFromEnv() // first: a refused start creates nothing
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	return &Provider{dir: dir, gpus: gpus, gpuType: os.Getenv(EnvGPUType), exited: map[string]chan struct{}{}, started: map[string]*os.Process{},
		ends: map[string]launchEnd{}}, nil
}

// Environment variables the local provider reads at New.
const (
	// EnvGPUs says which GPUs the machine has: a count ("4": devices 0–3) or a list of
	// distinct device ids ("0,2,3"; GPUsRule, read by ParseGPUs: a duplicate, an empty or a
	// malformed entry makes New fail). Unset: the supervisor's CUDA_VISIBLE_DEVICES (a
	// device named twice counted once), else one per /proc/driver/nvidia/gpus entry (none
	// without the NVIDIA driver).
	EnvGPUs = "LAKESHORE_LOCAL_GPUS"
	// EnvGPUType is the model of those GPUs ("a100"), matched against a shape's gpu_type.
	EnvGPUType = "LAKESHORE_LOCAL_GPU_TYPE"
)

// SetLakeshore makes a worker command whose program is "lakeshore" run path instead of
// the "lakeshore" found on PATH: `lakeshore provider run` sets its own executable, so the
// documented worker commands (`lakeshore worker QUEUE -- …`) run the supervisor's own
// version, and work when the binary was built in place (`./lakeshore`) and is not on PATH.
func (p *Provider) SetLakeshore(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lakeshore = path
}

// SetGPUs replaces the GPUs the provider hands out (device ids; one named twice is one
// device) and their type; for tests and embedders that know better than the environment.
func (p *Provider) SetGPUs(devices []string, gpuType string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gpus, p.gpuType = distinct(slices.Clone(devices)), gpuType
}

// GPUsRule says what EnvGPUs takes (1024 is plane.RequirementGPUsMax).
const GPUsRule = "use a GPU count 0–1024, or a comma-separated list of at most 1024 distinct device ids (indices, or GPU-/MIG- UUIDs of [A-Za-z0-9_.:/-] not starting with '-'), such as 0,1,3"

// gpusFromEnv reads the machine's GPUs (EnvGPUs' rule). Errors: a bad EnvGPUs
// (*plane.InvalidError, see ParseGPUs).
func gpusFromEnv() ([]string, error) {
	if v := strings.TrimSpace(os.Getenv(EnvGPUs)); v != "" {
		return ParseGPUs(v)
	}
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		// The supervisor's own list is taken as CUDA reads it, leniently (a "-1" that hides
		// every GPU must not stop a supervisor of CPU work), but a device named twice is
		// one device: it is handed out once.
		return distinct(splitDevices(v)), nil
	}
	entries, _ := os.ReadDir("/proc/driver/nvidia/gpus")
	out := make([]string, len(entries))
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out, nil
}

// ParseGPUs reads EnvGPUs' value v: a count n (devices 0 to n-1) or a device list. A list
// with an empty entry ("0,,1", "0,"), an entry CUDA_VISIBLE_DEVICES cannot name, a device
// named twice ("0,0": one GPU would be handed to two workers at once) or more than
// plane.RequirementGPUsMax devices is refused, so a provider never starts on a list it
// would misread. Errors: *plane.InvalidError naming EnvGPUs, the entry and GPUsRule.
func ParseGPUs(v string) ([]string, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 || n > plane.RequirementGPUsMax {
			return nil, plane.Invalid(EnvGPUs, v, "the count is out of range: "+GPUsRule)
		}
		out := make([]string, n)
		for i := range out {
			out[i] = strconv.Itoa(i)
		}
		return out, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > plane.RequirementGPUsMax {
		return nil, plane.Invalid(EnvGPUs, v, fmt.Sprintf("%d devices is too many: %s", len(parts), GPUsRule))
	}
	seen := make(map[string]bool, len(parts))
	out := make([]string, 0, len(parts))
	for i, d := range parts {
		d = strings.TrimSpace(d)
		switch {
		case d == "":
			return nil, plane.Invalid(EnvGPUs, v, fmt.Sprintf("entry %d is empty: %s", i+1, GPUsRule))
		case !validDevice(d):
			return nil, plane.Invalid(EnvGPUs, v, fmt.Sprintf("entry %d (%q) is not a device id: %s", i+1, plane.Truncate(d), GPUsRule))
		case seen[d]:
			return nil, plane.Invalid(EnvGPUs, v, fmt.Sprintf("device %q is named twice (it would be handed to two workers at once): %s", plane.Truncate(d), GPUsRule))
		}
		seen[d] = true
		out = append(out, d)
	}
	return out, nil
}

// validDevice reports whether d is a device id CUDA_VISIBLE_DEVICES can name: 1–128 bytes
// of [A-Za-z0-9_.:/-], not starting with '-'.
func validDevice(d string) bool {
	if d == "" || len(d) > 128 || d[0] == '-' {
		return false
	}
	for _, c := range []byte(d) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == ':', c == '/', c == '-':
		default:
			return false
		}
	}
	return true
}

// distinct returns devices without repeats, in first-seen order.
func distinct(devices []string) []string {
	seen := make(map[string]bool, len(devices))
	out := devices[:0]
	for _, d := range devices {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

func splitDevices(v string) []string {
	var out []string
	for _, d := range strings.Split(v, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// CanOffer implements provider.ShapeChecker: the machine's GPUs (count and type) and CPUs
// must cover r; the local provider offers no labels. Memory is not checked (the machine's
// is what it is).
func (p *Provider) CanOffer(r *plane.Requirement) error {
	p.mu.Lock()
	gpus, gpuType := len(p.gpus), p.gpuType
	p.mu.Unlock()
	switch {
	case r.GPUs > int64(gpus):
		return fmt.Errorf("local provider: the shape asks for %d GPUs and this machine has %d (set %s)", r.GPUs, gpus, EnvGPUs)
	case r.GPUType != "" && r.GPUType != gpuType:
		return fmt.Errorf("local provider: the shape asks for GPU type %q and this machine's are %q (set %s)", r.GPUType, gpuType, EnvGPUType)
	case len(r.Labels) > 0:
		return fmt.Errorf("local provider: the shape asks for labels, which the local provider does not offer")
	case r.MilliCPUs > int64(runtime.NumCPU())*1000:
		return fmt.Errorf("local provider: the shape asks for %d millicpus and this machine has %d CPUs", r.MilliCPUs, runtime.NumCPU())
	}
	return nil
}

// takeGPUs picks n GPUs no live launch holds. Called with p.mu held. Errors: too few free.
func (p *Provider) takeGPUs(n int64) ([]string, error) {
	held := map[string]bool{}
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if rec, ok := p.read(id); ok && p.aliveLocked(rec) {
			for _, g := range rec.GPUs {
				held[g] = true
			}
		}
	}
	var out []string
	for _, g := range p.gpus {
		if int64(len(out)) == n {
			break
		}
		if !held[g] {
			out = append(out, g)
		}
	}
	if int64(len(out)) < n {
		return nil, fmt.Errorf("local provider: the shape asks for %d GPUs and %d of this machine's %d are free (the others are held by live workers)",
			n, len(out), len(p.gpus))
	}
	return out, nil
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
	Shape     string   `json:"shape,omitempty"` // the launch's shape ("" default)
	GPUs      []string `json:"gpus,omitempty"`  // the devices in its CUDA_VISIBLE_DEVICES
}

var _ provider.LogLocator = (*Provider)(nil)

// LogPath implements provider.LogLocator: DIR/ID.log, which receives launch id's standard
// output and error.
func (p *Provider) LogPath(id string) string { return filepath.Join(p.dir, id+".log") }

// Launch implements provider.Provider: it starts l.Command with l.Env added to this
// process's environment. Errors: the program is not found or cannot start.
func (p *Provider) Launch(ctx context.Context, l *provider.Launch) error {
	if len(l.Command) == 0 {
		return plane.Invalid("worker command", l.Command, "give the worker's command")
	}
	if !validID(l.ID) {
		return plane.Invalid("launch id", l.ID, "use letters and digits only")
	}
	p.mu.Lock()
	path := p.lakeshore
	p.mu.Unlock()
	if l.Command[0] != "lakeshore" || path == "" {
		var err error
		if path, err = exec.LookPath(l.Command[0]); err != nil {
			return fmt.Errorf("local provider: worker command %q not found on this machine (PATH=%s): %w", l.Command[0], os.Getenv("PATH"), errors.Unwrap(err))
		}
	}
	logf, err := os.OpenFile(p.LogPath(l.ID), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	defer logf.Close()
	// GPUs are picked and the record written under p.mu, so two launches never take one.
	p.mu.Lock()
	locked := true
	defer func() {
		if locked {
			p.mu.Unlock()
		}
	}()
	var gpus []string
	if r := l.Requirement; r != nil && r.GPUs > 0 {
		if gpus, err = p.takeGPUs(r.GPUs); err != nil {
			return err
		}
	}
	cmd := exec.Command(path, l.Command[1:]...)
	cmd.Env = os.Environ()
	if l.Requirement != nil && !l.Requirement.IsZero() {
		cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+strings.Join(gpus, ","))
	}
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
	rec := record{ID: l.ID, Namespace: l.Namespace, Queue: l.Queue, PID: cmd.Process.Pid, StartTime: startTime(cmd.Process.Pid), Command: l.Command,
		Shape: l.Shape, GPUs: gpus}
	done := make(chan struct{})
	p.exited[l.ID], p.started[l.ID] = done, cmd.Process
	err = p.write(rec)
	p.mu.Unlock()
	locked = false
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return err
	}
	go func() {
		_ = cmd.Wait() // reap
		end := launchEnd{code: cmd.ProcessState.ExitCode()}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			end.signal = unix.SignalName(ws.Signal())
			if end.signal == "" {
				end.signal = ws.Signal().String()
			}
		}
		p.mu.Lock()
		delete(p.started, l.ID)
		p.ends[l.ID] = end
		if p.endOrder = append(p.endOrder, l.ID); len(p.endOrder) > endsKept {
			delete(p.ends, p.endOrder[0])
			p.endOrder = p.endOrder[1:]
		}
		p.mu.Unlock()
		close(done)
		// The record goes last: a List that no longer shows the launch finds its end in
		// ExitStatus, never a window where the launch is neither listed nor reported.
		_ = os.Remove(filepath.Join(p.dir, l.ID+".json"))
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
			State: provider.LaunchRunning, Detail: "pid " + strconv.Itoa(rec.PID), Shape: rec.Shape})
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
	defer p.mu.Unlock()
	return p.aliveLocked(rec)
}

// aliveLocked is alive with p.mu held.
func (p *Provider) aliveLocked(rec record) bool {
	done, ours := p.exited[rec.ID]
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

var _ provider.ExitReporter = (*Provider)(nil)

// ExitStatus implements provider.ExitReporter: the exit code of launch id, or -1 and the
// name of the signal that ended it, when this process started it and reaped it (among the
// last endsKept reaped); each is reported once.
func (p *Provider) ExitStatus(id string) (code int, signal string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.ends[id]
	delete(p.ends, id)
	return e.code, e.signal, ok
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

// validID reports whether id is a launch id this provider takes: provider.LaunchIDValid, at
// most 64.
func validID(id string) bool { return provider.LaunchIDValid(id, 64) }
