package planetest

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// sampleProvider is a provider reference with every field of the policy set.
func sampleProvider() plane.ProviderRef {
	return plane.ProviderRef{Name: plane.ProviderSlurm, Policy: plane.LaunchPolicy{
		MinWorkers: 1, MaxWorkers: 8, JobsPerWorker: 4, ScaleUpStep: 2,
		Cooldown: 30 * time.Second, IdleTimeout: 5 * time.Minute, RegisterTimeout: 10 * time.Minute,
		Command: []string{"lakeshore", "worker", "jobs", "--", "./handle.sh", "a b"},
		Env:     map[string]string{"CUDA_VISIBLE_DEVICES": "0", "EMPTY": ""},
		Resources: plane.Resources{CPUs: 4, GPUs: 1, MemoryMB: 16384, TimeLimit: 2 * time.Hour,
			Partition: "gpu"},
	}}
}

// testProviders checks the provider reference of a queue (issue 17): stored as given, read
// back, listed across namespaces in order, replaced, deleted; bad ones refused with
// nothing stored.
func testProviders(t *testing.T, s *suite) {
	t.Run("SetGetDelete", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ref, err := b.drv.QueueProviderGet(b.ctx, b.ns, b.q)
		must(t, err, "get provider")
		require.Nil(t, ref, "a queue starts without a provider")
		want := sampleProvider()
		must(t, b.drv.QueueProviderSet(b.ctx, &plane.ProviderParams{Namespace: b.ns, Queue: b.q, Provider: want}), "set provider")
		ref, err = b.drv.QueueProviderGet(b.ctx, b.ns, b.q)
		must(t, err, "get provider")
		require.Equal(t, &want, ref, "the reference reads back as set")

		// Setting again replaces it whole; defaults are not filled in by the plane.
		small := plane.ProviderRef{Name: plane.ProviderLocal, Policy: plane.LaunchPolicy{Command: []string{"python", "worker.py"}}}
		must(t, b.drv.QueueProviderSet(b.ctx, &plane.ProviderParams{Namespace: b.ns, Queue: b.q, Provider: small}), "replace provider")
		ref, err = b.drv.QueueProviderGet(b.ctx, b.ns, b.q)
		must(t, err, "get provider")
		require.Equal(t, &small, ref)

		// The provider lives beside the admission block, not in it.
		adm, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
		if err == nil {
			require.Nil(t, adm, "attaching a provider sets no admission block")
		}

		deleted, err := b.drv.QueueProviderDelete(b.ctx, b.ns, b.q)
		must(t, err, "delete provider")
		require.True(t, deleted)
		ref, err = b.drv.QueueProviderGet(b.ctx, b.ns, b.q)
		must(t, err, "get provider")
		require.Nil(t, ref)
		deleted, err = b.drv.QueueProviderDelete(b.ctx, b.ns, b.q)
		must(t, err, "delete provider again")
		require.False(t, deleted, "nothing left to delete")
	})

	t.Run("DeclaredProviders", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		// ssh:NAME and kubernetes:NAME name providers of the supervisor's lakeshore.yaml,
		// which the plane does not read: it stores the name as given.
		for _, name := range []string{"ssh:lab", "kubernetes:gpu.pool-1"} {
			ref := sampleProvider()
			ref.Name = name
			must(t, b.drv.QueueProviderSet(b.ctx, &plane.ProviderParams{Namespace: b.ns, Queue: b.q, Provider: ref}), "set "+name)
			got, err := b.drv.QueueProviderGet(b.ctx, b.ns, b.q)
			must(t, err, "get provider")
			require.Equal(t, &ref, got, name)
		}
	})

	t.Run("ListOrderedAndScoped", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ref := sampleProvider()
		for _, nq := range [][2]string{{"tenant-b", "z"}, {"tenant-a", "y"}, {"tenant-b", "a"}, {"tenant-a", "x"}} {
			ref.Policy.Env = map[string]string{"WHO": nq[0] + "/" + nq[1]}
			must(t, b.drv.QueueProviderSet(b.ctx, &plane.ProviderParams{Namespace: nq[0], Queue: nq[1], Provider: ref}), "set provider")
		}
		all, err := b.drv.QueueProviderList(b.ctx, "")
		must(t, err, "list providers")
		var names []string
		for _, qp := range all {
			names = append(names, qp.Namespace+"/"+qp.Queue)
			require.Equal(t, qp.Namespace+"/"+qp.Queue, qp.Provider.Policy.Env["WHO"], "each queue lists its own reference")
			require.Equal(t, ref.Policy.Command, qp.Provider.Policy.Command)
		}
		require.Equal(t, []string{"tenant-a/x", "tenant-a/y", "tenant-b/a", "tenant-b/z"}, names, "ordered by namespace, queue")

		a, err := b.drv.QueueProviderList(b.ctx, "tenant-a")
		must(t, err, "list providers of a")
		require.Len(t, a, 2)
		for _, qp := range a {
			require.Equal(t, "tenant-a", qp.Namespace, "a namespace's list holds only its own queues")
		}
		none, err := b.drv.QueueProviderList(b.ctx, "tenant-c")
		must(t, err, "list providers of c")
		require.Empty(t, none)

		// The same queue name in another namespace is another queue.
		ref2, err := b.drv.QueueProviderGet(b.ctx, "tenant-a", "z")
		must(t, err, "get provider")
		require.Nil(t, ref2, "tenant-b/z's provider is not tenant-a/z's")
		deleted, err := b.drv.QueueProviderDelete(b.ctx, "tenant-a", "z")
		must(t, err, "delete provider")
		require.False(t, deleted)
		all, err = b.drv.QueueProviderList(b.ctx, "")
		must(t, err, "list providers")
		require.Len(t, all, 4, "deleting in one namespace leaves the other's")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		good := sampleProvider()
		with := func(f func(r *plane.ProviderRef)) plane.ProviderRef {
			r := sampleProvider()
			r.Policy.Env = map[string]string{"A": "1"}
			f(&r)
			return r
		}
		for name, ref := range map[string]plane.ProviderRef{
			"unknown provider":    with(func(r *plane.ProviderRef) { r.Name = "kubernetes" }),
			"empty provider":      with(func(r *plane.ProviderRef) { r.Name = "" }),
			"exec without prog":   with(func(r *plane.ProviderRef) { r.Name = "exec: " }),
			"ssh without name":    with(func(r *plane.ProviderRef) { r.Name = "ssh:" }),
			"bad kubernetes name": with(func(r *plane.ProviderRef) { r.Name = "kubernetes:-gpu/x" }),
			"max below min":       with(func(r *plane.ProviderRef) { r.Policy.MinWorkers, r.Policy.MaxWorkers = 3, 2 }),
			"negative min":        with(func(r *plane.ProviderRef) { r.Policy.MinWorkers = -1 }),
			"negative max":        with(func(r *plane.ProviderRef) { r.Policy.MaxWorkers = -1 }),
			"negative per worker": with(func(r *plane.ProviderRef) { r.Policy.JobsPerWorker = -1 }),
			"negative step":       with(func(r *plane.ProviderRef) { r.Policy.ScaleUpStep = -1 }),
			"negative cooldown":   with(func(r *plane.ProviderRef) { r.Policy.Cooldown = -time.Second }),
			"negative idle":       with(func(r *plane.ProviderRef) { r.Policy.IdleTimeout = -time.Second }),
			"negative register":   with(func(r *plane.ProviderRef) { r.Policy.RegisterTimeout = -time.Second }),
			"no command":          with(func(r *plane.ProviderRef) { r.Policy.Command = nil }),
			"blank command":       with(func(r *plane.ProviderRef) { r.Policy.Command = []string{" "} }),
			"NUL in argument":     with(func(r *plane.ProviderRef) { r.Policy.Command = []string{"a", "b\x00"} }),
			"env name with =":     with(func(r *plane.ProviderRef) { r.Policy.Env = map[string]string{"A=B": "1"} }),
			"negative cpus":       with(func(r *plane.ProviderRef) { r.Policy.Resources.CPUs = -1 }),
			"negative gpus":       with(func(r *plane.ProviderRef) { r.Policy.Resources.GPUs = -1 }),
			"negative memory":     with(func(r *plane.ProviderRef) { r.Policy.Resources.MemoryMB = -1 }),
			"negative time":       with(func(r *plane.ProviderRef) { r.Policy.Resources.TimeLimit = -time.Second }),
			// Past the placement limits: a worker asking 2^63−1 GPUs overflowed the ssh
			// provider's sum of a host's GPUs in use and was placed on a host of four.
			"huge cpus":   with(func(r *plane.ProviderRef) { r.Policy.Resources.CPUs = plane.RequirementCPUsMax + 1 }),
			"huge gpus":   with(func(r *plane.ProviderRef) { r.Policy.Resources.GPUs = math.MaxInt }),
			"huge memory": with(func(r *plane.ProviderRef) { r.Policy.Resources.MemoryMB = plane.RequirementMemoryMax>>20 + 1 }),
			"too large":   with(func(r *plane.ProviderRef) { r.Policy.Env = map[string]string{"BIG": strings.Repeat("x", 70<<10)} }),
		} {
			err := b.drv.QueueProviderSet(b.ctx, &plane.ProviderParams{Namespace: b.ns, Queue: b.q, Provider: ref})
			requireIs(t, err, plane.ErrInvalid, name)
			var ie *plane.InvalidError
			require.ErrorAs(t, err, &ie, name)
			require.NotEmpty(t, ie.Rule, "%s: the error says what is allowed", name)
		}
		for name, p := range map[string]plane.ProviderParams{
			"namespace": {Namespace: "bad/ns", Queue: b.q, Provider: good},
			"queue":     {Namespace: b.ns, Queue: "", Provider: good},
		} {
			requireIs(t, b.drv.QueueProviderSet(b.ctx, &p), plane.ErrInvalid, name)
		}
		all, err := b.drv.QueueProviderList(b.ctx, "")
		must(t, err, "list providers")
		require.Empty(t, all, "nothing was stored")
		_, err = b.drv.QueueProviderGet(b.ctx, b.ns, "not ok")
		requireIs(t, err, plane.ErrInvalid, "get with a bad queue name")
		_, err = b.drv.QueueProviderDelete(b.ctx, "bad/ns", b.q)
		requireIs(t, err, plane.ErrInvalid, "delete with a bad namespace")
		_, err = b.drv.QueueProviderList(b.ctx, "bad/ns")
		requireIs(t, err, plane.ErrInvalid, "list with a bad namespace")

		// A rejected set keeps the stored reference.
		must(t, b.drv.QueueProviderSet(b.ctx, &plane.ProviderParams{Namespace: b.ns, Queue: b.q, Provider: good}), "set provider")
		bad := good
		bad.Policy.MaxWorkers = -3
		requireIs(t, b.drv.QueueProviderSet(b.ctx, &plane.ProviderParams{Namespace: b.ns, Queue: b.q, Provider: bad}), plane.ErrInvalid)
		ref, err := b.drv.QueueProviderGet(b.ctx, b.ns, b.q)
		must(t, err, "get provider")
		require.Equal(t, &good, ref, "a rejected set changes nothing")
	})
}

// testLeases checks named leases (LeaseAcquire, LeaseRelease): one holder at a time,
// renewed by its holder, taken over only once expired on the plane's clock, freed by
// release, and scoped by namespace.
func testLeases(t *testing.T, s *suite) {
	const (
		h1   = "01J0HOLDER0000000000000001"
		h2   = "01J0HOLDER0000000000000002"
		name = "provider/jobs"
	)
	acquire := func(t *testing.T, b *bundle, ns, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := b.drv.LeaseAcquire(b.ctx, &plane.LeaseParams{Namespace: ns, Name: name, Holder: holder, TTL: ttl})
		must(t, err, "acquire lease")
		return ok
	}

	t.Run("ExclusiveRenewTakeover", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		require.True(t, acquire(t, b, b.ns, h1, 10*time.Second), "a free lease is taken")
		require.False(t, acquire(t, b, b.ns, h2, 10*time.Second), "a held lease is not taken by another")
		b.clock.Advance(6 * time.Second)
		require.True(t, acquire(t, b, b.ns, h1, 10*time.Second), "the holder renews")
		b.clock.Advance(6 * time.Second)
		// 12 s after the first take, 6 s after the renewal: still h1's.
		require.False(t, acquire(t, b, b.ns, h2, 10*time.Second), "a renewed lease holds for its new TTL")
		b.clock.Advance(5 * time.Second)
		require.True(t, acquire(t, b, b.ns, h2, 10*time.Second), "an expired lease is taken over")
		require.False(t, acquire(t, b, b.ns, h1, 10*time.Second), "the old holder has lost it")
	})

	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		require.True(t, acquire(t, b, b.ns, h1, time.Hour))
		must(t, b.drv.LeaseRelease(b.ctx, b.ns, name, h2), "release by a non-holder")
		require.False(t, acquire(t, b, b.ns, h2, time.Hour), "a release by another holder changes nothing")
		must(t, b.drv.LeaseRelease(b.ctx, b.ns, name, h1), "release")
		require.True(t, acquire(t, b, b.ns, h2, time.Hour), "a released lease is free at once")
		must(t, b.drv.LeaseRelease(b.ctx, b.ns, "provider/other", h1), "release of a lease never taken")
	})

	t.Run("NamespaceIsolation", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		require.True(t, acquire(t, b, "tenant-a", h1, time.Hour))
		require.True(t, acquire(t, b, "tenant-b", h2, time.Hour), "the same name in another namespace is another lease")
		must(t, b.drv.LeaseRelease(b.ctx, "tenant-b", name, h1), "release in b by a's holder")
		require.False(t, acquire(t, b, "tenant-b", h1, time.Hour), "a's holder cannot free b's lease")
		must(t, b.drv.LeaseRelease(b.ctx, "tenant-b", name, h2), "release in b")
		require.False(t, acquire(t, b, "tenant-a", h2, time.Hour), "releasing b's lease leaves a's")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for what, p := range map[string]plane.LeaseParams{
			"namespace":    {Namespace: "bad/ns", Name: name, Holder: h1, TTL: time.Second},
			"empty name":   {Namespace: b.ns, Name: "", Holder: h1, TTL: time.Second},
			"long name":    {Namespace: b.ns, Name: strings.Repeat("n", 201), Holder: h1, TTL: time.Second},
			"control name": {Namespace: b.ns, Name: "a\nb", Holder: h1, TTL: time.Second},
			"empty holder": {Namespace: b.ns, Name: name, Holder: "", TTL: time.Second},
			"holder space": {Namespace: b.ns, Name: name, Holder: "a b", TTL: time.Second},
			"zero ttl":     {Namespace: b.ns, Name: name, Holder: h1},
			"negative ttl": {Namespace: b.ns, Name: name, Holder: h1, TTL: -time.Second},
			"ttl too long": {Namespace: b.ns, Name: name, Holder: h1, TTL: plane.LeaseTTLMax + time.Second},
		} {
			_, err := b.drv.LeaseAcquire(b.ctx, &p)
			requireIs(t, err, plane.ErrInvalid, what)
		}
		requireIs(t, b.drv.LeaseRelease(b.ctx, b.ns, "", h1), plane.ErrInvalid, "release with an empty name")
		requireIs(t, b.drv.LeaseRelease(b.ctx, b.ns, name, ""), plane.ErrInvalid, "release with an empty holder")
		require.True(t, acquire(t, b, b.ns, h2, time.Second), "nothing was taken by the refused calls")
	})
}
