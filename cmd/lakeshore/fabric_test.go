package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore"

	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

const fabricYAML = `modes:
  gpu:
    resources: {gpus: 1, gpu_type: a100}
    time_limit: 90s
    code: false
  shipped:
    code: true
code:
  mounts: [src]
`

// TestSubmitModeWithoutConfig: `submit --mode` where no lakeshore.yaml is found is bad input
// (exit 2, as a bad file or an unknown mode; before: exit 5, "any other error"), says how to
// name one, and submits nothing.
func TestSubmitModeWithoutConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv(fabric.EnvConfig, "")
	c := newCLI(t)
	_, errs, code := c.run("", "submit", "q", "1", "--mode", "gpu")
	if code != exitUsage || !strings.Contains(errs, "no lakeshore.yaml in the working directory or its parents") ||
		strings.Contains(errs, "Run 'lakeshore --help'") {
		t.Errorf("exit %d, %s", code, errs)
	}
	if out := c.ok("count", "q", "queued"); out != "0" {
		t.Errorf("something was submitted: count %s", out)
	}
}

// TestSubmitMode: `submit --mode` carries the mode's run declaration (shown by get), an
// unknown mode fails naming the allowed ones, and a mode that ships code uploads it to the
// server once (docs/fabric.md).
func TestSubmitMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lakeshore.yaml"), []byte(fabricYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "job.py"), []byte("print(1)\n"), 0o644)
	t.Chdir(dir)
	t.Setenv(fabric.EnvConfig, "")

	c := newCLI(t)
	id := c.ok("submit", "q", `{"x": 1}`, "--mode", "gpu")
	var inv struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(c.ok("--json", "get", id)), &inv); err != nil {
		t.Fatal(err)
	}
	if inv.Metadata[fabric.MetaMode] != "gpu" || !strings.HasPrefix(inv.Metadata[fabric.MetaHostKey], fabric.HostKeyPrefix) ||
		!strings.Contains(inv.Metadata[fabric.MetaRun], `"gpu_type":"a100"`) {
		t.Errorf("metadata %v", inv.Metadata)
	}
	d, err := lakeshore.Open(t.Context(), c.target, nil)
	if err != nil {
		t.Fatal(err)
	}
	dq, _ := d.Queue("q", nil)
	got, err := dq.Get(t.Context(), id)
	d.Close()
	if err != nil || got.AttemptTimeout != 90*time.Second {
		t.Errorf("the time limit is not the attempt timeout: %+v, %v", got, err)
	}
	if out := c.ok("get", id); !strings.Contains(out, "mode") || !strings.Contains(out, "gpu (host key hk1_") {
		t.Errorf("get does not show the mode:\n%s", out)
	}
	_, errs, code := c.run("", "submit", "q", "1", "--mode", "h100")
	if code != exitUsage || !strings.Contains(errs, `no mode "h100" (allowed: gpu, shipped)`) { // bad input
		t.Errorf("unknown mode: exit %d, %s", code, errs)
	}
	_, errs, code = c.run("", "submit", "q", "1", "--mode", "shipped")
	if code == 0 || !strings.Contains(errs, "needs a server") {
		t.Errorf("code without a server: exit %d, %s", code, errs)
	}

	drv, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	codeDir := t.TempDir()
	srv := server.New(drv, &server.Config{CodeDir: codeDir})
	ts := httptest.NewServer(srv)
	defer func() { ts.Close(); srv.Stop(); drv.Close() }()
	h := &cli{t: t, target: ts.URL}
	id = h.ok("submit", "q", "1", "--mode", "shipped")
	if err := json.Unmarshal([]byte(h.ok("--json", "get", id)), &inv); err != nil {
		t.Fatal(err)
	}
	digest := inv.Metadata[fabric.MetaCode]
	if _, err := os.Stat(filepath.Join(codeDir, "default", "q", digest+".tar.gz")); err != nil {
		t.Fatalf("the archive of %q is not on the server: %v", digest, err)
	}
	h.ok("submit", "q", "2", "--mode", "shipped") // the same tree: nothing uploaded, same digest

	// --function names the Python function the run imports from its code (2026-12-07:
	// before, a CLI run could name none, and a worker serving the queue by name failed it).
	id = h.ok("submit", "q", `{"x": 1}`, "--mode", "shipped", "--function", "src/job:main")
	inv.Metadata = nil
	if err := json.Unmarshal([]byte(h.ok("--json", "get", id)), &inv); err != nil {
		t.Fatal(err)
	}
	if inv.Metadata[fabric.MetaFunction] != "src/job:main" || inv.Metadata[fabric.MetaCode] != digest {
		t.Errorf("metadata %v", inv.Metadata)
	}
	_, errs, code = h.run("", "submit", "q", "1", "--mode", "shipped", "--function", "src/nosuch:main")
	if code != exitUsage || !strings.Contains(errs, `invalid function "src/nosuch:main": no src/nosuch.py or src/nosuch/__init__.py in the code mode "shipped" ships`) {
		t.Errorf("a function outside the code: exit %d, %s", code, errs)
	}
}

// TestWorkerOffers: `submit --requires` sets the job's requirement, shown by get, and so
// do a --mode's resources; `worker --offers` takes the jobs its offers satisfy, a worker
// without --offers only jobs without a requirement; bad values are usage errors.
func TestWorkerOffers(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lakeshore.yaml"), []byte(fabricYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv(fabric.EnvConfig, "")
	c := newCLI(t)
	gpu := c.ok("submit", "q", `"gpu"`, "--requires", "gpus=1,gpu_type=a100,memory=16GiB,cpus=0.5,label.zone=east")
	mode := c.ok("submit", "q", `"mode"`, "--mode", "gpu")
	plain := c.ok("submit", "q", `"plain"`)
	var inv struct {
		State       string         `json:"state"`
		Requirement map[string]any `json:"requirement"`
		Shape       string         `json:"shape"`
	}
	if err := json.Unmarshal([]byte(c.ok("--json", "get", gpu)), &inv); err != nil {
		t.Fatal(err)
	}
	if inv.Requirement["gpus"] != float64(1) || inv.Requirement["cpus_milli"] != float64(500) ||
		inv.Requirement["memory_bytes"] != float64(16<<30) || !strings.HasPrefix(inv.Shape, "sh1_") {
		t.Errorf("get --json: %+v", inv)
	}
	if out := c.ok("get", gpu); !strings.Contains(out, "cpus=0.5,memory=16GiB,gpus=1,gpu_type=a100,label.zone=east (shape sh1_") {
		t.Errorf("get does not show the requirement:\n%s", out)
	}
	if out := c.ok("get", mode); !strings.Contains(out, "gpus=1,gpu_type=a100 (shape sh1_") {
		t.Errorf("a mode's resources are not the requirement:\n%s", out)
	}
	// No offers: only the plain job; the worker says at start what it leaves (before
	// 2026-12-07 it said nothing).
	if _, errs, code := c.run("", "worker", "q", "--exit-when-idle", "--", "true"); code != 0 ||
		!strings.Contains(errs, "lakeshore worker: 2 queued jobs of q need offers this worker does not declare (e.g. ") {
		t.Errorf("a worker without offers does not say what it leaves: exit %d\n%s", code, errs)
	}
	state := func(id string) string {
		t.Helper()
		if err := json.Unmarshal([]byte(c.ok("--json", "get", id)), &inv); err != nil {
			t.Fatal(err)
		}
		return inv.State
	}
	if state(plain) != "succeeded" || state(gpu) != "queued" || state(mode) != "queued" {
		t.Fatalf("a worker without offers: plain %s, gpu %s, mode %s", state(plain), state(gpu), state(mode))
	}
	if _, errs, code := c.run("", "worker", "q", "--exit-when-idle", "--offers", "gpus=1,gpu_type=a100", "--", "true"); code != 0 ||
		!strings.Contains(errs, "lakeshore worker: 1 queued job of q needs offers this worker does not declare (e.g. cpus=0.5,memory=16GiB,gpus=1,gpu_type=a100,label.zone=east)") {
		t.Errorf("an a100 worker does not say it leaves the job needing more: exit %d\n%s", code, errs)
	}
	if state(gpu) != "queued" || state(mode) != "succeeded" {
		t.Fatalf("a100 without memory, cpus and zone: gpu %s, mode %s", state(gpu), state(mode))
	}
	// No live worker can run it (the workers above are gone): shown, not refused.
	if out := c.ok("get", gpu); !strings.Contains(out, "no capable worker: none of the 0 live workers of the queue offers this") {
		t.Errorf("get does not say no worker can run it:\n%s", out)
	}
	var shown struct {
		Workers *struct{ Capable, Serving int } `json:"workers"`
	}
	if err := json.Unmarshal([]byte(c.ok("--json", "get", gpu)), &shown); err != nil || shown.Workers == nil || shown.Workers.Capable != 0 {
		t.Errorf("get --json workers: %+v, %v", shown.Workers, err)
	}
	// `queues` says so for the queue, from the demand counters and the registry (before
	// 2026-12-07 the job waited there silently: only `get ID` told).
	const note = "note: queue default/q: 1 queued job needs offers no live worker declares (e.g. cpus=0.5,memory=16GiB,gpus=1,gpu_type=a100,label.zone=east)"
	if out, errs, code := c.run("", "queues"); code != 0 || !strings.Contains(errs, note) || strings.Contains(out, "note:") {
		t.Errorf("queues does not say the job waits for offers: exit %d\n%s\n%s", code, out, errs)
	}
	var listed struct {
		Unplaceable int64 `json:"unplaceable"`
	}
	if err := json.Unmarshal([]byte(c.ok("--json", "queues")), &listed); err != nil || listed.Unplaceable != 1 {
		t.Errorf("queues --json unplaceable: %+v, %v", listed, err)
	}
	if _, errs, code := c.run("", "worker", "q", "--exit-when-idle", "--offers", "gpus=2,gpu_type=a100,memory=80GiB,cpus=8,label.zone=east", "--", "true"); code != 0 ||
		strings.Contains(errs, "does not declare") {
		t.Errorf("a capable worker: exit %d\n%s", code, errs)
	}
	if state(gpu) != "succeeded" {
		t.Fatalf("a capable worker: gpu %s", state(gpu))
	}
	if _, errs, _ := c.run("", "queues"); strings.Contains(errs, "note:") {
		t.Errorf("nothing waits for offers, yet queues says:\n%s", errs)
	}
	for _, bad := range [][]string{{"submit", "q", "1", "--requires", "gpus=many"}, {"submit", "q", "1", "--requires", "gpu=1"},
		{"worker", "q", "--offers", "gpu_type=a 100", "--", "true"}} {
		flag := "--requires"
		if bad[0] == "worker" {
			flag = "--offers"
		}
		if _, errs, code := c.run("", bad...); code != exitUsage || !strings.Contains(errs, "invalid "+flag) || !strings.Contains(errs, "use ") {
			t.Errorf("%v: exit %d, %s", bad, code, errs)
		}
	}
}
