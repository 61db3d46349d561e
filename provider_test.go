package lakeshore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

func TestQueueProvider(t *testing.T) {
	t.Parallel()
	q, b := setup(t, nil)
	ctx := t.Context()

	ref, err := q.Provider(ctx)
	require.NoError(t, err)
	require.Nil(t, ref, "no provider: workers are started by hand")

	bad := lakeshore.ProviderRef{Name: lakeshore.ProviderLocal, Policy: lakeshore.LaunchPolicy{MinWorkers: 3, MaxWorkers: 2, Command: []string{"w"}}}
	require.ErrorIs(t, q.SetProvider(ctx, bad), lakeshore.ErrInvalid)
	require.ErrorContains(t, q.SetProvider(ctx, bad), "max workers")

	want := lakeshore.ProviderRef{Name: lakeshore.ProviderSlurm, Policy: lakeshore.LaunchPolicy{MaxWorkers: 4,
		Command: []string{"lakeshore", "worker", "test"}, Resources: lakeshore.Resources{GPUs: 1}}}
	require.NoError(t, q.SetProvider(ctx, want))
	ref, err = q.Provider(ctx)
	require.NoError(t, err)
	require.Equal(t, &want, ref)

	list, err := b.d.QueueProviders(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []lakeshore.QueueProvider{{Namespace: q.Namespace(), Queue: "test", Provider: want}}, list)
	_, err = b.d.QueueProviders(ctx, "bad/ns")
	require.ErrorIs(t, err, lakeshore.ErrInvalid)

	had, err := q.RemoveProvider(ctx)
	require.NoError(t, err)
	require.True(t, had)
	ref, err = q.Provider(ctx)
	require.NoError(t, err)
	require.Nil(t, ref)
}

func TestAdminLeases(t *testing.T) {
	t.Parallel()
	_, b := setup(t, nil)
	ctx, admin := t.Context(), b.d.Admin()
	ok, err := admin.AcquireLease(ctx, "default", "provider/test", "holder-1", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = admin.AcquireLease(ctx, "default", "provider/test", "holder-2", time.Hour)
	require.NoError(t, err)
	require.False(t, ok, "one holder at a time")
	require.NoError(t, admin.ReleaseLease(ctx, "default", "provider/test", "holder-1"))
	ok, err = admin.AcquireLease(ctx, "default", "provider/test", "holder-2", time.Hour)
	require.NoError(t, err)
	require.True(t, ok, "free once released")
	_, err = admin.AcquireLease(ctx, "default", "provider/test", "holder-2", 0)
	require.ErrorIs(t, err, lakeshore.ErrInvalid, "a lease needs a TTL")
	require.ErrorIs(t, admin.ReleaseLease(ctx, "default", "", "holder-2"), lakeshore.ErrInvalid)
}

// TestWorkerRegistersLaunch: a worker registers with its provider and launch id, and keeps
// the registry told how many jobs it runs and since when it is idle.
func TestWorkerRegistersLaunch(t *testing.T) {
	t.Parallel()
	q, d, _ := setupWorker(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started, release := make(chan struct{}), make(chan struct{})
	fn := func(ctx context.Context, job *lakeshore.Job) (any, error) {
		close(started)
		<-release
		return nil, nil
	}
	done := runWorker(t, ctx, d, []lakeshore.Handler{lakeshore.Handle("test", fn)}, &lakeshore.WorkerOptions{
		ID: "w-launched", LaunchID: "01J0LAUNCH0000000000000001", Provider: lakeshore.ProviderLocal, LeaseTTL: 10 * time.Second, HeartbeatInterval: 200 * time.Millisecond})
	worker := func() lakeshore.WorkerInfo {
		ws, err := d.Workers(t.Context(), nil)
		require.NoError(t, err)
		for _, w := range ws {
			if w.ID == "w-launched" {
				return w
			}
		}
		return lakeshore.WorkerInfo{}
	}
	require.Eventually(t, func() bool { return worker().ID != "" }, 30*time.Second, 10*time.Millisecond)
	w := worker()
	require.Equal(t, "01J0LAUNCH0000000000000001", w.LaunchID)
	require.Equal(t, lakeshore.ProviderLocal, w.Provider)
	require.Zero(t, w.Running)
	require.False(t, w.IdleSince.IsZero(), "a worker that ran nothing is idle since it started")

	_, err := q.Submit(t.Context(), 1, nil)
	require.NoError(t, err)
	<-started
	require.Eventually(t, func() bool { w := worker(); return w.Running == 1 && w.IdleSince.IsZero() },
		30*time.Second, 10*time.Millisecond, "a heartbeat reports the running job")
	ended := time.Now()
	close(release)
	require.Eventually(t, func() bool { w := worker(); return w.Running == 0 && !w.IdleSince.IsZero() },
		30*time.Second, 10*time.Millisecond, "and then that it is idle")
	require.WithinDuration(t, ended, worker().IdleSince, 10*time.Second, "idle since the job ended")
	cancel()
	<-done
}
