package planetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// claimAllOneByOne claims single jobs of kind until none is left and returns their ids in
// claim order.
func (b *bundle) claimAllOneByOne(t *testing.T, kind plane.Kind) []string {
	t.Helper()
	var ids []string
	for range 1000 {
		jobs := b.claim(t, plane.ClaimParams{Kind: kind, Temperature: 1, Worker: "w"})
		if len(jobs) == 0 {
			return ids
		}
		require.Len(t, jobs, 1, "a claim without Max claims one")
		ids = append(ids, jobs[0].ID)
	}
	require.FailNow(t, "claims never ran dry")
	return nil
}

// submitPriorities submits one invocation per priority, each in its own call, in order.
func (b *bundle) submitPriorities(t *testing.T, priorities ...float64) []string {
	t.Helper()
	ids := make([]string, len(priorities))
	for i, p := range priorities {
		ids[i] = b.submitOne(t, plane.SubmitParams{Priority: p, Payload: fmt.Appendf(nil, "job %d", i)})
		if i%2 == 1 {
			b.advance(time.Millisecond)
		}
	}
	return ids
}

// pick returns ids[i] for each i, in order.
func pick(ids []string, idx ...int) []string {
	out := make([]string, len(idx))
	for i, x := range idx {
		out[i] = ids[x]
	}
	return out
}

// lateSubmit is what submitLater reports: when the submit started, its id, its error.
type lateSubmit struct {
	at  time.Time
	id  string
	err error
}

// submitLater submits p after delay, on its own goroutine, and reports on the channel.
func (b *bundle) submitLater(delay time.Duration, p plane.SubmitParams) <-chan lateSubmit {
	ch := make(chan lateSubmit, 1)
	go func() {
		<-time.After(delay)
		r := lateSubmit{at: time.Now()}
		res, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{p}})
		if err == nil && len(res) == 1 {
			r.id = res[0].ID
		}
		r.err = err
		ch <- r
	}()
	return ch
}

func testClaim(t *testing.T, s *suite) {
	priorities := []float64{1, 5, 5, 3, -2, 5, 0.5}

	t.Run("FIFOOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPriorities(t, priorities...)
		require.Equal(t, ids, b.claimAllOneByOne(t, plane.KindFIFO), "fifo ignores priority")
	})

	t.Run("EmptyKindIsFIFO", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPriorities(t, priorities...)
		require.Equal(t, ids, b.claimAllOneByOne(t, ""))
	})

	t.Run("FILONewestFirst", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPriorities(t, priorities...)
		want := slices.Clone(ids)
		slices.Reverse(want)
		require.Equal(t, want, b.claimAllOneByOne(t, plane.KindFILO), "filo ignores priority")
	})

	t.Run("PriorityHighestFirstTiesOldest", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPriorities(t, priorities...)
		require.Equal(t, pick(ids, 1, 2, 5, 3, 0, 6, 4), b.claimAllOneByOne(t, plane.KindPriority))
	})

	t.Run("OrderChosenPerClaim", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPriorities(t, 2, 9, 4, 1)
		next := func(kind plane.Kind) string {
			jobs := b.claim(t, plane.ClaimParams{Kind: kind, Temperature: 0.001})
			require.Len(t, jobs, 1)
			return jobs[0].ID
		}
		require.Equal(t, ids[1], next(plane.KindPriority))
		require.Equal(t, ids[0], next(plane.KindFIFO))
		require.Equal(t, ids[3], next(plane.KindFILO))
		require.Equal(t, ids[2], next(plane.KindBoltzmann))
	})

	t.Run("BatchClaimInOrder", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			kind plane.Kind
			want []int
		}{
			{plane.KindFIFO, []int{0, 1, 2, 3, 4, 5, 6}},
			{plane.KindFILO, []int{6, 5, 4, 3, 2, 1, 0}},
			{plane.KindPriority, []int{1, 2, 5, 3, 0, 6, 4}},
		} {
			t.Run(string(c.kind), func(t *testing.T) {
				b := s.setup(t, config{})
				ids := b.submitPriorities(t, priorities...)
				first := b.claim(t, plane.ClaimParams{Kind: c.kind, Max: 3})
				rest := b.claim(t, plane.ClaimParams{Kind: c.kind, Max: 100})
				var got []string
				for _, j := range append(first, rest...) {
					got = append(got, j.ID)
				}
				require.Len(t, first, 3, "%s: Max caps the claim", c.kind)
				require.Equal(t, pick(ids, c.want...), got, "%s: a batch claim comes in claim order", c.kind)
				b.requireCounts(t, map[plane.State]int64{plane.StateRunning: 7})
			})
		}
	})

	t.Run("MaxZeroMeansOne", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.submitPayloads(t, "a", "b", "c")
		require.Len(t, b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 0}), 1)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2, plane.StateRunning: 1})
	})

	t.Run("ClaimsOnlyItsOwnQueue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		mine := b.submitTo(t, "default", "q1", plane.SubmitParams{})[0].ID
		b.submitTo(t, "default", "q2", plane.SubmitParams{})
		b.submitTo(t, "other", "q1", plane.SubmitParams{})
		for _, kind := range []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority, plane.KindBoltzmann} {
			jobs := b.claim(t, plane.ClaimParams{Namespace: "nobody", Queue: "q1", Kind: kind, Temperature: 1, Max: 10})
			require.Empty(t, jobs, "%s: a namespace without jobs", kind)
		}
		jobs := b.claim(t, plane.ClaimParams{Namespace: "default", Queue: "q1", Kind: plane.KindFIFO, Max: 10})
		require.Len(t, jobs, 1)
		require.Equal(t, mine, jobs[0].ID)
		require.EqualValues(t, 1, b.countIn(t, "default", "q2", plane.StateQueued))
		require.EqualValues(t, 1, b.countIn(t, "other", "q1", plane.StateQueued))
	})

	t.Run("NotClaimableBeforeAvailableAt", func(t *testing.T) {
		t.Parallel()
		for _, kind := range []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority, plane.KindBoltzmann} {
			t.Run(string(kind), func(t *testing.T) {
				b := s.setup(t, config{})
				// The job in backoff comes first in every order: oldest (fifo), newest (filo),
				// highest priority (priority, boltzmann at a low temperature).
				var other string
				if kind == plane.KindFILO {
					other = b.submitOne(t, plane.SubmitParams{Priority: 0})
				}
				retried := b.submitOne(t, plane.SubmitParams{Priority: 10})
				j := b.claim(t, plane.ClaimParams{Kind: plane.KindPriority})[0]
				require.Equal(t, retried, j.ID)
				nackedAt := b.now()
				p := nackParams(j, true, "again later")
				p.RetryDelay = 10 * time.Minute
				must(t, b.settle(t, p), "nack with retry delay")
				inv := b.requireState(t, retried, plane.StateQueued, 1)
				requireTime(t, nackedAt.Add(10*time.Minute), inv.AvailableAt, "RetryDelay overrides the backoff")
				if kind != plane.KindFILO {
					other = b.submitOne(t, plane.SubmitParams{Priority: 0})
				}
				claim := func() []*plane.Job {
					// A long lease: the clock moves 10 minutes while other is held.
					return b.claim(t, plane.ClaimParams{Kind: kind, Temperature: 0.01, Max: 10, LeaseTTL: time.Hour})
				}
				jobs := claim()
				require.Len(t, jobs, 1, "%s: only the job without backoff is claimable", kind)
				require.Equal(t, other, jobs[0].ID, kind)
				b.advance(10*time.Minute - time.Second)
				require.Empty(t, claim(), "%s: still in backoff", kind)
				b.advance(time.Second + time.Millisecond)
				jobs = claim()
				require.Len(t, jobs, 1, "%s: claimable once its available_at has passed", kind)
				require.Equal(t, retried, jobs[0].ID, kind)
				require.Equal(t, 2, jobs[0].Attempt)
			})
		}
	})

	t.Run("OneWinnerPerInvocation", func(t *testing.T) {
		t.Parallel()
		for _, kind := range []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority, plane.KindBoltzmann} {
			t.Run(string(kind), func(t *testing.T) {
				b := s.setup(t, config{realClock: true})
				const jobs, claimers = 60, 6
				var batch []plane.SubmitParams
				for i := range jobs {
					batch = append(batch, plane.SubmitParams{Priority: float64(i % 4)})
				}
				submitted := map[string]bool{}
				for _, r := range b.submit(t, batch...) {
					submitted[r.ID] = true
				}
				claimed := make([][]*plane.Job, claimers)
				errs := make([]error, claimers)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for c := range claimers {
					wg.Go(func() {
						<-start
						for {
							got, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q,
								Kind: kind, Temperature: 2, Max: 3, Worker: fmt.Sprintf("claimer-%d", c)})
							if err != nil {
								errs[c] = err
								return
							}
							if len(got) == 0 {
								return
							}
							claimed[c] = append(claimed[c], got...)
						}
					})
				}
				close(start)
				wg.Wait()
				winners := map[string]int{}
				tokens := map[string]bool{}
				for c := range claimers {
					must(t, errs[c], "concurrent claim")
					for _, j := range claimed[c] {
						require.True(t, submitted[j.ID], "%s: claimed an id never submitted", kind)
						winners[j.ID]++
						require.Equal(t, 1, winners[j.ID], "%s: %s claimed twice", kind, j.ID)
						require.False(t, tokens[j.Token], "%s: a lease token given twice", kind)
						tokens[j.Token] = true
					}
				}
				require.Len(t, winners, jobs, "%s: every job claimed exactly once", kind)
				b.requireCounts(t, map[plane.State]int64{plane.StateRunning: jobs})
			})
		}
	})

	t.Run("ConcurrentWaitingClaimersEachGetOne", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		const claimers = 6
		got := make([][]*plane.Job, claimers)
		errs := make([]error, claimers)
		var wg sync.WaitGroup
		for c := range claimers {
			wg.Go(func() {
				got[c], errs[c] = b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q,
					Kind: plane.KindFIFO, Wait: longWait, Worker: fmt.Sprintf("waiter-%d", c)})
			})
		}
		<-time.After(headStart) // let the claimers park; correctness does not depend on it
		ids := b.submitPayloads(t, "1", "2", "3", "4", "5", "6")
		wg.Wait()
		seen := map[string]bool{}
		for c := range claimers {
			must(t, errs[c], "waiting claim")
			require.Len(t, got[c], 1, "claimer %d: every waiting claimer is woken and gets one job", c)
			require.False(t, seen[got[c][0].ID], "a job claimed twice")
			seen[got[c][0].ID] = true
		}
		for _, id := range ids {
			require.True(t, seen[id])
		}
	})

	t.Run("WaitWokenBySubmit", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		submitted := b.submitLater(headStart, plane.SubmitParams{Payload: []byte("late")})
		start := time.Now()
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Wait: longWait})
		returned := time.Now()
		sub := <-submitted
		must(t, sub.err, "submit")
		require.Len(t, jobs, 1, "a waiting claim gets the job submitted while it waits")
		require.Equal(t, sub.id, jobs[0].ID)
		require.Equal(t, []byte("late"), jobs[0].Payload)
		require.Less(t, returned.Sub(start), longWait/2)
		require.Less(t, returned.Sub(sub.at), wakeLatency, "the waiting claimer is woken by the submit, not by polling")
	})

	t.Run("WaitReturnsEmptyWhenNothingCame", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		b.submitTo(t, b.ns, "elsewhere", plane.SubmitParams{})
		start := time.Now()
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Wait: shortWait})
		elapsed := time.Since(start)
		require.Empty(t, jobs)
		require.GreaterOrEqual(t, elapsed, shortWait*9/10, "the claim waited")
		require.Less(t, elapsed, shortWait+wakeLatency, "the claim stopped waiting")
	})

	t.Run("WaitEndsWithContext", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		ctx, cancel := context.WithTimeout(b.ctx, shortWait)
		defer cancel()
		start := time.Now()
		_, err := b.drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindFIFO, Wait: longWait})
		skipUnimplemented(t, err)
		require.ErrorIs(t, err, context.DeadlineExceeded, "a claim ends with its context")
		require.Less(t, time.Since(start), shortWait+wakeLatency)
		// The ended claim takes nothing: a job submitted now stays queued. Over HTTP the
		// server may not yet have seen the client go and hand the job to the claim it still
		// holds; it then gives it back (server: an unwritten claim is released), so the
		// job is queued again within wakeLatency, never lost nor left running.
		b.submitOne(t, plane.SubmitParams{})
		require.Eventually(t, func() bool { return b.count(t, plane.StateQueued) == 1 }, wakeLatency, 5*time.Millisecond)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
	})

	t.Run("WaitingClaimerGetsRetryWhenBackoffEnds", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		p := nackParams(j, true, "soon")
		p.RetryDelay = 300 * time.Millisecond
		must(t, b.settle(t, p), "nack")
		availableAt := b.get(t, id).AvailableAt
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Wait: longWait})
		returned := time.Now()
		require.Len(t, jobs, 1, "a waiting claimer gets a job whose backoff ends while it waits")
		require.Equal(t, id, jobs[0].ID)
		require.Equal(t, 2, jobs[0].Attempt)
		require.False(t, returned.Before(availableAt), "not before its available_at")
		require.Less(t, returned.Sub(availableAt), wakeLatency, "soon after its available_at")
	})
}
