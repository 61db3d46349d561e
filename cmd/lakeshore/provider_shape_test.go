package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/metrictest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestProviderLaunchesByShape: a queue with the local provider (two a100 GPUs) holds a job
// requiring gpus=1,gpu_type=a100, a job without a requirement and a job requiring 4 GPUs.
// The supervisor launches a worker for the default shape and one for the a100 shape — a
// `lakeshore worker` given --offers gpus=1,gpu_type=a100 and one GPU in
// CUDA_VISIBLE_DEVICES — which runs the a100 job; the default job runs; the 4-GPU shape,
// which no local launch can offer, is reported (log, gauge) and never launched, and its
// job stays queued.
func TestProviderLaunchesByShape(t *testing.T) {
	p := newProviderPlane(t)
	p.local.SetGPUs([]string{"0", "1"}, "a100")
	p.setProvider("shaped", plane.LaunchPolicy{MaxWorkers: 4, IdleTimeout: time.Minute,
		Command: workerCommand("shaped", "sh", "-c", `printf '%s|%s' "$CUDA_VISIBLE_DEVICES" "$LAKESHORE_OFFERS"`)})
	q, err := p.d.Queue("shaped", nil)
	if err != nil {
		t.Fatal(err)
	}
	a100 := &lakeshore.Requirement{GPUs: 1, GPUType: "a100"}
	ids, err := q.SubmitMany(t.Context(), []lakeshore.Submission{
		{Payload: "gpu", SubmitOptions: lakeshore.SubmitOptions{Requirement: a100}},
		{Payload: "cpu"},
		{Payload: "big", SubmitOptions: lakeshore.SubmitOptions{Requirement: &lakeshore.Requirement{GPUs: 4}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	s := p.supervisor(reg, &logs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	type result struct {
		ExitCode int    `msgpack:"exit_code"`
		Stdout   string `msgpack:"stdout"`
	}
	var gpu, cpu result
	if err := q.Result(t.Context(), ids[0], &gpu, &lakeshore.ResultOptions{Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("the a100 job: %v\n%s", err, logs.String())
	}
	if err := q.Result(t.Context(), ids[1], &cpu, &lakeshore.ResultOptions{Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("the default job: %v\n%s", err, logs.String())
	}
	devices, offers, _ := strings.Cut(gpu.Stdout, "|")
	if (devices != "0" && devices != "1") || offers != "gpus=1,gpu_type=a100" {
		t.Errorf("the a100 job ran with CUDA_VISIBLE_DEVICES=%q and offers %q; want one of the two GPUs and gpus=1,gpu_type=a100", devices, offers)
	}
	// The launches: one per launchable shape, the a100 one a `lakeshore worker --offers`.
	ls, err := p.local.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[string]int{}
	for _, l := range ls {
		shapes[l.Shape]++
	}
	want := map[string]int{"": 1, a100.Shape(): 1}
	if len(shapes) != 2 || shapes[""] != 1 || shapes[a100.Shape()] != 1 {
		t.Errorf("live launches by shape %v; want %v\n%s", shapes, want, logs.String())
	}
	waitFor(t, time.Minute, "the 4-GPU shape reported", func() bool {
		return strings.Contains(logs.String(), "no launch of the provider can offer the shape")
	})
	big := (&plane.Requirement{GPUs: 4}).Shape()
	if n := metrictest.Sum(t, reg, "lakeshore_provider_shape_unlaunchable", "shape", big); n != 1 {
		t.Errorf("lakeshore_provider_shape_unlaunchable{shape=%s} = %v; want 1", big, n)
	}
	if strings.Contains(logs.String(), "shape="+big+" offers=") {
		t.Errorf("a launch for the 4-GPU shape:\n%s", logs.String())
	}
	inv, err := q.Get(t.Context(), ids[2])
	if err != nil {
		t.Fatal(err)
	}
	if inv.State != lakeshore.StateQueued {
		t.Errorf("the 4-GPU job is %s; want queued", inv.State)
	}
	g, err := q.Get(t.Context(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("submit → first claim of the a100 job (local provider, 100 ms tick, a worker launched for its shape): %s",
		g.StartedAt.Sub(g.CreatedAt).Round(time.Millisecond))
}
