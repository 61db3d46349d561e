package planetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Shapes of the placement cases.
var (
	reqA100 = &plane.Requirement{GPUs: 1, GPUType: "a100"}
	reqGPU2 = &plane.Requirement{GPUs: 2}
	reqCPU8 = &plane.Requirement{MilliCPUs: 8000, MemoryBytes: 16 << 30}
	reqZone = &plane.Requirement{Labels: map[string]string{"zone": "east"}}
)

// submitShaped submits one invocation of payload p requiring r (nil: the default shape)
// and returns its id.
func (b *bundle) submitShaped(t *testing.T, p string, r *plane.Requirement) string {
	t.Helper()
	return b.submitOne(t, plane.SubmitParams{Payload: []byte(p), Requirement: r})
}

// claimOffering claims up to max jobs (fifo unless kind) with offers o and returns their
// payloads in claim order.
func (b *bundle) claimOffering(t *testing.T, o *plane.Offers, kind plane.Kind, max int) ([]string, []*plane.Job) {
	t.Helper()
	p := plane.ClaimParams{Kind: kind, Max: max, Worker: "placed", Offers: o}
	if kind == plane.KindBoltzmann {
		p.Temperature = 1
	}
	jobs := b.claim(t, p)
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = string(j.Payload)
	}
	return out, jobs
}

// testPlacement checks placement (plane/placement.go): a claim takes only the jobs whose
// requirement its offers satisfy, a claim without offers only jobs without one; a job no
// claim can run stays queued and shows its requirement; claims across shapes follow the
// claim order; bad requirements and offers are refused with nothing written.
func testPlacement(t *testing.T, s *suite) {
	t.Run("OnlySatisfied", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitShaped(t, "default", nil)
		b.submitShaped(t, "a100", reqA100)
		b.submitShaped(t, "gpu2", reqGPU2)
		b.submitShaped(t, "cpu8", reqCPU8)
		b.submitShaped(t, "zone", reqZone)
		b.submitShaped(t, "default-2", &plane.Requirement{}) // a zero requirement is the default shape

		got, _ := b.claimOffering(t, nil, plane.KindFIFO, 10)
		require.Equal(t, []string{"default", "default-2"}, got, "a claim without offers takes only jobs without a requirement")
		got, _ = b.claimOffering(t, &plane.Offers{GPUs: 1, GPUType: "h100", MilliCPUs: 64000, MemoryBytes: 1 << 40}, plane.KindFIFO, 10)
		require.Equal(t, []string{"cpu8"}, got, "an h100 worker takes neither the a100 nor the two-GPU job")
		got, _ = b.claimOffering(t, &plane.Offers{GPUs: 1, GPUType: "a100", Labels: map[string]string{"zone": "west"}}, plane.KindFIFO, 10)
		require.Equal(t, []string{"a100"}, got, "labels must match by value")
		got, _ = b.claimOffering(t, &plane.Offers{GPUs: 4, Labels: map[string]string{"zone": "east", "arch": "x86"}}, plane.KindFIFO, 10)
		require.Equal(t, []string{"gpu2", "zone"}, got)
		b.requireNothingClaimable(t)
		require.EqualValues(t, 0, b.count(t, plane.StateQueued))
	})

	// Waiting claims whose waits keep ending while a transaction holds them for a hand-off
	// that finds them nothing (jobs of a shape they cannot run) all return when their waits
	// end. (On the SQLite plane such a waiter was put back in line and then waited for a
	// later hand-off, ignoring its context: a server's handler hung until go test's timeout.)
	t.Run("WaitsEndDuringHandOffs", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true, noMaintenance: true})
		stop := make(chan struct{})
		submitted := make(chan struct{})
		go func() {
			defer close(submitted)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
					Invocations: []plane.SubmitParams{{Payload: []byte("gpu"), Requirement: reqGPU2}}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		until := time.Now().Add(time.Second)
		claimed := make(chan error, 4)
		for i := range cap(claimed) {
			go func() {
				for n := 0; time.Now().Before(until); n++ {
					wait := time.Duration(1+(i+n)%3) * time.Millisecond
					jobs, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Max: 1, Wait: wait})
					if err == nil && len(jobs) > 0 {
						err = fmt.Errorf("a claim without offers took %d jobs of shape %+v", len(jobs), reqGPU2)
					}
					if err != nil {
						claimed <- err
						return
					}
				}
				claimed <- nil
			}()
		}
		for range cap(claimed) {
			select {
			case err := <-claimed:
				require.NoError(t, err)
			case <-time.After(time.Until(until) + wakeLatency):
				t.Fatalf("a claim did not return %s after its wait ended", wakeLatency)
			}
		}
		close(stop)
		<-submitted
	})

	t.Run("WaitsVisible", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		big := &plane.Requirement{GPUs: 8, GPUType: "h100"}
		id := b.submitShaped(t, "big", big)
		for _, o := range []*plane.Offers{nil, {GPUs: 8}, {GPUs: 4, GPUType: "h100"}, {GPUs: 8, GPUType: "a100"}} {
			got, _ := b.claimOffering(t, o, plane.KindFIFO, 5)
			require.Empty(t, got, "offers %+v do not satisfy %+v", o, big)
		}
		inv := b.requireState(t, id, plane.StateQueued, 0)
		require.Equal(t, big, inv.Requirement, "Get shows what the job waits for")
		require.Equal(t, big.Shape(), inv.Shape)
		require.NotEmpty(t, inv.Shape)
		require.EqualValues(t, 1, b.count(t, plane.StateQueued), "counted as queued")
		require.Equal(t, []string{id}, b.listAll(t, plane.ListParams{Namespace: b.ns, Queue: b.q, State: plane.StateQueued}), "listed as queued")
		got, _ := b.claimOffering(t, &plane.Offers{GPUs: 8, GPUType: "h100"}, plane.KindFIFO, 5)
		require.Equal(t, []string{"big"}, got, "a capable worker takes it")
		inv = b.requireState(t, id, plane.StateRunning, 1)
		require.Equal(t, big, inv.Requirement)
	})

	t.Run("WaitingClaimWoken", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		// An offer-less claim parks first: a shaped submit must pass it over and reach
		// the capable claim behind it.
		plain := make(chan []*plane.Job, 1)
		go func() {
			jobs, _ := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Wait: longWait, Worker: "plain"})
			plain <- jobs
		}()
		time.Sleep(headStart)
		capable := make(chan []*plane.Job, 1)
		go func() {
			jobs, _ := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Wait: longWait, Worker: "gpu",
				Offers: &plane.Offers{GPUs: 1, GPUType: "a100"}})
			capable <- jobs
		}()
		time.Sleep(headStart)
		start := time.Now()
		id := b.submitShaped(t, "a100", reqA100)
		select {
		case jobs := <-capable:
			require.Len(t, jobs, 1)
			require.Equal(t, id, jobs[0].ID)
			require.Less(t, time.Since(start), wakeLatency, "the capable claim is woken by the submit")
		case jobs := <-plain:
			t.Fatalf("the offer-less claim got %d jobs", len(jobs))
		case <-time.After(longWait):
			t.Fatal("the capable claim was not woken")
		}
		b.submitShaped(t, "plain", nil)
		select {
		case jobs := <-plain:
			require.Len(t, jobs, 1)
			require.Equal(t, "plain", string(jobs[0].Payload))
		case <-time.After(longWait):
			t.Fatal("the offer-less claim was not woken")
		}
	})

	t.Run("Order", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		all := &plane.Offers{GPUs: 2, GPUType: "a100", MilliCPUs: 8000, MemoryBytes: 16 << 30}
		var want []string
		for i := range 3 {
			for _, sh := range []struct {
				name string
				r    *plane.Requirement
			}{{"a100", reqA100}, {"default", nil}, {"cpu8", reqCPU8}, {"gpu2", reqGPU2}} {
				p := fmt.Sprintf("%s-%d", sh.name, i)
				b.submitShaped(t, p, sh.r)
				want = append(want, p)
			}
		}
		got, _ := b.claimOffering(t, all, plane.KindFIFO, 5)
		require.Equal(t, want[:5], got, "fifo across shapes: submit order")
		got, _ = b.claimOffering(t, all, plane.KindFILO, 3)
		require.Equal(t, []string{want[11], want[10], want[9]}, got, "filo across shapes: newest first")
		var rest []string
		for {
			got, _ := b.claimOffering(t, all, plane.KindFIFO, 1)
			if len(got) == 0 {
				break
			}
			rest = append(rest, got...)
		}
		require.Equal(t, want[5:9], rest, "one at a time in the same order")

		// Priority across shapes.
		b.submitOne(t, plane.SubmitParams{Payload: []byte("p1-a100"), Priority: 1, Requirement: reqA100})
		b.submitOne(t, plane.SubmitParams{Payload: []byte("p5-default"), Priority: 5})
		b.submitOne(t, plane.SubmitParams{Payload: []byte("p3-cpu8"), Priority: 3, Requirement: reqCPU8})
		b.submitOne(t, plane.SubmitParams{Payload: []byte("p9-gpu2"), Priority: 9, Requirement: reqGPU2})
		got, _ = b.claimOffering(t, all, plane.KindPriority, 10)
		require.Equal(t, []string{"p9-gpu2", "p5-default", "p3-cpu8", "p1-a100"}, got, "priority across shapes")
	})

	t.Run("NoHeadOfLineBlocking", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		ps := make([]plane.SubmitParams, 200)
		for i := range ps {
			ps[i] = plane.SubmitParams{Payload: fmt.Appendf(nil, "gpu-%d", i), Requirement: reqA100}
		}
		b.submit(t, ps...)
		b.submitShaped(t, "cpu", reqCPU8)
		b.submitShaped(t, "plain", nil)
		got, _ := b.claimOffering(t, &plane.Offers{MilliCPUs: 16000, MemoryBytes: 32 << 30}, plane.KindFIFO, 10)
		require.Equal(t, []string{"cpu", "plain"}, got, "a CPU worker is not held behind 200 GPU jobs")
		got, _ = b.claimOffering(t, nil, plane.KindFIFO, 10)
		require.Empty(t, got)
		got, _ = b.claimOffering(t, &plane.Offers{GPUs: 1, GPUType: "a100"}, plane.KindFIFO, 3)
		require.Equal(t, []string{"gpu-0", "gpu-1", "gpu-2"}, got)
		got, _ = b.claimOffering(t, &plane.Offers{GPUs: 1, GPUType: "a100"}, plane.KindBoltzmann, 3)
		require.Len(t, got, 3, "a boltzmann claim with offers takes shaped jobs too")
	})

	t.Run("Retry", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		id := b.submitShaped(t, "a100", reqA100)
		offers := &plane.Offers{GPUs: 1, GPUType: "a100"}
		_, jobs := b.claimOffering(t, offers, plane.KindFIFO, 1)
		require.Len(t, jobs, 1)
		b.nack(t, jobs[0], true, "again")
		b.advance(pastBackoff)
		b.maintain(t)
		got, _ := b.claimOffering(t, nil, plane.KindFIFO, 5)
		require.Empty(t, got, "a retried job keeps its requirement")
		_, jobs = b.claimOffering(t, offers, plane.KindFIFO, 1)
		require.Len(t, jobs, 1, "and is claimable again by a capable worker")
		require.Equal(t, id, jobs[0].ID)
		require.Equal(t, 2, jobs[0].Attempt)
		// Cancelled while queued: gone from every claim.
		id2 := b.submitShaped(t, "cancel-me", reqA100)
		require.True(t, b.cancel(t, id2))
		got, _ = b.claimOffering(t, offers, plane.KindFIFO, 5)
		require.Empty(t, got)
		b.requireState(t, id2, plane.StateCancelled, 0)
	})

	t.Run("SettleAndClaim", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitShaped(t, "plain", nil)
		offers := &plane.Offers{GPUs: 1, GPUType: "a100"}
		_, jobs := b.claimOffering(t, nil, plane.KindFIFO, 1)
		require.Len(t, jobs, 1)
		id := b.submitShaped(t, "a100", reqA100)
		errs, got, err := b.drv.InvocationSettleAndClaim(b.ctx, []plane.SettleParams{ackParams(jobs[0], "done")},
			&plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindFIFO, Worker: "w"})
		must(t, err, "settle and claim without offers")
		require.NoError(t, errs[0])
		require.Empty(t, got, "settle-and-claim without offers takes no shaped job")
		_, got, err = b.drv.InvocationSettleAndClaim(b.ctx, nil,
			&plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindFIFO, Worker: "w", Offers: offers})
		must(t, err, "settle and claim with offers")
		require.Len(t, got, 1)
		require.Equal(t, id, got[0].ID)
	})

	t.Run("SeveralQueues", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		id := b.submitTo(t, b.ns, "gpu", plane.SubmitParams{Payload: []byte("a100"), Requirement: reqA100})[0].ID
		p := plane.ClaimParams{Queue: "cpu", Queues: []string{"gpu"}, Kind: plane.KindFIFO, Worker: "w"}
		require.Empty(t, b.claim(t, p), "a claim over several queues without offers")
		p.Offers = &plane.Offers{GPUs: 1, GPUType: "a100"}
		jobs := b.claim(t, p)
		require.Len(t, jobs, 1, "a claim over several queues with offers")
		require.Equal(t, id, jobs[0].ID)
	})

	t.Run("Deadline", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		late := b.submitOne(t, plane.SubmitParams{Payload: []byte("late"), Requirement: reqA100, Deadline: b.now().Add(10 * time.Second)})
		b.advance(11 * time.Second)
		b.maintain(t)
		b.requireState(t, late, plane.StateTimeout, 0)
		got, _ := b.claimOffering(t, &plane.Offers{GPUs: 1, GPUType: "a100"}, plane.KindFIFO, 5)
		require.Empty(t, got, "a shaped job past its deadline never runs")
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for _, bad := range []struct {
			r       plane.Requirement
			mention string
		}{
			{plane.Requirement{GPUs: -1}, "gpus"},
			{plane.Requirement{GPUs: plane.RequirementGPUsMax + 1}, "gpus"},
			{plane.Requirement{MilliCPUs: -5}, "cpus_milli"},
			{plane.Requirement{MemoryBytes: -1}, "memory_bytes"},
			{plane.Requirement{GPUType: "a 100"}, "gpu_type"},
			{plane.Requirement{Labels: map[string]string{"-zone": "x"}}, "labels"},
			{plane.Requirement{Labels: map[string]string{"zone": "a\nb"}}, "labels"},
		} {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
				Invocations: []plane.SubmitParams{{Payload: []byte("x")}, {Payload: []byte("y"), Requirement: &bad.r}}})
			requireInvalid(t, err, bad.mention)
		}
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Payload: []byte("z"), Requirement: reqA100, ConcurrencyKey: "tenant"}}})
		requireInvalid(t, err, "requirement", "concurrency key")
		require.EqualValues(t, 0, b.count(t, plane.StateQueued), "nothing of a refused batch is written")
		_, err = b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Offers: &plane.Offers{GPUs: -1}})
		requireInvalid(t, err, "offers.gpus")
		_, err = b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Offers: &plane.Offers{GPUType: "../x"}})
		requireInvalid(t, err, "offers.gpu_type")
	})

	t.Run("Shapes", func(t *testing.T) {
		t.Parallel()
		// The shape key: one per requirement, whatever the labels' order; "" for none.
		a := &plane.Requirement{GPUs: 1, Labels: map[string]string{"a": "1", "b": "2"}}
		c := &plane.Requirement{GPUs: 1, Labels: map[string]string{"b": "2", "a": "1"}}
		require.Equal(t, a.Shape(), c.Shape())
		require.NotEqual(t, a.Shape(), reqA100.Shape())
		require.Equal(t, "", (*plane.Requirement)(nil).Shape())
		require.Equal(t, "", (&plane.Requirement{}).Shape())
		shapes := []string{reqA100.Shape(), reqGPU2.Shape(), reqCPU8.Shape(), reqZone.Shape()}
		slices.Sort(shapes)
		require.Len(t, slices.Compact(shapes), 4)
	})
}
