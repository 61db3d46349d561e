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
	_, err = q.Submit(ctx, 1, &lakeshore.SubmitOptions{Mode: "shipped"})
	require.NoError(t, err)
	require.Equal(t, int64(1), puts.Load(), "an unchanged tree was uploaded again")

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
