package provider_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakeshore-dev/lakeshore/internal/metrictest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// TestSupervisorLaunchesByShape: on a real plane with the local provider (two GPUs), a
// queue holding 2 jobs requiring one a100 (submitted first), 5 default jobs and one job
// requiring 4 GPUs, max_workers 3: the a100 shape, waiting longest, gets its 2 workers —
// each with its own GPU in CUDA_VISIBLE_DEVICES and LAKESHORE_OFFERS/LAKESHORE_SHAPE set —
// the default shape what is left (1); the 4-GPU shape, which the machine cannot offer, is
// reported and never launched, tick after tick, and counts no failure.
func TestSupervisorLaunchesByShape(t *testing.T) {
	r := newRig(t)
	r.local.SetGPUs([]string{"0", "1"}, "a100")
	out := t.TempDir()
	r.setProvider("shaped", plane.ProviderLocal, plane.LaunchPolicy{MaxWorkers: 3, Command: []string{"sh", "-c",
		`printf '%s|%s|%s' "$CUDA_VISIBLE_DEVICES" "$LAKESHORE_OFFERS" "$LAKESHORE_SHAPE" > "$1/$LAKESHORE_LAUNCH_ID.tmp" && mv "$1/$LAKESHORE_LAUNCH_ID.tmp" "$1/$LAKESHORE_LAUNCH_ID"; exec sleep 60`,
		"worker", out}})
	a100 := &plane.Requirement{GPUs: 1, GPUType: "a100"}
	big := &plane.Requirement{GPUs: 4}
	submit := func(n int, req *plane.Requirement) {
		inv := make([]plane.SubmitParams, n)
		for i := range inv {
			inv[i] = plane.SubmitParams{Payload: []byte{0xc0}, Requirement: req}
		}
		if _, err := r.drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "shaped", Invocations: inv}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the next shape's jobs are younger (ready ages are in ms)
	}
	submit(2, a100)
	submit(5, nil)
	submit(1, big)
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	s := r.supervisor(reg, logs, nil)
	r.tick(s)
	waitUntil(t, "three launches wrote their environment", func() bool {
		es, _ := os.ReadDir(out)
		n := 0
		for _, e := range es {
			if !strings.HasSuffix(e.Name(), ".tmp") {
				n++
			}
		}
		return n == 3
	})
	var devices []string
	byShape := map[string]int{}
	es, _ := os.ReadDir(out)
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Split(string(b), "|")
		byShape[f[2]]++
		switch f[2] {
		case a100.Shape():
			if f[1] != "gpus=1,gpu_type=a100" || (f[0] != "0" && f[0] != "1") {
				t.Errorf("an a100 launch got CUDA_VISIBLE_DEVICES=%q offers %q; want one GPU and gpus=1,gpu_type=a100", f[0], f[1])
			}
			devices = append(devices, f[0])
		case "":
			if f[0] != "" || f[1] != "" {
				t.Errorf("a default launch got CUDA_VISIBLE_DEVICES=%q offers %q; want neither", f[0], f[1])
			}
		}
	}
	slices.Sort(devices)
	if byShape[a100.Shape()] != 2 || byShape[""] != 1 || !slices.Equal(devices, []string{"0", "1"}) {
		t.Fatalf("launches by shape %v, GPUs %v; want 2 a100 launches on GPUs 0 and 1 and 1 default\n%s", byShape, devices, logs.String())
	}
	for range 5 {
		r.clock.add(2 * time.Second)
		r.tick(s)
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_launches_total"); n != 3 {
		t.Errorf("launches_total = %v after more ticks; want 3 (max_workers reached, the 4-GPU shape never launched)\n%s", n, logs.String())
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_failures_total"); n != 0 {
		t.Errorf("failures_total = %v; an unlaunchable shape is no failure\n%s", n, logs.String())
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_shape_unlaunchable", "shape", big.Shape()); n != 1 {
		t.Errorf("shape_unlaunchable{shape=4 GPUs} = %v; want 1", n)
	}
	if n := strings.Count(logs.String(), "no launch of the provider can offer the shape"); n != 1 {
		t.Errorf("the unlaunchable shape was logged %d times; want once\n%s", n, logs.String())
	}
	if n := metrictest.Sum(t, reg, "lakeshore_provider_shape_workers_live", "shape", a100.Shape()); n != 2 {
		t.Errorf("shape_workers_live{a100} = %v; want 2", n)
	}
}

// TestWithOffers: --offers goes before the `--` of a lakeshore worker command, at the end
// without one, and nowhere for other commands or a command that gives its own.
func TestWithOffers(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"lakeshore", "worker", "q", "--", "run", "--offers"}, []string{"lakeshore", "worker", "q", "--offers", "gpus=1", "--", "run", "--offers"}},
		{[]string{"/usr/bin/lakeshore", "worker", "q"}, []string{"/usr/bin/lakeshore", "worker", "q", "--offers", "gpus=1"}},
		{[]string{"lakeshore", "worker", "q", "--offers=cpus=1"}, []string{"lakeshore", "worker", "q", "--offers=cpus=1"}},
		{[]string{"python", "worker.py"}, []string{"python", "worker.py"}},
	} {
		if got := provider.WithOffers(c.in, "gpus=1"); !slices.Equal(got, c.want) {
			t.Errorf("WithOffers(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}
