package planetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Host keys of the warm cases (the form of fabric.HostKey).
var (
	hostKeyA = "hk1_" + strings.Repeat("a", 32)
	hostKeyB = "hk1_" + strings.Repeat("b", 32)
)

// submitWarm submits one invocation of payload p with host key hk ("" none), requiring r
// (nil: the default shape), at priority prio, and returns its id.
func (b *bundle) submitWarm(t *testing.T, p, hk string, r *plane.Requirement, prio float64) string {
	t.Helper()
	var md map[string]string
	if hk != "" {
		md = map[string]string{plane.MetaHostKey: hk}
	}
	return b.submitOne(t, plane.SubmitParams{Payload: []byte(p), Metadata: md, Requirement: r, Priority: prio})
}

// claimWarm claims up to max jobs of kind, one claim each, with offers o and warm host keys
// warm, and returns their payloads in claim order.
func (b *bundle) claimWarm(t *testing.T, kind plane.Kind, o *plane.Offers, max int, warm ...string) []string {
	t.Helper()
	var out []string
	for range max {
		jobs := b.claim(t, plane.ClaimParams{Kind: kind, Worker: "warm", Offers: o, WarmHostKeys: warm})
		if len(jobs) == 0 {
			break
		}
		out = append(out, string(jobs[0].Payload))
	}
	return out
}

// testWarm checks warm host-key preference (plane.WarmFirst; docs/semantics.md,
// "Placement"): a claim naming warm host keys takes a job of one of them before colder
// jobs submitted up to plane.WarmHeadStart before it, never a job its offers do not
// satisfy, and never passes over a job older than that; a claim without warm keys keeps
// the plain order.
func testWarm(t *testing.T, s *suite) {
	// cold, warm(B) 10 s later, plain 10 s later.
	fill := func(t *testing.T, b *bundle) {
		b.submitWarm(t, "coldA", hostKeyA, nil, 0)
		b.advance(10 * time.Second)
		b.submitWarm(t, "warmB", hostKeyB, nil, 0)
		b.advance(10 * time.Second)
		b.submitWarm(t, "plain", "", nil, 0)
	}
	t.Run("WarmFirst", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		fill(t, b)
		require.Equal(t, []string{"warmB", "coldA", "plain"}, b.claimWarm(t, plane.KindFIFO, nil, 5, hostKeyB),
			"the warm job goes before an older cold one, then the order")
	})
	t.Run("WarmFirstInOneClaim", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		fill(t, b)
		b.submitWarm(t, "warmB2", hostKeyB, nil, 0)
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 10, Worker: "warm", WarmHostKeys: []string{hostKeyB, hostKeyA}})
		var got []string
		for _, j := range jobs {
			got = append(got, string(j.Payload))
		}
		require.Equal(t, []string{"coldA", "warmB", "warmB2", "plain"}, got, "jobs of either warm key first, in order")
	})
	t.Run("NoWarmKeysKeepOrder", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		fill(t, b)
		require.Equal(t, []string{"coldA", "warmB", "plain"}, b.claimWarm(t, plane.KindFIFO, nil, 5))
	})
	t.Run("OtherKeysKeepOrder", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		fill(t, b)
		require.Equal(t, []string{"coldA", "warmB", "plain"}, b.claimWarm(t, plane.KindFIFO, nil, 5, "hk1_"+strings.Repeat("c", 32)))
	})
	t.Run("RequirementFirst", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitWarm(t, "plain", "", nil, 0)
		b.advance(time.Second)
		b.submitWarm(t, "warmA100", hostKeyB, reqA100, 0)
		b.submitWarm(t, "warmGPU2", hostKeyB, reqGPU2, 0)
		require.Equal(t, []string{"plain"}, b.claimWarm(t, plane.KindFIFO, nil, 5, hostKeyB),
			"a warm key never takes a job its offers do not satisfy")
		b.submitWarm(t, "plain2", "", nil, 0)
		a100 := &plane.Offers{GPUs: 1, GPUType: "a100"}
		require.Equal(t, []string{"warmA100", "plain2"}, b.claimWarm(t, plane.KindFIFO, a100, 5, hostKeyB))
		require.EqualValues(t, 1, b.count(t, plane.StateQueued), "the gpu2 job waits for a worker that offers it")
	})
	t.Run("ShapedWarm", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitWarm(t, "coldA100", hostKeyA, reqA100, 0)
		b.submitWarm(t, "coldPlain", "", nil, 0)
		b.advance(5 * time.Second)
		b.submitWarm(t, "warmA100", hostKeyB, reqA100, 0)
		a100 := &plane.Offers{GPUs: 1, GPUType: "a100"}
		require.Equal(t, []string{"warmA100", "coldA100", "coldPlain"}, b.claimWarm(t, plane.KindFIFO, a100, 5, hostKeyB))
	})
	t.Run("NoStarvation", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitWarm(t, "old", "", nil, 0)
		b.advance(plane.WarmHeadStart + time.Second)
		b.submitWarm(t, "warm", hostKeyB, nil, 0)
		b.submitWarm(t, "warm2", hostKeyB, nil, 0)
		require.Equal(t, []string{"old", "warm", "warm2"}, b.claimWarm(t, plane.KindFIFO, nil, 5, hostKeyB),
			"a job older than the head start is not passed over")
	})
	t.Run("FILO", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitWarm(t, "warm", hostKeyB, nil, 0)
		b.advance(10 * time.Second)
		b.submitWarm(t, "newer", "", nil, 0)
		b.advance(plane.WarmHeadStart)
		b.submitWarm(t, "newest", "", nil, 0)
		require.Equal(t, []string{"newest", "warm", "newer"}, b.claimWarm(t, plane.KindFILO, nil, 5, hostKeyB))
	})
	t.Run("Priority", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitWarm(t, "high", "", nil, 5)
		b.submitWarm(t, "low", "", nil, 1)
		b.advance(10 * time.Second)
		b.submitWarm(t, "warmLow", hostKeyB, nil, 1)
		require.Equal(t, []string{"high", "warmLow", "low"}, b.claimWarm(t, plane.KindPriority, nil, 5, hostKeyB),
			"priority first, then warm within a level")
	})
	t.Run("Retried", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitWarm(t, "plain", "", nil, 0)
		b.advance(10 * time.Second)
		b.submitWarm(t, "warm", hostKeyB, nil, 0)
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Worker: "w", WarmHostKeys: []string{hostKeyB}})
		require.Len(t, jobs, 1)
		require.Equal(t, "warm", string(jobs[0].Payload))
		b.nack(t, jobs[0], true, "again")
		b.advance(pastBackoff)
		require.Equal(t, []string{"warm", "plain"}, b.claimWarm(t, plane.KindFIFO, nil, 5, hostKeyB), "a retried job keeps its host key")
	})
	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		many := make([]string, plane.WarmHostKeysMax+1)
		for i := range many {
			many[i] = hostKeyA
		}
		_, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, WarmHostKeys: many})
		requireInvalid(t, err, "warm_host_keys")
		_, err = b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, WarmHostKeys: []string{"../x"}})
		requireInvalid(t, err, "warm_host_keys")
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Payload: []byte("x"), Metadata: map[string]string{plane.MetaHostKey: "a key"}}}})
		requireInvalid(t, err, plane.MetaHostKey)
		require.EqualValues(t, 0, b.count(t, plane.StateQueued), "nothing of a refused batch is written")
	})
}

// testPlacementTrim checks that trimming the rows of shapes no longer used (maintenance,
// after planekit.PlacementIdleTrim) never hides a job: a shape (and a warm pair) submitted
// again after its rows were trimmed is claimable, also when the submit races the pass
// that trims.
func testPlacementTrim(t *testing.T, s *suite) {
	t.Run("Resubmitted", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		a100 := &plane.Offers{GPUs: 1, GPUType: "a100"}
		run := func(payload string) {
			t.Helper()
			b.submitWarm(t, payload, hostKeyB, reqA100, 0)
			b.submitWarm(t, payload+"-default", hostKeyB, nil, 0)
			jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 5, Worker: "w", Offers: a100, WarmHostKeys: []string{hostKeyB}})
			require.Len(t, jobs, 2, "both jobs are claimable")
			for _, j := range jobs {
				b.ack(t, j, "ok")
			}
		}
		run("first")
		b.maintain(t) // marks the shape and the pairs idle
		b.advance(time.Hour)
		b.maintain(t) // trims them
		run("again")
		for i := range 20 {
			// The pass that trims races the submit that needs the rows again.
			b.maintain(t)
			b.advance(time.Hour)
			done := make(chan error, 1)
			go func() { done <- b.drv.Maintain(b.ctx) }()
			run(fmt.Sprint("race-", i))
			must(t, <-done, "maintain")
		}
	})
}
