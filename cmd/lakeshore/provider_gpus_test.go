package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestProviderRefusesDuplicateGPUs: `lakeshore provider run` and `serve --providers` with
// LAKESHORE_LOCAL_GPUS=0,0 exit 2 at start-up saying which device is named twice, and
// launch nothing. Before, the list was two GPUs, both device 0: two one-GPU workers got
// CUDA_VISIBLE_DEVICES=0 at once.
func TestProviderRefusesDuplicateGPUs(t *testing.T) {
	p := newProviderPlane(t)
	p.setProvider("gpu", plane.LaunchPolicy{MaxWorkers: 2, JobsPerWorker: 1, Command: workerCommand("gpu", "true")})
	p.submit("gpu", 2)
	t.Setenv(lakeshore.EnvURL, "")
	t.Setenv(EnvAdminToken, "")
	t.Setenv("LAKESHORE_LOCAL_GPUS", "0,0")
	target := filepath.Join(p.home, lakeshore.DefaultDBName)
	for _, args := range [][]string{
		{"--target", target, "provider", "run", "--tick", "100ms"},
		{"--target", target, "serve", "--addr", "127.0.0.1:0", "--providers"},
	} {
		var stderr bytes.Buffer
		// Bounded: a start that takes the list runs until its context ends.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		code := run(ctx, args, strings.NewReader(""), io.Discard, &stderr)
		cancel()
		if code != 2 {
			t.Errorf("%s: exit %d, want 2 (bad input); stderr:\n%s", args[2], code, stderr.String())
		}
		for _, want := range []string{"LAKESHORE_LOCAL_GPUS", `device "0" is named twice`} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("%s: stderr lacks %q:\n%s", args[2], want, stderr.String())
			}
		}
	}
	if ls, err := p.local.List(t.Context()); err != nil || len(ls) != 0 {
		t.Errorf("launches %v (%v), want none", ls, err)
	}
}
