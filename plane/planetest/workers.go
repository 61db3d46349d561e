package planetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

func (b *bundle) workers(t *testing.T, namespace string) map[string]plane.WorkerInfo {
	t.Helper()
	list, err := b.drv.WorkerList(b.ctx, &plane.WorkerListParams{Namespace: namespace, SeenWithin: time.Hour})
	must(t, err, "list workers")
	out := map[string]plane.WorkerInfo{}
	for _, w := range list {
		key := w.Namespace + "/" + w.ID
		require.NotContains(t, out, key, "a worker listed twice")
		out[key] = w
	}
	return out
}

func testWorkers(t *testing.T, s *suite) {
	t.Run("KeyedByNamespaceAndID", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		const id = "01J0WORKER0000000000000000"
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: id, Namespace: "tenant-a", Host: "host-a", PID: 1,
			Queues: []string{"jobs"}, StartedAt: b.now()}), "register in a")
		// The same id in another namespace is another worker: it must not overwrite a's.
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: id, Namespace: "tenant-b", Host: "host-b", PID: 2,
			Queues: []string{"other"}, StartedAt: b.now()}), "register in b")
		a, bb := b.workers(t, "tenant-a"), b.workers(t, "tenant-b")
		require.Len(t, a, 1)
		require.Len(t, bb, 1)
		require.Equal(t, "host-a", a["tenant-a/"+id].Host)
		require.Equal(t, []string{"jobs"}, a["tenant-a/"+id].Queues)
		require.Equal(t, "host-b", bb["tenant-b/"+id].Host)
		require.Len(t, b.workers(t, ""), 2)

		// A refresh updates only its own namespace's worker.
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: id, Namespace: "tenant-b", Host: "host-b", PID: 2,
			Queues: []string{"other", "more"}}), "refresh in b")
		require.Equal(t, []string{"jobs"}, b.workers(t, "tenant-a")["tenant-a/"+id].Queues)
		require.Equal(t, []string{"other", "more"}, b.workers(t, "tenant-b")["tenant-b/"+id].Queues)

		// Removing a's worker leaves b's.
		must(t, b.drv.WorkerRemove(b.ctx, "tenant-a", id), "remove in a")
		require.Empty(t, b.workers(t, "tenant-a"))
		require.Len(t, b.workers(t, "tenant-b"), 1)
	})

	t.Run("LaunchAndLoad", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		const id = "01J0WORKER0000000000000001"
		started := b.now()
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: id, Namespace: b.ns, Host: "node-1", PID: 7,
			Queues: []string{b.q}, StartedAt: started, Provider: plane.ProviderSlurm, LaunchID: "01J0LAUNCH00000000000000001",
			Running: 0, IdleSince: started}), "register")
		w := b.workers(t, b.ns)[b.ns+"/"+id]
		require.Equal(t, plane.ProviderSlurm, w.Provider)
		require.Equal(t, "01J0LAUNCH00000000000000001", w.LaunchID, "the launch id reads back")
		require.Equal(t, 0, w.Running)
		requireTime(t, started, w.IdleSince, "idle since")

		// A refresh while jobs run: Running counts them, IdleSince is zero.
		b.clock.Advance(3 * time.Second)
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: id, Namespace: b.ns, Host: "node-1", PID: 7,
			Queues: []string{b.q}, StartedAt: started, Provider: plane.ProviderSlurm, LaunchID: "01J0LAUNCH00000000000000001",
			Running: 2}), "refresh while running")
		w = b.workers(t, b.ns)[b.ns+"/"+id]
		require.Equal(t, 2, w.Running)
		require.True(t, w.IdleSince.IsZero(), "a busy worker is not idle")
		requireTime(t, started, w.StartedAt, "started at")

		// Idle again.
		idle := b.clock.Advance(2 * time.Second)
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: id, Namespace: b.ns, Host: "node-1", PID: 7,
			Queues: []string{b.q}, StartedAt: started, Provider: plane.ProviderSlurm, LaunchID: "01J0LAUNCH00000000000000001",
			IdleSince: idle}), "refresh idle")
		w = b.workers(t, b.ns)[b.ns+"/"+id]
		require.Equal(t, 0, w.Running)
		requireTime(t, idle, w.IdleSince, "idle since")

		// A worker started by hand says nothing of a provider.
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: "by-hand", Namespace: b.ns, Host: "laptop", PID: 8,
			Queues: []string{b.q}, StartedAt: started}), "register by hand")
		w = b.workers(t, b.ns)[b.ns+"/by-hand"]
		require.Empty(t, w.Provider)
		require.Empty(t, w.LaunchID)
	})

	t.Run("InvalidRegistrations", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for name, w := range map[string]plane.WorkerInfo{
			"empty id":         {ID: "", Namespace: "default", Host: "h"},
			"id with space":    {ID: "a b", Namespace: "default", Host: "h"},
			"namespace":        {ID: "w1", Namespace: "bad/ns", Host: "h"},
			"host control":     {ID: "w1", Namespace: "default", Host: "h\nx"},
			"host too long":    {ID: "w1", Namespace: "default", Host: string(make([]byte, 300))},
			"queue name":       {ID: "w1", Namespace: "default", Host: "h", Queues: []string{"ok", "not ok"}},
			"negative pid":     {ID: "w1", Namespace: "default", Host: "h", PID: -1},
			"host not utf8":    {ID: "w1", Namespace: "default", Host: "\xff"},
			"empty queue":      {ID: "w1", Namespace: "default", Host: "h", Queues: []string{""}},
			"id too long":      {ID: string(make([]byte, 129)), Namespace: "default", Host: "h"},
			"queue dot start":  {ID: "w1", Namespace: "default", Host: "h", Queues: []string{".hidden"}},
			"negative running": {ID: "w1", Namespace: "default", Host: "h", Running: -1},
			"launch id ctrl":   {ID: "w1", Namespace: "default", Host: "h", LaunchID: "a\tb"},
			"provider long":    {ID: "w1", Namespace: "default", Host: "h", Provider: string(make([]byte, 300))},
		} {
			requireIs(t, b.drv.WorkerRegister(b.ctx, &w), plane.ErrInvalid, name)
		}
		require.Empty(t, b.workers(t, ""), "nothing was registered")
	})
}
