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
}
