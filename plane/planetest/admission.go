package planetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// testAdmission checks the admission block of a queue (issue 6): stored in the plane,
// enforced in the submit transaction, all-or-nothing for batches, bypassed by existing keys.
func testAdmission(t *testing.T, s *suite) {
	t.Run("ConditionalSet", func(t *testing.T) {
		// A set with IfMatch applies only while the stored block has that tag (of the block
		// as read from this plane: over HTTP, through the API's seconds and maps); another
		// tag is ErrChanged and writes nothing.
		t.Parallel()
		b := s.setup(t, config{})
		set := func(a plane.Admission, ifMatch string) error {
			_, err := b.drv.QueueAdmissionSet(b.ctx, &plane.AdmissionParams{Namespace: b.ns, Queue: b.q, Admission: a, IfMatch: ifMatch})
			return err
		}
		read := func() *plane.Admission {
			a, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
			must(t, err, "get admission")
			return a
		}
		first := plane.Admission{MaxDepth: 5, RateLimit: 2.5, DeadlineCutoff: 4350 * time.Millisecond, ConcurrencyLimit: 3,
			ConcurrencyLimits: map[string]int64{"a": 1}, KeyWeights: map[string]float64{"a": 0.3}, KeyRateLimit: 0.7,
			KeyRateLimits: map[string]float64{"b": 1.1}, KeyBursts: map[string]int64{"c": 4}}
		requireIs(t, set(first, "0123456789abcdef"), plane.ErrChanged, "no block yet: only the tag none matches")
		require.Nil(t, read(), "a refused conditional set writes nothing")
		must(t, set(first, plane.AdmissionTagNone), "a conditional set on a queue with no block")
		stored := read()
		tag := plane.AdmissionTag(stored)
		require.Equal(t, plane.AdmissionTag(&first), tag, "the tag of the block read is the tag of the block set")
		second := *stored
		second.MaxDepth = 9
		must(t, set(second, tag), "a set conditional on the block read")
		requireIs(t, set(first, tag), plane.ErrChanged, "the block changed since the tag was read")
		require.Equal(t, int64(9), read().MaxDepth, "the refused set wrote nothing")
		must(t, set(first, ""), "an unconditional set")
	})
	t.Run("SetGetDelete", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		a, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
		must(t, err, "get admission")
		require.Nil(t, a, "a queue starts without an admission block")
		b.setAdmission(t, plane.Admission{MaxDepth: 5, RateLimit: 2.5, DeadlineCutoff: 3 * time.Second})
		a, err = b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
		must(t, err, "get admission")
		require.Equal(t, &plane.Admission{MaxDepth: 5, OnFull: plane.OnFullReject, RateLimit: 2.5, Burst: 3, DeadlineCutoff: 3 * time.Second}, a)
		stats, err := b.drv.QueueStatsList(b.ctx, b.ns)
		must(t, err, "queue stats")
		require.Len(t, stats, 1, "a queue with a block and no invocations is listed")
		require.Equal(t, a, stats[0].Admission)
		for _, bad := range []plane.Admission{{MaxDepth: -1}, {OnFull: "drop"}, {RateLimit: -1}, {Burst: -2}, {DeadlineCutoff: -time.Second}} {
			_, err := b.drv.QueueAdmissionSet(b.ctx, &plane.AdmissionParams{Namespace: b.ns, Queue: b.q, Admission: bad})
			requireIs(t, err, plane.ErrInvalid, "admission %+v", bad)
		}
		again, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
		must(t, err, "get admission")
		require.Equal(t, a, again, "a rejected set changes nothing")
		deleted, err := b.drv.QueueAdmissionDelete(b.ctx, b.ns, b.q)
		must(t, err, "delete admission")
		require.True(t, deleted)
		a, err = b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
		must(t, err, "get admission")
		require.Nil(t, a)
	})

	t.Run("DefaultBurstFollowsRate", func(t *testing.T) {
		// A burst the caller never set follows the rate, also through a read, a change of
		// the rate and a set of the block read (the CLI's queue set, UpdateAdmission, Python's
		// dataclasses.replace); a burst set explicitly stays. Each concurrency key's bucket
		// alike: key_burst follows key_rate_limit unless set.
		t.Parallel()
		b := s.setup(t, config{})
		read := func() plane.Admission {
			a, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
			must(t, err, "get admission")
			require.NotNil(t, a)
			return *a
		}
		change := func(edit func(a *plane.Admission)) { // a read, a change, a set of the block read
			a := read()
			edit(&a)
			b.setAdmission(t, a)
		}
		b.setAdmission(t, plane.Admission{RateLimit: 10})
		require.Equal(t, int64(10), read().Burst, "the default burst is shown: the rate rounded up")
		change(func(a *plane.Admission) { a.RateLimit = 1000 })
		require.Equal(t, int64(1000), read().Burst, "a burst never set follows a raised rate")
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: make([]plane.SubmitParams, 50)})
		must(t, err, "a batch of 50 under a rate of 1000 with the burst it follows")
		change(func(a *plane.Admission) { a.RateLimit = 2.5 })
		require.Equal(t, int64(3), read().Burst, "and a lowered one")

		b.setAdmission(t, plane.Admission{RateLimit: 10, Burst: 10})
		change(func(a *plane.Admission) { a.RateLimit = 1000 })
		require.Equal(t, int64(10), read().Burst, "a burst set explicitly stays, even one equal to the default")
		change(func(a *plane.Admission) { a.Burst = 20 })
		change(func(a *plane.Admission) { a.RateLimit = 5 })
		require.Equal(t, int64(20), read().Burst, "a burst set on a block read stays")

		b.setAdmission(t, plane.Admission{KeyRateLimit: 10})
		require.Equal(t, int64(10), read().KeyBurst, "the default key burst is shown")
		change(func(a *plane.Admission) { a.KeyRateLimit = 1000 })
		require.Equal(t, int64(1000), read().KeyBurst, "a key burst never set follows a raised key rate")
		change(func(a *plane.Admission) { a.KeyBurst = 4 })
		change(func(a *plane.Admission) { a.KeyRateLimit = 2 })
		require.Equal(t, int64(4), read().KeyBurst, "a key burst set explicitly stays")
	})

	t.Run("RejectAtDepth", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.setAdmission(t, plane.Admission{MaxDepth: 3})
		b.submitPayloads(t, "a", "b")
		// A batch that does not fit is refused whole, saying how many would fit.
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Payload: []byte("c")}, {Payload: []byte("d")}}})
		requireIs(t, err, plane.ErrQueueFull)
		var ae *plane.AdmissionError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, int64(1), ae.Fit, "one of the two would fit")
		require.Equal(t, int64(2), b.count(t, plane.StateQueued), "nothing of the refused batch was written")
		b.submitPayloads(t, "c")
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Payload: []byte("d")}}})
		requireIs(t, err, plane.ErrQueueFull)
		require.Equal(t, int64(3), b.count(t, plane.StateQueued))
		// A claim makes room; running invocations do not count against max depth.
		require.Len(t, b.claim(t, plane.ClaimParams{}), 1)
		b.submitPayloads(t, "d")
		require.Equal(t, int64(3), b.count(t, plane.StateQueued))
	})

	t.Run("ExistingKeyBypassesFullQueue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.setAdmission(t, plane.Admission{MaxDepth: 1, RateLimit: 1, Burst: 1})
		id := b.submitOne(t, plane.SubmitParams{Key: "k", Payload: []byte("a")})
		res := b.submit(t, plane.SubmitParams{Key: "k", Payload: []byte("again")})
		require.Equal(t, plane.SubmitResult{ID: id, Existing: true}, res[0], "an existing key returns its id past every limit")
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Key: "other"}}})
		requireIs(t, err, plane.ErrQueueFull, "a new key is still refused")
	})

	t.Run("BlockReleasedByClaimInArrivalOrder", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		b.setAdmission(t, plane.Admission{MaxDepth: 1, OnFull: plane.OnFullBlock})
		b.submitPayloads(t, "first")
		type outcome struct {
			name string
			id   string
			err  error
		}
		done := make(chan outcome, 2)
		blocked := func(name string) {
			res, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
				Invocations: []plane.SubmitParams{{Payload: []byte(name)}}})
			o := outcome{name: name, err: err}
			if err == nil {
				o.id = res[0].ID
			}
			done <- o
		}
		// The arrival order under test needs A parked (its first transaction found the
		// queue full and it joined the line) before B arrives: nothing shows that from
		// outside, so the gap between them is generous, and scaled like wakeLatency.
		go blocked("A")
		time.Sleep(4 * headStart * raceSlowdown)
		go blocked("B")
		time.Sleep(4 * headStart * raceSlowdown)
		select {
		case o := <-done:
			t.Fatalf("submit %s went through a full queue (err %v)", o.name, o.err)
		default:
		}
		require.Len(t, b.claim(t, plane.ClaimParams{}), 1)
		first := <-done
		require.NoError(t, first.err)
		require.Equal(t, "A", first.name, "the earlier waiter is admitted first")
		require.Len(t, b.claim(t, plane.ClaimParams{}), 1)
		second := <-done
		require.NoError(t, second.err)
		require.Equal(t, "B", second.name)
		require.Equal(t, int64(1), b.count(t, plane.StateQueued))
	})

	t.Run("BlockEndsWithCallersDeadline", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		b.setAdmission(t, plane.Admission{MaxDepth: 1, OnFull: plane.OnFullBlock})
		b.submitPayloads(t, "first")
		// The context must outlast the submit's first transaction, which finds the queue
		// full (a context that ends before that is an honest context error): 1 s leaves a
		// loaded machine's commit room, scaled like wakeLatency under the race detector.
		deadline := time.Second * raceSlowdown
		ctx, cancel := context.WithTimeout(b.ctx, deadline)
		defer cancel()
		start := time.Now()
		_, err := b.drv.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Payload: []byte("late")}}})
		requireIs(t, err, plane.ErrQueueFull, "a blocked submit whose context ends reports the full queue")
		require.Less(t, time.Since(start), deadline+wakeLatency, "it returns when its context ends")
		require.Equal(t, int64(1), b.count(t, plane.StateQueued), "nothing was written")
	})

	t.Run("RateLimitBurstThenRefill", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.setAdmission(t, plane.Admission{RateLimit: 10, Burst: 3})
		b.submitPayloads(t, "1", "2", "3")
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Payload: []byte("4")}}})
		requireIs(t, err, plane.ErrRateLimited)
		var ae *plane.AdmissionError
		require.ErrorAs(t, err, &ae)
		require.InDelta(t, float64(100*time.Millisecond), float64(ae.RetryAfter), float64(5*time.Millisecond),
			"the error carries how long until one token refills (1/10 s)")
		require.Equal(t, int64(3), b.count(t, plane.StateQueued))
		b.advance(100 * time.Millisecond)
		b.submitPayloads(t, "4")
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Payload: []byte("5")}}})
		requireIs(t, err, plane.ErrRateLimited)
		b.advance(10 * time.Second) // refills to the burst, not beyond
		b.submitPayloads(t, "5", "6", "7")
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Payload: []byte("8")}}})
		requireIs(t, err, plane.ErrRateLimited)
		// A batch larger than the burst never passes, and says so.
		b.advance(10 * time.Second)
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: make([]plane.SubmitParams, 4)})
		requireIs(t, err, plane.ErrRateLimited)
		require.Contains(t, err.Error(), "burst")
		require.Equal(t, int64(7), b.count(t, plane.StateQueued))
	})

	t.Run("DeadlineCutoff", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setAdmission(t, plane.Admission{DeadlineCutoff: 10 * time.Second})
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{Payload: []byte("near"), Deadline: b.now().Add(5 * time.Second)}}})
		requireIs(t, err, plane.ErrInvalid, "a deadline nearer than the cutoff is refused at submit")
		require.Contains(t, err.Error(), "cutoff")
		require.Equal(t, int64(0), b.count(t, plane.StateQueued))
		far := b.submitOne(t, plane.SubmitParams{Payload: []byte("far"), Deadline: b.now().Add(20 * time.Second)})
		none := b.submitOne(t, plane.SubmitParams{Payload: []byte("none")})
		// At claim the far deadline is now nearer than the cutoff: ended as timeout, not started.
		b.advance(15 * time.Second)
		jobs := b.claim(t, plane.ClaimParams{Max: 2})
		require.Len(t, jobs, 1)
		require.Equal(t, none, jobs[0].ID, "a job without a deadline runs")
		inv := b.requireState(t, far, plane.StateTimeout, 0)
		require.NotNil(t, inv.Error)
		require.Equal(t, "deadline", inv.Error.Type)
	})
}

// setAdmission sets a as the queue's block and checks that the set returns the block as
// stored, the one a read right after it sees.
func (b *bundle) setAdmission(t *testing.T, a plane.Admission) {
	t.Helper()
	written, err := b.drv.QueueAdmissionSet(b.ctx, &plane.AdmissionParams{Namespace: b.ns, Queue: b.q, Admission: a})
	must(t, err, "set admission")
	read, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
	must(t, err, "get admission")
	require.Equal(t, read, written, "the set returns the block as stored")
}
