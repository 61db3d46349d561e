package execprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/execprovider"
)

// program writes an exec provider program (a shell script) and returns the provider for
// it; body runs after the request is saved: "$1" is the operation, "$D/stdin" its request.
func program(t *testing.T, timeout time.Duration, body string) (*execprovider.Provider, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "provider.sh")
	script := "#!/bin/sh\nD=" + strconv.Quote(dir) + "\ncat > \"$D/stdin\"\necho \"$1\" > \"$D/op\"\n" + body + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := execprovider.New("exec:"+path, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// checkNoTypeName fails t when err's message names a Go type (json.SyntaxError, *exec.ExitError…).
func checkNoTypeName(t *testing.T, err error) {
	t.Helper()
	if err != nil && regexp.MustCompile(`\*?\b[a-z]+\.[A-Z][A-Za-z]+\b`).MatchString(err.Error()) {
		t.Errorf("the error %q names a Go type", err)
	}
}

func TestNew(t *testing.T) {
	for _, name := range []string{"exec:", "exec:  ", "local", "/bin/provider"} {
		if _, err := execprovider.New(name, 0); !errors.Is(err, plane.ErrInvalid) || !strings.Contains(err.Error(), "exec:PROGRAM") {
			t.Errorf("New(%q) = %v; want ErrInvalid saying exec:PROGRAM", name, err)
		}
	}
	p, err := execprovider.New("exec:/opt/bin/k8s", 0)
	if err != nil || p.Name() != "exec:/opt/bin/k8s" {
		t.Fatalf("New = %v, %v", p, err)
	}
}

// TestLaunchRequest: launch gets the launch as JSON on stdin, durations in seconds and
// resources not asked absent; its stdout is ignored.
func TestLaunchRequest(t *testing.T) {
	p, dir := program(t, 0, `echo 'whatever the program prints'`)
	l := &provider.Launch{ID: "L1", Namespace: "team", Queue: "q", Command: []string{"lakeshore", "worker", "q", "--", "true"},
		Env: map[string]string{"A": "1"}, Resources: plane.Resources{CPUs: 2, TimeLimit: 90 * time.Second, Partition: "gpu"}}
	if err := p.Launch(t.Context(), l); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if op := read(t, filepath.Join(dir, "op")); op != "launch" {
		t.Errorf("operation %q; want launch", op)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, "stdin"))), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "L1", "namespace": "team", "queue": "q", "command": []any{"lakeshore", "worker", "q", "--", "true"},
		"env": map[string]any{"A": "1"}, "resources": map[string]any{"cpus": 2.0, "time_limit": 90.0, "partition": "gpu"}}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("launch request\n got %s\nwant %s", g, w)
	}
	// No environment: {} rather than null (a program merges it into its own).
	if err := p.Launch(t.Context(), &provider.Launch{ID: "L2", Command: []string{"w"}}); err != nil {
		t.Fatal(err)
	}
	if s := read(t, filepath.Join(dir, "stdin")); !strings.Contains(s, `"env":{}`) || !strings.Contains(s, `"resources":{}`) {
		t.Errorf("launch request without env or resources: %s; want \"env\":{} and \"resources\":{}", s)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStopRequest: stop gets the id and the grace in seconds.
func TestStopRequest(t *testing.T) {
	p, dir := program(t, 0, "")
	if err := p.Stop(t.Context(), "L1", 1500*time.Millisecond); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if op, in := read(t, filepath.Join(dir, "op")), read(t, filepath.Join(dir, "stdin")); op != "stop" || in != `{"grace_seconds":1.5,"id":"L1"}` {
		t.Errorf("stop ran with %q and %s", op, in)
	}
}

// TestList: list's answer is parsed; a bad answer is an error saying what is wrong with
// it, never a Go type name.
func TestList(t *testing.T) {
	p, dir := program(t, 0, `echo '{"launches": [{"id": "a", "namespace": "n", "queue": "q", "state": "running", "detail": "vm-1"},
	  {"id": "b", "queue": "q", "state": "pending"}, {"id": "c", "state": "exited"}]}'`)
	list, err := p.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := []provider.LaunchStatus{{ID: "a", Namespace: "n", Queue: "q", State: provider.LaunchRunning, Detail: "vm-1"},
		{ID: "b", Queue: "q", State: provider.LaunchPending}, {ID: "c", State: provider.LaunchExited}}
	if mustJSON(t, list) != mustJSON(t, want) {
		t.Errorf("List = %+v; want %+v", list, want)
	}
	if in := read(t, filepath.Join(dir, "stdin")); in != "{}" {
		t.Errorf("list's request %q; want {}", in)
	}

	for _, c := range []struct{ name, answer, want string }{
		{"garbage", `echo 'this is not JSON'`, `is not {"launches": [...]} JSON (invalid JSON at byte 2); it began "this is not JSON`},
		{"empty", `true`, "(empty answer)"},
		{"wrong kind", `echo '{"launches": 3}'`, `field "launches" has a JSON number where the protocol wants another kind`},
		{"unknown state", `echo '{"launches": [{"id": "x", "state": "sideways"}]}'`, `launch 0 has state "sideways"; use pending, running or exited`},
		{"no id", `echo '{"launches": [{"state": "running"}]}'`, "launch 0 has no id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, _ := program(t, 0, c.answer)
			_, err := p.List(t.Context())
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p.Name()+" list") {
				t.Fatalf("List = %v; want an error naming the provider and saying %q", err, c.want)
			}
			checkNoTypeName(t, err)
		})
	}
}

// TestExitStatus: a non-zero exit is a failure carrying the status and the tail of stderr.
func TestExitStatus(t *testing.T) {
	p, _ := program(t, 0, `echo 'cloud quota exceeded' >&2; exit 3`)
	for op, call := range map[string]func() error{
		"launch": func() error { return p.Launch(t.Context(), &provider.Launch{ID: "x", Command: []string{"w"}}) },
		"stop":   func() error { return p.Stop(t.Context(), "x", time.Second) },
		"list":   func() error { _, err := p.List(t.Context()); return err },
	} {
		err := call()
		if want := p.Name() + " " + op + ": exited with status 3: cloud quota exceeded"; err == nil || err.Error() != "provider "+want {
			t.Errorf("%s = %v; want %q", op, err, want)
		}
		checkNoTypeName(t, err)
	}
	// A long stderr is cut to its last 2 KiB; no stderr says so.
	long, _ := program(t, 0, `head -c 10000 /dev/zero | tr '\0' 'x' >&2; echo END >&2; exit 1`)
	err := long.Stop(t.Context(), "x", 0)
	if err == nil || !strings.HasSuffix(err.Error(), "xxxEND") || len(err.Error()) > 2048+200 {
		t.Errorf("a long stderr: %d bytes of error, ending %q; want its last 2 KiB", len(err.Error()), err.Error()[max(0, len(err.Error())-20):])
	}
	silent, _ := program(t, 0, `exit 7`)
	if err := silent.Stop(t.Context(), "x", 0); err == nil || !strings.Contains(err.Error(), "exited with status 7: (no stderr)") {
		t.Errorf("a silent failure: %v", err)
	}
}

// TestHangCutOffByCallerNamesCallersBound: a call cut off by its caller's deadline, shorter
// than the program's own bound, says the bound that cut it (the caller's), not the program's.
// Before, it named the program's 30 s while the call had waited 1 s.
func TestHangCutOffByCallerNamesCallersBound(t *testing.T) {
	p, _ := program(t, 30*time.Second, `sleep 30`)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err := p.Launch(ctx, &provider.Launch{ID: "x", Command: []string{"w"}})
	// The bound left when the call began: 1 s less the time to get there.
	m := regexp.MustCompile(`launch: no answer within ([0-9.]+m?s); the program was killed`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("Launch of a hanging program under a 1 s deadline = %v", err)
	}
	if d, perr := time.ParseDuration(m[1]); perr != nil || d <= 0 || d > time.Second {
		t.Errorf("Launch of a hanging program under a 1 s deadline names %s; want the caller's bound (at most 1s), not the program's 30s", m[1])
	}
}

// TestHangIsCutOff: a program that does not answer is killed with its children after the
// timeout, and the call returns an error saying so.
func TestHangIsCutOff(t *testing.T) {
	// 3 s: the program must have started its child and written its pid before the cut-off
	// for the child's end to be checked. A machine so loaded that it did not (no pid file,
	// or an empty one: the group was killed first) leaves nothing to check in that run,
	// which is tried again with a new program, not passed.
	const timeout = 3 * time.Second
	for attempt := 1; ; attempt++ {
		p, dir := program(t, timeout, `sleep 30 & echo $! > "$D/child"; wait`)
		start := time.Now()
		err := p.Launch(t.Context(), &provider.Launch{ID: "x", Command: []string{"w"}})
		if err == nil || !strings.Contains(err.Error(), "launch: no answer within 3s; the program was killed") {
			t.Fatalf("Launch of a hanging program = %v", err)
		}
		// Cut off at the timeout, not when the program ended by itself (its child sleeps 30 s):
		// the upper bound is halfway to that end, not a verdict on how fast the kill lands.
		if d := time.Since(start); d < timeout || d > 15*time.Second {
			t.Errorf("the call returned after %s; want about the %s timeout, well before the program's own end at 30 s", d, timeout)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "child"))
		child, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			if attempt == 5 {
				t.Fatalf("in 5 runs the program never wrote its child's pid before the %s cut-off", timeout)
			}
			t.Logf("run %d: the program was cut off before it wrote its child's pid; again", attempt)
			continue
		}
		deadline := time.Now().Add(5 * time.Second)
		for processRuns(child) {
			if time.Now().After(deadline) {
				t.Fatalf("the program's child %d still runs: the process group was not killed", child)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return
	}
}

// processRuns reports whether pid runs (a zombie does not).
func processRuns(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// TestCallerCancels: a caller that gives up ends the call at once with its context's error.
func TestCallerCancels(t *testing.T) {
	p, _ := program(t, time.Minute, `sleep 30`)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.List(ctx)
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "no answer") {
		t.Errorf("List with a cancelled context = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("List returned after %s", d)
	}
}

// TestProgramMissing: a program that does not exist is a clear error, from Check (before
// any call) and from every call.
func TestProgramMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-provider")
	p, err := execprovider.New("exec:"+missing, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "is not found or not executable on this machine") {
		t.Errorf("Check = %v", err)
	}
	if _, err := p.List(t.Context()); err == nil || !strings.Contains(err.Error(), "not found on this machine") {
		t.Errorf("List = %v", err)
	}
	notExecutable := filepath.Join(t.TempDir(), "provider.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ne, _ := execprovider.New("exec:"+notExecutable, 0)
	if ne.Check(t.Context()) == nil {
		t.Error("Check of a file that is not executable passed")
	}
	_, err = ne.List(t.Context())
	if err == nil || !strings.Contains(err.Error(), "is not executable (chmod +x it)") {
		t.Errorf("List of a program that is not executable = %v", err)
	}
	checkNoTypeName(t, err)
	ok, _ := program(t, 0, "")
	if err := ok.Check(t.Context()); err != nil {
		t.Errorf("Check of an executable program: %v", err)
	}
	checkNoTypeName(t, p.Check(t.Context()))
}

// TestLaunchShape: a launch for a shape has "shape" and "requirement" in its JSON and the
// shape in PROGRAM's environment; list gives each launch's shape back.
func TestLaunchShape(t *testing.T) {
	p, dir := program(t, 0, `env | grep '^LAKESHORE_' | sort > "$D/env"
[ "$1" = list ] && echo '{"launches": [{"id": "L1", "namespace": "team", "queue": "q", "state": "running", "shape": "sh1_x"}]}'
exit 0`)
	req := &plane.Requirement{MilliCPUs: 4000, GPUs: 1, GPUType: "a100", Labels: map[string]string{"zone": "east"}}
	l := &provider.Launch{ID: "L1", Namespace: "team", Queue: "q", Command: []string{"w"}, Shape: req.Shape(), Requirement: req}
	if err := p.Launch(t.Context(), l); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, "stdin"))), &got); err != nil {
		t.Fatal(err)
	}
	wantReq := map[string]any{"cpus_milli": 4000.0, "gpus": 1.0, "gpu_type": "a100", "labels": map[string]any{"zone": "east"}}
	if got["shape"] != req.Shape() || mustJSON(t, got["requirement"]) != mustJSON(t, wantReq) {
		t.Errorf("launch request shape %v requirement %v; want %s and %v", got["shape"], got["requirement"], req.Shape(), wantReq)
	}
	env := read(t, filepath.Join(dir, "env"))
	for _, want := range []string{
		execprovider.EnvShape + "=" + req.Shape(),
		execprovider.EnvOffers + "=cpus=4000m,gpus=1,gpu_type=a100,label.zone=east",
		execprovider.EnvShapeCPUsMilli + "=4000",
		execprovider.EnvShapeGPUs + "=1",
		execprovider.EnvShapeGPUType + "=a100",
	} {
		if !strings.Contains(env, want+"\n") && !strings.HasSuffix(env, want) {
			t.Errorf("the program's environment misses %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, execprovider.EnvShapeMemoryBytes) {
		t.Errorf("the program's environment has %s for a requirement without memory:\n%s", execprovider.EnvShapeMemoryBytes, env)
	}
	ls, err := p.List(t.Context())
	if err != nil || len(ls) != 1 || ls[0].Shape != "sh1_x" {
		t.Errorf("List = %+v, %v; want one launch of shape sh1_x", ls, err)
	}
}
