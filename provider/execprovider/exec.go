// Package execprovider is the "exec:PROGRAM" provider: an external program that launches,
// stops and lists workers wherever it likes (a cloud, Kubernetes), so Lakeshore needs no
// code for it.
//
// The protocol (docs/providers.md has an example in Python): the supervisor runs
//
//	PROGRAM launch   stdin: a launch as JSON {"id", "namespace", "queue", "command",
//	                 "env", "resources": {"cpus", "gpus", "memory_mb", "time_limit"
//	                 (seconds), "partition"}, "shape", "requirement": {"cpus_milli",
//	                 "memory_bytes", "gpus", "gpu_type", "labels"}} (resources not asked,
//	                 and shape and requirement for the default shape, are absent);
//	                 stdout: anything (ignored)
//	PROGRAM stop     stdin: {"id": "...", "grace_seconds": 30}; stdout: anything
//	PROGRAM list     stdin: {}; stdout: {"launches": [{"id", "namespace", "queue",
//	                 "state": "pending"|"running"|"exited", "detail", "shape"}]}
//
// A launch for a shape also has the shape in PROGRAM's environment (EnvShape… below), and in
// the worker's env (LAKESHORE_SHAPE, LAKESHORE_OFFERS): the program starts a host, VM or
// Pod that offers it. A launch's "shape" given back by list lets a restarted supervisor
// count the launch under its shape.
//
// Exit status 0 means success; any other status is a failure whose stderr (its last
// 2 KiB) is reported. Every call is bounded by a timeout; a program that hangs is killed.
package execprovider

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// Environment variables of PROGRAM launch for a shape (absent for the default shape).
const (
	// EnvShape is the shape key (provider.EnvShape).
	EnvShape = provider.EnvShape
	// EnvOffers is the requirement in --offers form (provider.EnvOffers).
	EnvOffers = provider.EnvOffers
	// EnvShapeCPUsMilli, EnvShapeMemoryBytes, EnvShapeGPUs and EnvShapeGPUType are the
	// requirement's fields (absent when zero); labels are in EnvOffers and the JSON.
	EnvShapeCPUsMilli   = "LAKESHORE_SHAPE_CPUS_MILLI"
	EnvShapeMemoryBytes = "LAKESHORE_SHAPE_MEMORY_BYTES"
	EnvShapeGPUs        = "LAKESHORE_SHAPE_GPUS"
	EnvShapeGPUType     = "LAKESHORE_SHAPE_GPU_TYPE"
)

// TimeoutDefault bounds one call of the program when Config.Timeout is 0.
const TimeoutDefault = 30 * time.Second

// stderrTail is how much of a failed call's stderr an error keeps.
const stderrTail = 2048

// Provider runs an external program for every launch, stop and list. Create it with New.
type Provider struct {
	name    string
	program string
	timeout time.Duration
}

// New returns the provider for name "exec:PROGRAM"; each call is cut off after timeout
// (0: TimeoutDefault). Errors: *plane.InvalidError for a name without a program.
func New(name string, timeout time.Duration) (*Provider, error) {
	program := strings.TrimSpace(strings.TrimPrefix(name, plane.ProviderExecPrefix))
	if !strings.HasPrefix(name, plane.ProviderExecPrefix) || program == "" {
		return nil, plane.Invalid("provider", name, "use exec:PROGRAM, e.g. exec:/usr/local/bin/my-provider")
	}
	return &Provider{name: name, program: program, timeout: cmp.Or(timeout, TimeoutDefault)}, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return p.name }

var _ provider.Checker = (*Provider)(nil)

// Check implements provider.Checker: the program exists and is executable on this machine
// (a supervisor checks at start-up). It does not run the program.
func (p *Provider) Check(context.Context) error {
	if _, err := exec.LookPath(p.program); err != nil {
		return fmt.Errorf("provider %s: program %q is not found or not executable on this machine; install it or fix the queue's provider name", p.name, p.program)
	}
	return nil
}

// Launch implements provider.Provider: PROGRAM launch.
func (p *Provider) Launch(ctx context.Context, l *provider.Launch) error {
	r, env := l.Resources, l.Env
	if env == nil {
		env = map[string]string{} // {} rather than null: programs merge it into theirs
	}
	req := launchRequest{ID: l.ID, Namespace: l.Namespace, Queue: l.Queue,
		Command: l.Command, Env: env, Resources: resourcesRequest{CPUs: r.CPUs, GPUs: r.GPUs, MemoryMB: r.MemoryMB,
			TimeLimit: r.TimeLimit.Seconds(), Partition: r.Partition}}
	var extra []string
	if q := l.Requirement; l.Shape != "" && !q.IsZero() {
		req.Shape, req.Requirement = l.Shape, q
		offers, _ := plane.FormatOffers((*plane.Offers)(q))
		extra = append(extra, EnvShape+"="+l.Shape, EnvOffers+"="+offers)
		for _, f := range []struct {
			name string
			v    int64
		}{{EnvShapeCPUsMilli, q.MilliCPUs}, {EnvShapeMemoryBytes, q.MemoryBytes}, {EnvShapeGPUs, q.GPUs}} {
			if f.v > 0 {
				extra = append(extra, f.name+"="+strconv.FormatInt(f.v, 10))
			}
		}
		if q.GPUType != "" {
			extra = append(extra, EnvShapeGPUType+"="+q.GPUType)
		}
	}
	_, err := p.callEnv(ctx, extra, "launch", req)
	return err
}

// launchRequest is a launch as the program reads it on stdin (durations in seconds, as on
// the HTTP API).
type launchRequest struct {
	ID        string            `json:"id"`
	Namespace string            `json:"namespace"`
	Queue     string            `json:"queue"`
	Command   []string          `json:"command"`
	Env       map[string]string `json:"env"`
	Resources resourcesRequest  `json:"resources"`
	// Shape and Requirement are the launch's shape; absent for the default shape.
	Shape       string             `json:"shape,omitempty"`
	Requirement *plane.Requirement `json:"requirement,omitempty"`
}

// resourcesRequest is plane.Resources on the wire; zero values (not asked) are absent.
type resourcesRequest struct {
	CPUs      int     `json:"cpus,omitempty"`
	GPUs      int     `json:"gpus,omitempty"`
	MemoryMB  int64   `json:"memory_mb,omitempty"`
	TimeLimit float64 `json:"time_limit,omitempty"` // seconds
	Partition string  `json:"partition,omitempty"`
}

// Stop implements provider.Provider: PROGRAM stop.
func (p *Provider) Stop(ctx context.Context, id string, grace time.Duration) error {
	_, err := p.call(ctx, "stop", map[string]any{"id": id, "grace_seconds": grace.Seconds()})
	return err
}

// List implements provider.Provider: PROGRAM list. Errors: the answer is not the JSON
// the protocol describes.
func (p *Provider) List(ctx context.Context) ([]provider.LaunchStatus, error) {
	out, err := p.call(ctx, "list", struct{}{})
	if err != nil {
		return nil, err
	}
	var answer struct {
		Launches []provider.LaunchStatus `json:"launches"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	if err := dec.Decode(&answer); err != nil {
		return nil, fmt.Errorf("provider %s list: the answer is not {\"launches\": [...]} JSON (%s); it began %q", p.name, jsonProblem(err), head(out))
	}
	for i, l := range answer.Launches {
		switch l.State {
		case provider.LaunchPending, provider.LaunchRunning, provider.LaunchExited:
		default:
			return nil, fmt.Errorf("provider %s list: launch %d has state %q; use pending, running or exited", p.name, i, l.State)
		}
		if l.ID == "" {
			return nil, fmt.Errorf("provider %s list: launch %d has no id", p.name, i)
		}
	}
	return answer.Launches, nil
}

// call runs PROGRAM op with in as JSON on stdin and returns its stdout.
func (p *Provider) call(ctx context.Context, op string, in any) ([]byte, error) {
	return p.callEnv(ctx, nil, op, in)
}

// callEnv is call with env added to PROGRAM's environment.
func (p *Provider) callEnv(ctx context.Context, env []string, op string, in any) ([]byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("provider %s %s: %w", p.name, op, err)
	}
	// The bound the message names is the one that cuts the call: the caller's deadline when
	// it comes first (a supervisor's CallTimeout below the program's own), else p.timeout.
	bound := p.timeout
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < bound {
		bound = max(time.Until(deadline), 0).Round(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.program, op)
	cmd.Stdin = bytes.NewReader(body)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // its children too
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return nil, fmt.Errorf("provider %s %s: no answer within %s; the program was killed", p.name, op, bound)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("provider %s %s: %w", p.name, op, ctx.Err())
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("provider %s %s: program %q not found on this machine", p.name, op, p.program)
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("provider %s %s: program %q is not executable (chmod +x it)", p.name, op, p.program)
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, fmt.Errorf("provider %s %s: exited with status %d: %s", p.name, op, exit.ExitCode(), tail(stderr.Bytes()))
		}
		return nil, fmt.Errorf("provider %s %s: %w", p.name, op, err)
	}
	return stdout.Bytes(), nil
}

func tail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > stderrTail {
		b = b[len(b)-stderrTail:]
	}
	if len(b) == 0 {
		return "(no stderr)"
	}
	return strings.ToValidUTF8(string(b), "?")
}

func head(b []byte) string {
	if len(b) > 80 {
		b = b[:80]
	}
	return strings.ToValidUTF8(string(b), "?")
}

// jsonProblem describes a decode error without naming Go types.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q has a JSON %s where the protocol wants another kind", typ.Field, typ.Value)
	case errors.Is(err, io.EOF):
		return "empty answer"
	}
	return "unreadable answer"
}
