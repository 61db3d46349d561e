package planetest

// Feature combinations that every plane must get right: pause with claims across queues,
// settle-and-claim, offers, warm keys, waiting claimers and jobs falling due; concurrency
// keys with cancels, deadlines, trims, limit changes, debounce and settle-and-claim.

import (
	"cmp"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

var allKinds = []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority, plane.KindBoltzmann}

// fillPaused submits a plain, a keyed and a placed job to b's queue.
func (b *bundle) fillMixed(t *testing.T, p plane.SubmitParams) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for _, x := range []plane.SubmitParams{{Payload: []byte("plain")}, {Payload: []byte("keyed"), ConcurrencyKey: "tenant-1"},
		{Payload: []byte("placed"), Requirement: &plane.Requirement{GPUs: 1}}} {
		x.Delay, x.NotBefore = p.Delay, p.NotBefore
		ids[b.submitOne(t, x)] = true
	}
	return ids
}

// requirePausedClaimsEmpty claims every way of one queue (with Queues extra) and wants nothing.
func (b *bundle) requirePausedClaimsEmpty(t *testing.T, queues ...string) {
	t.Helper()
	for _, kind := range allKinds {
		for _, o := range []*plane.Offers{nil, {GPUs: 1}} {
			require.Empty(t, b.claim(t, plane.ClaimParams{Kind: kind, Temperature: 1, Max: 5, Offers: o, Queues: queues}),
				"a %s claim (offers %v, queues %v) of a paused queue takes nothing", kind, o, queues)
			require.Empty(t, b.claim(t, plane.ClaimParams{Kind: kind, Temperature: 1, Max: 5, Offers: o, Queues: queues, WarmHostKeys: []string{hostKeyA}}),
				"a warm %s claim of a paused queue takes nothing", kind)
		}
	}
}

func (b *bundle) claimAllIDs(t *testing.T) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for range 10 {
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 5, Offers: &plane.Offers{GPUs: 1}})
		if len(jobs) == 0 {
			break
		}
		for _, j := range jobs {
			got[j.ID] = true
		}
	}
	return got
}

// testPauseCombined checks a pause with the other features (docs/semantics.md, "Pause"):
// no claim of any shape takes from a paused queue, nothing is handed to its waiting
// claimers, and a resume wakes each of them.
func testPauseCombined(t *testing.T, s *suite) {
	t.Run("ClaimAcrossQueuesSkipsIt", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		ids := b.fillMixed(t, plane.SubmitParams{})
		b.pause(t, true)
		other := b.submitTo(t, b.ns, "other", plane.SubmitParams{Payload: []byte("o")})[0].ID
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 5, Queues: []string{"other"}, Offers: &plane.Offers{GPUs: 1}})
		require.Len(t, jobs, 1)
		require.Equal(t, other, jobs[0].ID)
		b.requirePausedClaimsEmpty(t, "other")
		jobs = b.claim(t, plane.ClaimParams{Queue: "other", Queues: []string{b.q}, Kind: plane.KindPriority, Max: 5, Offers: &plane.Offers{GPUs: 1}})
		require.Empty(t, jobs)
		b.pause(t, false)
		require.Equal(t, ids, b.claimAllIDs(t))
	})

	t.Run("SettleAndClaimTakesNothing", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		first := b.submitOne(t, plane.SubmitParams{Payload: []byte("first")})
		second := b.submitOne(t, plane.SubmitParams{Payload: []byte("second"), ConcurrencyKey: "k"})
		j := b.claimID(t, first)
		b.submitOne(t, plane.SubmitParams{Payload: []byte("k2"), ConcurrencyKey: "k"})
		b.submitOne(t, plane.SubmitParams{Payload: []byte("p"), Requirement: &plane.Requirement{GPUs: 1}})
		j2 := b.claimID(t, second)
		b.pause(t, true)
		for i, kind := range allKinds {
			for _, o := range []*plane.Offers{nil, {GPUs: 1}} {
				var ps []plane.SettleParams
				if i == 0 && o == nil {
					ps = []plane.SettleParams{ackParams(j, "ok"), ackParams(j2, "ok")}
				}
				errs, jobs, err := b.drv.InvocationSettleAndClaim(b.ctx, ps, &plane.ClaimParams{
					Namespace: b.ns, Queue: b.q, Kind: kind, Temperature: 1, Max: 5, Worker: "w", Offers: o})
				must(t, err, "settle and claim")
				for _, e := range errs {
					require.NoError(t, e)
				}
				require.Empty(t, jobs, "settle-and-claim %s offers %v of a paused queue takes nothing", kind, o)
			}
		}
		b.pause(t, false)
		require.Len(t, b.claimAllIDs(t), 2)
	})

	t.Run("DueWhilePausedStaysQueued", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		ids := b.fillMixed(t, plane.SubmitParams{Delay: time.Minute})
		b.pause(t, true)
		b.advance(2 * time.Minute)
		b.requirePausedClaimsEmpty(t)
		b.maintain(t)
		b.requirePausedClaimsEmpty(t)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 3})
		b.pause(t, false)
		require.Equal(t, ids, b.claimAllIDs(t))
	})

	t.Run("KeyedRetryStaysBehind", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		ids := b.submitKeyed(t, "k", 2)
		j := b.claimID(t, ids[0])
		b.pause(t, true)
		b.nack(t, j, true, "again")
		b.advance(pastBackoff)
		b.requirePausedClaimsEmpty(t)
		b.maintain(t)
		b.requirePausedClaimsEmpty(t)
		b.pause(t, false)
		require.Len(t, b.claimAllIDs(t), 1, "limit 1")
	})

	// A slot freed by any end of the running job's lease hands nothing to a waiter.
	for _, end := range []string{"ack", "kill", "fail", "release", "retry"} {
		t.Run("FreedSlotNotHandedToWaiter/"+end, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t, config{realClock: true, noMaintenance: true, backoff: plane.Backoff{Base: time.Millisecond, Max: time.Millisecond}})
			b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
			ids := b.submitKeyed(t, "k", 2)
			first := b.claimID(t, ids[0])
			b.pause(t, true)
			got := b.waiter(t, plane.ClaimParams{Worker: "w2"})
			time.Sleep(headStart)
			switch end {
			case "ack":
				b.ack(t, first, "ok")
			case "kill":
				require.True(t, b.kill(t, first.ID))
			case "fail":
				b.nack(t, first, false, "x")
			case "release":
				must(t, b.settle(t, plane.SettleParams{ID: first.ID, Token: first.Token, Outcome: plane.OutcomeReleased}), "release")
			case "retry":
				b.nack(t, first, true, "x")
			}
			require.Len(t, b.heldUntilResume(t, got, "when a slot freed ("+end+")"), 1)
		})
	}

	t.Run("RaisedLimitNotHandedToWaiter", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true, noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		ids := b.submitKeyed(t, "k", 2)
		b.claimID(t, ids[0])
		b.pause(t, true)
		got := b.waiter(t, plane.ClaimParams{Worker: "w2"})
		time.Sleep(headStart)
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 5})
		require.Len(t, b.heldUntilResume(t, got, "when the limit rose"), 1)
	})

	t.Run("WaiterAcrossQueuesGetsOnlyTheOther", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true, noMaintenance: true})
		b.pause(t, true)
		got := b.waiter(t, plane.ClaimParams{Queue: "other", Queues: []string{b.q}, Worker: "w2"})
		time.Sleep(headStart)
		b.fillMixed(t, plane.SubmitParams{})
		select {
		case jobs := <-got:
			t.Fatalf("a waiter across a paused queue got %d jobs", len(jobs))
		case <-time.After(shortWait):
		}
		o := b.submitTo(t, b.ns, "other", plane.SubmitParams{Payload: []byte("o")})[0].ID
		select {
		case jobs := <-got:
			require.Len(t, jobs, 1)
			require.Equal(t, o, jobs[0].ID)
		case <-time.After(longWait):
			t.Fatal("not woken")
		}
	})

	t.Run("DebounceDueWhilePausedIsTakenOver", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.pause(t, true)
		r1 := b.submit(t, plane.SubmitParams{Payload: []byte("a"), Key: "d", Debounce: 10 * time.Second})[0]
		b.advance(20 * time.Second)
		b.maintain(t)
		r2 := b.submit(t, plane.SubmitParams{Payload: []byte("b"), Key: "d", Debounce: 10 * time.Second})[0]
		require.False(t, r2.Existing, "a holder whose quiet came while paused is due: a debounced submit takes its key over")
		require.NotEqual(t, r1.ID, r2.ID)
		b.requirePausedClaimsEmpty(t)
		b.pause(t, false)
		b.claimID(t, r1.ID)
		b.requireNothingClaimable(t)
	})

	t.Run("SlowedDownKeyStaysBehind", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 2})
		ids := b.submitKeyed(t, "k", 3)
		j := b.claimID(t, ids[0])
		must(t, b.settle(t, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeRateLimited, RetryDelay: time.Minute, RateLimitKey: "k"}), "rl")
		b.pause(t, true)
		b.advance(2 * time.Minute)
		b.maintain(t)
		b.requirePausedClaimsEmpty(t)
		b.pause(t, false)
		require.Len(t, b.claimAllIDs(t), 2)
	})

	t.Run("BoltzmannKeyedLevels", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true, seed: 7})
		for i := range 5 {
			b.submitOne(t, plane.SubmitParams{Payload: []byte("x"), ConcurrencyKey: fmt.Sprintf("k%d", i), Priority: float64(i)})
			b.submitOne(t, plane.SubmitParams{Payload: []byte("y"), Priority: float64(i)})
		}
		b.pause(t, true)
		b.requirePausedClaimsEmpty(t)
		b.pause(t, false)
		n := 0
		for range 20 {
			n += len(b.claim(t, plane.ClaimParams{Kind: plane.KindBoltzmann, Temperature: 1, Max: 3}))
		}
		require.Equal(t, 10, n)
	})

	resumeWakes := func(name string, fill func(t *testing.T, b *bundle), p plane.ClaimParams) {
		t.Run("ResumeWakes"+name, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t, config{realClock: true})
			b.pause(t, true)
			fill(t, b)
			p.Worker = "w"
			got := b.waiter(t, p)
			require.Len(t, b.heldUntilResume(t, got, "before the resume"), 1)
		})
	}
	resumeWakes("Keyed", func(t *testing.T, b *bundle) { b.submitKeyed(t, "k", 1) }, plane.ClaimParams{})
	resumeWakes("Placed", func(t *testing.T, b *bundle) {
		b.submitOne(t, plane.SubmitParams{Payload: []byte("p"), Requirement: &plane.Requirement{GPUs: 1}})
	}, plane.ClaimParams{Offers: &plane.Offers{GPUs: 1}})
	resumeWakes("KeyedAcross", func(t *testing.T, b *bundle) { b.submitKeyed(t, "k", 1) }, plane.ClaimParams{Queue: "other", Queues: []string{"jobs"}})
	resumeWakes("PlacedAcross", func(t *testing.T, b *bundle) {
		b.submitOne(t, plane.SubmitParams{Payload: []byte("p"), Requirement: &plane.Requirement{GPUs: 1}})
	}, plane.ClaimParams{Queue: "other", Queues: []string{"jobs"}, Offers: &plane.Offers{GPUs: 1}})
	resumeWakes("Priority", func(t *testing.T, b *bundle) { b.submitOne(t, plane.SubmitParams{Payload: []byte("x"), Priority: 3}) },
		plane.ClaimParams{Kind: plane.KindBoltzmann, Temperature: 1})

	t.Run("PausedClaimsDrawNoTokens", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{KeyRateLimit: 1, KeyBurst: 1})
		b.submitKeyed(t, "k", 2)
		b.pause(t, true)
		b.requirePausedClaimsEmpty(t)
		b.pause(t, false)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5}), 1)
	})

	t.Run("PausedClaimsKeepTurns", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitKeyed(t, "a", 4)
		b.submitKeyed(t, "b", 4)
		first := b.claimOne(t).ConcurrencyKey
		b.pause(t, true)
		b.requirePausedClaimsEmpty(t)
		b.pause(t, false)
		second := b.claimOne(t).ConcurrencyKey
		require.NotEqual(t, first, second)
	})
}

// testKeysCombined checks concurrency keys with the other features (docs/semantics.md,
// "Concurrency keys and fair share"): the key counters follow cancels, deadlines, trims,
// releases and retries of keyed jobs, delayed or not.
func testKeysCombined(t *testing.T, s *suite) {
	t.Run("CancelDelayedAndBackedOffKeyed", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		d := b.submitOne(t, plane.SubmitParams{Payload: []byte("d"), ConcurrencyKey: "k", Delay: time.Minute})
		require.True(t, b.cancel(t, d), "a queued keyed job cancels")
		require.NotContains(t, b.keyStats(t), "k")
		r := b.submitOne(t, plane.SubmitParams{Payload: []byte("r"), ConcurrencyKey: "k"})
		j := b.claimID(t, r)
		b.nack(t, j, true, "again")
		require.True(t, b.cancel(t, r), "a queued keyed job cancels")
		require.NotContains(t, b.keyStats(t), "k")
		b.advance(2 * time.Minute)
		b.maintain(t)
		require.NotContains(t, b.keyStats(t), "k")
		b.requireKeyCountsAfresh(t, "k")
	})

	t.Run("CancelDueKeyedBeforeItsPromotion", func(t *testing.T) {
		// A keyed job whose delay has passed, no claim or maintenance having made it
		// claimable yet, cancels and leaves its key counting nothing.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		d := b.submitOne(t, plane.SubmitParams{Payload: []byte("d"), ConcurrencyKey: "k", Delay: time.Minute})
		b.advance(2 * time.Minute)
		require.True(t, b.cancel(t, d), "a queued keyed job cancels")
		b.requireNothingClaimable(t)
		b.maintain(t)
		require.NotContains(t, b.keyStats(t), "k")
		b.requireKeyCountsAfresh(t, "k")
	})

	t.Run("DeadlineOfDelayedKeyed", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		b.submitOne(t, plane.SubmitParams{Payload: []byte("d"), ConcurrencyKey: "k", Delay: time.Minute, Deadline: b.now().Add(30 * time.Second)})
		b.submitOne(t, plane.SubmitParams{Payload: []byte("q"), ConcurrencyKey: "k", Deadline: b.now().Add(30 * time.Second)})
		b.advance(2 * time.Minute)
		b.maintain(t)
		require.NotContains(t, b.keyStats(t), "k")
		b.requireCounts(t, map[plane.State]int64{plane.StateTimeout: 2})
		n := b.submitKeyed(t, "k", 2)
		b.claimID(t, n[0])
		b.requireNothingClaimable(t)
	})

	t.Run("TrimLeavesCounters", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		ids := b.submitKeyed(t, "k", 3)
		b.ack(t, b.claimID(t, ids[0]), "ok")
		j := b.claimID(t, ids[1])
		_, err := b.drv.InvocationTrim(b.ctx, &plane.TrimParams{Namespace: b.ns, Queue: b.q, FinishedBefore: b.now().Add(time.Hour)})
		must(t, err, "trim")
		b.requireNothingClaimable(t)
		b.ack(t, j, "ok")
		b.claimID(t, ids[2])
		require.Equal(t, plane.KeyStats{Key: "k", Queued: 0, Running: 1, Limit: 1, Weight: 1}, stripKS(b.keyStats(t)["k"]))
	})

	t.Run("LimitOverrideChanges", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1, ConcurrencyLimits: map[string]int64{"k": 3}})
		b.submitKeyed(t, "k", 5)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5}), 3)
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		require.Empty(t, b.claim(t, plane.ClaimParams{Max: 5}))
		require.Equal(t, int64(1), b.keyStats(t)["k"].Limit)
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1, ConcurrencyLimits: map[string]int64{"k": 0}})
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5}), 2, "0 override: no limit")
		_, err := b.drv.QueueAdmissionDelete(b.ctx, b.ns, b.q)
		must(t, err, "delete")
		require.Equal(t, int64(0), b.keyStats(t)["k"].Limit)
	})

	t.Run("DebounceTakeOverWhenDue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		r1 := b.submit(t, plane.SubmitParams{Payload: []byte("a"), Key: "d", Debounce: 10 * time.Second, ConcurrencyKey: "k"})[0]
		b.advance(20 * time.Second)
		r2 := b.submit(t, plane.SubmitParams{Payload: []byte("b"), Key: "d", Debounce: 10 * time.Second, ConcurrencyKey: "k"})[0]
		require.False(t, r2.Existing)
		require.NotEqual(t, r1.ID, r2.ID)
		b.claimID(t, r1.ID)
		b.requireNothingClaimable(t)
		b.advance(20 * time.Second)
		b.claimID(t, r2.ID)
	})

	t.Run("ReleasedAndRetriedCounters", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true, backoff: plane.Backoff{Base: time.Hour, Max: time.Hour}})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		ids := b.submitKeyed(t, "k", 2)
		j := b.claimID(t, ids[0])
		must(t, b.settle(t, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeReleased}), "release")
		require.Equal(t, plane.KeyStats{Key: "k", Queued: 2, Running: 0, Limit: 1, Weight: 1}, stripKS(b.keyStats(t)["k"]))
		j = b.claimID(t, ids[0])
		b.nack(t, j, true, "x")
		require.Equal(t, plane.KeyStats{Key: "k", Queued: 1, Running: 0, Limit: 1, Weight: 1}, stripKS(b.keyStats(t)["k"]))
		b.claimID(t, ids[1])
	})

	t.Run("SettleAndClaimTakesFreedSlot", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		ids := b.submitKeyed(t, "k", 3)
		j := b.claimID(t, ids[0])
		errs, jobs := b.settleAndClaim(t, []plane.SettleParams{ackParams(j, "ok")}, 2, 0)
		require.NoError(t, errs[0])
		require.Len(t, jobs, 1, "the freed slot takes the key's next job")
		require.Equal(t, ids[1], jobs[0].ID)
		errs, jobs = b.settleAndClaim(t, []plane.SettleParams{nackParams(jobs[0], true, "x")}, 2, 0)
		require.NoError(t, errs[0])
		require.Len(t, jobs, 1, "a retry frees the slot for the key's next job")
		require.Equal(t, ids[2], jobs[0].ID)
	})

	for _, wait := range []time.Duration{0, 5 * time.Second} {
		t.Run(fmt.Sprintf("SettleAndClaimTakesDueKeyedJobWithoutCounterRow/wait=%s", wait), func(t *testing.T) {
			t.Parallel()
			b := s.setup(t, config{noMaintenance: true})
			plain := b.submitOne(t, plane.SubmitParams{Payload: []byte("plain")})
			k := b.submitOne(t, plane.SubmitParams{Payload: []byte("k"), ConcurrencyKey: "k", Delay: time.Minute})
			js := b.claim(t, plane.ClaimParams{LeaseTTL: time.Hour, Worker: "w"})
			require.Len(t, js, 1)
			require.Equal(t, plain, js[0].ID)
			j := js[0]
			b.advance(2 * time.Minute)
			errs, jobs := b.settleAndClaim(t, []plane.SettleParams{ackParams(j, "ok")}, 1, wait)
			require.NoError(t, errs[0])
			require.Len(t, jobs, 1)
			require.Equal(t, k, jobs[0].ID)
		})
	}

	t.Run("DueKeyedClaimedWithOffers", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		k := b.submitOne(t, plane.SubmitParams{Payload: []byte("k"), Delay: time.Minute, Requirement: &plane.Requirement{GPUs: 1}})
		k2 := b.submitOne(t, plane.SubmitParams{Payload: []byte("k2"), ConcurrencyKey: "k2", Delay: time.Minute})
		b.advance(2 * time.Minute)
		jobs := b.claim(t, plane.ClaimParams{Max: 5, Offers: &plane.Offers{GPUs: 1}, WarmHostKeys: []string{hostKeyA}})
		got := map[string]bool{}
		for _, j := range jobs {
			got[j.ID] = true
		}
		require.Equal(t, map[string]bool{k: true, k2: true}, got)
	})

	t.Run("RateOverrideChangeAppliesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{KeyRateLimits: map[string]float64{"k": 0.01}})
		b.submitKeyed(t, "k", 3)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5}), 1)
		require.Empty(t, b.claim(t, plane.ClaimParams{Max: 5}))
		b.setKeys(t, plane.Admission{KeyRateLimits: map[string]float64{"k": 10}})
		b.advance(100 * time.Millisecond)
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5}), 1)
	})

	t.Run("LoweredLimitHoldsUntilBelow", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 3})
		b.submitKeyed(t, "k", 6)
		jobs := b.claim(t, plane.ClaimParams{Max: 5})
		require.Len(t, jobs, 3)
		b.setKeys(t, plane.Admission{ConcurrencyLimit: 1})
		b.ack(t, jobs[0], "ok")
		require.Empty(t, b.claim(t, plane.ClaimParams{Max: 5}))
		b.ack(t, jobs[1], "ok")
		require.Empty(t, b.claim(t, plane.ClaimParams{Max: 5}))
		b.ack(t, jobs[2], "ok")
		require.Len(t, b.claim(t, plane.ClaimParams{Max: 5}), 1)
	})

	t.Run("WeightChangeApplies", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.submitKeyed(t, "a", 20)
		b.submitKeyed(t, "b", 20)
		for range 4 {
			b.ack(t, b.claimOne(t), "ok")
		}
		b.setKeys(t, plane.Admission{KeyWeights: map[string]float64{"a": 3}})
		got := map[string]int{}
		for range 8 {
			j := b.claimOne(t)
			got[j.ConcurrencyKey]++
			b.ack(t, j, "ok")
		}
		require.Equal(t, map[string]int{"a": 6, "b": 2}, got)
	})
}

func stripKS(k plane.KeyStats) plane.KeyStats {
	return plane.KeyStats{Key: k.Key, Queued: k.Queued, Running: k.Running, Limit: k.Limit, Weight: k.Weight}
}

// waiter starts a claim of p (b's namespace; b's queue unless p names one) that waits up to
// longWait, and returns the channel its jobs come on; a failed claim fails t.
func (b *bundle) waiter(t *testing.T, p plane.ClaimParams) <-chan []*plane.Job {
	p.Namespace, p.Queue, p.Wait = b.ns, cmp.Or(p.Queue, b.q), longWait
	got := make(chan []*plane.Job, 1)
	go func() {
		jobs, err := b.drv.InvocationClaimMany(b.ctx, &p)
		if err != nil {
			t.Error(err)
		}
		got <- jobs
	}()
	return got
}

// heldUntilResume: the waiter of the paused queue (got: what its claim returns) gets
// nothing within shortWait of what just happened (what, for the message); a resume then
// wakes it, and heldUntilResume returns what it got (a failure after longWait).
func (b *bundle) heldUntilResume(t *testing.T, got <-chan []*plane.Job, what string) []*plane.Job {
	t.Helper()
	select {
	case jobs := <-got:
		t.Fatalf("a waiter of a paused queue got %d jobs %s", len(jobs), what)
	case <-time.After(shortWait):
	}
	b.pause(t, false)
	select {
	case jobs := <-got:
		return jobs
	case <-time.After(longWait):
		t.Fatalf("the resume did not wake the waiter (%s)", what)
	}
	return nil
}

// requireKeyCountsAfresh: key (limit 1) counts from nothing: of two new jobs of it one is
// claimed, the other held by the limit, and its counters say exactly that.
func (b *bundle) requireKeyCountsAfresh(t *testing.T, key string) {
	t.Helper()
	n := b.submitKeyed(t, key, 2)
	b.claimID(t, n[0])
	b.requireNothingClaimable(t)
	require.Equal(t, plane.KeyStats{Key: key, Queued: 1, Running: 1, Limit: 1, Weight: 1}, stripKS(b.keyStats(t)[key]))
}
