package pgplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestKeyCountersExactClaimPaths checks the counters of concurrency keys (migration 0013:
// a claim counts its keyed starts itself, the trigger every other change) through the
// claim paths TestKeyCountersExact does not take, from two processes on one database:
// every kind (fifo, filo, priority, boltzmann), claims over several queues, claims with
// offers and warm host keys (placement, whose default claim takes keyed jobs in the same
// transaction as placed ones), parked claims served by a submitter's or a settler's
// transaction (direct handoff), settle-and-claim in groups, the same key names in two
// queues, keyed jobs whose deadline passes at the claim (ended as timeout, not started),
// delayed jobs promoted by claims that hold rows (promoteHolding), key rate limits and
// limit changes while claims run.
func TestKeyCountersExactClaimPaths(t *testing.T) {
	url := pgtest.Database(t)
	planes := []*Driver{
		open(t, url, &Config{MaintenanceInterval: time.Hour}),
		open(t, url, &Config{MaintenanceInterval: time.Hour}),
	}
	ctx := t.Context()
	queues := []string{"q", "r"}
	_, err := planes[0].QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q",
		Admission: plane.Admission{ConcurrencyLimit: 2, ConcurrencyLimits: map[string]int64{"k1": 1}}})
	require.NoError(t, err)
	_, err = planes[0].QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "r",
		Admission: plane.Admission{ConcurrencyLimit: 3, KeyRateLimit: 2000, KeyBurst: 2}})
	require.NoError(t, err)
	kinds := []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority, plane.KindBoltzmann}
	submit := func(d *Driver, rng *rand.Rand, queue string, n int) {
		batch := make([]plane.SubmitParams, n)
		for i := range batch {
			s := plane.SubmitParams{Payload: []byte{0xc0}, MaxAttempts: 3, Priority: float64(rng.IntN(3))}
			if rng.IntN(5) != 0 {
				s.ConcurrencyKey = fmt.Sprintf("k%d", rng.IntN(6))
			}
			switch rng.IntN(8) {
			case 0:
				s.Delay = time.Duration(1+rng.IntN(4)) * time.Millisecond
			case 1:
				s.Deadline = time.Now().Add(time.Duration(rng.IntN(4)) * time.Millisecond)
			case 2:
				if s.ConcurrencyKey == "" {
					s.Requirement = &plane.Requirement{GPUs: 1}
				}
			case 3:
				s.Metadata = map[string]string{plane.MetaHostKey: "h1"}
			}
			batch[i] = s
		}
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: queue, Invocations: batch})
		require.NoError(t, err)
	}
	for _, q := range queues {
		for range 4 {
			submit(planes[0], rand.New(rand.NewPCG(1, 2)), q, 100)
		}
	}
	var wg sync.WaitGroup
	// Submitters: their transactions serve parked claims (direct handoff).
	for s := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s), 11))
			for round := 0; round < 60; round++ {
				submit(planes[s], rng, queues[rng.IntN(2)], 1+rng.IntN(8))
				time.Sleep(time.Millisecond)
			}
		}()
	}
	// Limit changes while claims run.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 0; round < 10; round++ {
			limit := int64(1 + round%3)
			_, err := planes[1].QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q",
				Admission: plane.Admission{ConcurrencyLimit: limit, ConcurrencyLimits: map[string]int64{"k1": 1}}})
			require.NoError(t, err)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 13))
			d := planes[w%2]
			var pending []plane.SettleParams
			for round := 0; round < 40; round++ {
				claim := &plane.ClaimParams{Namespace: "default", Queue: queues[rng.IntN(2)], Kind: kinds[rng.IntN(len(kinds))],
					Temperature: 1, Max: 1 + rng.IntN(5), Worker: fmt.Sprint(w), LeaseTTL: time.Minute}
				switch rng.IntN(6) {
				case 0:
					claim.Queues = queues
				case 1:
					claim.Offers = &plane.Offers{GPUs: 2}
				case 2:
					if claim.Kind != plane.KindBoltzmann {
						claim.WarmHostKeys = []string{"h1"}
					}
				case 3:
					claim.Wait = 20 * time.Millisecond
				}
				got := settleThenClaim(t, d, rng, pending, claim)
				pending = nil
				for _, j := range got {
					s := plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
					switch rng.IntN(8) {
					case 0, 1:
						s.Outcome, s.Error = plane.OutcomeRetry, &plane.ErrorInfo{Message: "again"}
						s.RetryDelay = time.Duration(rng.IntN(2)) * time.Millisecond
					case 2:
						s.Outcome, s.Error = plane.OutcomeReleased, &plane.ErrorInfo{Message: "not run"}
					case 3:
						s.Outcome, s.Error, s.RetryDelay = plane.OutcomeRateLimited, &plane.ErrorInfo{Message: "slow"}, time.Millisecond
						if j.ConcurrencyKey != "" && rng.IntN(2) == 0 {
							s.RateLimitKey = j.ConcurrencyKey
						}
					}
					pending = append(pending, s)
				}
			}
			if len(pending) > 0 {
				_, err := d.InvocationSettleMany(ctx, pending)
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	requireKeyCountersExact(t, url, "after the workers")
	// Drain with every kind, offers and queues.
	for idle := 0; idle < 3; {
		var got []*plane.Job
		for _, p := range []*plane.ClaimParams{
			{Namespace: "default", Queue: "q", Queues: queues, Max: 50},
			{Namespace: "default", Queue: "q", Max: 50, Offers: &plane.Offers{GPUs: 2}},
			{Namespace: "default", Queue: "r", Max: 50, Offers: &plane.Offers{GPUs: 2}},
		} {
			jobs, err := planes[0].InvocationClaimMany(ctx, p)
			require.NoError(t, err)
			got = append(got, jobs...)
		}
		if len(got) == 0 {
			idle++
			time.Sleep(10 * time.Millisecond)
			require.NoError(t, planes[0].Maintain(ctx))
			continue
		}
		idle = 0
		settle := make([]plane.SettleParams, len(got))
		for i, j := range got {
			settle[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
		}
		_, err := planes[0].InvocationSettleMany(ctx, settle)
		require.NoError(t, err)
	}
	requireKeyCountersExact(t, url, "drained")
}

// TestKeyedHandoffNoDeadlock: a transaction that makes jobs claimable claims for the
// parked claimers of its process before it commits (direct handoff, handoff.go), holding
// what it wrote: a submit holds the counter rows of the keys it inserted claimable jobs
// under. Its claim's promotion must then wait for no row (promoteHolding), as a claim after
// settles does: a promotion that waits for a due row another claim's promotion holds,
// while that one waits for a counter row the submit holds, is a deadlock PostgreSQL breaks
// after deadlock_timeout (and a retry). Three planes submit batches of several keys, half
// of them delayed (due rows for every claim's promotion), while claimers of each plane
// park for jobs; PostgreSQL must count no deadlock, and the counters end exact.
func TestKeyedHandoffNoDeadlock(t *testing.T) {
	url := pgtest.Database(t)
	conn, planes, before := deadlockPlanes(t, url, 3, 20*time.Millisecond)
	ctx := t.Context()
	orders := [][]string{{"k0", "k1", "k2", "k3"}, {"k3", "k2", "k1", "k0"}, {"k1", "k3", "k0", "k2"}}
	var submitted, settled atomic.Int64
	var submitters, claimers sync.WaitGroup
	stop := make(chan struct{})
	for w := range 6 {
		submitters.Add(1)
		go func() {
			defer submitters.Done()
			d, order := planes[w%len(planes)], orders[w%len(orders)]
			for round := range 25 {
				batch := make([]plane.SubmitParams, 0, 2*len(order))
				for i := range 2 {
					for _, k := range order {
						s := plane.SubmitParams{Payload: []byte{0xc0}, ConcurrencyKey: k}
						if (round+i)%2 == 0 {
							s.Delay = 3 * time.Millisecond
						}
						batch = append(batch, s)
					}
				}
				if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch}); err != nil {
					t.Error(err)
					return
				}
				submitted.Add(int64(len(batch)))
				time.Sleep(time.Millisecond)
			}
		}()
	}
	for w := range 9 {
		claimers.Add(1)
		go func() {
			defer claimers.Done()
			d := planes[w%len(planes)]
			for {
				select {
				case <-stop:
					return
				default:
				}
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 4, Wait: 50 * time.Millisecond})
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					continue
				}
				settles := make([]plane.SettleParams, len(jobs))
				for i, j := range jobs {
					settles[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
				}
				errs, err := d.InvocationSettleMany(ctx, settles)
				if err != nil {
					t.Error(err)
					return
				}
				requireSettled(t, errs)
				settled.Add(int64(len(jobs)))
			}
		}()
	}
	submitters.Wait()
	require.Eventually(t, func() bool { return settled.Load() == submitted.Load() }, 30*time.Second, 10*time.Millisecond,
		"every job settled")
	close(stop)
	claimers.Wait()
	requireKeyCountersExact(t, url, "drained")
	requireNoNewDeadlocks(t, conn, planes, before)
}

// TestHoldingClaimPromotesWithoutWaiting: a claim in a transaction that already holds a
// counter row (a submit's insert of a keyed job, then its direct handoff to a parked
// claimer; settles, then the claim of a settle-and-claim) must promote only what it can
// without waiting (promoteHolding), whichever path claims: a parked claimer without offers,
// one with offers (placement), a settle-and-claim with offers. Here another transaction
// holds the due row the promotion would take and then waits for the key's counter row the
// claiming transaction holds: a promotion that waits for the due row closes a deadlock,
// which PostgreSQL breaks after deadlock_timeout by aborting one of them (here the other
// transaction's statement).
func TestHoldingClaimPromotesWithoutWaiting(t *testing.T) {
	for _, c := range []struct {
		name   string
		offers *plane.Offers
		settle bool // a settle-and-claim holds the key's row, not a submit's handoff
	}{
		{name: "handoff"},
		{name: "handoff with offers", offers: &plane.Offers{GPUs: 1}},
		{name: "settle and claim with offers", offers: &plane.Offers{GPUs: 1}, settle: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := pgtest.Database(t)
			conn, watch := mustConn(t, url), mustConn(t, url) // watch reads pg_stat_activity outside the other transaction
			// The plane's sessions look for a deadlock after 10 s, the other transaction's
			// after 100 ms: a deadlock aborts the other transaction's statement.
			_, err := conn.Exec(t.Context(), `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = ''10s''', current_database()); END $$`)
			require.NoError(t, err)
			_, err = conn.Exec(t.Context(), `SET deadlock_timeout = '100ms'`)
			require.NoError(t, err)
			var offset atomic.Int64 // the plane's clock runs ahead by this
			d := open(t, url, &Config{MaintenanceInterval: time.Hour,
				Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
			ctx := t.Context()
			// Key k has a running job, so its counter row exists; the delayed job is due an
			// hour from now.
			submitOne(t, d, plane.SubmitParams{ConcurrencyKey: "k"})
			running := claimOne(t, d, 0)
			require.NotNil(t, running)
			delayed := submitOne(t, d, plane.SubmitParams{ConcurrencyKey: "other", Delay: time.Hour})

			var claimed []*plane.Job
			claimDone := make(chan error, 1)
			if !c.settle {
				// A claimer parks (nothing claimable; the delayed job's time is past its wait).
				go func() {
					jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 5,
						Wait: 20 * time.Second, Offers: c.offers})
					claimed = jobs
					claimDone <- err
				}()
				require.Eventually(t, func() bool {
					parked := 0 // counted, none taken
					d.claimWaiters.TakeFirst(planekit.QueueKey("default", "q"), func(*claimWaiter) bool { parked++; return false })
					return parked > 0
				}, 10*time.Second, time.Millisecond, "the claimer parks")
			}
			offset.Store(int64(2 * time.Hour)) // the delayed job is due, not yet promoted
			// Another transaction holds the due row.
			other, err := conn.Begin(ctx)
			require.NoError(t, err)
			defer other.Rollback(context.Background())
			_, err = other.Exec(ctx, `SELECT 1 FROM lakeshore.invocations WHERE id = $1 FOR UPDATE`, delayed)
			require.NoError(t, err)
			// The transaction holding k's counter row claims: a submit of k handed to the
			// parked claimer, or a settle-and-claim settling k's running job.
			writeDone := make(chan error, 1)
			go func() {
				if c.settle {
					_, jobs, err := d.InvocationSettleAndClaim(ctx, []plane.SettleParams{{ID: running.ID, Token: running.Token,
						Outcome: plane.OutcomeRetry, Error: &plane.ErrorInfo{Message: "again"}}},
						&plane.ClaimParams{Namespace: "default", Queue: "q", Max: 5, Offers: c.offers})
					claimed = jobs
					writeDone <- err
					return
				}
				_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
					Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}, ConcurrencyKey: "k"}}})
				writeDone <- err
			}()
			// Wait until that transaction either finished or waits for a lock; then the
			// other transaction wants k's counter row.
			var waiting bool
			require.Eventually(t, func() bool {
				select {
				case err := <-writeDone:
					writeDone <- err // checked below
					return true
				default:
				}
				var activity string
				if err := watch.QueryRow(ctx, `SELECT count(*) FILTER (WHERE wait_event_type = 'Lock' AND query LIKE '%WITH due AS%') > 0,
					string_agg(state || ' ' || coalesce(wait_event_type, '') || ' ' || left(query, 60), E'\n')
					FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&waiting, &activity); err != nil {
					return false
				}
				if waiting {
					t.Log(activity)
				}
				return waiting
			}, 10*time.Second, time.Millisecond, "the claiming transaction finishes or waits")
			_, err = other.Exec(ctx, `UPDATE lakeshore.concurrency_keys SET queued = queued WHERE concurrency_key = 'k'`)
			require.NoError(t, err, "the other transaction's wait for k's counter row (waiting promotion: %v)", waiting)
			require.NoError(t, other.Commit(ctx))
			require.NoError(t, <-writeDone)
			if !c.settle {
				require.NoError(t, <-claimDone)
			}
			require.NotEmpty(t, claimed, "the claim got k's job")
			requireKeyCountersExact(t, url, "after")
		})
	}
}

// TestHoldingClaimReportsSkippedDueRow: a claim in a transaction that holds rows leaves a
// due row another transaction holds waiting (promoteHolding), and must then say that a job
// is due (its next), so that its claimer, finding nothing, claims again at once (and a
// handoff does not mark the queue quiet) instead of sleeping until a notification or a
// poll: before, it reported nothing due, and a due delayed job waited for a poll.
func TestHoldingClaimReportsSkippedDueRow(t *testing.T) {
	url := pgtest.Database(t)
	conn := mustConn(t, url)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	ctx := t.Context()
	delayed := submitOne(t, d, plane.SubmitParams{ConcurrencyKey: "k", Delay: time.Millisecond})
	time.Sleep(5 * time.Millisecond) // due
	other, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback(context.Background())
	_, err = other.Exec(ctx, `SELECT 1 FROM lakeshore.invocations WHERE id = $1 FOR UPDATE`, delayed)
	require.NoError(t, err)
	var r *claimRequest
	require.NoError(t, d.do(ctx, func(tx *tx) error {
		tx.holdsRows = true // as after settles, or an earlier claim of its group
		r = &claimRequest{P: &plane.ClaimParams{Namespace: "default", Queue: "q"}, Claim: planekit.Claim{Kind: plane.KindFIFO, N: 1, Lease: time.Minute}}
		return tx.claimFor([]*claimRequest{r})
	}))
	require.Empty(t, r.Jobs, "the due row is held: not promoted")
	require.NotZero(t, r.Next, "the claim says a job is due")
	require.NoError(t, other.Rollback(ctx))
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: time.Second})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, delayed, jobs[0].ID)
	requireKeyCountersExact(t, url, "after")
}
