package pgplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestShapedBatchesNoDeadlock runs three planes on one database (three processes) whose
// workers submit, claim (with offers satisfying every shape) and settle batches of jobs of
// several placement shapes, each worker in its own shape order: grouped submits, settle
// groups with acks, re-queues and backed-off retries, and settle-and-claim (settles of some
// shapes, then claims of others, in one transaction). The per-shape counters
// (placement_counts) are changed by a trigger for every row in the order the statement
// writes the rows; 0010's trigger waited for the transaction's shard row (one of 8), and
// deadlocked; since 0016 it takes a row of the shape no other transaction holds, and since
// 0017 the row it makes when all are held is numbered after its transaction alone, so it
// never waits; new shapes are recorded in shape order, and a claim's promotes never wait
// for an invocation row (promote and promoteHolding take the due rows they can lock at once,
// FOR UPDATE SKIP LOCKED, and the claim reports a due row left to its holder as due now), and
// its promotes after the first never wait for a counter row (tx.promoted); so PostgreSQL
// counts no deadlock, and the counters end exact: nothing queued or running in any shape
// once every job succeeded.
//
// The last deadlock (1 in 115 runs under the race detector, 2026-12-05, when a claim's
// first promote still waited for due rows in id order): its server log showed a claim's
// first promote waiting for the transaction of a placed claim whose shape heads statement
// (FOR UPDATE SKIP LOCKED) waited for the promote's. PostgreSQL 15 (heapam.c) lets a lock
// under SKIP LOCKED wait when the row's updater finishes just as it is locked: it follows
// the update chain (heap_lock_updated_tuple) and waits for the holder of a newer version
// whatever the wait policy, and the promote held such a version (a row locked in its newest
// version, its re-check failed, left out but still locked). The promote's own wait, in id
// order, was the other edge of the cycle: it is gone (tx.promoted says which waits remain).
func TestShapedBatchesNoDeadlock(t *testing.T) {
	url := pgtest.Database(t)
	conn, planes, before := deadlockPlanes(t, url, 3, 20*time.Millisecond)
	orders := [][]int{ // each worker's shape order (shape i asks for (i+1) × 100 millicpus)
		{0, 1, 2, 3},
		{3, 2, 1, 0},
		{1, 3, 0, 2},
		{2, 0, 3, 1},
	}
	offers := &plane.Offers{MilliCPUs: 10_000} // every shape
	submitted := batchRounds(t, planes, orders,
		func(s int) plane.SubmitParams {
			return plane.SubmitParams{Payload: []byte{byte(s)}, // its shape (a msgpack integer)
				Requirement: &plane.Requirement{MilliCPUs: int64(s+1) * 100}}
		},
		func(j *plane.Job) int { return int(j.Payload[0]) }, offers)
	if t.Failed() {
		return
	}
	ctx := t.Context()
	d := planes[0]
	drainAcked(t, d, submitted, offers)
	demand, err := d.DemandList(ctx, "default")
	require.NoError(t, err)
	shapes := 0
	for _, s := range demand {
		if s.Shape == "" {
			continue
		}
		shapes++
		require.Zero(t, s.Queued, "queued of shape %s", s.Shape)
		require.Zero(t, s.Running, "running of shape %s", s.Shape)
	}
	require.Equal(t, len(orders[0]), shapes, "one row per shape")
	var counterRows []int
	require.NoError(t, conn.QueryRow(ctx, `SELECT array_agg(n ORDER BY shape) FROM (SELECT shape, count(*) AS n FROM `+d.schema+
		`.placement_counts GROUP BY shape) AS c`).Scan(&counterRows))
	t.Logf("counter rows per shape: %v", counterRows) // about as many as transactions changed it at once (migrations 0016, 0017)
	requireNoNewDeadlocks(t, conn, planes, before)
}

// TestIdempotencyKeyUnderSeveralConcurrencyKeysNoDeadlock runs three planes on one
// database whose workers submit, each round, batches of the same idempotency keys, each
// plane giving every key a concurrency key of its own choosing, so that ordered by
// concurrency key the batches of the planes hold the idempotency keys in differing orders. An insert
// waits on an idempotency key another transaction inserted until that one ends; the insert
// takes its idempotency keys in key order and its concurrency keys' counter rows in key
// order after all of them, so PostgreSQL counts no deadlock. Each key ends with one
// invocation, which every batch of the round was answered with, and the counters exact.
func TestIdempotencyKeyUnderSeveralConcurrencyKeysNoDeadlock(t *testing.T) {
	url := pgtest.Database(t)
	conn, planes, before := deadlockPlanes(t, url, 3, 20*time.Millisecond)
	const (
		workers = 12 // four per plane
		rounds  = 20
		keys    = 30
	)
	var answers [rounds][keys]sync.Map // id → true, per round and key
	var wg sync.WaitGroup
	ctx := t.Context()
	var ready [rounds]sync.WaitGroup // every worker starts a round together
	for round := range rounds {
		ready[round].Add(workers)
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := planes[w%len(planes)]
			for round := range rounds {
				ready[round].Done()
				ready[round].Wait()
				batch := make([]plane.SubmitParams, keys)
				for i := range batch {
					// Plane p gives key i the concurrency key k(i+10p): ordered by concurrency
					// key, the batches of the planes hold the keys rotated, i0 first, i20
					// first, i10 first.
					batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, Key: fmt.Sprintf("r%d-i%d", round, i),
						ConcurrencyKey: fmt.Sprintf("k%d", (i+keys/3*(w%len(planes)))%keys)}
				}
				res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
				if err != nil {
					t.Error(err)
					continue // on to the next round, which waits for this worker
				}
				for i, r := range res {
					answers[round][i].Store(r.ID, true)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for round := range rounds {
		for i := range keys {
			n := 0
			answers[round][i].Range(func(any, any) bool { n++; return true })
			require.Equal(t, 1, n, "one invocation answered for key r%d-i%d", round, i)
		}
	}
	// Every key holds one invocation; drain them, then no counter row is left.
	d := planes[0]
	drainAcked(t, d, rounds*keys, nil)
	var counters int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+d.schema+`.concurrency_keys`).Scan(&counters))
	require.Zero(t, counters, "counter rows left")
	requireNoNewDeadlocks(t, conn, planes, before)
}

// TestClaimPromotesWithoutWaitingForAHeldDueRow: a claim's promote never waits for a due
// row another transaction holds (it waited, in id order, until 2026-12, and that wait closed
// the rare deadlock of TestShapedBatchesNoDeadlock; tx.promoted), and a due row it skipped
// is still claimed as soon as its holder lets go, without waiting for a notification (the
// holder here is a bare connection, which sends none), a poll (an hour) or maintenance (an
// hour): the claim reports the row due now (leftDue) and its claimer claims again at once.
// For each way the holder ends (it promotes the row itself and commits, or lets it go
// unchanged), a claim with offers (a placed claim, then the default shape's) that may wait,
// and one that may not (it tries again while the row is held, planekit.WhileHeld), of the queue or
// across queues.
func TestClaimPromotesWithoutWaitingForAHeldDueRow(t *testing.T) {
	url := pgtest.Database(t)
	conn, planes, before := deadlockPlanes(t, url, 0, time.Hour)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour, PollInterval: time.Hour})
	planes = append(planes, d)
	ctx := t.Context()
	for _, c := range []struct {
		name     string
		promotes bool // the holder promotes the row before it commits
		wait     time.Duration
		queues   []string // further queues: a claim across queues (claimAcross)
	}{
		{"held unchanged, claim waits", false, time.Minute, nil},
		{"promoted by its holder, claim waits", true, time.Minute, nil},
		{"held unchanged, claim may not wait", false, 0, nil},
		{"promoted by its holder, claim may not wait", true, 0, nil},
		{"held unchanged, claim across queues waits", false, time.Minute, []string{"other"}},
		{"promoted by its holder, claim across queues may not wait", true, 0, []string{"other"}},
	} {
		id := submitOne(t, d, plane.SubmitParams{Delay: time.Hour})
		_, err := conn.Exec(ctx, `UPDATE lakeshore.invocations SET available_ms = 0 WHERE id = $1`, id) // due
		require.NoError(t, err, c.name)
		holderConn := mustConn(t, url)
		holder, err := holderConn.Begin(ctx)
		require.NoError(t, err, c.name)
		_, err = holder.Exec(ctx, `SELECT 1 FROM lakeshore.invocations WHERE id = $1 FOR UPDATE`, id)
		require.NoError(t, err, c.name)
		type claimed struct {
			jobs []*plane.Job
			err  error
		}
		done := make(chan claimed, 1)
		go func() {
			p := &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 1, Offers: &plane.Offers{MilliCPUs: 1000}, Wait: c.wait}
			p.Queues = c.queues
			jobs, err := d.InvocationClaimMany(ctx, p)
			done <- claimed{jobs, err}
		}()
		// The claim tries again and again while the row is held; no promote of it waits.
		deadline := time.Now().Add(100 * time.Millisecond)
		for time.Now().Before(deadline) {
			var waiting int
			require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
				AND wait_event_type = 'Lock'`).Scan(&waiting), c.name)
			require.Zero(t, waiting, "%s: a statement waits for a lock", c.name)
			select {
			case got := <-done:
				t.Fatalf("%s: the claim returned while the due row was held: %d jobs, %v", c.name, len(got.jobs), got.err)
			default:
			}
			time.Sleep(5 * time.Millisecond)
		}
		if c.promotes {
			_, err = holder.Exec(ctx, `UPDATE lakeshore.invocations SET waiting = false WHERE id = $1`, id)
			require.NoError(t, err, c.name)
		}
		require.NoError(t, holder.Commit(ctx), c.name)
		released := time.Now()
		require.NoError(t, holderConn.Close(ctx), c.name)
		select {
		case got := <-done:
			require.NoError(t, got.err, c.name)
			require.Len(t, got.jobs, 1, c.name)
			require.Equal(t, id, got.jobs[0].ID, c.name)
			// Milliseconds as a rule; the bound is only that the claim did not wait for the
			// poll or the maintenance interval (an hour each), not how fast a loaded machine
			// under the race detector ran it (900 ms was, and failed there).
			require.Less(t, time.Since(released), 30*time.Second, "%s: claimed late", c.name)
			errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: id, Token: got.jobs[0].Token, Outcome: plane.OutcomeSucceeded}})
			require.NoError(t, err, c.name)
			requireSettled(t, errs)
		case <-time.After(45 * time.Second):
			t.Fatalf("%s: the due row was not claimed once its holder let go", c.name)
		}
	}
	requireNoNewDeadlocks(t, conn, planes, before)
}

// TestPlacementCounterNeverWaitsForAnOldRowsNumber: a change of a shape's counter that
// finds every counter row of the shape held makes a row of its own, numbered after its
// transaction alone (migration 0017). 0016 numbered it 8 + txid % 32,752, the number of a
// row an older transaction (32,752 ids before) may have made: with that row held, the
// trigger waited for its holder. The test moves the server's transaction ids past 32,752,
// makes such a row, holds every row of the shape and changes a job of the shape: the
// change does not wait.
func TestPlacementCounterNeverWaitsForAnOldRowsNumber(t *testing.T) {
	url := pgtest.Database(t)
	conn := mustConn(t, url)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	ctx := t.Context()
	id := submitOne(t, d, plane.SubmitParams{Requirement: &plane.Requirement{MilliCPUs: 100}})
	var shape string
	require.NoError(t, conn.QueryRow(ctx, `SELECT shape FROM lakeshore.invocations WHERE id = $1`, id).Scan(&shape))
	// Transaction ids past 32,752 (the server's, shared by the package's tests): one
	// transaction each, unsynchronized.
	var xid int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT txid_current()`).Scan(&xid))
	if xid < 33_000 {
		_, err := conn.Exec(ctx, `SET synchronous_commit = off`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP PERFORM txid_current(); COMMIT; END LOOP; END $$`, 33_000-xid))
		require.NoError(t, err)
	}
	changer, err := mustConn(t, url).Begin(ctx)
	require.NoError(t, err)
	defer changer.Rollback(context.Background())
	require.NoError(t, changer.QueryRow(ctx, `SELECT txid_current()`).Scan(&xid))
	// The row a transaction 32,752 ids older made under 0016's numbering.
	_, err = conn.Exec(ctx, `INSERT INTO lakeshore.placement_counts (namespace, queue, shape, shard) VALUES ('default', 'q', $1, 8 + $2::bigint % 32752)`,
		shape, xid)
	require.NoError(t, err)
	holder, err := mustConn(t, url).Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(context.Background())
	var held int
	require.NoError(t, holder.QueryRow(ctx, `WITH h AS (SELECT 1 FROM lakeshore.placement_counts WHERE shape = $1 FOR UPDATE)
		SELECT count(*) FROM h`, shape).Scan(&held))
	require.Equal(t, 2, held, "the shape's row and the old one, held")
	_, err = changer.Exec(ctx, `SET LOCAL lock_timeout = '500ms'`)
	require.NoError(t, err)
	_, err = changer.Exec(ctx, `UPDATE lakeshore.invocations SET state = 1 WHERE id = $1`, id) // queued → running
	require.NoError(t, err, "the counter's change waits for no row")
	var own struct{ queued, running int64 }
	require.NoError(t, changer.QueryRow(ctx, `SELECT queued, running FROM lakeshore.placement_counts WHERE shape = $1 AND shard = 8 + $2::bigint`,
		shape, xid).Scan(&own.queued, &own.running))
	require.Equal(t, struct{ queued, running int64 }{-1, 1}, own, "the change, in a row of the transaction's own")
}

// TestClaimTakesTheRestOnceAHeldDueRowIsLetGo: a claim for two jobs that finds one
// claimable and the other due but held by another transaction (maintenance promoting it, a
// cancel) returns both once the holder lets go, not one: what counts as queued is what a
// claim gets (planetest's CountsFollowTheLifecycle failed over HTTP on PostgreSQL when the
// server's maintenance pass held the retried job). For a claim of the queue that may wait
// and one that may not, with offers (a placed claim) and without, and a settle-and-claim.
func TestClaimTakesTheRestOnceAHeldDueRowIsLetGo(t *testing.T) {
	url := pgtest.Database(t)
	conn := mustConn(t, url)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour, PollInterval: time.Hour})
	ctx := t.Context()
	for _, c := range []struct {
		name   string
		wait   time.Duration
		offers *plane.Offers
		settle bool
	}{
		{"claim may not wait", 0, nil, false},
		{"claim waits", time.Minute, nil, false},
		{"placed claim may not wait", 0, &plane.Offers{MilliCPUs: 1000}, false},
		{"placed claim waits", time.Minute, &plane.Offers{MilliCPUs: 1000}, false},
		{"settle-and-claim may not wait", 0, nil, true},
		{"settle-and-claim waits", time.Minute, nil, true},
	} {
		var settle []plane.SettleParams
		if c.settle {
			submitOne(t, d, plane.SubmitParams{})
			jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 1})
			require.NoError(t, err, c.name)
			require.Len(t, jobs, 1, c.name)
			settle = []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}}
		}
		ready := submitOne(t, d, plane.SubmitParams{})
		held := submitOne(t, d, plane.SubmitParams{Delay: time.Hour})
		_, err := conn.Exec(ctx, `UPDATE lakeshore.invocations SET available_ms = 0 WHERE id = $1`, held) // due
		require.NoError(t, err, c.name)
		holderConn := mustConn(t, url)
		holder, err := holderConn.Begin(ctx)
		require.NoError(t, err, c.name)
		_, err = holder.Exec(ctx, `SELECT 1 FROM lakeshore.invocations WHERE id = $1 FOR UPDATE`, held)
		require.NoError(t, err, c.name)
		type claimed struct {
			jobs []*plane.Job
			err  error
		}
		done := make(chan claimed, 1)
		go func() {
			p := &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 2, Offers: c.offers, Wait: c.wait}
			if c.settle {
				errs, jobs, err := d.InvocationSettleAndClaim(ctx, settle, p)
				if err == nil {
					err = errors.Join(errs...)
				}
				done <- claimed{jobs, err}
				return
			}
			jobs, err := d.InvocationClaimMany(ctx, p)
			done <- claimed{jobs, err}
		}()
		time.Sleep(100 * time.Millisecond) // well within planekit.HeldDueRetry
		select {
		case got := <-done:
			t.Fatalf("%s: the claim returned while a due row was held: %d jobs, %v", c.name, len(got.jobs), got.err)
		default:
		}
		require.NoError(t, holder.Commit(ctx), c.name)
		require.NoError(t, holderConn.Close(ctx), c.name)
		select {
		case got := <-done:
			require.NoError(t, got.err, c.name)
			var ids []string
			var settles []plane.SettleParams
			for _, j := range got.jobs {
				ids = append(ids, j.ID)
				settles = append(settles, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded})
			}
			require.ElementsMatch(t, []string{ready, held}, ids, c.name)
			errs, err := d.InvocationSettleMany(ctx, settles)
			require.NoError(t, err, c.name)
			requireSettled(t, errs)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the claim did not return once the holder let go", c.name)
		}
	}
}
