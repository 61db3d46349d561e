package planetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// requireFenced checks that every call a worker makes with job's token is refused with
// ErrLeaseLost, and that none of them changed the invocation or its journal.
func (b *bundle) requireFenced(t *testing.T, job *plane.Job, why string) {
	t.Helper()
	before := b.get(t, job.ID)
	framesBefore, closedBefore := b.frames(t, invJournal(job.ID))

	hb := b.heartbeat(t, job.ID, job.Token, time.Hour)
	require.ErrorIs(t, hb.Err, plane.ErrLeaseLost, "%s: heartbeat", why)
	for _, p := range []plane.SettleParams{
		{ID: job.ID, Token: job.Token, Outcome: plane.OutcomeSucceeded, Result: []byte("stale result")},
		nackParams(job, true, "stale retry"),
		nackParams(job, false, "stale failure"),
	} {
		require.ErrorIs(t, b.settle(t, p), plane.ErrLeaseLost, "%s: settle with outcome %d", why, p.Outcome)
	}
	if !before.State.Terminal() {
		// On a closed journal ErrJournalClosed is as right as ErrLeaseLost; on an open one
		// only the lease decides.
		_, err := b.postErr(invJournal(job.ID), job.Token, "stale frame", false)
		require.ErrorIs(t, err, plane.ErrLeaseLost, "%s: post", why)
		_, err = b.postErr(invJournal(job.ID), job.Token, "stale final", true)
		require.ErrorIs(t, err, plane.ErrLeaseLost, "%s: post final", why)
	}

	after := b.get(t, job.ID)
	require.Equal(t, before.State, after.State, "%s: state unchanged", why)
	require.Equal(t, before.Attempt, after.Attempt, "%s: attempt unchanged", why)
	require.Equal(t, before.Result, after.Result, "%s: result unchanged", why)
	require.Equal(t, before.Error, after.Error, "%s: error unchanged", why)
	require.True(t, before.LeaseExpiresAt.Equal(after.LeaseExpiresAt), "%s: lease unchanged", why)
	require.True(t, before.AvailableAt.Equal(after.AvailableAt), "%s: available_at unchanged", why)
	framesAfter, closedAfter := b.frames(t, invJournal(job.ID))
	require.Equal(t, framesBefore, framesAfter, "%s: journal unchanged", why)
	require.Equal(t, closedBefore, closedAfter)
}

func testLease(t *testing.T, s *suite) {
	t.Run("ClaimGrantsLease", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "a", "b")
		now := b.advance(time.Second)
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Worker: "worker-default"})
		require.Len(t, jobs, 1)
		j := jobs[0]
		require.Equal(t, ids[0], j.ID)
		require.Equal(t, 1, j.Attempt, "attempt counts claims, starting at 1")
		require.NotEmpty(t, j.Token)
		requireTime(t, now.Add(plane.LeaseTTLDefault), j.LeaseExpiresAt, "a claim without LeaseTTL gets the default lease")
		require.Equal(t, 30*time.Second, plane.LeaseTTLDefault, "the semantics page says 30 s")
		inv := b.requireState(t, j.ID, plane.StateRunning, 1)
		require.Equal(t, "worker-default", inv.Worker)
		requireTime(t, now, inv.StartedAt, "started at")
		requireTime(t, j.LeaseExpiresAt, inv.LeaseExpiresAt, "Get's lease expiry")

		jobs = b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: 5 * time.Second})
		require.Len(t, jobs, 1)
		requireTime(t, now.Add(5*time.Second), jobs[0].LeaseExpiresAt, "a claim's LeaseTTL")
		require.NotEqual(t, j.Token, jobs[0].Token, "every claim has its own token")
	})

	t.Run("HeartbeatExtendsLease", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		start := b.now()
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: 10 * time.Second})[0]
		requireTime(t, start.Add(10*time.Second), j.LeaseExpiresAt, "lease")
		b.advance(6 * time.Second)
		hb := b.heartbeat(t, id, j.Token, 10*time.Second)
		require.NoError(t, hb.Err)
		requireTime(t, start.Add(16*time.Second), hb.LeaseExpiresAt, "heartbeat's new expiry")
		requireTime(t, start.Add(16*time.Second), b.get(t, id).LeaseExpiresAt, "Get's lease after heartbeat")
		b.advance(6 * time.Second) // past the claim's lease, within the heartbeat's
		b.maintain(t)
		b.requireState(t, id, plane.StateRunning, 1)
		b.requireNothingClaimable(t)
		hb = b.heartbeat(t, id, j.Token, 0)
		require.NoError(t, hb.Err)
		requireTime(t, b.now().Add(plane.LeaseTTLDefault), hb.LeaseExpiresAt, "a heartbeat without LeaseTTL extends by the default")
		b.ack(t, j, "done")
		b.requireState(t, id, plane.StateSucceeded, 1)
	})

	t.Run("HeartbeatManyIsPerItem", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "a", "b")
		j := b.claimID(t, ids[0])
		res, err := b.drv.InvocationHeartbeatMany(b.ctx, []plane.HeartbeatParams{
			{ID: ids[0], Token: j.Token, LeaseTTL: time.Minute},
			{ID: ids[1], Token: j.Token},
			{ID: unknownID, Token: j.Token},
		})
		must(t, err, "heartbeat many")
		require.Len(t, res, 3)
		require.NoError(t, res[0].Err)
		requireTime(t, b.now().Add(time.Minute), res[0].LeaseExpiresAt, "extended")
		require.ErrorIs(t, res[1].Err, plane.ErrLeaseLost, "a queued job has no lease to extend")
		require.ErrorIs(t, res[2].Err, plane.ErrNotFound)
		b.requireState(t, ids[1], plane.StateQueued, 0)
	})

	t.Run("ExpiryRequeuesThenTimesOut", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 3})
		var tokens []string
		for attempt := 1; attempt <= 3; attempt++ {
			j := b.claimID(t, id)
			require.Equal(t, attempt, j.Attempt)
			require.NotContains(t, tokens, j.Token, "a fresh token every claim")
			tokens = append(tokens, j.Token)
			b.post(t, j, "working")
			b.advance(plane.LeaseTTLDefault + time.Millisecond)
			b.maintain(t)
			if attempt < 3 {
				inv := b.requireState(t, id, plane.StateQueued, attempt)
				require.True(t, inv.FinishedAt.IsZero())
				frames, closed := b.frames(t, invJournal(id))
				require.False(t, closed, "a re-queued job's journal stays open")
				require.Len(t, frames, attempt)
				b.advance(pastBackoff)
			}
		}
		inv := b.requireState(t, id, plane.StateTimeout, 3)
		requireTime(t, b.now(), inv.FinishedAt, "finished at")
		info := b.requireErrorFrame(t, id, 3)
		require.Equal(t, "lease expired", info.Message)
		requireIs(t, b.waitTerminal(t, id).TerminalError(), plane.ErrTimedOut)
		b.requireCounts(t, map[plane.State]int64{plane.StateTimeout: 1})
		b.requireNothingClaimable(t)
	})

	t.Run("ExpiryOfOnlyAttemptTimesOut", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 1})
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: 10 * time.Second})[0]
		b.post(t, j, "partial")
		b.advance(10*time.Second + time.Millisecond)
		b.maintain(t)
		b.requireState(t, id, plane.StateTimeout, 1)
		info := b.requireErrorFrame(t, id, 1)
		require.Equal(t, "lease expired", info.Message)
		frames, _ := b.frames(t, invJournal(id))
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameError}, frameKinds(frames))
		err := b.waitTerminal(t, id).TerminalError()
		requireIs(t, err, plane.ErrTimedOut)
		require.Contains(t, err.Error(), "lease expired")
	})

	t.Run("StaleTokenFencedAfterReclaim", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 3})
		first := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: 10 * time.Second, Worker: "first"})[0]
		require.Zero(t, b.post(t, first, "from the first worker"))
		b.advance(11 * time.Second)
		b.maintain(t)
		b.requireState(t, id, plane.StateQueued, 1)
		b.requireFenced(t, first, "expired, not yet re-claimed")
		b.advance(pastBackoff)
		second := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: time.Minute, Worker: "second"})[0]
		require.Equal(t, id, second.ID)
		require.Equal(t, 2, second.Attempt)
		require.NotEqual(t, first.Token, second.Token)

		b.requireFenced(t, first, "re-claimed by another worker")
		inv := b.requireState(t, id, plane.StateRunning, 2)
		require.Equal(t, "second", inv.Worker)

		require.EqualValues(t, 1, b.post(t, second, "from the second worker"))
		errs, err := b.drv.InvocationSettleMany(b.ctx, []plane.SettleParams{
			{ID: id, Token: first.Token, Outcome: plane.OutcomeSucceeded, Result: []byte("stale")},
			{ID: id, Token: second.Token, Outcome: plane.OutcomeSucceeded, Result: []byte("fresh")},
		})
		must(t, err, "settle")
		require.Len(t, errs, 2)
		require.ErrorIs(t, errs[0], plane.ErrLeaseLost, "the stale worker's ack")
		require.NoError(t, errs[1], "the current holder's ack")
		inv = b.requireState(t, id, plane.StateSucceeded, 2)
		require.Equal(t, []byte("fresh"), inv.Result)
		b.requireFenced(t, first, "after the new holder's ack")
		frames, closed := b.frames(t, invJournal(id))
		require.True(t, closed)
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameValue, plane.FrameEnd}, frameKinds(frames))
		require.Equal(t, []int{1, 2, 2}, []int{frames[0].Attempt, frames[1].Attempt, frames[2].Attempt})
		require.Equal(t, []byte("fresh"), frames[2].Value)
	})

	t.Run("ExpiredLeaseFencedBeforeMaintenance", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 2})
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: 10 * time.Second})[0]
		b.advance(10*time.Second + time.Millisecond)
		// The lease is over whether or not maintenance has noticed yet.
		hb := b.heartbeat(t, id, j.Token, time.Minute)
		require.ErrorIs(t, hb.Err, plane.ErrLeaseLost, "heartbeat on an expired lease")
		require.ErrorIs(t, b.settle(t, plane.SettleParams{ID: id, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: []byte("late")}),
			plane.ErrLeaseLost, "ack on an expired lease")
		require.NotEqual(t, plane.StateSucceeded, b.get(t, id).State)
		b.maintain(t)
		b.requireState(t, id, plane.StateQueued, 1)
	})

	t.Run("WrongTokenFenced", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "a", "b")
		j := b.claimID(t, ids[0])
		other := b.claimID(t, ids[1])
		for _, token := range []string{"not-the-token", other.Token, plane.NewToken(b.now())} {
			wrong := *j
			wrong.Token = token
			b.requireFenced(t, &wrong, "token "+token)
		}
		b.requireState(t, ids[0], plane.StateRunning, 1)
		b.ack(t, j, "mine")
		b.ack(t, other, "theirs")
	})

	t.Run("HeartbeatingJobNeverRedispatched", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 3})
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: 10 * time.Second})[0]
		for range 12 { // 72 s of work on a 10 s lease
			b.advance(6 * time.Second)
			hb := b.heartbeat(t, id, j.Token, 10*time.Second)
			require.NoError(t, hb.Err)
			b.maintain(t)
			for _, kind := range []plane.Kind{plane.KindFIFO, plane.KindPriority} {
				require.Empty(t, b.claim(t, plane.ClaimParams{Kind: kind, Max: 10}), "a heartbeating job is not handed out again")
			}
		}
		b.ack(t, j, "done after a long time")
		b.requireState(t, id, plane.StateSucceeded, 1)
	})

	t.Run("HeartbeatingJobNeverRedispatchedRealTime", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 3})
		// Heartbeats every lease/30; only a stall of 29/30 of the lease (2.9 s) would lose it. A
		// 1 s lease was lost on a machine at load 22, where one group commit's fsync took
		// longer than 900 ms: the plane rightly handed the job on, and the test measured the
		// machine, not the rule.
		const lease = 3 * time.Second * raceSlowdown
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: lease})[0]
		done := make(chan struct{})
		var stolen []*plane.Job
		var claimErr error
		var claimers sync.WaitGroup
		claimers.Go(func() { // a second worker, claiming all the while
			for {
				select {
				case <-done:
					return
				default:
				}
				jobs, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindFIFO, Wait: 100 * time.Millisecond})
				if err != nil {
					claimErr = err
					return
				}
				stolen = append(stolen, jobs...)
			}
		})
		// The heartbeats go on until the second worker has stopped claiming: the lease is
		// kept alive for the whole time anyone could take it. They stop before the ack (one
		// heartbeat at most 1/30 of the lease earlier): a heartbeat that reached the plane
		// after the ack would rightly be answered "lease lost".
		stopHeartbeats := make(chan struct{})
		var hbErr error
		var heartbeats sync.WaitGroup
		heartbeats.Go(func() {
			ticker := time.NewTicker(lease / 30)
			defer ticker.Stop()
			for {
				select {
				case <-stopHeartbeats:
					return
				case <-ticker.C:
				}
				res, err := b.drv.InvocationHeartbeatMany(b.ctx, []plane.HeartbeatParams{{ID: id, Token: j.Token, LeaseTTL: lease}})
				if err == nil && len(res) != 1 {
					err = errors.New("heartbeat: want one result")
				}
				if err == nil {
					err = res[0].Err
				}
				if hbErr = err; hbErr != nil {
					return
				}
			}
		})
		time.Sleep(lease * 8 / 5)
		close(done)
		claimers.Wait()
		must(t, claimErr, "claim")
		require.Empty(t, stolen, "a job whose lease is kept alive is never handed to a second claimer")
		close(stopHeartbeats)
		heartbeats.Wait()
		must(t, hbErr, "heartbeat")
		b.ack(t, j, "done")
		b.requireState(t, id, plane.StateSucceeded, 1)
	})

	t.Run("ConcurrentWorkersSettleEachJobOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		const jobs, workers = 30, 4
		// A lease lost to a slow machine costs only an attempt; the attempts are many so
		// that no job runs out of them under load (the rule under test is that each job's
		// ack is accepted exactly once, and never after its lease).
		const lease = 250 * time.Millisecond * raceSlowdown
		var batch []plane.SubmitParams
		for range jobs {
			batch = append(batch, plane.SubmitParams{MaxAttempts: 50})
		}
		ids := map[string]int{}
		for i, r := range b.submit(t, batch...) {
			ids[r.ID] = i
		}
		var (
			mu        sync.Mutex
			won       = map[string][]string{} // id → results of the acks that succeeded
			staleWins []string                // slow acks that succeeded after their lease
			failures  []error
		)
		ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second*raceSlowdown)
		defer cancel()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					mu.Lock()
					finished := len(won) == jobs
					mu.Unlock()
					if finished {
						return
					}
					got, err := b.drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q,
						Kind: plane.KindFIFO, Max: 2, LeaseTTL: lease, Wait: 50 * time.Millisecond})
					if err != nil {
						if ctx.Err() == nil {
							mu.Lock()
							failures = append(failures, err)
							mu.Unlock()
						}
						return
					}
					for _, j := range got {
						// Every third job stalls past its lease on its first attempt.
						slow := j.Attempt == 1 && ids[j.ID]%3 == 0
						if slow {
							<-time.After(lease + 150*time.Millisecond)
						}
						result := fmt.Sprintf("%s by %d at attempt %d", j.ID, w, j.Attempt)
						errs, err := b.drv.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token,
							Outcome: plane.OutcomeSucceeded, Result: []byte(result)}})
						if err == nil {
							err = errs[0]
						}
						mu.Lock()
						switch {
						case err == nil && slow:
							staleWins = append(staleWins, j.ID)
						case err == nil:
							won[j.ID] = append(won[j.ID], result)
						case !errors.Is(err, plane.ErrLeaseLost) && ctx.Err() == nil:
							failures = append(failures, err)
						}
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		require.Empty(t, failures, "workers saw only ErrLeaseLost")
		require.Empty(t, staleWins, "an ack after the lease ended was accepted")
		require.Len(t, won, jobs, "every job succeeded")
		for id, results := range won {
			require.Len(t, results, 1, "%s was acked successfully more than once: %v", id, results)
			inv := b.requireState(t, id, plane.StateSucceeded, b.get(t, id).Attempt)
			require.Equal(t, results[0], string(inv.Result), "the stored result is the accepted ack's")
			if ids[id]%3 == 0 {
				require.GreaterOrEqual(t, inv.Attempt, 2, "a stalled first attempt was re-dispatched")
			}
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateSucceeded: jobs})
	})

	t.Run("AbandonedJobReclaimedAutomatically", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 2})
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: 300 * time.Millisecond})[0]
		// The worker vanishes. A waiting claimer gets the job once the lease is over, with
		// nobody calling Maintain.
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Wait: longWait})
		returned := time.Now()
		require.Len(t, jobs, 1, "an abandoned job is claimable again after its lease")
		require.Equal(t, id, jobs[0].ID)
		require.Equal(t, 2, jobs[0].Attempt)
		require.False(t, returned.Before(j.LeaseExpiresAt), "not before the lease ended")
		require.Less(t, returned.Sub(j.LeaseExpiresAt), wakeLatency, "within the lease and a small margin")
		b.requireFenced(t, j, "abandoned")
		b.ack(t, jobs[0], "second time lucky")
		b.requireState(t, id, plane.StateSucceeded, 2)
	})
}
