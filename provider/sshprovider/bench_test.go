package sshprovider_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/sshprovider"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildOut  []byte
)

// lakeshoreBinary builds cmd/lakeshore once per test binary.
func lakeshoreBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sshprovider-bin-")
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
	})
	if buildErr != nil {
		t.Fatalf("build lakeshore: %v\n%s", buildErr, buildOut)
	}
	return binary
}

// submitToClaim submits a job to a queue at zero workers on a SQLite plane, launches a
// real `lakeshore worker` for it over SSH at once (as a supervisor does at its tick; the
// command's "lakeshore" is the host's binary), waits for the result and stops the worker.
// It returns submit → the worker's claim (the invocation's StartedAt).
func submitToClaim(t testing.TB, p *sshprovider.Provider) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	d, err := lakeshore.Open(ctx, filepath.Join(home, "lakeshore.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("ssh-e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	job, err := q.Submit(ctx, "hello over ssh", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := newID()
	l := &provider.Launch{ID: id, Namespace: "default", Queue: "ssh-e2e",
		Command: []string{"lakeshore", "worker", "ssh-e2e", "--", "sh", "-c", "cat; echo"},
		Env: map[string]string{"LAKESHORE_HOME": home, provider.EnvLaunchID: id, provider.EnvProvider: p.Name(),
			provider.EnvQueue: "ssh-e2e", provider.EnvNamespace: "default"}}
	if err := p.Launch(ctx, l); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	defer func() {
		if err := p.Stop(ctx, id, wait); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	var result map[string]any
	if err := q.Result(ctx, job, &result, &lakeshore.ResultOptions{Timeout: wait}); err != nil {
		t.Fatalf("the job's result: %v (worker log: %s)", err, p.LogPath(id))
	}
	if out, _ := result["stdout"].(string); !strings.Contains(out, "hello over ssh") {
		t.Errorf("result = %v, want the payload echoed", result)
	}
	inv, err := q.Get(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	return inv.StartedAt.Sub(inv.CreatedAt)
}

// TestLakeshoreWorker runs a real `lakeshore worker` over SSH: it claims the job of a
// queue at zero workers, runs it, and drains on Stop. Skipped with -short (it builds
// cmd/lakeshore).
func TestLakeshoreWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/lakeshore; run without -short")
	}
	f := newFixture(t, 1, "127.0.0.1")
	f.cfg.Hosts[0].Lakeshore = lakeshoreBinary(t)
	t.Logf("submit → claim over SSH: %s", submitToClaim(t, f.provider(t)))
}

// BenchmarkSubmitToClaim measures submit → first claim at zero workers through the ssh
// provider without a supervisor (a supervisor adds up to one tick): one SSH session to
// start the worker on a connection already open, then the worker's start and claim.
// ms-to-claim is the median, max-ms-to-claim the slowest.
//
//	go test -run '^$' -bench SubmitToClaim -benchtime 10x ./provider/sshprovider
func BenchmarkSubmitToClaim(b *testing.B) {
	f := newFixture(b, 1, "127.0.0.1")
	f.cfg.Hosts[0].Lakeshore = lakeshoreBinary(b)
	p, err := sshprovider.New(f.cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.Check(context.Background()); err != nil { // the connection, opened once
		b.Fatal(err)
	}
	var ms []float64
	for b.Loop() {
		ms = append(ms, float64(submitToClaim(b, p).Microseconds())/1000)
	}
	b.Logf("ms to claim, in order: %v", ms)
	slices.Sort(ms)
	b.ReportMetric(ms[len(ms)/2], "ms-to-claim")
	b.ReportMetric(ms[len(ms)-1], "max-ms-to-claim")
	b.ReportMetric(0, "ns/op")
}
