package sqliteplane

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// BenchmarkSchedulesIdle is the cost of one maintenance pass (Driver.Maintain, the pass the
// writer runs every MaintenanceInterval, 250 ms by default) with 0 and with 10,000 idle
// schedules (every one's next fire an hour away): the due query probes the next_ms index,
// so idle schedules add nothing but that probe. docs/benchmarks.md records the figures.
func BenchmarkSchedulesIdle(b *testing.B) {
	for _, n := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("schedules=%d", n), func(b *testing.B) {
			ctx := context.Background()
			d, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"), &Config{MaintenanceInterval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			for i := range n {
				if _, err := d.ScheduleSet(ctx, &plane.Schedule{Namespace: "default", Name: fmt.Sprintf("s%05d", i),
					Queue: "q", Every: time.Hour}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if err := d.Maintain(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
