package lakeshore_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

const modeYAML = `code:
  mounts: [{path: src}]
modes:
  a100:
    resources: {gpus: 1, gpu_type: a100, memory: 40GiB}
    time_limit: 2m
    code: false
  shipped:
    code: true
`

// TestSubmitMode (docs/fabric.md, "Submitting a mode"): SubmitOptions.Mode adds the mode's
// run declaration to the metadata (the caller's map untouched), its time limit as the
// attempt timeout and its resources as the requirement; a mode that ships code uploads
// its archive once per digest, however many submissions name it; an unknown mode, and a
// code-shipping mode on a plane that keeps no code, submit nothing.
func TestSubmitMode(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lakeshore.yaml"), []byte(modeYAML), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "job.py"), []byte("print(1)\n"), 0o644))
	t.Chdir(dir)
	t.Setenv(fabric.EnvConfig, "")
	ctx := t.Context()

	drv, err := sqliteplane.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	codeDir := t.TempDir()
	srv := server.New(drv, &server.Config{CodeDir: codeDir})
	var puts, heads atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			puts.Add(1)
		}
		if r.Method == http.MethodHead {
			heads.Add(1)
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.Close(); srv.Stop(); drv.Close() })
	d, err := lakeshore.Open(ctx, ts.URL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	q, err := d.Queue("q", nil)
	require.NoError(t, err)

	mine := map[string]string{"owner": "me"}
	id, err := q.Submit(ctx, 1, &lakeshore.SubmitOptions{Mode: "a100", Metadata: mine})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"owner": "me"}, mine, "the caller's metadata map changed")
	inv, err := q.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, &lakeshore.Requirement{GPUs: 1, GPUType: "a100", MemoryBytes: 40 << 30}, inv.Requirement)
	require.Equal(t, 2*time.Minute, inv.AttemptTimeout)
	require.Equal(t, "me", inv.Metadata["owner"])
	require.Equal(t, "a100", inv.Metadata[fabric.MetaMode])
	require.Empty(t, inv.Metadata[fabric.MetaCode])

	// An explicit requirement and timeout win over the mode's.
	own := &lakeshore.Requirement{GPUs: 2}
	id, err = q.Submit(ctx, 1, &lakeshore.SubmitOptions{Mode: "a100", Requirement: own, AttemptTimeout: time.Second})
	require.NoError(t, err)
	inv, err = q.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, own, inv.Requirement)
	require.Equal(t, time.Second, inv.AttemptTimeout)

	// Code: one upload for a batch of three and none for a later submit of the same tree.
	batch := make([]lakeshore.Submission, 3)
	for i := range batch {
		batch[i] = lakeshore.Submission{Payload: i, SubmitOptions: lakeshore.SubmitOptions{Mode: "shipped"}}
	}
	ids, err := q.SubmitMany(ctx, batch)
	require.NoError(t, err)
	require.Equal(t, int64(1), puts.Load())
	inv, err = q.Get(ctx, ids[2])
	require.NoError(t, err)
	digest := inv.Metadata[fabric.MetaCode]
	require.True(t, fabric.ValidDigest(digest), "digest %q", digest)
	require.Nil(t, inv.Requirement)
	require.FileExists(t, filepath.Join(codeDir, "default", "q", digest+".tar.gz"))
	asked := heads.Load()
	_, err = q.Submit(ctx, 1, &lakeshore.SubmitOptions{Mode: "shipped"})
	require.NoError(t, err)
	require.Equal(t, int64(1), puts.Load(), "an unchanged tree was uploaded again")
	require.Equal(t, asked, heads.Load(), "a digest this process uploaded was asked for again")

	// Bad input: nothing submitted.
	before, err := q.Count(ctx, lakeshore.StateQueued)
	require.NoError(t, err)
	_, err = q.Submit(ctx, 1, &lakeshore.SubmitOptions{Mode: "h100"})
	var ce *fabric.ConfigError
	require.True(t, errors.As(err, &ce), "unknown mode: %v", err)
	require.ErrorContains(t, err, `no mode "h100" (allowed: a100, shipped)`)
	_, err = q.SubmitMany(ctx, []lakeshore.Submission{{Payload: 1}, {Payload: 2, SubmitOptions: lakeshore.SubmitOptions{Mode: "h100"}}})
	require.ErrorContains(t, err, "submission [1]")
	after, err := q.Count(ctx, lakeshore.StateQueued)
	require.NoError(t, err)
	require.Equal(t, before, after)

	local, err := lakeshore.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { local.Close() })
	lq, err := local.Queue("q", nil)
	require.NoError(t, err)
	_, err = lq.Submit(ctx, 1, &lakeshore.SubmitOptions{Mode: "shipped"})
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
	require.ErrorContains(t, err, "needs a server")
}

// TestSubmitModeFunction: SubmitOptions.Function (lakeshore submit --function) names the
// Python function a code-shipping run imports, stored as lakeshore.function; one naming a
// module the code does not hold, a malformed one, one without a mode or with a mode that
// ships no code is *InvalidError naming function, with nothing uploaded or submitted.
// Found by a new user's trial (2026-12-07): a run submitted from the CLI or Go shipped the
// code but could name no function in it, so a worker serving the queue by name failed it
// ("this worker has no function for the queue").
func TestSubmitModeFunction(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lakeshore.yaml"), []byte(modeYAML), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src", "pkg"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "job.py"), []byte("def main(x): return x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "pkg", "__init__.py"), []byte("def run(): pass\n"), 0o644))
	t.Chdir(dir)
	t.Setenv(fabric.EnvConfig, "")
	ctx := t.Context()

	drv, err := sqliteplane.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	srv := server.New(drv, &server.Config{CodeDir: t.TempDir()})
	var puts atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			puts.Add(1)
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.Close(); srv.Stop(); drv.Close() })
	d, err := lakeshore.Open(ctx, ts.URL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	q, err := d.Queue("q", nil)
	require.NoError(t, err)

	for fn, why := range map[string]string{
		"src/nosuch:main": `no src/nosuch.py or src/nosuch/__init__.py in the code mode "shipped" ships`,
		"os:system":       `no os.py or os/__init__.py in the code mode "shipped" ships`,
		"src/job":         "use module:qualname or directory/module:qualname",
		"src/job:":        "use module:qualname or directory/module:qualname",
		"../src/job:main": "the directory must be a clean relative path inside the code",
	} {
		_, err := q.Submit(ctx, 1, &lakeshore.SubmitOptions{Mode: "shipped", Function: fn})
		require.ErrorIs(t, err, lakeshore.ErrInvalid, fn)
		require.ErrorContains(t, err, `invalid function "`+fn+`": `+why)
	}
	require.Zero(t, puts.Load(), "a bad function uploads nothing")
	_, err = q.Submit(ctx, 1, &lakeshore.SubmitOptions{Function: "src/job:main"})
	require.ErrorContains(t, err, "name a --mode (SubmitOptions.Mode) that ships code")
	_, err = q.Submit(ctx, 1, &lakeshore.SubmitOptions{Mode: "a100", Function: "src/job:main"})
	require.ErrorContains(t, err, `mode "a100" ships no code to import it from`)
	n, err := q.Count(ctx, lakeshore.StateQueued)
	require.NoError(t, err)
	require.Zero(t, n, "nothing was submitted")

	for _, fn := range []string{"src/job:main", "src/pkg:run"} {
		id, err := q.Submit(ctx, map[string]any{"x": 1}, &lakeshore.SubmitOptions{Mode: "shipped", Function: fn})
		require.NoError(t, err, fn)
		inv, err := q.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, fn, inv.Metadata[fabric.MetaFunction])
		require.True(t, fabric.ValidDigest(inv.Metadata[fabric.MetaCode]))
	}
	// In one batch, the mode's code is scanned once and each submission's function checked.
	_, err = q.SubmitMany(ctx, []lakeshore.Submission{
		{Payload: 1, SubmitOptions: lakeshore.SubmitOptions{Mode: "shipped", Function: "src/job:main"}},
		{Payload: 2, SubmitOptions: lakeshore.SubmitOptions{Mode: "shipped", Function: "src/gone:main"}},
	})
	require.ErrorContains(t, err, `submission [1]: invalid function "src/gone:main"`)
}
