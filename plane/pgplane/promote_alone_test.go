package pgplane

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestClaimHoldsNoPromotedCounterRow: a claim that is its transaction's first statement
// promotes in a transaction of its own (queuePromote), so that while it reads its key
// turns and heads (FOR UPDATE SKIP LOCKED, which PostgreSQL 15 lets wait through an update
// chain) and starts its jobs, it holds no counter row of a key it promoted: holding one
// there closed a deadlock with a writer taking keys in key order
// (TestKeyedHandoffNoDeadlock, rarely). Key kb runs one job at its limit of 1; its delayed
// job is due; an unkeyed job is claimable. Another transaction holds the queue's counts
// rows, so the claim, which takes the unkeyed job, waits at its commit; meanwhile kb's
// counter row, which the promote counted the due job in, must be free (NOWAIT). Both
// claim paths: without offers (claimFor) and with (claimPlaced).
func TestClaimHoldsNoPromotedCounterRow(t *testing.T) {
	for _, c := range []struct {
		name   string
		offers *plane.Offers
	}{
		{name: "claim"},
		{name: "claim with offers", offers: &plane.Offers{GPUs: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := pgtest.Database(t)
			conn, watch := mustConn(t, url), mustConn(t, url)
			var offset atomic.Int64 // the plane's clock runs ahead by this
			d := open(t, url, &Config{MaintenanceInterval: time.Hour,
				Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
			ctx := t.Context()
			_, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q",
				Admission: plane.Admission{ConcurrencyLimit: 1}})
			require.NoError(t, err)
			submitOne(t, d, plane.SubmitParams{ConcurrencyKey: "kb"})
			running := claimOne(t, d, 0)
			require.Equal(t, "kb", running.ConcurrencyKey)
			unkeyed := submitOne(t, d, plane.SubmitParams{})
			delayed := submitOne(t, d, plane.SubmitParams{ConcurrencyKey: "kb", Delay: time.Hour})

			other := holdCounts(t, conn)

			offset.Store(int64(2 * time.Hour)) // the delayed job is due, not yet promoted
			done := claimAsync(ctx, d, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 1, Offers: c.offers})
			waitForCounts(t, watch, "the claim waits at its commit for the counts rows")
			// kb's counter row: counted by the promote, not held by the claim still open.
			requireKeyRowFree(t, watch, "the claim's transaction holds kb's counter row")

			requireClaimedOnRelease(t, other, done, unkeyed)
			var waiting bool
			require.NoError(t, watch.QueryRow(ctx, `SELECT waiting FROM lakeshore.invocations WHERE id = $1`, delayed).Scan(&waiting))
			require.False(t, waiting, "the delayed job was promoted")
		})
	}
}

// TestMaintenancePromoteHandsNothingOff: maintenance's promote wakes the parked claimers
// of the queues it made jobs claimable in after its commit, and claims nothing for them
// before it (no direct handoff): a handoff there would read key turns while the
// transaction holds the counter rows of the keys it promoted, the order queuePromote keeps
// a claim out of. Key kb runs one job at its limit of 1; a claimer parks; a delayed kb job
// and a delayed unkeyed job fall due and maintenance promotes them. Another transaction
// holds the queue's counts rows, so whichever transaction starts the unkeyed job waits at
// its commit; meanwhile kb's counter row must be free (NOWAIT).
func TestMaintenancePromoteHandsNothingOff(t *testing.T) {
	url := pgtest.Database(t)
	conn, watch := mustConn(t, url), mustConn(t, url)
	var offset atomic.Int64 // the plane's clock runs ahead by this
	d := open(t, url, &Config{MaintenanceInterval: 10 * time.Millisecond,
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	ctx := t.Context()
	_, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q",
		Admission: plane.Admission{ConcurrencyLimit: 1}})
	require.NoError(t, err)
	submitOne(t, d, plane.SubmitParams{ConcurrencyKey: "kb"})
	// Its lease outlives the clock's jump (maintenance would expire it, a write of kb's row).
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", LeaseTTL: 24 * time.Hour})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	submitOne(t, d, plane.SubmitParams{ConcurrencyKey: "kb", Delay: time.Hour})
	unkeyed := submitOne(t, d, plane.SubmitParams{Delay: time.Hour})

	other := holdCounts(t, conn)

	done := claimAsync(ctx, d, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 1, Wait: 30 * time.Second})
	require.Eventually(t, func() bool {
		parked := 0 // counted, none taken
		d.claimWaiters.TakeFirst(planekit.QueueKey("default", "q"), func(*claimWaiter) bool { parked++; return false })
		return parked > 0
	}, 10*time.Second, time.Millisecond, "the claimer parks")
	offset.Store(int64(2 * time.Hour)) // both delayed jobs are due: maintenance promotes them
	waitForCounts(t, watch, "the unkeyed job's start waits at its commit for the counts rows")
	requireKeyRowFree(t, watch, "the transaction starting the unkeyed job holds kb's counter row")

	requireClaimedOnRelease(t, other, done, unkeyed)
}

// claimAnswer is a claim's answer, from claimAsync.
type claimAnswer struct {
	jobs []*plane.Job
	err  error
}

// claimAsync runs d.InvocationClaimMany(ctx, p) in a goroutine; its answer arrives on the
// channel returned.
func claimAsync(ctx context.Context, d *Driver, p *plane.ClaimParams) <-chan claimAnswer {
	done := make(chan claimAnswer, 1)
	go func() {
		jobs, err := d.InvocationClaimMany(ctx, p)
		done <- claimAnswer{jobs, err}
	}()
	return done
}

// requireClaimedOnRelease rolls back other (holdCounts' hold of the counts rows, which kept
// the claim's transaction at its commit) and requires the claim's answer on done to be the
// one job id.
func requireClaimedOnRelease(t *testing.T, other pgx.Tx, done <-chan claimAnswer, id string) {
	t.Helper()
	require.NoError(t, other.Rollback(t.Context()))
	r := <-done
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1)
	require.Equal(t, id, r.jobs[0].ID)
}

// holdCounts locks every counts row of default/q (priority 0, every state and shard) in a
// transaction of conn's, rolled back at the test's end: a transaction of the plane that
// starts a job there then waits at its commit, holding what it locked until then. One
// statement inside the holding transaction inserts the missing rows and locks the ones
// there (ON CONFLICT DO UPDATE locks the row it meets): inserted and committed first, a row
// of n = 0 could be deleted by maintenance's trim (MaintenanceInterval 10 ms in
// TestMaintenancePromoteHandsNothingOff) before the lock was taken, and the plane's start
// then wrote a new row without waiting (1 run in ~10 did).
func holdCounts(t *testing.T, conn *pgx.Conn) pgx.Tx {
	t.Helper()
	ctx := t.Context()
	other, err := conn.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { other.Rollback(context.Background()) })
	_, err = other.Exec(ctx, `INSERT INTO lakeshore.counts (namespace, queue, state, priority, shard, n)
		SELECT 'default', 'q', s, 0, sh, 0 FROM generate_series(-3, 6) AS s, generate_series(0, $1::int - 1) AS sh
		ON CONFLICT (namespace, queue, state, priority, shard) DO UPDATE SET n = counts.n`, shards)
	require.NoError(t, err)
	_, err = other.Exec(ctx, `SELECT 1 FROM lakeshore.counts WHERE namespace = 'default' AND queue = 'q' FOR UPDATE`)
	require.NoError(t, err)
	return other
}

// waitForCounts waits until a session of the database waits for a lock in its counts
// statement (the plane's transaction, at its commit, behind holdCounts).
func waitForCounts(t *testing.T, watch *pgx.Conn, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting bool
		err := watch.QueryRow(t.Context(), `SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%INTO "lakeshore".counts%'`).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, time.Millisecond, what)
}

// requireKeyRowFree requires key kb's counter row of default/q free (FOR UPDATE NOWAIT)
// and counting one queued job (the promoted one, committed) and one running.
func requireKeyRowFree(t *testing.T, watch *pgx.Conn, held string) {
	t.Helper()
	var queued, run int64
	err := watch.QueryRow(t.Context(), `SELECT queued, running FROM lakeshore.concurrency_keys
		WHERE namespace = 'default' AND queue = 'q' AND concurrency_key = 'kb' FOR UPDATE NOWAIT`).Scan(&queued, &run)
	require.NoError(t, err, held)
	require.Equal(t, [2]int64{1, 1}, [2]int64{queued, run}, "kb counts its promoted job (committed) and its running one")
}

// TestClaimTakesWhatItPromotedWhileAnotherPromoteHoldsIt: a promote whose statement began
// before a claim's promote committed (maintenance's, here a statement like it) finds the
// row the claim moved still waiting in its snapshot, locks the row's newest version, fails
// its re-check and keeps the row locked until its transaction ends; the claim's candidates
// (FOR UPDATE SKIP LOCKED) skip it. The claim, which may not wait, must come back with its
// job, not empty: it reports the claimable row it was left (planekit.Promotions,
// claimableLeft) as held and tries again once the holder let go.
//
// Two advisory locks the test holds make the interleaving exact: the other promote's
// statement waits on one (43) after taking its snapshot and before locking, and the
// claim's statements after its promote wait on the other (42), which a view in place of
// queue_pauses (read by the claim's candidates and key turns) asks for.
func TestClaimTakesWhatItPromotedWhileAnotherPromoteHoldsIt(t *testing.T) {
	for _, c := range []struct {
		name        string
		requirement *plane.Requirement
		offers      *plane.Offers
		key         string
	}{
		{name: "claim"},
		{name: "claim of a keyed job", key: "tenant-1"},
		{name: "claim with offers", offers: &plane.Offers{GPUs: 1}},
		{name: "claim with offers of a shaped job", requirement: &plane.Requirement{GPUs: 1}, offers: &plane.Offers{GPUs: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			claimTakesWhatItPromoted(t, c.requirement, c.offers, c.key)
		})
	}
}

// claimTakesWhatItPromoted is TestClaimTakesWhatItPromotedWhileAnotherPromoteHoldsIt for a
// job of requirement and concurrency key claimed with offers.
func claimTakesWhatItPromoted(t *testing.T, requirement *plane.Requirement, offers *plane.Offers, key string) {
	url := pgtest.Database(t)
	ctx := t.Context()
	gate, other, watch := mustConn(t, url), mustConn(t, url), mustConn(t, url)
	var offset atomic.Int64 // the plane's clock runs ahead by this
	d := open(t, url, &Config{MaintenanceInterval: time.Hour, OnDemand: true,
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	delayed := submitOne(t, d, plane.SubmitParams{Delay: time.Hour, Requirement: requirement, ConcurrencyKey: key})
	for _, sql := range []string{
		`CREATE FUNCTION lakeshore.test_gate(k bigint) RETURNS TABLE (namespace text, queue text, paused_ms bigint)
			LANGUAGE plpgsql VOLATILE AS $$ BEGIN PERFORM pg_advisory_xact_lock_shared(k); END $$`,
		`CREATE FUNCTION lakeshore.test_wait(k bigint) RETURNS boolean
			LANGUAGE plpgsql VOLATILE AS $$ BEGIN PERFORM pg_advisory_xact_lock_shared(k); RETURN true; END $$`,
		`ALTER TABLE lakeshore.queue_pauses RENAME TO queue_pauses_table`,
		`CREATE VIEW lakeshore.queue_pauses AS SELECT * FROM lakeshore.queue_pauses_table UNION ALL SELECT * FROM lakeshore.test_gate(42)`,
		`SELECT pg_advisory_lock(42), pg_advisory_lock(43)`,
	} {
		_, err := gate.Exec(ctx, sql)
		require.NoError(t, err)
	}

	// The other promote takes its snapshot (the row waiting) and waits before locking.
	tx, err := other.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	locked := make(chan int, 1)
	go func() {
		rows, err := tx.Query(ctx, `SELECT id FROM lakeshore.invocations WHERE id = $1 AND waiting
			AND lakeshore.test_wait(43) FOR UPDATE SKIP LOCKED`, delayed)
		n := 0
		for err == nil && rows.Next() {
			n++
		}
		if rows != nil {
			rows.Close()
		}
		locked <- n
	}()
	waitAdvisory(t, watch, 43)

	offset.Store(int64(2 * time.Hour)) // the delayed job is due
	done := claimAsync(ctx, d, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 1, Offers: offers})
	waitAdvisory(t, watch, 42) // the claim's promote committed; its claim waits

	_, err = gate.Exec(ctx, `SELECT pg_advisory_unlock(43)`)
	require.NoError(t, err)
	require.Zero(t, <-locked, "the other promote's re-check fails: the claim moved the row")
	var waiting bool
	require.NoError(t, watch.QueryRow(ctx, `SELECT waiting FROM lakeshore.invocations WHERE id = $1`, delayed).Scan(&waiting))
	require.False(t, waiting, "the claim's promote moved the row")
	check, err := watch.Begin(ctx)
	require.NoError(t, err)
	_, err = check.Exec(ctx, `SELECT id FROM lakeshore.invocations WHERE id = $1 FOR UPDATE NOWAIT`, delayed)
	require.Error(t, err, "the other promote keeps the row it failed to re-check locked")
	require.NoError(t, check.Rollback(ctx))

	// Let the claim's first try go on (its candidates skip the locked row), and wait for it
	// to end: the gate is taken again once its transaction let go.
	_, err = gate.Exec(ctx, `SELECT pg_advisory_unlock(42)`)
	require.NoError(t, err)
	_, err = gate.Exec(ctx, `SELECT pg_advisory_lock(42)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx)) // the other promote's transaction ends
	_, err = gate.Exec(ctx, `SELECT pg_advisory_unlock(42)`)
	require.NoError(t, err)

	r := <-done
	require.NoError(t, r.err)
	require.Len(t, r.jobs, 1, "a claim that may not wait takes the job it made claimable")
	require.Equal(t, delayed, r.jobs[0].ID)
}

// waitAdvisory waits until a session waits for the advisory lock key.
func waitAdvisory(t *testing.T, watch *pgx.Conn, key int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := watch.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
			AND classid = 0 AND objid = $1 AND objsubid = 1 AND NOT granted`, key).Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, time.Millisecond)
}
