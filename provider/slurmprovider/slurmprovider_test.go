package slurmprovider_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lakeshore-dev/lakeshore/internal/slurmtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/slurmprovider"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if wantsBinary() {
		// Build cmd/lakeshore while the other tests run: TestLakeshoreWorker, last, needs it.
		go buildOnce.Do(build)
	}
	code := slurmtest.Main(m)
	buildOnce.Do(func() {}) // wait for a build under way
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// wait is generous: the machine may be loaded (load 10–30).
const wait = 90 * time.Second

var launches atomic.Int64

func newLaunchID() string {
	return fmt.Sprintf("T%d-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9, launches.Add(1))
}

// newProvider returns a provider on the shared test cluster, whose launches are cancelled
// when t ends.
func newProvider(t testing.TB) (*slurmprovider.Provider, *slurmtest.Cluster) {
	t.Helper()
	c := slurmtest.Shared(t)
	p, err := slurmprovider.New(slurmprovider.Config{SlurmConf: c.Conf, LogDir: t.TempDir(), PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, _ := p.List(ctx)
		for _, s := range list {
			_ = p.Stop(ctx, s.ID, 0)
		}
	})
	return p, c
}

func waitUntil(t testing.TB, what string, c *slurmtest.Cluster, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s\n%s", what, wait, c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func find(t testing.TB, p *slurmprovider.Provider, id string) (provider.LaunchStatus, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := p.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, s := range list {
		if s.ID == id {
			return s, true
		}
	}
	return provider.LaunchStatus{}, false
}

func fileHas(path, want string) bool {
	data, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(data), want)
}

// worker is a real worker stand-in: it writes "started" and its environment's X and
// LAKESHORE_LAUNCH_ID, records every SIGTERM, and sleeps; with drain it exits on SIGTERM,
// otherwise it keeps running until killed.
func worker(dir string, drain bool) []string {
	onTerm := `echo TERM >> "$D/term"`
	if drain {
		onTerm += "; exit 0"
	}
	script := `D="$1"; trap '` + onTerm + `' TERM; printf '%s\n' "$LAKESHORE_LAUNCH_ID" "$X" > "$D/env"; echo started > "$D/started"; while :; do sleep 0.2; done`
	return []string{"sh", "-c", script, "worker", dir}
}

// TestLaunchListStop launches a worker, sees it in List (pending, then running, with its
// namespace and queue), and stops it: the worker sees SIGTERM and drains, and the launch
// leaves List.
func TestLaunchListStop(t *testing.T) {
	p, c := newProvider(t)
	ctx := context.Background()
	dir := t.TempDir()
	id := newLaunchID()
	l := &provider.Launch{ID: id, Namespace: "team-a", Queue: "thumbnails", Command: worker(dir, true),
		Env: map[string]string{provider.EnvLaunchID: id, "X": `a,b "c" 'd' $e`}}
	if err := p.Launch(ctx, l); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	s, ok := find(t, p, id)
	if !ok {
		t.Fatalf("List after Launch misses %s", id)
	}
	if s.Namespace != "team-a" || s.Queue != "thumbnails" || (s.State != provider.LaunchPending && s.State != provider.LaunchRunning) {
		t.Errorf("List = %+v, want team-a/thumbnails pending or running", s)
	}
	if !strings.HasPrefix(s.Detail, "slurm job ") {
		t.Errorf("Detail = %q, want it to name the SLURM job", s.Detail)
	}
	waitUntil(t, "the worker starts", c, func() bool { return fileHas(filepath.Join(dir, "started"), "started") })
	waitUntil(t, "List shows it running", c, func() bool { s, _ := find(t, p, id); return s.State == provider.LaunchRunning })
	if data, _ := os.ReadFile(filepath.Join(dir, "env")); string(data) != id+"\n"+l.Env["X"]+"\n" {
		t.Errorf("the worker's environment: %q, want launch id %q and X %q", data, id, l.Env["X"])
	}
	if err := p.Stop(ctx, id, 60*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !fileHas(filepath.Join(dir, "term"), "TERM") {
		t.Error("the worker did not see SIGTERM")
	}
	if _, ok := find(t, p, id); ok {
		t.Error("List still shows the stopped launch")
	}
	if _, err := os.Stat(p.LogPath(id)); err != nil {
		t.Errorf("no log for the launch: %v", err)
	}
	// Stopping a launch that ended is not an error.
	if err := p.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("Stop of an ended launch: %v", err)
	}
}

// TestStopKillsAfterGrace stops a worker that ignores SIGTERM: it sees SIGTERM, keeps
// running through the grace, and is then killed.
func TestStopKillsAfterGrace(t *testing.T) {
	p, c := newProvider(t)
	ctx := context.Background()
	dir := t.TempDir()
	id := newLaunchID()
	if err := p.Launch(ctx, &provider.Launch{ID: id, Command: worker(dir, false)}); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitUntil(t, "the worker starts", c, func() bool { return fileHas(filepath.Join(dir, "started"), "started") })
	start := time.Now()
	grace := 2 * time.Second
	if err := p.Stop(ctx, id, grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if elapsed := time.Since(start); elapsed < grace {
		t.Errorf("Stop returned after %s, before the grace (%s) of a worker still running", elapsed, grace)
	}
	if !fileHas(filepath.Join(dir, "term"), "TERM") {
		t.Error("the worker did not see SIGTERM before being killed")
	}
	waitUntil(t, "the killed launch leaves List", c, func() bool { _, ok := find(t, p, id); return !ok })
}

// TestStopPending cancels a launch that cannot start yet (it asks for more CPUs than the
// free ones while another job holds the node) without waiting for the grace.
func TestStopPending(t *testing.T) {
	p, c := newProvider(t)
	ctx := context.Background()
	holder, pending := newLaunchID(), newLaunchID()
	dir := t.TempDir()
	if err := p.Launch(ctx, &provider.Launch{ID: holder, Command: worker(dir, true), Resources: plane.Resources{CPUs: 2}}); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitUntil(t, "the holder starts", c, func() bool { return fileHas(filepath.Join(dir, "started"), "started") })
	if err := p.Launch(ctx, &provider.Launch{ID: pending, Command: []string{"true"}, Resources: plane.Resources{CPUs: 2}}); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if s, ok := find(t, p, pending); !ok || s.State != provider.LaunchPending {
		t.Fatalf("List = %+v (found %v), want pending", s, ok)
	}
	start := time.Now()
	if err := p.Stop(ctx, pending, time.Minute); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Errorf("Stop of a pending launch took %s: it waited for the grace", elapsed)
	}
	waitUntil(t, "the cancelled launch leaves List", c, func() bool { _, ok := find(t, p, pending); return !ok })
	if err := p.Stop(ctx, holder, time.Minute); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestResources checks that the launch's resources reach SLURM (scontrol show job).
func TestResources(t *testing.T) {
	p, c := newProvider(t)
	ctx := context.Background()
	id := newLaunchID()
	res := plane.Resources{CPUs: 2, GPUs: 1, MemoryMB: 256, TimeLimit: 90 * time.Second, Partition: slurmtest.Partition}
	if err := p.Launch(ctx, &provider.Launch{ID: id, Command: []string{"sleep", "300"}, Resources: res}); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	out, err := c.Command(ctx, "squeue", "--noheader", "--name="+p.JobName(id), "--format=%i").Output()
	jobID := strings.TrimSpace(string(out))
	if err != nil || jobID == "" {
		t.Fatalf("squeue --name=%s: %v %q", p.JobName(id), err, out)
	}
	out, err = c.Command(ctx, "scontrol", "show", "job", "--oneliner", jobID).CombinedOutput()
	if err != nil {
		t.Fatalf("scontrol show job: %v: %s", err, out)
	}
	for _, want := range []string{
		`\bCPUs/Task=2\b`,
		`\bTresPerNode=gres:gpu:1\b`,
		`\bMinMemoryNode=256M\b`,
		`\bTimeLimit=00:02:00\b`, // 90 s rounded up to whole minutes
		`\bPartition=` + slurmtest.Partition + `\b`,
		`\bJobName=` + regexp.QuoteMeta(p.JobName(id)) + `\b`,
		`\bRequeue=0\b`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("scontrol show job misses %s:\n%s", want, out)
		}
	}
	if err := p.Stop(ctx, id, time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestCancelledOutside checks that a job cancelled behind the provider's back (scancel by
// hand, or SLURM ending it) leaves List, so the supervisor replaces it.
func TestCancelledOutside(t *testing.T) {
	p, c := newProvider(t)
	ctx := context.Background()
	dir := t.TempDir()
	id := newLaunchID()
	if err := p.Launch(ctx, &provider.Launch{ID: id, Command: worker(dir, false)}); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitUntil(t, "the worker starts", c, func() bool { return fileHas(filepath.Join(dir, "started"), "started") })
	if out, err := c.Command(ctx, "scancel", "--name="+p.JobName(id)).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v: %s", err, out)
	}
	waitUntil(t, "the cancelled launch leaves List", c, func() bool { _, ok := find(t, p, id); return !ok })
}

// TestWrapQuoting runs a command whose arguments hold quotes, spaces, $, backquotes, globs,
// semicolons and a newline, and checks the worker received each one unchanged.
func TestWrapQuoting(t *testing.T) {
	p, c := newProvider(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "args")
	args := []string{`it's a "quoted" arg`, "$HOME `id` * ?", "semi;colon && echo no | cat", "new\nline", `back\slash '' ""`}
	argv := append([]string{"sh", "-c", `out="$1"; shift; for a in "$@"; do printf '[%s]' "$a"; done > "$out.tmp"; mv "$out.tmp" "$out"`, "worker", out}, args...)
	id := newLaunchID()
	if err := p.Launch(ctx, &provider.Launch{ID: id, Command: argv}); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	var want strings.Builder
	for _, a := range args {
		want.WriteString("[" + a + "]")
	}
	waitUntil(t, "the worker writes its arguments", c, func() bool { _, err := os.Stat(out); return err == nil })
	if data, _ := os.ReadFile(out); string(data) != want.String() {
		t.Errorf("the worker got %q, want %q", data, want.String())
	}
}

// TestWrapCommandShell checks WrapCommand's quoting with this machine's sh, without SLURM.
func TestWrapCommandShell(t *testing.T) {
	args := []string{"", `'`, `''`, `it's`, "$(id)", "`id`", "*", "a b\tc\nd", `\`, `"`, "-n"}
	line := slurmprovider.WrapCommand(append([]string{"printf", "[%s]"}, args...))
	out, err := exec.Command("sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	var want strings.Builder
	for _, a := range args {
		want.WriteString("[" + a + "]")
	}
	if string(out) != want.String() {
		t.Errorf("sh -c %q printed %q, want %q", line, out, want.String())
	}
}

// TestUnknownPartition checks that SLURM's refusal is a clear error, and nothing is left.
func TestUnknownPartition(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	id := newLaunchID()
	err := p.Launch(ctx, &provider.Launch{ID: id, Command: []string{"true"}, Resources: plane.Resources{Partition: "no-such-partition"}})
	if !errors.Is(err, slurmprovider.ErrRejected) || !errors.Is(err, plane.ErrInvalid) {
		t.Fatalf("Launch with an unknown partition: %v, want ErrRejected and plane.ErrInvalid", err)
	}
	for _, want := range []string{"sbatch", "Invalid partition name", "partition", "sinfo"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not mention %q", err, want)
		}
	}
	checkNoTypeName(t, err)
	if _, ok := find(t, p, id); ok {
		t.Error("a refused launch is in List")
	}
}

// TestUnreachable checks the errors when SLURM cannot be reached: a slurm.conf that does
// not exist (at once, not after SLURM's minute of retries) and a controller that does not
// answer.
func TestUnreachable(t *testing.T) {
	c := slurmtest.Shared(t)
	_, err := slurmprovider.New(slurmprovider.Config{SlurmConf: filepath.Join(t.TempDir(), "missing.conf"), LogDir: t.TempDir()})
	if !errors.Is(err, slurmprovider.ErrUnreachable) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("New with a missing slurm.conf: %v, want ErrUnreachable saying it does not exist", err)
	}
	// A copy of the cluster's configuration naming a port nobody listens on.
	conf, err := os.ReadFile(c.Conf)
	if err != nil {
		t.Fatal(err)
	}
	dead := regexp.MustCompile(`(?m)^SlurmctldPort=\d+$`).ReplaceAll(conf, []byte("SlurmctldPort=1"))
	deadConf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(deadConf, dead, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := slurmprovider.New(slurmprovider.Config{SlurmConf: deadConf, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = p.List(ctx)
	if !errors.Is(err, slurmprovider.ErrUnreachable) || !errors.Is(err, plane.ErrUnavailable) {
		t.Fatalf("List with the controller down: %v, want ErrUnreachable", err)
	}
	for _, want := range []string{"squeue", "Unable to contact slurm controller", "scontrol ping"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not mention %q", err, want)
		}
	}
	checkNoTypeName(t, err)
}

// TestBadInput checks the errors that need no SLURM: a bad launch, and commands that are
// not installed.
func TestBadInput(t *testing.T) {
	p, err := slurmprovider.New(slurmprovider.Config{Sbatch: "/nonexistent/sbatch", Squeue: "/nonexistent/squeue", LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Launch(ctx, &provider.Launch{ID: "has space", Command: []string{"true"}}); !errors.Is(err, plane.ErrInvalid) {
		t.Errorf("Launch with a bad id: %v, want plane.ErrInvalid", err)
	}
	if err := p.Launch(ctx, &provider.Launch{ID: "ok", Command: nil}); !errors.Is(err, plane.ErrInvalid) {
		t.Errorf("Launch without a command: %v, want plane.ErrInvalid", err)
	}
	err = p.Launch(ctx, &provider.Launch{ID: "ok", Command: []string{"true"}})
	if !errors.Is(err, slurmprovider.ErrNotInstalled) || !strings.Contains(err.Error(), "sbatch was not found") {
		t.Errorf("Launch without sbatch: %v, want ErrNotInstalled naming sbatch", err)
	}
	checkNoTypeName(t, err)
	if _, err := p.List(ctx); !errors.Is(err, slurmprovider.ErrNotInstalled) {
		t.Errorf("List without squeue: %v, want ErrNotInstalled", err)
	}
}

func checkNoTypeName(t *testing.T, err error) {
	t.Helper()
	if err != nil && regexp.MustCompile(`\*?[a-z]+\.[A-Z][A-Za-z]+(Error)?\b`).MatchString(err.Error()) {
		t.Errorf("the error %q names a Go type", err)
	}
}

// TestShapeResources: a launch for a shape asks SLURM for the shape's requirement in place
// of the policy's resources — --cpus-per-task rounded up to whole CPUs, --mem in MiB,
// --gres=gpu:TYPE:N, --constraint from a label listed in ConstraintLabels — and List
// reports the launch's shape; a label not listed cannot be offered (CanOffer).
func TestShapeResources(t *testing.T) {
	c := slurmtest.Shared(t)
	p, err := slurmprovider.New(slurmprovider.Config{SlurmConf: c.Conf, LogDir: t.TempDir(), PollInterval: 100 * time.Millisecond,
		ConstraintLabels: []string{"zone"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := &plane.Requirement{MilliCPUs: 1500, MemoryBytes: 200<<20 + 1, GPUs: 2, GPUType: slurmtest.GPUType,
		Labels: map[string]string{"zone": slurmtest.Feature}}
	if err := p.CanOffer(req); err != nil {
		t.Fatalf("CanOffer(%+v): %v", req, err)
	}
	if err := p.CanOffer(&plane.Requirement{Labels: map[string]string{"rack": "r1"}}); err == nil || !strings.Contains(err.Error(), slurmprovider.EnvConstraintLabels) {
		t.Errorf("CanOffer of an unlisted label: %v; want an error naming %s", err, slurmprovider.EnvConstraintLabels)
	}
	id := newLaunchID()
	l := &provider.Launch{ID: id, Namespace: "default", Queue: "q", Command: []string{"sleep", "300"}, Shape: req.Shape(), Requirement: req,
		Resources: plane.Resources{CPUs: 1, GPUs: 1, MemoryMB: 100}}
	if err := p.Launch(ctx, l); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background(), id, 0) })
	out, err := c.Command(ctx, "squeue", "--noheader", "--name="+p.JobName(id), "--format=%i").Output()
	jobID := strings.TrimSpace(string(out))
	if err != nil || jobID == "" {
		t.Fatalf("squeue --name=%s: %v %q", p.JobName(id), err, out)
	}
	out, err = c.Command(ctx, "scontrol", "show", "job", "--oneliner", jobID).CombinedOutput()
	if err != nil {
		t.Fatalf("scontrol show job: %v: %s", err, out)
	}
	for _, want := range []string{
		`\bCPUs/Task=2\b`,
		`\bTresPerNode=gres:gpu:` + slurmtest.GPUType + `:2\b`,
		`\bMinMemoryNode=201M\b`,
		`\bFeatures=` + slurmtest.Feature + `\b`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("scontrol show job misses %s:\n%s", want, out)
		}
	}
	s, ok := find(t, p, id)
	if !ok || s.Shape != req.Shape() {
		t.Errorf("List: %+v (found %v); want the launch with shape %s", s, ok, req.Shape())
	}
}

// TestConstraintLabelIsOneFeature: a label listed in ConstraintLabels names one node
// feature. A label value is the submitter's (printable UTF-8: `submit --requires
// label.zone=…`), and --constraint reads SLURM's expression language in it: before,
// "east|gpu" or "east*2" or "[a|b]" reached sbatch as an OR, a node count, a matching OR,
// so a tenant chose nodes outside the feature the operator meant (the launch of
// zone=east|east was accepted). Now CanOffer refuses such a value and Launch refuses it
// with a *plane.InvalidError before sbatch runs.
func TestConstraintLabelIsOneFeature(t *testing.T) {
	c := slurmtest.Shared(t)
	p, err := slurmprovider.New(slurmprovider.Config{SlurmConf: c.Conf, LogDir: t.TempDir(), PollInterval: 100 * time.Millisecond,
		ConstraintLabels: []string{"zone"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{slurmtest.Feature + "|" + slurmtest.Feature, slurmtest.Feature + "&" + slurmtest.Feature, "[" + slurmtest.Feature + "]", slurmtest.Feature + "*1", "!x", "a b", ""} {
		req := &plane.Requirement{Labels: map[string]string{"zone": value}}
		if err := p.CanOffer(req); err == nil {
			t.Errorf("CanOffer(zone=%q): nil; want an error", value)
		}
		id := newLaunchID()
		err := p.Launch(context.Background(), &provider.Launch{ID: id, Namespace: "default", Queue: "q", Command: []string{"sleep", "300"},
			Shape: req.Shape(), Requirement: req})
		var ie *plane.InvalidError
		if !errors.As(err, &ie) {
			_ = p.Stop(context.Background(), id, 0)
			t.Errorf("Launch(zone=%q): %v; want a *plane.InvalidError", value, err)
		}
	}
	if err := p.CanOffer(&plane.Requirement{Labels: map[string]string{"zone": slurmtest.Feature}}); err != nil {
		t.Errorf("CanOffer(zone=%s): %v", slurmtest.Feature, err)
	}
}
