package planetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// testDelayed checks delayed submits (NotBefore, Delay): queued but not claimable before
// their due time, which the plane's clock decides, and claimed promptly once due.
func testDelayed(t *testing.T, s *suite) {
	t.Run("QueuedButNotClaimableUntilDue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		start := b.now()
		id := b.submitOne(t, plane.SubmitParams{Payload: []byte("later"), Delay: time.Hour})
		inv := b.requireState(t, id, plane.StateQueued, 0)
		requireTime(t, start.Add(time.Hour), inv.AvailableAt, "available at of a delayed invocation")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
		b.requireNothingClaimable(t)
		b.advance(59 * time.Minute)
		b.requireNothingClaimable(t)
		b.advance(time.Minute)
		j := b.claimID(t, id)
		require.Equal(t, 1, j.Attempt)
	})

	t.Run("DelayedDoesNotHoldBackOthers", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		delayed := b.submitOne(t, plane.SubmitParams{Payload: []byte("later"), Delay: time.Hour})
		now := b.submitOne(t, plane.SubmitParams{Payload: []byte("now")})
		b.claimID(t, now)
		b.requireNothingClaimable(t)
		b.requireState(t, delayed, plane.StateQueued, 0)
	})

	t.Run("LaterOfNotBeforeAndDelayWins", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		start := b.now()
		a := b.submitOne(t, plane.SubmitParams{NotBefore: start.Add(2 * time.Hour), Delay: time.Hour})
		c := b.submitOne(t, plane.SubmitParams{NotBefore: start.Add(time.Minute), Delay: time.Hour})
		requireTime(t, start.Add(2*time.Hour), b.get(t, a).AvailableAt, "NotBefore later than the delay")
		requireTime(t, start.Add(time.Hour), b.get(t, c).AvailableAt, "delay later than NotBefore")
		b.advance(time.Hour)
		b.claimID(t, c)
		b.requireNothingClaimable(t)
		b.advance(time.Hour)
		b.claimID(t, a)
	})

	t.Run("DueTimesAreThePlanesClock", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		// The plane's clock is years ahead of the real one: a NotBefore that is still in
		// the real future is in the plane's past, so the invocation is claimable at once.
		real := time.Now()
		require.True(t, b.now().After(real.Add(24*time.Hour)), "the suite's fake clock starts in the future")
		id := b.submitOne(t, plane.SubmitParams{NotBefore: real.Add(time.Hour)})
		b.claimID(t, id)
		// A Delay counts from the plane's clock, not the caller's.
		id = b.submitOne(t, plane.SubmitParams{Delay: time.Minute})
		requireTime(t, b.now().Add(time.Minute), b.get(t, id).AvailableAt, "due time of a delay")
	})

	t.Run("IdleClaimerIsWokenWhenDue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		const delay = 300 * time.Millisecond
		start := time.Now()
		id := b.submitOne(t, plane.SubmitParams{Payload: []byte("soon"), Delay: delay})
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Wait: longWait})
		elapsed := time.Since(start)
		require.Len(t, jobs, 1, "the waiting claimer got the delayed invocation")
		require.Equal(t, id, jobs[0].ID)
		require.GreaterOrEqual(t, elapsed, delay-5*time.Millisecond, "claimed before it was due")
		require.Less(t, elapsed, delay+wakeLatency, "a claimer waiting for a delayed invocation was not woken when it came due")
	})

	t.Run("EveryIdleClaimerGetsAJobWhenSeveralFallDue", func(t *testing.T) {
		// Several claimers wake together when the jobs fall due and promote at once: on
		// PostgreSQL the first promotes them all while the others skip the rows it holds
		// (a claim's promote never waits for a row), and those must still claim the rows it
		// promoted at once, not after a notification that never comes (a claim's promote
		// sends none) or a poll. No maintenance promotes them.
		t.Parallel()
		b := s.setup(t, config{realClock: true, noMaintenance: true})
		const (
			delay    = 300 * time.Millisecond
			claimers = 6
		)
		start := time.Now()
		ids := make(map[string]bool, claimers)
		for range claimers {
			ids[b.submitOne(t, plane.SubmitParams{Delay: delay})] = true
		}
		type claimed struct {
			jobs    []*plane.Job
			err     error
			elapsed time.Duration
		}
		got := make(chan claimed, claimers)
		for range claimers {
			go func() {
				jobs, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindFIFO, Wait: longWait})
				got <- claimed{jobs, err, time.Since(start)}
			}()
		}
		for range claimers {
			c := <-got
			must(t, c.err, "claim")
			require.Len(t, c.jobs, 1, "each waiting claimer gets one of the due jobs")
			require.True(t, ids[c.jobs[0].ID], "a due job claimed once")
			delete(ids, c.jobs[0].ID)
			require.GreaterOrEqual(t, c.elapsed, delay-5*time.Millisecond, "claimed before it was due")
			require.Less(t, c.elapsed, delay+wakeLatency, "a claimer waiting for delayed invocations was not served when they came due")
		}
	})

	t.Run("IdleClaimerIsWokenWhenTheClockPassesDue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{Delay: time.Hour})
		got := make(chan []*plane.Job, 1)
		go func() {
			jobs, _ := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindFIFO, Wait: longWait})
			got <- jobs
		}()
		time.Sleep(headStart)
		b.advance(time.Hour)
		select {
		case jobs := <-got:
			require.Len(t, jobs, 1)
			require.Equal(t, id, jobs[0].ID)
		case <-time.After(wakeLatency):
			t.Fatal("a claimer parked on a delayed invocation was not woken after the plane's clock passed its due time")
		}
	})

	t.Run("DelayedCanBeCancelledAndTimesOutAtItsDeadline", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		cancelled := b.submitOne(t, plane.SubmitParams{Delay: time.Hour})
		require.True(t, b.cancel(t, cancelled), "a delayed invocation is queued, so cancel ends it")
		b.requireState(t, cancelled, plane.StateCancelled, 0)
		late := b.submitOne(t, plane.SubmitParams{Delay: time.Hour, Deadline: b.now().Add(time.Minute)})
		b.advance(2 * time.Minute)
		b.maintain(t)
		inv := b.requireState(t, late, plane.StateTimeout, 0)
		require.NotNil(t, inv.Error)
		require.Equal(t, "deadline", inv.Error.Type)
		b.requireCounts(t, map[plane.State]int64{plane.StateCancelled: 1, plane.StateTimeout: 1})
		b.advance(time.Hour)
		b.requireNothingClaimable(t)
	})

	t.Run("BackoffDoesNotHoldBackFreshJobs", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{backoff: plane.Backoff{Base: time.Hour, Max: time.Hour}})
		var retried []string
		for range 20 {
			retried = append(retried, b.submitOne(t, plane.SubmitParams{}))
		}
		for range retried {
			b.nack(t, b.claimOne(t), true, "later")
		}
		fresh := b.submitOne(t, plane.SubmitParams{})
		b.claimID(t, fresh)
		b.requireNothingClaimable(t)
		require.Equal(t, int64(20), b.count(t, plane.StateQueued), "jobs in backoff count as queued")
	})

	t.Run("NegativeDelayIsInvalid", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Delay: -time.Second}}})
		requireIs(t, err, plane.ErrInvalid)
		require.Contains(t, err.Error(), "delay")
	})

	t.Run("DelayedCountsAgainstMaxDepth", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		_, err := b.drv.QueueAdmissionSet(b.ctx, &plane.AdmissionParams{Namespace: b.ns, Queue: b.q, Admission: plane.Admission{MaxDepth: 1}})
		must(t, err, "set admission")
		b.submitOne(t, plane.SubmitParams{Delay: time.Hour})
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{{}}})
		requireIs(t, err, plane.ErrQueueFull, "a delayed invocation takes room in its queue")
	})
}
