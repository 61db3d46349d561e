package planetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// demandOf returns the demand of b's queue by shape ("" the default shape), checking the
// listing's order.
func (b *bundle) demandOf(t *testing.T, namespace string) map[string]plane.ShapeDemand {
	t.Helper()
	list, err := b.drv.DemandList(b.ctx, namespace)
	must(t, err, "demand list")
	sorted := append([]plane.ShapeDemand{}, list...)
	plane.SortDemand(sorted)
	require.Equal(t, sorted, append([]plane.ShapeDemand{}, list...), "DemandList is in (namespace, queue, shape) order")
	out := map[string]plane.ShapeDemand{}
	for _, d := range list {
		if d.Namespace == b.ns && d.Queue == b.q {
			out[d.Shape] = d
		}
	}
	return out
}

// testDemand checks Driver.DemandList (plane/demand.go): per (queue, shape) the queued
// (delayed included) and running counts, the requirement and the oldest ready age, the
// default shape being the queue's jobs without a requirement; counts follow claims, acks
// and retries; a bad namespace is refused.
func testDemand(t *testing.T, s *suite) {
	t.Run("PausedQueueMarked", func(t *testing.T) {
		// A paused queue's demand says so (no worker claims its jobs until it resumes), its
		// counts unchanged; other queues are not marked; a resume clears it.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitShaped(t, "d1", nil)
		b.submitShaped(t, "a1", reqA100)
		b.submitTo(t, b.ns, "other", plane.SubmitParams{Payload: []byte("o")})
		b.pause(t, true)
		d := b.demandOf(t, b.ns)
		require.Len(t, d, 2)
		for shape, x := range d {
			require.True(t, x.Paused, "shape %q of the paused queue", shape)
			require.Equal(t, int64(1), x.Queued, "shape %q still counts its queued job", shape)
		}
		list, err := b.drv.DemandList(b.ctx, b.ns)
		must(t, err, "demand list")
		for _, x := range list {
			if x.Queue == "other" {
				require.False(t, x.Paused, "another queue is not paused")
			}
		}
		b.pause(t, false)
		for shape, x := range b.demandOf(t, b.ns) {
			require.False(t, x.Paused, "shape %q after the resume", shape)
		}
	})

	t.Run("PerShape", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		require.Empty(t, b.demandOf(t, ""), "an empty plane has no demand")
		b.submitShaped(t, "a1", reqA100) // first: the a100 claim below takes them before the default jobs
		b.submitShaped(t, "a2", reqA100)
		b.submitShaped(t, "d1", nil)
		b.submitShaped(t, "d2", nil)
		b.submitOne(t, plane.SubmitParams{Payload: []byte("a-later"), Requirement: reqA100, Delay: time.Hour})
		b.submitShaped(t, "z1", reqZone)
		b.submitTo(t, b.ns, "other", plane.SubmitParams{Payload: []byte("o"), Requirement: reqA100})
		b.advance(10 * time.Second)

		d := b.demandOf(t, "")
		require.Len(t, d, 3, "the default shape and two shapes: %v", d)
		def, a100, zone := d[""], d[reqA100.Shape()], d[reqZone.Shape()]
		require.Nil(t, def.Requirement)
		require.Equal(t, int64(2), def.Queued)
		require.Equal(t, reqA100, a100.Requirement)
		require.Equal(t, int64(3), a100.Queued, "delayed jobs count as queued")
		require.Equal(t, int64(1), zone.Queued)
		for _, x := range []plane.ShapeDemand{def, a100, zone} {
			require.Zero(t, x.Running)
			require.InDelta(t, 10*time.Second, x.OldestReady, float64(time.Second), "oldest ready of %q", x.Shape)
		}
		require.Equal(t, d, b.demandOf(t, b.ns), "a namespace filter")
		other, err := b.drv.DemandList(b.ctx, "elsewhere")
		must(t, err, "demand of another namespace")
		require.Empty(t, other)

		// A claim moves one a100 job to running; its ack ends it; a retry queues it again.
		_, jobs := b.claimOffering(t, &plane.Offers{GPUs: 1, GPUType: "a100"}, plane.KindFIFO, 2)
		require.Len(t, jobs, 2)
		a100 = b.demandOf(t, "")[reqA100.Shape()]
		require.Equal(t, int64(1), a100.Queued)
		require.Equal(t, int64(2), a100.Running)
		require.Zero(t, a100.OldestReady, "only a delayed a100 job is queued")
		b.ack(t, jobs[0], "ok")
		b.nack(t, jobs[1], true, "again")
		d = b.demandOf(t, "")
		require.Equal(t, int64(2), d[reqA100.Shape()].Queued)
		require.Zero(t, d[reqA100.Shape()].Running)
		require.Equal(t, int64(2), d[""].Queued, "the default shape is untouched")

		def1 := b.claimOne(t)
		d = b.demandOf(t, "")
		require.Equal(t, int64(1), d[""].Queued)
		require.Equal(t, int64(1), d[""].Running)
		b.ack(t, def1, "ok")
		def2 := b.claimOne(t)
		b.ack(t, def2, "ok")
		_, ok := b.demandOf(t, "")[""]
		require.False(t, ok, "a default shape with nothing queued or running is not listed")
	})
	t.Run("BadNamespace", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		_, err := b.drv.DemandList(b.ctx, "bad namespace!")
		requireIs(t, err, plane.ErrInvalid)
	})
}
