package planetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// testQueues covers a claim over several queues (plane.ClaimParams.Queues).
func testQueues(t *testing.T, s *suite) {
	across := func(queues ...string) plane.ClaimParams {
		return plane.ClaimParams{Queue: queues[0], Queues: queues[1:], Kind: plane.KindFIFO, Worker: "w"}
	}

	t.Run("WorkOnlyOnTheSecondComesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitTo(t, b.ns, "second", plane.SubmitParams{Payload: []byte("x")})[0].ID
		p := across("first", "second")
		p.Wait = 20 * time.Second
		start := time.Now()
		jobs := b.claim(t, p)
		require.Len(t, jobs, 1)
		require.Equal(t, id, jobs[0].ID)
		require.Equal(t, "second", jobs[0].Queue, "a job names the queue it came from")
		require.Less(t, time.Since(start), 10*time.Second, "the claim did not wait on the empty first queue")
	})

	t.Run("WaitsOnEveryQueueAtOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		for i, target := range []string{"third", "first"} {
			p := across("first", "second", "third")
			p.Wait = 20 * time.Second
			done := make(chan []*plane.Job, 1)
			go func() {
				jobs, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: p.Queue,
					Queues: p.Queues, Kind: p.Kind, Wait: p.Wait})
				if err != nil {
					t.Error(err)
				}
				done <- jobs
			}()
			time.Sleep(50 * time.Millisecond) // most likely waiting by now; either way it must get the job
			submitted := time.Now()
			id := b.submitTo(t, b.ns, target, plane.SubmitParams{Payload: fmt.Appendf(nil, "%d", i)})[0].ID
			jobs := <-done
			require.Len(t, jobs, 1, "a submit to %s ends the wait", target)
			require.Equal(t, id, jobs[0].ID)
			require.Less(t, time.Since(submitted), 10*time.Second, "the submit to %s woke the claim", target)
		}
	})

	t.Run("HotQueueDoesNotStarveColdOne", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for i := range 20 {
			b.submitTo(t, b.ns, "hot", plane.SubmitParams{Payload: fmt.Appendf(nil, "hot %d", i)})
		}
		for i := range 3 {
			b.submitTo(t, b.ns, "cold", plane.SubmitParams{Payload: fmt.Appendf(nil, "cold %d", i)})
		}
		from := map[string]int{}
		for range 6 {
			jobs := b.claim(t, across("hot", "cold"))
			require.Len(t, jobs, 1)
			from[jobs[0].Queue]++
		}
		// Each of two queues is tried first in every second claim.
		require.Equal(t, map[string]int{"hot": 3, "cold": 3}, from, "claims over a hot and a cold queue take turns")
	})

	t.Run("JobsOfOneClaimComeFromOneQueue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.submitTo(t, b.ns, "a", plane.SubmitParams{}, plane.SubmitParams{})
		b.submitTo(t, b.ns, "b", plane.SubmitParams{}, plane.SubmitParams{})
		p := across("a", "b", "a")
		p.Max = 10
		jobs := b.claim(t, p)
		require.Len(t, jobs, 2)
		require.Equal(t, jobs[0].Queue, jobs[1].Queue)
		rest := b.claim(t, p)
		require.Len(t, rest, 2)
		require.NotEqual(t, jobs[0].Queue, rest[0].Queue)
		require.Empty(t, b.claim(t, p))
	})

	t.Run("OnlyItsNamespace", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.submitTo(t, "other", "b", plane.SubmitParams{})
		require.Empty(t, b.claim(t, across("a", "b")))
		require.EqualValues(t, 1, b.countIn(t, "other", "b", plane.StateQueued))
	})

	t.Run("SettleAndClaimAcrossQueues", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.submitTo(t, b.ns, "a", plane.SubmitParams{})
		j := b.claim(t, plane.ClaimParams{Queue: "a"})[0]
		id := b.submitTo(t, b.ns, "b", plane.SubmitParams{})[0].ID
		errs, jobs, err := b.drv.InvocationSettleAndClaim(b.ctx, []plane.SettleParams{ackParams(j, "done")},
			&plane.ClaimParams{Namespace: b.ns, Queue: "a", Queues: []string{"b"}, Kind: plane.KindFIFO})
		must(t, err, "settle and claim across queues")
		require.NoError(t, errs[0])
		require.Len(t, jobs, 1)
		require.Equal(t, id, jobs[0].ID)
		b.requireState(t, j.ID, plane.StateSucceeded, 1)
	})

	t.Run("KeyedJobFallenDueWithoutWait", func(t *testing.T) {
		// A claim without a wait over an empty queue and one whose keyed job has just fallen
		// due (no maintenance promoted it, and its key has no counter row yet) takes the job,
		// whichever queue the rotation tries first: two rounds, two new keys. Before, on
		// PostgreSQL, when the empty queue came first its claim's promote made the
		// transaction one that holds rows, whose later promote leaves a keyed row without a
		// counter row to the next claim; the claim tried again for a second in the same order
		// and came back empty (SQLite took the job).
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for _, key := range []string{"k1", "k2"} {
			id := b.submitTo(t, b.ns, "keyed", plane.SubmitParams{ConcurrencyKey: key, Delay: time.Minute})[0].ID
			b.advance(2 * time.Minute)
			jobs := b.claim(t, across("quiet", "keyed"))
			require.Len(t, jobs, 1, "the due keyed job of %s is claimed", key)
			require.Equal(t, id, jobs[0].ID)
		}
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		many := make([]string, plane.ClaimQueuesLimit)
		for i := range many {
			many[i] = fmt.Sprintf("q%d", i)
		}
		for _, p := range []plane.ClaimParams{
			{Namespace: b.ns, Queue: "a", Queues: many, Kind: plane.KindFIFO},
			{Namespace: b.ns, Queue: "a", Queues: []string{"b", "not a name"}, Kind: plane.KindFIFO},
			{Namespace: b.ns, Queue: "a", Queues: []string{""}, Kind: plane.KindFIFO},
		} {
			_, err := b.drv.InvocationClaimMany(b.ctx, &p)
			var invalid *plane.InvalidError
			require.True(t, errors.As(err, &invalid), "a bad queues list is invalid: %v", err)
			require.Equal(t, "queues", invalid.Field)
		}
		// The limit counts each name once.
		dup := append([]string{"a"}, many[:plane.ClaimQueuesLimit-1]...)
		dup = append(dup, many[:plane.ClaimQueuesLimit-1]...)
		_, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: "a", Queues: dup, Kind: plane.KindFIFO})
		require.NoError(t, err)
	})
}
