package slurmprovider_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/slurmprovider"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildOut  []byte
)

// lakeshoreBinary builds cmd/lakeshore once per test binary (the build cache makes it a
// link when CI built it already).
func lakeshoreBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(build)
	if buildErr != nil {
		t.Fatalf("build lakeshore: %v\n%s", buildErr, buildOut)
	}
	return binary
}

func build() {
	dir, err := os.MkdirTemp("", "slurmprovider-bin-")
	if err != nil {
		buildErr = err
		return
	}
	binary = filepath.Join(dir, "lakeshore")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	buildOut, buildErr = exec.Command(gobin, "build", "-o", binary, "github.com/lakeshore-dev/lakeshore/cmd/lakeshore").CombinedOutput()
}

// wantsBinary reports whether this run will run a test or benchmark that needs the
// lakeshore binary (so TestMain starts building it early).
func wantsBinary() bool {
	if testing.Short() {
		return false
	}
	matches := func(flagName, name string) bool {
		f := flag.Lookup(flagName)
		if f == nil {
			return false
		}
		pattern := f.Value.String()
		if pattern == "" {
			return flagName == "test.run"
		}
		re, err := regexp.Compile(pattern)
		return err == nil && re.MatchString(name)
	}
	return matches("test.run", "TestLakeshoreWorker") || matches("test.bench", "BenchmarkSubmitToClaim")
}

// workerRun is one job run by a `lakeshore worker` that SLURM started for it.
type workerRun struct {
	toClaim time.Duration // submit → the worker's claim (the invocation's StartedAt)
	stop    time.Duration // how long Stop took: the worker drained on SIGTERM
}

// runWorkerOnSlurm submits a job to a queue at zero workers on a SQLite plane, launches a
// `lakeshore worker` for it through the provider at once (as a supervisor would on its
// tick), waits for the job's result, and stops the worker.
func runWorkerOnSlurm(t testing.TB, p *slurmprovider.Provider, bin string) workerRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	home := t.TempDir()
	d, err := lakeshore.Open(ctx, filepath.Join(home, "lakeshore.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("slurm-e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	job, err := q.Submit(ctx, "hello from slurm", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := newLaunchID()
	l := &provider.Launch{ID: id, Namespace: "default", Queue: "slurm-e2e",
		Command: []string{bin, "worker", "slurm-e2e", "--", "sh", "-c", "cat; echo"},
		Env: map[string]string{"LAKESHORE_HOME": home, "LAKESHORE_URL": "", provider.EnvLaunchID: id,
			provider.EnvProvider: p.Name(), provider.EnvQueue: "slurm-e2e", provider.EnvNamespace: "default"}}
	if err := p.Launch(ctx, l); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	var result map[string]any
	if err := q.Result(ctx, job, &result, &lakeshore.ResultOptions{Timeout: wait}); err != nil {
		log, _ := os.ReadFile(p.LogPath(id))
		t.Fatalf("the job's result: %v\nworker log:\n%s", err, log)
	}
	if out, _ := result["stdout"].(string); !strings.Contains(out, "hello from slurm") {
		t.Errorf("result = %v, want the payload echoed on stdout", result)
	}
	inv, err := q.Get(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.Stop(ctx, id, wait); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stop := time.Since(start)
	if _, ok := find(t, p, id); ok {
		t.Error("List still shows the stopped worker")
	}
	return workerRun{toClaim: inv.StartedAt.Sub(inv.CreatedAt), stop: stop}
}

// TestLakeshoreWorker runs a real `lakeshore worker` as a SLURM job: it claims the job of
// a queue at zero workers, runs it, and drains on Stop's SIGTERM (it exits by itself,
// before the grace). Skipped with -short (it builds cmd/lakeshore).
func TestLakeshoreWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/lakeshore; run without -short")
	}
	p, _ := newProvider(t)
	bin := lakeshoreBinary(t)
	run := runWorkerOnSlurm(t, p, bin)
	t.Logf("submit → claim through SLURM: %s; Stop (drain) took %s", run.toClaim, run.stop)
	if run.stop >= wait {
		t.Errorf("Stop took the whole grace (%s): the worker did not drain on SIGTERM", run.stop)
	}
}

// BenchmarkSubmitToClaim measures submit → first claim at zero workers through SLURM
// without a supervisor: the launch follows the submit at once (a supervisor adds up to one
// tick). ms-to-claim is the median, max-ms-to-claim the slowest.
//
//	go test -run '^$' -bench SubmitToClaim -benchtime 5x ./provider/slurmprovider
func BenchmarkSubmitToClaim(b *testing.B) {
	p, _ := newProvider(b)
	bin := lakeshoreBinary(b)
	var ms []float64
	for b.Loop() {
		run := runWorkerOnSlurm(b, p, bin)
		ms = append(ms, float64(run.toClaim.Microseconds())/1000)
	}
	b.Logf("ms to claim, in order: %v", ms)
	slices.Sort(ms)
	b.ReportMetric(ms[len(ms)/2], "ms-to-claim")
	b.ReportMetric(ms[len(ms)-1], "max-ms-to-claim")
	b.ReportMetric(0, "ns/op")
}
