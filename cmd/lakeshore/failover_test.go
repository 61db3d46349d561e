package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// TestServeFailoverGoClient runs two `lakeshore serve` replicas on one SQLite file and one Go
// producer and one Go Worker, each a single lakeshore.Open of both URLs
// ("http://a,http://b"), and SIGKILLs the replica they use in the middle of the run. The
// clients fail over to the other replica by themselves: every submitted job ends succeeded
// and the producer never sees an error.
func TestServeFailoverGoClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	db := filepath.Join(t.TempDir(), "plane.db")
	a, b := startServe(t, db), startServe(t, db)
	urls := a.url + "," + b.url
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	d, err := lakeshore.Open(ctx, urls, nil)
	require.NoError(t, err)
	defer d.Close()
	// A short lease: a job claimed through the killed replica whose answer died with it
	// runs again soon.
	q, err := d.Queue("failover", &lakeshore.QueueOptions{LeaseTTL: 2 * time.Second})
	require.NoError(t, err)

	wd, err := lakeshore.Open(ctx, urls, nil)
	require.NoError(t, err)
	defer wd.Close()
	var ran atomic.Int64
	w, err := lakeshore.NewWorker(wd, []lakeshore.Handler{
		lakeshore.Handle("failover", func(ctx context.Context, job *lakeshore.Job) (any, error) {
			ran.Add(1)
			time.Sleep(5 * time.Millisecond)
			return "ok", nil
		}),
	}, &lakeshore.WorkerOptions{Concurrency: 4})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))

	const jobs = 200
	var ids []string
	var mu sync.Mutex
	produced := make(chan error, 1)
	go func() {
		for i := range jobs {
			id, err := q.Submit(ctx, fmt.Sprint(i), nil)
			if err != nil {
				produced <- fmt.Errorf("submit %d: %w", i, err)
				return
			}
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
		produced <- nil
	}()

	require.Eventually(t, func() bool { return ran.Load() >= jobs/4 }, time.Minute, 5*time.Millisecond)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	<-a.done
	t.Logf("SIGKILLed replica %s after %d jobs ran", a.url, ran.Load())

	require.NoError(t, <-produced, "the producer fails over without an error")
	mu.Lock()
	require.Len(t, ids, jobs)
	mu.Unlock()
	for _, id := range ids {
		var out string
		require.NoError(t, q.Result(ctx, id, &out, nil), "job %s", id)
		require.Equal(t, "ok", out)
	}
	require.NoError(t, w.Stop(ctx))
}
