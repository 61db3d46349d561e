package pgplane

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestWorkerRefreshIsOneStatement checks that registering a worker already registered (a
// running worker does it again and again) sends one statement on its row, the update,
// under the cap on workers: not a read of its key, then the upsert. It failed before: two
// statements. A new worker is still counted under the cap.
func TestWorkerRefreshIsOneStatement(t *testing.T) {
	d, counter := countedDriver(t, &Config{MaintenanceInterval: time.Hour, MaxWorkersPerNamespace: 1})
	workerStatements := func() int {
		counter.mu.Lock()
		defer counter.mu.Unlock()
		n := 0
		for sql, c := range counter.count {
			if strings.Contains(sql, ".workers") {
				n += c
			}
		}
		counter.count = map[string]int{}
		return n
	}
	info := plane.WorkerInfo{ID: "w1", Namespace: "default", Host: "h", PID: 1, Queues: []string{"q"}}
	require.NoError(t, d.WorkerRegister(t.Context(), &info))
	workerStatements()
	info.Running = 3
	require.NoError(t, d.WorkerRegister(t.Context(), &info))
	require.Equal(t, 1, workerStatements(), "a refresh is one statement on the worker's row")
	ws, err := d.WorkerList(t.Context(), &plane.WorkerListParams{Namespace: "default"})
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, 3, ws[0].Running, "refreshed")
	// A second worker is past the cap of one.
	require.ErrorIs(t, d.WorkerRegister(t.Context(), &plane.WorkerInfo{ID: "w2", Namespace: "default", Host: "h", PID: 2}), plane.ErrLimitExceeded)
}
