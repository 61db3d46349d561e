package planetest

import (
	"maps"
	"slices"
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
	t.Run("SilentWorkersTrimmedAfterRetention", func(t *testing.T) {
		// A worker that never removed itself (killed, its machine gone) is deleted by
		// maintenance once silent for the retention period (plane.RetentionDefault); one
		// seen since is kept. Before, registrations of crashed workers were kept for ever.
		t.Parallel()
		b := s.setup(t, config{})
		register := func(id string) {
			must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: id, Namespace: b.ns, Host: "h", PID: 1,
				Queues: []string{b.q}}), "register "+id)
		}
		register("silent")
		register("alive")
		b.advance(plane.RetentionDefault - time.Minute)
		register("alive")
		b.maintain(t)
		require.ElementsMatch(t, []string{"silent", "alive"}, storedWorkerIDs(t, b), "kept for the retention period")
		b.advance(2 * time.Minute)
		b.maintain(t)
		require.Equal(t, []string{"alive"}, storedWorkerIDs(t, b), "silent past retention: trimmed")
	})

	t.Run("ShortRetentionKeepsLiveWorkers", func(t *testing.T) {
		// A retention shorter than a worker's refresh interval (serve --retention 2s) does
		// not trim a live worker: a registration is kept while WorkerList shows it (seen
		// within plane.WorkerSeenWithinDefault), then trimmed once silent past both. Before
		// 2026-12-07 maintenance deleted every registration not refreshed within the
		// retention, so `lakeshore workers` showed none of the running workers between their
		// refreshes (every 10 s) and a provider supervisor took its launches for
		// unregistered ones.
		t.Parallel()
		b := s.setup(t, config{retention: time.Second})
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: "live", Namespace: b.ns, Host: "h", PID: 1,
			Queues: []string{b.q}}), "register")
		b.advance(plane.WorkerSeenWithinDefault - time.Second) // past the retention, not past a refresh's bound
		b.maintain(t)
		require.Equal(t, []string{"live"}, storedWorkerIDs(t, b), "a worker seen within the last minute is kept")
		b.advance(2 * time.Second)
		b.maintain(t)
		require.Empty(t, storedWorkerIDs(t, b), "silent past the retention and the minute: trimmed")
	})

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

	t.Run("OffersAndWarmHostKeys", func(t *testing.T) {
		// A worker registers what it offers and the host keys it is warm for; a queued job
		// no live worker of its queue can run is counted as such (plane.CapableWorkers).
		t.Parallel()
		b := s.setup(t, config{})
		offers := &plane.Offers{GPUs: 1, GPUType: "a100", Labels: map[string]string{"zone": "east"}}
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: "gpu-worker", Namespace: b.ns, Host: "h", PID: 1,
			Queues: []string{b.q}, StartedAt: b.now(), Offers: offers, WarmHostKeys: []string{hostKeyA, hostKeyB}}), "register")
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: "cpu-worker", Namespace: b.ns, Host: "h", PID: 2,
			Queues: []string{b.q}, StartedAt: b.now()}), "register")
		ws := b.workers(t, b.ns)
		w := ws[b.ns+"/gpu-worker"]
		require.Equal(t, offers, w.Offers)
		require.Equal(t, []string{hostKeyA, hostKeyB}, w.WarmHostKeys)
		require.Nil(t, ws[b.ns+"/cpu-worker"].Offers)
		require.Empty(t, ws[b.ns+"/cpu-worker"].WarmHostKeys)
		list := []plane.WorkerInfo{w, ws[b.ns+"/cpu-worker"]}
		capable, serving := plane.CapableWorkers(reqA100, b.ns, b.q, list)
		require.Equal(t, [2]int{1, 2}, [2]int{capable, serving})
		capable, serving = plane.CapableWorkers(reqGPU2, b.ns, b.q, list)
		require.Equal(t, [2]int{0, 2}, [2]int{capable, serving}, "no capable worker")
		capable, serving = plane.CapableWorkers(reqA100, b.ns, "other", list)
		require.Equal(t, [2]int{0, 0}, [2]int{capable, serving}, "workers of another queue do not count")
		// A refresh replaces them; bad ones are refused.
		must(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: "gpu-worker", Namespace: b.ns, Host: "h", PID: 1,
			Queues: []string{b.q}, StartedAt: b.now()}), "refresh")
		w = b.workers(t, b.ns)[b.ns+"/gpu-worker"]
		require.Nil(t, w.Offers)
		require.Empty(t, w.WarmHostKeys)
		requireInvalid(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: "bad", Namespace: b.ns, Offers: &plane.Offers{GPUs: -1}}), "offers.gpus")
		requireInvalid(t, b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: "bad", Namespace: b.ns, WarmHostKeys: []string{"a key"}}), "warm_host_keys")
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

	t.Run("CapPerNamespace", func(t *testing.T) {
		// A namespace holds at most the plane's MaxWorkersPerNamespace registered workers:
		// registering one more is refused (limit_exceeded, naming the cap and the flag that
		// raises it) and stores nothing; a registered worker's refresh goes on, another
		// namespace has its own count, and a removal makes room. (Before the cap every
		// registration was stored.)
		t.Parallel()
		b := s.setup(t, config{maxWorkers: 2})
		register := func(namespace, id string) error {
			return b.drv.WorkerRegister(b.ctx, &plane.WorkerInfo{ID: id, Namespace: namespace, Host: "h", PID: 1, Queues: []string{b.q}})
		}
		must(t, register(b.ns, "w1"), "register w1")
		must(t, register(b.ns, "w2"), "register w2")
		err := register(b.ns, "w3")
		requireIs(t, err, plane.ErrLimitExceeded, "a third worker in a namespace capped at 2")
		require.Equal(t, "limit_exceeded", plane.Code(err), "its stable code")
		require.Contains(t, err.Error(), "holds 2 registered workers, its maximum (2)")
		require.Contains(t, err.Error(), plane.MaxWorkersPerNamespaceFlag)
		require.Len(t, b.workers(t, b.ns), 2, "a refused registration stores nothing")
		must(t, register(b.ns, "w1"), "a registered worker's refresh at the cap")
		must(t, register("tenant-b", "w3"), "another namespace has its own count")
		must(t, b.drv.WorkerRemove(b.ctx, b.ns, "w1"), "remove w1")
		must(t, register(b.ns, "w3"), "a removal makes room")
		require.ElementsMatch(t, []string{b.ns + "/w2", b.ns + "/w3"}, slices.Collect(maps.Keys(b.workers(t, b.ns))))
	})
}

// storedWorkerIDs lists the ids of b's namespace's stored worker registrations, seen within
// ten retention periods (every one maintenance has not trimmed).
func storedWorkerIDs(t *testing.T, b *bundle) []string {
	t.Helper()
	list, err := b.drv.WorkerList(b.ctx, &plane.WorkerListParams{Namespace: b.ns, SeenWithin: 10 * plane.RetentionDefault})
	must(t, err, "list workers")
	var ids []string
	for _, w := range list {
		ids = append(ids, w.ID)
	}
	return ids
}
