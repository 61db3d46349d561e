package pgplane

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestKeyedBatchesNoDeadlock runs three planes on one database (three processes) whose
// workers submit and settle batches of jobs under several concurrency keys, each worker
// in its own key order: grouped submits, settle groups with acks, immediate re-queues and
// backed-off retries (promoted later by claims and maintenance), and settle-and-claim.
// Every transaction that changes the counter rows of several keys locks them in key order,
// so PostgreSQL counts no deadlock (each one it breaks costs a transaction
// deadlock_timeout, 1 s, before the driver's retry); and the counters end exact: every job
// succeeded, no key counted as queued or running.
func TestKeyedBatchesNoDeadlock(t *testing.T) {
	url := pgtest.Database(t)
	conn, planes, before := deadlockPlanes(t, url, 3, 20*time.Millisecond)
	orders := [][]string{ // each worker's key order
		{"k0", "k1", "k2", "k3"},
		{"k3", "k2", "k1", "k0"},
		{"k1", "k3", "k0", "k2"},
		{"k2", "k0", "k3", "k1"},
	}
	submitted := batchRounds(t, planes, orders,
		func(k string) plane.SubmitParams { return plane.SubmitParams{Payload: []byte{0xc0}, ConcurrencyKey: k} },
		func(j *plane.Job) string { return j.ConcurrencyKey }, nil)
	if t.Failed() {
		return
	}
	d := planes[0]
	drainAcked(t, d, submitted, nil)
	// No key counts a queued or running job: every counter row went with its last job.
	var counters int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM `+d.schema+`.concurrency_keys`).Scan(&counters))
	require.Zero(t, counters, "counter rows left")
	requireNoNewDeadlocks(t, conn, planes, before)
}

// TestHoldOfAnotherKeyLocksInKeyOrder: a rate-limited settle of a job of key "b" whose
// worker holds key "a" back (RateLimitKey) changes two counter rows, b's (its job leaves
// running) and a's (the hold); it locks them in key order, as every transaction that
// changes several keys' rows does, so it never waits for a's row while it holds b's. A
// transaction that holds a's row and takes b's next (in key order, as a submit of jobs of
// both keys does) is not made to wait for the settle: before, the settle wrote b's row
// (the trigger) and then a's (the hold), and the two deadlocked.
func TestHoldOfAnotherKeyLocksInKeyOrder(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	ctx := t.Context()
	for range 2 {
		submitOne(t, d, plane.SubmitParams{ConcurrencyKey: "b"})
	}
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	hold := func(j *plane.Job) error {
		errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token,
			Outcome: plane.OutcomeRateLimited, RetryDelay: time.Hour, RateLimitKey: "a"}})
		return cmp.Or(err, errs[0])
	}
	require.NoError(t, hold(jobs[0])) // a's row made by the hold

	other := mustConn(t, url)
	tx, err := other.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	_, err = tx.Exec(ctx, `SELECT 1 FROM lakeshore.concurrency_keys WHERE namespace = 'default' AND queue = 'q' AND concurrency_key = 'a' FOR UPDATE`)
	require.NoError(t, err)
	settled := make(chan error, 1)
	go func() { settled <- hold(jobs[1]) }()
	watch := mustConn(t, url)
	require.Eventually(t, func() bool { // the settle waits for a's row
		var waiting int
		err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%concurrency_keys%'`).Scan(&waiting)
		return err == nil && waiting == 1
	}, 10*time.Second, 5*time.Millisecond)
	// Well before deadlock_timeout (1 s), which would break the cycle by failing one of the two.
	_, err = tx.Exec(ctx, `SET LOCAL lock_timeout = '300ms'`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM lakeshore.concurrency_keys WHERE namespace = 'default' AND queue = 'q' AND concurrency_key = 'b' FOR UPDATE`)
	require.NoError(t, err, "b's row, taken in key order after a's, is not held by the settle waiting for a's")
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-settled)
	requireKeyCountersExact(t, url, "after the holds")
}

// TestKeptKeyRowsUnderConcurrency: counter rows kept for their rate state (migration
// 0014) under concurrent use from two planes on one database, whose leader's maintenance
// (every 5 ms) drops settled rows while workers submit batches of several keys, claim
// under a rate limit per key, and answer "slow down" for their own key or another one: no
// deadlock, the counters stay exact, and once every bucket has refilled and every hold
// ended, maintenance leaves no counter row.
func TestKeptKeyRowsUnderConcurrency(t *testing.T) {
	url := pgtest.Database(t)
	conn, planes, before := deadlockPlanes(t, url, 2, 5*time.Millisecond)
	ctx := t.Context()
	_, err := planes[0].QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q",
		Admission: plane.Admission{ConcurrencyLimit: 2, KeyRateLimit: 500, KeyBurst: 2}})
	require.NoError(t, err)
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	var submitted atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := planes[w%len(planes)]
			for round := range 20 {
				batch := make([]plane.SubmitParams, 0, 3)
				for i := range 3 {
					batch = append(batch, plane.SubmitParams{Payload: []byte{0xc0}, ConcurrencyKey: keys[(w+round+2*i)%len(keys)]})
				}
				if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch}); err != nil {
					t.Error(err)
					return
				}
				submitted.Add(int64(len(batch)))
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 4, Wait: 5 * time.Millisecond})
				if err != nil {
					t.Error(err)
					return
				}
				settles := make([]plane.SettleParams, len(jobs))
				for i, j := range jobs {
					settles[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
					if (round+i)%3 == 0 {
						settles[i].Outcome, settles[i].RetryDelay = plane.OutcomeRateLimited, time.Duration(1+round%3)*time.Millisecond
						settles[i].RateLimitKey = keys[(w*7+round+i)%len(keys)] // often another key
					}
				}
				if len(settles) > 0 {
					errs, err := d.InvocationSettleMany(ctx, settles)
					if err != nil {
						t.Error(err)
						return
					}
					requireSettled(t, errs)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	requireKeyCountersExact(t, url, "after the workers")
	d := planes[0]
	drainAcked(t, d, submitted.Load(), nil)
	requireKeyCountersExact(t, url, "drained")
	require.Eventually(t, func() bool { // the buckets refill in 4 ms, the holds end in 3
		var rows int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+d.schema+`.concurrency_keys`).Scan(&rows))
		return rows == 0
	}, 10*time.Second, 10*time.Millisecond, "maintenance drops every settled counter row")
	requireNoNewDeadlocks(t, conn, planes, before)
}

// TestConcurrentMaintenanceNoDeadlock: two processes' maintenance passes at once (an
// explicit Maintain beside the leader's, or a pass that outlives its leader's lease) trim
// the placement tables one after the other: neither deadlocks the other. Each pass's trim
// locked a table against writers in SHARE mode, which two trims both hold at once, and then
// wrote to it, which each one's SHARE lock refuses the other.
func TestConcurrentMaintenanceNoDeadlock(t *testing.T) {
	url := pgtest.Database(t)
	conn, planes, before := deadlockPlanes(t, url, 2, time.Hour)
	submitOne(t, planes[0], plane.SubmitParams{Requirement: &plane.Requirement{GPUs: 1}}) // a placement row
	var wg sync.WaitGroup
	for _, d := range planes {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 15 {
					if err := d.Maintain(t.Context()); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	requireNoNewDeadlocks(t, conn, planes, before)
}
