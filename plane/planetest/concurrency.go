package planetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// setKeys stores an admission block with concurrency limits and weights on the subtest's
// queue.
func (b *bundle) setKeys(t *testing.T, a plane.Admission) {
	t.Helper()
	_, err := b.drv.QueueAdmissionSet(b.ctx, &plane.AdmissionParams{Namespace: b.ns, Queue: b.q, Admission: a})
	must(t, err, "set admission")
}

// keyStats returns the concurrency keys of the subtest's queue (QueueStatsList), by key.
func (b *bundle) keyStats(t *testing.T) map[string]plane.KeyStats {
	t.Helper()
	stats, err := b.drv.QueueStatsList(b.ctx, b.ns)
	must(t, err, "queue stats")
	out := map[string]plane.KeyStats{}
	for _, st := range stats {
		if st.Queue == b.q {
			for _, k := range st.Keys {
				out[k.Key] = k
			}
		}
	}
	return out
}

// keyOf maps claimed jobs to their concurrency keys ("-" for none).
func keysOf(jobs []*plane.Job) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		k := j.ConcurrencyKey
		if k == "" {
			k = "-"
		}
		out[k]++
	}
	return out
}

// submitKeyed submits n invocations of concurrency key key (payloads key-0, key-1, …) and
// returns their ids.
func (b *bundle) submitKeyed(t *testing.T, key string, n int) []string {
	t.Helper()
	ps := make([]plane.SubmitParams, n)
	for i := range ps {
		ps[i] = plane.SubmitParams{ConcurrencyKey: key, Payload: fmt.Appendf(nil, "%s-%d", key, i)}
	}
	res := b.submit(t, ps...)
	ids := make([]string, n)
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// requireAlternate claims and acks six jobs one at a time and requires the first to be of
// key first and each pair of claims to be one of each of keys (two keys taking turns).
func (b *bundle) requireAlternate(t *testing.T, first string, keys ...string) {
	t.Helper()
	var order []string
	for range 6 {
		j := b.claimOne(t)
		order = append(order, j.ConcurrencyKey)
		b.ack(t, j, "ok")
	}
	require.Equal(t, first, order[0], "the key that joined goes first at the turn (%v)", order)
	for i := 0; i < len(order); i += 2 {
		require.ElementsMatch(t, keys, order[i:i+2], "claims %d and %d alternate: %v", i, i+1, order)
	}
}

// testConcurrency checks concurrency keys, their limits and fair share (plane/
// concurrency.go): at most the key's limit of its invocations hold a lease at once, every
// way a lease ends frees its slot exactly once, unkeyed jobs are never limited, and claims
// rotate across keys by weight.
func testConcurrency(t *testing.T, s *suite) {
	t.Run("Limit", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 2, ConcurrencyLimits: map[string]int64{"b": 1}})
		b.submitKeyed(t, "a", 5)
		b.submitKeyed(t, "b", 3)
		b.submit(t, plane.SubmitParams{}, plane.SubmitParams{})
		jobs := b.claim(t, plane.ClaimParams{Max: 20, Worker: "w"})
		require.Equal(t, map[string]int{"a": 2, "b": 1, "-": 2}, keysOf(jobs), "each key up to its limit, unkeyed jobs unlimited")
		b.requireNothingClaimable(t)
		require.EqualValues(t, 5, b.count(t, plane.StateQueued), "the jobs of keys at their limit stay queued")
		stats, err := b.drv.QueueStatsList(b.ctx, b.ns)
		must(t, err, "queue stats")
		var keys []plane.KeyStats
		for _, st := range stats {
			if st.Queue == b.q {
				keys = st.Keys
			}
		}
		require.Equal(t, []plane.KeyStats{{Key: "a", Queued: 3, Running: 2, Limit: 2, Weight: 1},
			{Key: "b", Queued: 2, Running: 1, Limit: 1, Weight: 1}}, keys, "stats show each key's running and limit")
		for _, j := range jobs {
			if j.ConcurrencyKey == "a" {
				b.ack(t, j, "done")
				break
			}
		}
		next := b.claim(t, plane.ClaimParams{Max: 20, Worker: "w"})
		require.Equal(t, map[string]int{"a": 1}, keysOf(next), "an ack frees exactly one slot of its key")
		b.requireNothingClaimable(t)
		inv := b.get(t, next[0].ID)
		require.Equal(t, "a", inv.ConcurrencyKey)
		require.Equal(t, plane.StateRunning, inv.State)
	})

	t.Run("EveryLeaseEndFreesItsSlot", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true, backoff: plane.Backoff{Base: time.Second, Max: time.Second}})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		b.submitKeyed(t, "k", 6)
		claimKey := func(what string) *plane.Job {
			t.Helper()
			jobs := b.claim(t, plane.ClaimParams{Max: 5, Worker: "w", LeaseTTL: 10 * time.Second})
			require.Len(t, jobs, 1, "%s: one slot", what)
			b.requireNothingClaimable(t)
			return jobs[0]
		}
		j := claimKey("first")
		b.nack(t, j, false, "failed")
		j = claimKey("after a failed nack")
		b.nack(t, j, true, "retry") // the retried one waits out its backoff; its slot is free
		j = claimKey("after a retry nack")
		ok, err := b.drv.InvocationKill(b.ctx, j.ID)
		must(t, err, "kill")
		require.True(t, ok)
		j = claimKey("after a kill")
		b.advance(11 * time.Second) // the lease expires; the retried job's backoff passed too
		b.maintain(t)
		b.requireFenced(t, j, "the expired lease")
		jobs := b.claim(t, plane.ClaimParams{Max: 5, Worker: "w", LeaseTTL: 10 * time.Second})
		require.Len(t, jobs, 1, "after lease expiry: one slot, not two")
		b.ack(t, jobs[0], "ok")
		// The rest drain one at a time: the slot never leaks.
		for range 10 {
			jobs = b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"})
			if len(jobs) == 0 {
				break
			}
			require.Len(t, jobs, 1)
			b.ack(t, jobs[0], "ok")
		}
		require.EqualValues(t, 0, b.count(t, plane.StateQueued)+b.count(t, plane.StateRunning), "every job ran")
	})

	t.Run("CancelQueuedKeyed", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		ids := b.submitKeyed(t, "k", 2)
		ok, err := b.drv.InvocationCancel(b.ctx, ids[0])
		must(t, err, "cancel")
		require.True(t, ok, "a queued keyed invocation cancels")
		b.requireState(t, ids[0], plane.StateCancelled, 0)
		b.claimID(t, ids[1])
		b.requireNothingClaimable(t)
		b.requireCounts(t, map[plane.State]int64{plane.StateCancelled: 1, plane.StateRunning: 1})
		page, err := b.drv.InvocationList(b.ctx, &plane.ListParams{Namespace: b.ns, Queue: b.q, State: plane.StateRunning})
		must(t, err, "list")
		require.Len(t, page.Invocations, 1)
	})

	t.Run("ListsAndCountsKeyedAsQueued", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		ids := b.submitKeyed(t, "k", 3)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 3})
		page, err := b.drv.InvocationList(b.ctx, &plane.ListParams{Namespace: b.ns, Queue: b.q, State: plane.StateQueued, Oldest: true})
		must(t, err, "list")
		require.Len(t, page.Invocations, 3)
		require.Equal(t, ids[0], page.Invocations[0].ID)
		require.Equal(t, plane.StateQueued, b.get(t, ids[0]).State)
		a, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
		must(t, err, "admission get")
		require.Nil(t, a, "keys need no admission block: without one they are unlimited")
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), 3)
	})

	t.Run("KeyStatsKeepKeysWithBacklog", func(t *testing.T) {
		// KeyStats lists at most plane.KeyStatsMax keys, most running first; a key with
		// jobs claimable must still be among them when more keys run, since a worker's
		// ExitWhenIdle (Go and Python) reads a listed key's Queued to know that a job is
		// due but held back. Before, 101 keys each running one job pushed out a key held
		// back by its rate limit (named after them), and such a worker exited with that
		// job due.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		ps := make([]plane.SubmitParams, plane.KeyStatsMax+1)
		for i := range ps {
			ps[i] = plane.SubmitParams{ConcurrencyKey: fmt.Sprintf("a%03d", i), Payload: []byte("1")}
		}
		b.submit(t, ps...)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: len(ps), Worker: "w"}), len(ps))
		b.setKeys(t, plane.Admission{KeyRateLimit: 0.001, KeyBurst: 1})
		b.submitKeyed(t, "z-held", 2)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 2, Worker: "w"}), 1, "z-held starts one job, then waits for its key's next token")
		b.submitKeyed(t, "a000", 1) // a running key with a backlog too
		keys := b.keyStats(t)
		require.Len(t, keys, plane.KeyStatsMax)
		require.EqualValues(t, 1, keys["z-held"].Queued, "the key with a job due but held back is listed")
		require.EqualValues(t, 1, keys["a000"].Queued, "the key running one job with one due is listed")
		stats, err := b.drv.QueueStatsList(b.ctx, b.ns)
		must(t, err, "queue stats")
		for _, st := range stats {
			if st.Queue == b.q {
				require.Equal(t, "a000", st.Keys[0].Key, "most running first, then by key")
				require.Equal(t, "z-held", st.Keys[len(st.Keys)-1].Key, "then by key")
			}
		}
	})

	t.Run("LimitChangeApplies", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		b.submitKeyed(t, "k", 4)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), 1)
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 3})
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), 2, "a raised limit applies to the keys at once")
		got, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
		must(t, err, "admission get")
		require.EqualValues(t, 3, got.ConcurrencyLimit)
		_, err = b.drv.QueueAdmissionDelete(b.ctx, b.ns, b.q)
		must(t, err, "admission delete")
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), 1, "without a block: no limit")
	})

	t.Run("NeverAboveLimitUnderConcurrentClaimers", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true, noMaintenance: true})
		const limit, keys, perKey, workers = 3, 4, 15, 8
		b.setKeys(t, plane.Admission{ConcurrencyLimit: limit})
		for k := range keys {
			b.submitKeyed(t, fmt.Sprintf("k%d", k), perKey)
		}
		var running [keys]atomic.Int64
		var peak [keys]atomic.Int64
		var done atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done.Load() < keys*perKey {
					jobs, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q,
						Max: 2, Worker: fmt.Sprintf("w%d", w), Wait: 50 * time.Millisecond})
					if err != nil {
						errs <- err
						return
					}
					for _, j := range jobs {
						var k int
						fmt.Sscanf(j.ConcurrencyKey, "k%d", &k)
						n := running[k].Add(1)
						for p := peak[k].Load(); n > p && !peak[k].CompareAndSwap(p, n); p = peak[k].Load() {
						}
					}
					time.Sleep(time.Millisecond)
					for _, j := range jobs {
						var k int
						fmt.Sscanf(j.ConcurrencyKey, "k%d", &k)
						running[k].Add(-1) // before the ack frees the slot
						res, err := b.drv.InvocationSettleMany(b.ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
						if err == nil {
							err = res[0]
						}
						if err != nil {
							errs <- err
							return
						}
						done.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for k := range keys {
			require.LessOrEqual(t, peak[k].Load(), int64(limit), "key k%d ran above its limit", k)
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateSucceeded: keys * perKey})
	})

	t.Run("WaitingClaimWokenBySlot", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true, noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		b.submitKeyed(t, "k", 2)
		first := b.claimOne(t)
		got := make(chan []*plane.Job, 1)
		go func() {
			jobs, _ := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Worker: "w2", Wait: 30 * time.Second})
			got <- jobs
		}()
		time.Sleep(50 * time.Millisecond) // the claim parks (it may also start after the ack)
		b.ack(t, first, "ok")
		select {
		case jobs := <-got:
			require.Len(t, jobs, 1, "the freed slot wakes the waiting claim")
		case <-time.After(20 * time.Second):
			t.Fatal("a claim waiting on a key at its limit was not woken by the ack that freed it")
		}
	})

	t.Run("FairShareRoundRobin", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		big := b.submitKeyed(t, "big", 90)
		small := b.submitKeyed(t, "small", 10)
		var order []string
		for range 20 {
			order = append(order, b.claimOne(t).ConcurrencyKey)
		}
		for i := 0; i < 20; i += 2 {
			require.ElementsMatch(t, []string{"big", "small"}, order[i:i+2],
				"90/10 backlog: claims alternate between the keys (claims %d and %d: %v)", i, i+1, order)
		}
		require.Len(t, big, 90)
		require.Len(t, small, 10)
		for range 80 {
			require.Equal(t, "big", b.claimOne(t).ConcurrencyKey)
		}
		b.requireNothingClaimable(t)
	})

	t.Run("FairShareWeighted", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{KeyWeights: map[string]float64{"gold": 3}})
		b.submitKeyed(t, "gold", 30)
		b.submitKeyed(t, "basic", 30)
		got := keysOf(b.claim(t, plane.ClaimParams{Max: 1, Worker: "w"}))
		for range 15 {
			for k, n := range keysOf(b.claim(t, plane.ClaimParams{Max: 1, Worker: "w"})) {
				got[k] += n
			}
		}
		require.InDelta(t, 12, got["gold"], 1, "weight 3 to 1: three quarters of 16 claims (%v)", got)
		require.InDelta(t, 4, got["basic"], 1, "weight 3 to 1: a quarter of 16 claims (%v)", got)
	})

	t.Run("FairShareJoinedKeyFirst", func(t *testing.T) {
		// A key that joins the rotation (a tenant whose job arrives while another key has a
		// backlog) joins at the current turn and takes the next claim: on a tie with the key
		// whose turn it is, the key that joined since its last claim goes first, whatever
		// the keys' names ("a" sorts first). Its job done, it leaves the rotation and joins
		// again with its next job.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitKeyed(t, "a", 10)
		b.ack(t, b.claimOne(t), "ok")
		for round := range 3 {
			b.submitKeyed(t, "z", 1)
			j := b.claimOne(t)
			require.Equal(t, "z", j.ConcurrencyKey, "round %d: the key that joined at the current turn goes first", round)
			b.ack(t, j, "ok")
			j = b.claimOne(t)
			require.Equal(t, "a", j.ConcurrencyKey, "round %d: then the backlog's key", round)
			b.ack(t, j, "ok")
		}
	})

	t.Run("FairShareJoinWhileNoKeyReady", func(t *testing.T) {
		// A key that joins while no key is ready (the only other key at its limit) joins at
		// that key's turn, not ahead of it by all the claims it has made: the claims then
		// alternate, the new key first.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		b.submitKeyed(t, "a", 20)
		for range 5 {
			b.ack(t, b.claimOne(t), "ok")
		}
		held := b.claimOne(t) // "a" at its limit: no key is ready
		b.submitKeyed(t, "b", 20)
		b.ack(t, held, "ok")
		b.requireAlternate(t, "b", "a", "b")
	})

	t.Run("FairShareJoinPastStalePass", func(t *testing.T) {
		// When no key is ready, a joining key's turn is not a pass that stopped while the
		// others claimed: "c" runs one job with nothing queued while "a" claims 11 times;
		// "b" joins while "a" is at its limit and must not take the next 11 claims. And "c",
		// coming back with its job still running, must not either.
		t.Parallel()
		t.Run("NewKey", func(t *testing.T) {
			b := s.setup(t, config{noMaintenance: true})
			b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
			b.submitKeyed(t, "c", 1)
			b.claimOne(t) // "c" runs, nothing of it queued: its pass stops
			b.submitKeyed(t, "a", 40)
			for range 10 {
				b.ack(t, b.claimOne(t), "ok")
			}
			held := b.claimOne(t) // "a" at its limit: no key is ready
			b.submitKeyed(t, "b", 40)
			b.ack(t, held, "ok")
			b.requireAlternate(t, "b", "a", "b")
		})
		t.Run("ReturningKey", func(t *testing.T) {
			b := s.setup(t, config{noMaintenance: true})
			b.setKeys(t, plane.Admission{ConcurrencyLimit: 2})
			b.submitKeyed(t, "c", 1)
			b.claimOne(t) // "c" runs, nothing of it queued: its row and pass stay
			b.submitKeyed(t, "a", 40)
			for range 10 {
				b.ack(t, b.claimOne(t), "ok")
			}
			held := []*plane.Job{b.claimOne(t), b.claimOne(t)} // "a" at its limit
			b.submitKeyed(t, "c", 40)
			for _, j := range held {
				b.ack(t, j, "ok")
			}
			b.requireAlternate(t, "c", "a", "c")
		})
	})

	t.Run("DelayedKeyJoinsWhenDue", func(t *testing.T) {
		// A key whose only job is delayed is not in the rotation (nor in the stats) until
		// the job is due, and then it joins at the turn of that moment, not of its submit:
		// "b" is submitted while "a"'s pass is low and joins after "a" has claimed on.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		b.submitKeyed(t, "a", 40)
		b.submitOne(t, plane.SubmitParams{ConcurrencyKey: "b", Delay: time.Minute, Payload: []byte("b-0")})
		require.NotContains(t, b.keyStats(t), "b", "a key with only a delayed job has no counters")
		for range 10 {
			b.ack(t, b.claimOne(t), "ok")
		}
		b.advance(2 * time.Minute)
		must(t, b.drv.Maintain(b.ctx), "maintain")
		b.submitKeyed(t, "b", 40)
		require.Equal(t, int64(41), b.keyStats(t)["b"].Queued, "the due job counts as queued")
		b.requireAlternate(t, "b", "a", "b")
	})

	t.Run("UnkeyedInOrderWithKeys", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		first := b.submitOne(t, plane.SubmitParams{})
		b.submitKeyed(t, "k", 3)
		last := b.submitOne(t, plane.SubmitParams{})
		b.claimID(t, first)
		require.Equal(t, "k", b.claimOne(t).ConcurrencyKey, "fifo: the key's head is older than the last unkeyed job")
		b.claimID(t, last)
		b.requireNothingClaimable(t)
	})

	t.Run("KeyOrderAcrossPriorities", func(t *testing.T) {
		// One key's jobs of several priority levels, in each claim order: fifo and filo by
		// id whatever the levels, priority by level then id. Then the levels narrow (the
		// highest is claimed, the rest share one) and the key empties and refills with
		// another level: the order still holds.
		t.Parallel()
		priorities := []float64{2, 5, 2, 9, 5, -1.5}
		submit := func(b *bundle, ps ...float64) []string {
			params := make([]plane.SubmitParams, len(ps))
			for i, p := range ps {
				params[i] = plane.SubmitParams{ConcurrencyKey: "k", Priority: p}
			}
			var ids []string
			for _, r := range b.submit(t, params...) {
				ids = append(ids, r.ID)
			}
			return ids
		}
		claimAll := func(b *bundle, kind plane.Kind, n int) []string {
			var got []string
			for range n {
				jobs := b.claim(t, plane.ClaimParams{Kind: kind, Max: 1, Worker: "w"})
				require.Len(t, jobs, 1, "%s: one job claimable", kind)
				got = append(got, jobs[0].ID)
			}
			return got
		}
		for _, kind := range []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority} {
			b := s.setup(t, config{noMaintenance: true})
			ids := submit(b, priorities...)
			want := map[plane.Kind][]string{
				plane.KindFIFO:     ids,
				plane.KindFILO:     {ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]},
				plane.KindPriority: {ids[3], ids[1], ids[4], ids[0], ids[2], ids[5]},
			}[kind]
			require.Equal(t, want, claimAll(b, kind, len(ids)), "%s order of one key's jobs of several priorities", kind)
			b.requireNothingClaimable(t)
			// The key emptied: it refills with one level, then narrows from two to one.
			ids = submit(b, 7, 7, 3)
			want = map[plane.Kind][]string{
				plane.KindFIFO:     ids,
				plane.KindFILO:     {ids[2], ids[1], ids[0]},
				plane.KindPriority: ids,
			}[kind]
			require.Equal(t, want, claimAll(b, kind, len(ids)), "%s order after the key refilled", kind)
			ids = submit(b, 9, 1, 1)
			require.Equal(t, ids[0], claimAll(b, plane.KindPriority, 1)[0])
			want = map[plane.Kind][]string{
				plane.KindFIFO:     {ids[1], ids[2]},
				plane.KindFILO:     {ids[2], ids[1]},
				plane.KindPriority: {ids[1], ids[2]},
			}[kind]
			require.Equal(t, want, claimAll(b, kind, 2), "%s order once one of two levels is gone", kind)
		}
	})

	t.Run("KeyOrderMixedKinds", func(t *testing.T) {
		// One key's jobs claimed in turn by handles of different orders: each claim takes
		// the head of its own order among the jobs still claimable, whatever the others
		// took before (a plane that keeps a position per key for one order must not let a
		// claim of another order move it past claimable jobs).
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		ids := b.submitKeyed(t, "k", 6)
		for i, step := range []struct {
			kind plane.Kind
			want string
		}{
			{plane.KindFILO, ids[5]}, {plane.KindFIFO, ids[0]}, {plane.KindFILO, ids[4]},
			{plane.KindPriority, ids[1]}, {plane.KindFIFO, ids[2]}, {plane.KindFILO, ids[3]},
		} {
			jobs := b.claim(t, plane.ClaimParams{Kind: step.kind, Max: 1, Worker: "w"})
			require.Len(t, jobs, 1, "claim %d (%s): one job claimable", i, step.kind)
			require.Equal(t, step.want, jobs[0].ID, "claim %d (%s) takes the head of its order", i, step.kind)
		}
		b.requireNothingClaimable(t)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for what, key := range map[string]string{"too long": string(make([]byte, 300)), "NUL": "a\x00b", "not UTF-8": "\xff"} {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
				Invocations: []plane.SubmitParams{{ConcurrencyKey: key}}})
			requireIs(t, err, plane.ErrInvalid, what)
		}
		for what, a := range map[string]plane.Admission{
			"negative limit":    {ConcurrencyLimit: -1},
			"negative override": {ConcurrencyLimits: map[string]int64{"k": -1}},
			"zero weight":       {KeyWeights: map[string]float64{"k": 0}},
			"tiny weight":       {KeyWeights: map[string]float64{"k": 5e-324}},
			"bad key":           {KeyWeights: map[string]float64{"": 1}},
			"negative key rate": {KeyRateLimits: map[string]float64{"k": -1}},
			"zero key burst":    {KeyRateLimit: 1, KeyBursts: map[string]int64{"k": 0}},
			"bad rate key":      {KeyRateLimits: map[string]float64{"a\x00b": 1}},
		} {
			_, err := b.drv.QueueAdmissionSet(b.ctx, &plane.AdmissionParams{Namespace: b.ns, Queue: b.q, Admission: a})
			requireIs(t, err, plane.ErrInvalid, what)
		}
	})

	testKeysCombined(t, s)
}

// testRateLimits checks rate limits per concurrency key (Admission.KeyRateLimit, a token
// bucket per key in the plane) and the worker's "slow down" answer (OutcomeRateLimited):
// re-queued after its delay without consuming an attempt, its key held back as long.
func testRateLimits(t *testing.T, s *suite) {
	t.Run("RateLimitedSettle", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		ids := b.submit(t, plane.SubmitParams{ConcurrencyKey: "api", MaxAttempts: 1, Payload: []byte("1")},
			plane.SubmitParams{ConcurrencyKey: "api", MaxAttempts: 1, Payload: []byte("2")},
			plane.SubmitParams{Payload: []byte("unkeyed")})
		for round := range 3 { // never consumes its one attempt
			j := b.claimID(t, ids[0].ID)
			require.Equal(t, 1, j.Attempt, "round %d", round)
			must(t, b.settle(t, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeRateLimited,
				RetryDelay: 10 * time.Second, RateLimitKey: "api"}), "rate-limited settle")
			inv := b.requireState(t, j.ID, plane.StateQueued, 0)
			require.Equal(t, plane.ErrorTypeRateLimited, inv.Error.Type)
			u := b.claimOne(t)
			require.Equal(t, ids[2].ID, u.ID, "the key is held back: only the unkeyed job is claimable")
			b.requireNothingClaimable(t)
			b.nack(t, u, true, "again") // back for the next round
			b.advance(10 * time.Second)
		}
		j := b.claimID(t, ids[0].ID)
		b.ack(t, j, "done")
		b.requireState(t, j.ID, plane.StateSucceeded, 1)
	})

	t.Run("ReleasedSettle", func(t *testing.T) {
		// OutcomeReleased (a job claimed but never run, given back): claimable again at
		// once, its attempt not counted however often, no key held back (its RetryDelay and
		// RateLimitKey are ignored).
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		ids := b.submit(t, plane.SubmitParams{ConcurrencyKey: "api", MaxAttempts: 1, Payload: []byte("1")},
			plane.SubmitParams{ConcurrencyKey: "api", MaxAttempts: 1, Payload: []byte("2")})
		for round := range 3 {
			jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 10, Worker: "w"})
			require.Len(t, jobs, 2, "round %d: both jobs claimable at once, the key not held back", round)
			for _, j := range jobs {
				require.Equal(t, 1, j.Attempt, "round %d", round)
			}
			must(t, b.settle(t, plane.SettleParams{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeReleased,
				RetryDelay: 10 * time.Second, RateLimitKey: "api",
				Error: &plane.ErrorInfo{Type: plane.ErrorTypeReleased, Message: "the worker is draining"}}), "released settle")
			must(t, b.settle(t, plane.SettleParams{ID: jobs[1].ID, Token: jobs[1].Token, Outcome: plane.OutcomeReleased}),
				"released settle without an error")
			for _, j := range jobs {
				inv := b.requireState(t, j.ID, plane.StateQueued, 0)
				require.Equal(t, plane.ErrorTypeReleased, inv.Error.Type)
			}
		}
		for _, j := range b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 10, Worker: "w"}) {
			b.ack(t, j, "done")
		}
		for _, r := range ids {
			b.requireState(t, r.ID, plane.StateSucceeded, 1)
		}
	})

	t.Run("HoldOfEmptiedKey", func(t *testing.T) {
		// A worker's "slow down" for its key's only job holds the key back although the
		// key has nothing queued or running once the job is re-queued with its delay: a job
		// of the key submitted during the hold waits; both start when it has passed. The
		// key is listed (QueueStats.Keys) while held back, saying for how long.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		first := b.submit(t, plane.SubmitParams{ConcurrencyKey: "api"})[0].ID
		j := b.claimID(t, first)
		must(t, b.settle(t, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeRateLimited,
			RetryDelay: 10 * time.Second, RateLimitKey: "api"}), "rate-limited settle")
		b.maintain(t) // keeps the hold
		b.advance(4 * time.Second)
		require.Equal(t, map[string]plane.KeyStats{"api": {Key: "api", Weight: 1, RateWait: 6 * time.Second}}, b.keyStats(t),
			"the held key is listed although its only job waits out the hold")
		second := b.submit(t, plane.SubmitParams{ConcurrencyKey: "api"})[0].ID
		b.requireNothingClaimable(t)
		b.advance(10 * time.Second)
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 10, Worker: "w"})
		require.ElementsMatch(t, []string{first, second}, []string{jobs[0].ID, jobs[len(jobs)-1].ID})
		require.Len(t, jobs, 2)
	})

	t.Run("HoldOfKeyWithoutJobs", func(t *testing.T) {
		// A worker may name another key than its job's: the hold applies to that key's
		// next job although the key had no job when the hold was set.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		j := b.claimID(t, b.submit(t, plane.SubmitParams{ConcurrencyKey: "caller"})[0].ID)
		must(t, b.settle(t, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeRateLimited,
			RetryDelay: 10 * time.Second, RateLimitKey: "upstream"}), "rate-limited settle")
		require.Equal(t, plane.KeyStats{Key: "upstream", Weight: 1, RateWait: 10 * time.Second}, b.keyStats(t)["upstream"],
			"a held key is listed before it has a job")
		b.submitKeyed(t, "upstream", 1)
		b.requireNothingClaimable(t)
		b.advance(10 * time.Second)
		jobs := b.claim(t, plane.ClaimParams{Max: 10, Worker: "w"})
		require.Equal(t, map[string]int{"caller": 1, "upstream": 1}, keysOf(jobs))
		for _, j := range jobs {
			b.ack(t, j, "ok")
		}
		require.Empty(t, b.keyStats(t), "the hold over and no jobs: no key listed")
	})

	t.Run("KeyRateLimitOfEmptiedKey", func(t *testing.T) {
		// A key whose jobs come one at a time, each done before the next: its bucket is
		// kept between them, so it starts at most its rate (here 1/s, burst 1), and
		// maintenance forgets it only once the bucket is full again.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{KeyRateLimit: 1, KeyBurst: 1})
		started := 0
		for range 5 {
			b.submitKeyed(t, "api", 1)
			for _, j := range b.claim(t, plane.ClaimParams{Max: 10, Worker: "w"}) {
				started++
				b.ack(t, j, "ok")
			}
			b.maintain(t)
			b.advance(100 * time.Millisecond)
		}
		require.Equal(t, 1, started, "one start a second")
		b.advance(500 * time.Millisecond)
		jobs := b.claim(t, plane.ClaimParams{Max: 10, Worker: "w"})
		require.Len(t, jobs, 1, "a second after the first start, the next")
		b.ack(t, jobs[0], "ok")
		for range 3 {
			b.advance(time.Second)
			b.maintain(t)
			jobs = b.claim(t, plane.ClaimParams{Max: 10, Worker: "w"})
			require.Len(t, jobs, 1, "one a second")
			b.ack(t, jobs[0], "ok")
		}
		require.Empty(t, b.keyStats(t), "a key with no jobs is not listed")
	})

	t.Run("EmptiedKeyRejoinsAtTurn", func(t *testing.T) {
		// A key whose jobs are all done has left the rotation, and its next job joins at
		// the current turn, whether or not its counter row is kept for its rate state: "a"
		// claims 5 times while "b" is at its limit, empties, and comes back when "b" is
		// ready again; it joins at "b"'s turn, not 5 claims behind it.
		t.Parallel()
		for name, a := range map[string]plane.Admission{
			"NoKeyRateLimit": {ConcurrencyLimit: 1},
			"KeyRateLimit":   {ConcurrencyLimit: 1, KeyRateLimit: 1000, KeyBurst: 1000}, // drawn from, never short
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := s.setup(t, config{noMaintenance: true})
				b.setKeys(t, a)
				b.submitKeyed(t, "b", 20)
				held := b.claimOne(t) // "b" at its limit
				b.submitKeyed(t, "a", 5)
				for range 5 {
					j := b.claimOne(t)
					require.Equal(t, "a", j.ConcurrencyKey)
					b.ack(t, j, "ok")
				}
				b.ack(t, held, "ok")
				b.submitKeyed(t, "a", 20)
				b.requireAlternate(t, "a", "a", "b")
			})
		}
	})

	t.Run("KeyRateLimit", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{KeyRateLimit: 1, KeyBurst: 2})
		b.submitKeyed(t, "a", 5)
		b.submitKeyed(t, "b", 5)
		jobs := b.claim(t, plane.ClaimParams{Max: 10, Worker: "w"})
		require.Equal(t, map[string]int{"a": 2, "b": 2}, keysOf(jobs), "each key starts its burst")
		for _, j := range jobs {
			b.ack(t, j, "ok")
		}
		b.requireNothingClaimable(t)
		b.advance(time.Second)
		jobs = b.claim(t, plane.ClaimParams{Max: 10, Worker: "w"})
		require.Equal(t, map[string]int{"a": 1, "b": 1}, keysOf(jobs), "one start per key per second")
		b.advance(500 * time.Millisecond)
		k := b.keyStats(t)["a"]
		require.InDelta(t, 1, k.RateLimit, 1e-9)
		require.EqualValues(t, 2, k.Burst)
		require.Equal(t, 500*time.Millisecond, k.RateWait, "stats say when the key's bucket next has a token")
		b.requireNothingClaimable(t)
		got, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
		must(t, err, "admission get")
		require.InDelta(t, 1, got.KeyRateLimit, 1e-9)
		require.EqualValues(t, 2, got.KeyBurst)
	})
	t.Run("KeyRateChangeAppliesAtOnce", func(t *testing.T) {
		// A claim that finds a key's bucket empty holds the key back until the bucket has a
		// token at the rate of that moment. A changed rate applies at the next claim: before,
		// the hold outlived the change on every plane, so a key held 100 s at 0.01/s stayed
		// held after a raise to 10/s, and one whose rate was removed waited out its hold.
		// A worker's "slow down" hold is not the bucket's and outlives the change.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{KeyRateLimit: 0.01, KeyBurst: 1})
		b.submitKeyed(t, "a", 4)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), 1, "the burst")
		require.Empty(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), "the bucket is empty for 100 s")
		b.setKeys(t, plane.Admission{KeyRateLimit: 10, KeyBurst: 1})
		b.advance(100 * time.Millisecond)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), 1, "a raised rate refills at the new rate")
		require.Empty(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), "one token in 100 ms")
		require.Equal(t, 100*time.Millisecond, b.keyStats(t)["a"].RateWait)
		b.setKeys(t, plane.Admission{})
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), 2, "a removed rate holds nothing back")
		require.Zero(t, b.keyStats(t)["a"].RateWait)

		// A "slow down" hold of a minute outlives a change of the rate, and a removal.
		b.setKeys(t, plane.Admission{KeyRateLimit: 1, KeyBurst: 1})
		ids := b.submitKeyed(t, "s", 2)
		j := b.claimID(t, ids[0])
		must(t, b.settle(t, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeRateLimited,
			RetryDelay: time.Minute, RateLimitKey: "s"}), "slow down")
		b.setKeys(t, plane.Admission{KeyRateLimit: 100, KeyBurst: 1})
		b.advance(2 * time.Second)
		b.requireNothingClaimable(t)
		b.setKeys(t, plane.Admission{})
		b.requireNothingClaimable(t)
		require.Equal(t, 58*time.Second, b.keyStats(t)["s"].RateWait, "the hold runs on")
		b.advance(58 * time.Second)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5, Worker: "w"}), 2, "the hold ended, and the handed-back job is due with it")
	})
	t.Run("KeyRateLimitOverrides", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		a := plane.Admission{KeyRateLimit: 1, KeyBurst: 2,
			KeyRateLimits: map[string]float64{"fast": 4, "free": 0},
			KeyBursts:     map[string]int64{"big": 5}}
		b.setKeys(t, a)
		for k, n := range map[string]int{"a": 8, "fast": 10, "big": 8, "free": 8} {
			b.submitKeyed(t, k, n)
		}
		jobs := b.claim(t, plane.ClaimParams{Max: 40, Worker: "w"})
		require.Equal(t, map[string]int{"a": 2, "fast": 4, "big": 5, "free": 8}, keysOf(jobs),
			"each key starts its own burst: the default 2, the override's rate rounded up, the burst override, no limit for rate 0")
		for _, j := range jobs {
			b.ack(t, j, "ok")
		}
		b.requireNothingClaimable(t)
		b.advance(500 * time.Millisecond)
		jobs = b.claim(t, plane.ClaimParams{Max: 40, Worker: "w"})
		require.Equal(t, map[string]int{"fast": 2}, keysOf(jobs), "half a second: only the 4/s key has whole tokens")
		keys := b.keyStats(t)
		for key, want := range map[string]plane.KeyStats{
			"a":    {RateLimit: 1, Burst: 2, RateWait: 500 * time.Millisecond},
			"fast": {RateLimit: 4, Burst: 4, RateWait: 250 * time.Millisecond},
			"big":  {RateLimit: 1, Burst: 5, RateWait: 500 * time.Millisecond},
		} {
			got := keys[key]
			require.Equal(t, want, plane.KeyStats{RateLimit: got.RateLimit, Burst: got.Burst, RateWait: got.RateWait}, "key %s", key)
		}
		b.advance(500 * time.Millisecond)
		jobs = b.claim(t, plane.ClaimParams{Max: 40, Worker: "w"})
		require.Equal(t, map[string]int{"a": 1, "fast": 2, "big": 1}, keysOf(jobs), "each key refills at its own rate")
		b.requireNothingClaimable(t)
		got, err := b.drv.QueueAdmissionGet(b.ctx, b.ns, b.q)
		must(t, err, "admission get")
		require.Equal(t, a.KeyRateLimits, got.KeyRateLimits)
		require.Equal(t, a.KeyBursts, got.KeyBursts)
		// Dropping the overrides applies at the next claim: "fast" falls back to 1/s.
		b.setKeys(t, plane.Admission{KeyRateLimit: 1, KeyBurst: 2})
		b.advance(2 * time.Second)
		jobs = b.claim(t, plane.ClaimParams{Max: 40, Worker: "w"})
		require.Equal(t, 2, keysOf(jobs)["fast"], "without its override the key has the default bucket of 2 (%v)", keysOf(jobs))
	})
}
