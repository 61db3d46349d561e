package planetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// pause pauses (or resumes) the subtest's queue and returns whether that changed it.
func (b *bundle) pause(t *testing.T, paused bool) bool {
	t.Helper()
	changed, err := b.drv.QueuePause(b.ctx, &plane.PauseParams{Namespace: b.ns, Queue: b.q, Paused: paused})
	must(t, err, "pause")
	return changed
}

// pausedIn reports whether QueueStatsList says the queue is paused (false when not listed).
func (b *bundle) pausedIn(t *testing.T, ns, q string) bool {
	t.Helper()
	stats, err := b.drv.QueueStatsList(b.ctx, ns)
	must(t, err, "queue stats")
	for _, s := range stats {
		if s.Namespace == ns && s.Queue == q {
			return s.Paused
		}
	}
	return false
}

// testPause checks Driver.QueuePause: a paused queue accepts submits and gives no claim
// anything (nor a waiting claimer), other queues are untouched, and a resume makes the
// queued invocations claimable and wakes a waiting claimer.
func testPause(t *testing.T, s *suite) {
	t.Run("SubmitsAcceptedClaimsStopped", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		before := b.submitOne(t, plane.SubmitParams{Payload: []byte("before")})
		require.True(t, b.pause(t, true), "pausing a running queue changes it")
		require.False(t, b.pause(t, true), "pausing a paused queue changes nothing")
		require.True(t, b.pausedIn(t, b.ns, b.q), "QueueStatsList reports the pause")
		after := b.submitOne(t, plane.SubmitParams{Payload: []byte("after")})
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2})
		b.requireNothingClaimable(t)
		for _, kind := range []plane.Kind{plane.KindFILO, plane.KindPriority, plane.KindBoltzmann} {
			jobs := b.claim(t, plane.ClaimParams{Kind: kind, Temperature: 1, Max: 5})
			require.Empty(t, jobs, "a %s claim of a paused queue takes nothing", kind)
		}
		// Another queue of the namespace is not paused.
		other := b.submitTo(t, b.ns, "other", plane.SubmitParams{Payload: []byte("x")})[0].ID
		jobs := b.claim(t, plane.ClaimParams{Queue: "other", Kind: plane.KindFIFO})
		require.Len(t, jobs, 1)
		require.Equal(t, other, jobs[0].ID)
		require.False(t, b.pausedIn(t, b.ns, "other"))

		require.True(t, b.pause(t, false), "resuming a paused queue changes it")
		require.False(t, b.pause(t, false), "resuming a running queue changes nothing")
		require.False(t, b.pausedIn(t, b.ns, b.q))
		b.claimID(t, before)
		b.claimID(t, after)
	})

	t.Run("KeyedAndPlacedJobsStayQueued", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		keyed := b.submitOne(t, plane.SubmitParams{Payload: []byte("keyed"), ConcurrencyKey: "tenant-1"})
		shaped := b.submitOne(t, plane.SubmitParams{Payload: []byte("shaped"), Requirement: &plane.Requirement{GPUs: 1}})
		b.pause(t, true)
		for _, kind := range []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority, plane.KindBoltzmann} {
			require.Empty(t, b.claim(t, plane.ClaimParams{Kind: kind, Temperature: 1, Max: 5}),
				"a %s claim of a paused queue takes no keyed job", kind)
			require.Empty(t, b.claim(t, plane.ClaimParams{Kind: kind, Temperature: 1, Max: 5, Offers: &plane.Offers{GPUs: 1}}),
				"a %s claim with offers of a paused queue takes nothing", kind)
		}
		b.pause(t, false)
		got := map[string]bool{}
		for _, j := range b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 5, Offers: &plane.Offers{GPUs: 1}}) {
			got[j.ID] = true
		}
		require.Equal(t, map[string]bool{keyed: true, shaped: true}, got, "a resume makes both claimable")
	})

	t.Run("RunningJobsSettle", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.submitPayloads(t, "a", "b")
		j := b.claimOne(t)
		b.pause(t, true)
		require.NoError(t, b.settle(t, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: []byte("ok")}),
			"a job claimed before the pause settles")
		b.requireNothingClaimable(t)
	})

	t.Run("PausedQueueWithoutInvocationsIsListed", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.pause(t, true)
		require.True(t, b.pausedIn(t, b.ns, b.q), "a paused empty queue is listed with Paused")
	})

	t.Run("WaitingClaimerIsNotHandedAJobAndIsWokenOnResume", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		b.pause(t, true)
		type claimed struct {
			jobs []*plane.Job
			err  error
			at   time.Time
		}
		done := make(chan claimed, 1)
		go func() {
			jobs, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q,
				Kind: plane.KindFIFO, Wait: longWait, Worker: "waiter"})
			done <- claimed{jobs, err, time.Now()}
		}()
		time.Sleep(headStart)
		id := b.submitOne(t, plane.SubmitParams{Payload: []byte("held")})
		select {
		case c := <-done:
			t.Fatalf("a claimer of a paused queue returned %d jobs (err %v) after a submit", len(c.jobs), c.err)
		case <-time.After(shortWait):
		}
		require.Equal(t, plane.StateQueued, b.get(t, id).State, "the submit to a paused queue stays queued")
		resumed := time.Now()
		b.pause(t, false)
		select {
		case c := <-done:
			require.NoError(t, c.err)
			require.Len(t, c.jobs, 1, "the waiting claimer got the job on resume")
			require.Equal(t, id, c.jobs[0].ID)
			require.Less(t, c.at.Sub(resumed), wakeLatency, "the resume woke the waiting claimer")
		case <-time.After(longWait):
			t.Fatal("the waiting claimer was not woken by the resume")
		}
	})

	t.Run("BadNames", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for _, p := range []plane.PauseParams{{Namespace: b.ns, Queue: ""}, {Namespace: "bad/ns", Queue: "q"}, {Namespace: b.ns, Queue: "bad\x00q"}} {
			_, err := b.drv.QueuePause(b.ctx, &p)
			var invalid *plane.InvalidError
			require.True(t, errors.As(err, &invalid), "pause %q/%q: want *InvalidError, got %v", p.Namespace, p.Queue, err)
		}
	})

	testPauseCombined(t, s)
}
