package slurmprovider_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/provider"
)

// BenchmarkLaunchToStart measures, per launch, the time from calling Launch (sbatch) to the
// worker's process running on the node (its own clock reading, written as its first act),
// on the private single-node cluster: ms-to-start (median), sbatch-ms (median time Launch
// took), max-ms-to-start. Each launch is stopped before the next, so the node is free.
//
//	go test -run '^$' -bench LaunchToStart -benchtime 10x ./provider/slurmprovider
func BenchmarkLaunchToStart(b *testing.B) {
	p, c := newProvider(b)
	ctx := context.Background()
	var toStart, submit []float64
	i := 0
	for b.Loop() {
		i++
		dir := b.TempDir()
		id := newLaunchID()
		mark := filepath.Join(dir, "start")
		cmd := []string{"sh", "-c", `date +%s%N > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 300`, "worker", mark}
		t0 := time.Now()
		if err := p.Launch(ctx, &provider.Launch{ID: id, Command: cmd}); err != nil {
			b.Fatalf("Launch: %v", err)
		}
		submit = append(submit, float64(time.Since(t0).Microseconds())/1000)
		deadline := time.Now().Add(wait)
		var data []byte
		for {
			var err error
			if data, err = os.ReadFile(mark); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("launch %d did not start within %s\n%s", i, wait, c.Logs())
			}
			time.Sleep(5 * time.Millisecond)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			b.Fatalf("the worker wrote %q", data)
		}
		toStart = append(toStart, float64(time.Unix(0, ns).Sub(t0).Microseconds())/1000)
		b.StopTimer()
		if err := p.Stop(ctx, id, 0); err != nil {
			b.Fatalf("Stop: %v", err)
		}
		b.StartTimer()
	}
	msToStart := slices.Clone(toStart)
	slices.Sort(toStart)
	slices.Sort(submit)
	b.Logf("ms to start, in launch order: %v", msToStart)
	b.ReportMetric(toStart[len(toStart)/2], "ms-to-start")
	b.ReportMetric(toStart[len(toStart)-1], "max-ms-to-start")
	b.ReportMetric(submit[len(submit)/2], "sbatch-ms")
	b.ReportMetric(0, "ns/op")
}
