package pgplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestKeyCountersExact drives keyed jobs through every way a keyed job changes state —
// claims of several jobs and of one (the claim counts its starts itself, migration 0013),
// settle-and-claim, acks, retries, failures, releases, rate-limited answers, cancels of
// queued jobs, leases left to expire and ended by maintenance — from concurrent workers,
// and checks that each key's counter row holds exactly its claimable (queued) and running
// jobs, and that a key with neither has no row: a counter that drifts blocks a key forever.
func TestKeyCountersExact(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	ctx := t.Context()
	_, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q",
		Admission: plane.Admission{ConcurrencyLimit: 3}})
	require.NoError(t, err)
	const keys, jobs = 12, 1200
	var ids []string
	batch := make([]plane.SubmitParams, 0, 100)
	for i := range jobs {
		batch = append(batch, plane.SubmitParams{Payload: []byte{0xc0}, ConcurrencyKey: fmt.Sprintf("k%d", i%keys), MaxAttempts: 3})
		if i%17 == 0 {
			batch[len(batch)-1].ConcurrencyKey = "" // unkeyed jobs among them
		}
		if len(batch) == cap(batch) {
			res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
			require.NoError(t, err)
			for _, r := range res {
				ids = append(ids, r.ID)
			}
			batch = batch[:0]
		}
	}
	check := func(when string) { t.Helper(); requireKeyCountersExact(t, url, when) }
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var pending []plane.SettleParams
			for round := 0; round < 30; round++ {
				claim := &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 1 + rng.IntN(4), Worker: fmt.Sprint(w), LeaseTTL: time.Minute}
				if rng.IntN(5) == 0 {
					claim.LeaseTTL = time.Millisecond // left to expire: maintenance ends it
				}
				got := settleThenClaim(t, d, rng, pending, claim)
				pending = nil
				for _, j := range got {
					if claim.LeaseTTL == time.Millisecond {
						continue
					}
					s := plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
					switch rng.IntN(10) {
					case 0, 1:
						s.Outcome, s.Error, s.RetryDelay = plane.OutcomeRetry, &plane.ErrorInfo{Message: "again"}, time.Millisecond
					case 2:
						s.Outcome, s.Error = plane.OutcomeFailed, &plane.ErrorInfo{Message: "no"}
					case 3:
						s.Outcome, s.Error = plane.OutcomeReleased, &plane.ErrorInfo{Message: "not run"}
					case 4:
						s.Outcome, s.Error, s.RetryDelay = plane.OutcomeRateLimited, &plane.ErrorInfo{Message: "slow"}, time.Millisecond
						if j.ConcurrencyKey != "" && rng.IntN(2) == 0 {
							s.RateLimitKey = j.ConcurrencyKey
						}
					}
					pending = append(pending, s)
				}
				if rng.IntN(4) == 0 {
					_, err := d.InvocationCancel(ctx, ids[rng.IntN(len(ids))])
					require.NoError(t, err)
				}
				if rng.IntN(16) == 0 {
					require.NoError(t, d.Maintain(ctx))
				}
			}
			if len(pending) > 0 {
				_, err := d.InvocationSettleMany(ctx, pending)
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("workers done: %v", time.Since(start))
	check("after the workers")
	time.Sleep(5 * time.Millisecond) // every short lease has expired
	require.NoError(t, d.Maintain(ctx))
	check("after maintenance")
	// Drain: every job ends, and no key keeps a row.
	for {
		got, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 50})
		require.NoError(t, err)
		if len(got) == 0 {
			time.Sleep(5 * time.Millisecond) // retries and rate-limited keys wait a millisecond
			require.NoError(t, d.Maintain(ctx))
			if got, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 50, Wait: 50 * time.Millisecond}); err != nil || len(got) == 0 {
				require.NoError(t, err)
				break
			}
		}
		settle := make([]plane.SettleParams, len(got))
		for i, j := range got {
			settle[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
		}
		_, err = d.InvocationSettleMany(ctx, settle)
		require.NoError(t, err)
	}
	t.Logf("drained: %v", time.Since(start))
	check("drained")
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var left, open int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM lakeshore.concurrency_keys),
		(SELECT count(*) FROM lakeshore.invocations WHERE state IN (-2, 0, 1))`).Scan(&left, &open))
	require.Equal(t, [2]int64{0, 0}, [2]int64{left, open}, "counter rows and unfinished jobs left after the drain")
}

// requireKeyCountersExact checks that each key's counter row of the database at url holds
// exactly its claimable and running jobs, and that no key with neither has a row.
func requireKeyCountersExact(t *testing.T, url, when string) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT coalesce(k.concurrency_key, i.concurrency_key), coalesce(k.queued, -1), coalesce(k.running, -1),
			coalesce(i.queued, 0), coalesce(i.running, 0)
		FROM lakeshore.concurrency_keys k FULL JOIN (SELECT namespace, queue, concurrency_key,
			count(*) FILTER (WHERE state = -2) AS queued, count(*) FILTER (WHERE state = 1) AS running
			FROM lakeshore.invocations WHERE concurrency_key IS NOT NULL AND state IN (-2, 1)
			GROUP BY namespace, queue, concurrency_key) i
		ON k.namespace = i.namespace AND k.queue = i.queue AND k.concurrency_key = i.concurrency_key`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var key string
		var queued, running, actualQueued, actualRunning int64
		require.NoError(t, rows.Scan(&key, &queued, &running, &actualQueued, &actualRunning))
		require.Equal(t, [2]int64{actualQueued, actualRunning}, [2]int64{queued, running}, "%s: key %s's counters (queued, running) against its jobs", when, key)
	}
	require.NoError(t, rows.Err())
}

// TestKeyCountersOldBuildStart: a process of the build before migration 0013, running
// beside a new one during a rolling upgrade, starts keyed rows with a plain UPDATE and
// leaves the counting to the trigger, which must still count it; and the new build's own
// starts in the same database are counted once.
func TestKeyCountersOldBuildStart(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	ctx := t.Context()
	for i := range 6 {
		submitOne(t, d, plane.SubmitParams{ConcurrencyKey: fmt.Sprintf("k%d", i%2)})
	}
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	// The start of the build before (its setRunning, one row).
	tag, err := conn.Exec(ctx, `UPDATE lakeshore.invocations SET state = 1, attempt = attempt + 1, lease_token = 'old-build',
		lease_expires_ms = 4102444800000, started_ms = 1, worker = 'old'
		WHERE id = (SELECT id FROM lakeshore.invocations WHERE state = -2 ORDER BY id LIMIT 1)`)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	requireKeyCountersExact(t, url, "after the old build's start")
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 3})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	requireKeyCountersExact(t, url, "after the new build's claim")
	// The setting is the transaction's own: a later plain start on the same connection
	// after one that set it is counted by the trigger again.
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT set_config('lakeshore.keyed_start', 'counted', true)`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	_, err = conn.Exec(ctx, `UPDATE lakeshore.invocations SET state = 1, attempt = attempt + 1, lease_token = 'old-build-2',
		lease_expires_ms = 4102444800000, started_ms = 1, worker = 'old'
		WHERE id = (SELECT id FROM lakeshore.invocations WHERE state = -2 ORDER BY id LIMIT 1)`)
	require.NoError(t, err)
	requireKeyCountersExact(t, url, "after a second start of the old build")
}

// TestDropSettledKeysPastHeldRows: more keys held back for months than a maintenance batch
// (1,000 rows) do not keep the pass from the settled counter rows after them, which one
// pass drops. Before, the pass read the same first 1,000 kept rows each time (LIMIT
// without a cursor), so every other kept row stayed until those holds ended.
func TestDropSettledKeysPastHeldRows(t *testing.T) {
	url := pgtest.Database(t)
	var clock atomic.Int64
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	d := open(t, url, &Config{Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }, MaintenanceInterval: time.Hour})
	ctx := t.Context()
	const held = maintainBatch + 1
	batch := make([]plane.SubmitParams, held+2)
	for i := range batch {
		batch[i] = plane.SubmitParams{Payload: []byte{0xc0}}
	}
	_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
	require.NoError(t, err)
	var jobs []*plane.Job
	for len(jobs) < len(batch) {
		got, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: min(len(batch)-len(jobs), 1000)})
		require.NoError(t, err)
		require.NotEmpty(t, got)
		jobs = append(jobs, got...)
	}
	settles := make([]plane.SettleParams, len(jobs))
	for i, j := range jobs {
		settles[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeRateLimited,
			RetryDelay: 300 * 24 * time.Hour, RateLimitKey: fmt.Sprintf("a%04d", i)}
		if i >= held { // after the held keys in key order, held for a second
			settles[i].RetryDelay, settles[i].RateLimitKey = time.Second, fmt.Sprintf("b%d", i)
		}
	}
	errs, err := d.InvocationSettleMany(ctx, settles)
	require.NoError(t, err)
	for _, err := range errs {
		require.NoError(t, err)
	}
	conn := mustConn(t, url)
	rows := func() (n int) {
		t.Helper()
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM lakeshore.concurrency_keys`).Scan(&n))
		return n
	}
	require.Equal(t, held+2, rows())
	clock.Add(int64(2 * time.Second))
	require.NoError(t, d.Maintain(ctx))
	require.Equal(t, held, rows(), "the ended holds' rows are dropped; the months-long ones kept")
	requireKeyCountersExact(t, url, "after maintenance")
}

// TestDropSettledKeysHoldsNoSubmit: maintenance's drop of settled counter rows reads the
// queue's admission block (the keys' rate limits) without locking it, so a submit to the
// queue does not wait for the drop, which may wait for a key's row that a claim or settle
// holds. Before, it took the block as a submit takes it (FOR UPDATE) and held it to its
// commit: every submit to the queue waited out the pass.
func TestDropSettledKeysHoldsNoSubmit(t *testing.T) {
	url := pgtest.Database(t)
	var clock atomic.Int64
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	d := open(t, url, &Config{Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }, MaintenanceInterval: time.Hour})
	ctx := t.Context()
	_, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q",
		Admission: plane.Admission{KeyRateLimit: 1, KeyBurst: 1}})
	require.NoError(t, err)
	for _, key := range []string{"k0", "k1"} {
		j := submitOne(t, d, plane.SubmitParams{ConcurrencyKey: key})
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q"})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, j, jobs[0].ID)
		errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
	}
	clock.Add(int64(2 * time.Second)) // both buckets full again: both rows settled

	other := mustConn(t, url) // a transaction holding k1's row
	tx, err := other.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	_, err = tx.Exec(ctx, `SELECT 1 FROM lakeshore.concurrency_keys WHERE namespace = 'default' AND queue = 'q' AND concurrency_key = 'k1' FOR UPDATE`)
	require.NoError(t, err)
	maintained := make(chan error, 1)
	go func() { maintained <- d.Maintain(ctx) }()
	watch := mustConn(t, url)
	require.Eventually(t, func() bool { // the drop waits for k1's row
		var waiting int
		err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE 'DELETE FROM %concurrency_keys%'`).Scan(&waiting)
		return err == nil && waiting == 1
	}, 10*time.Second, 5*time.Millisecond)
	submitCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = d.InvocationSubmitMany(submitCtx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
		Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
	require.NoError(t, err, "a submit to the queue while the drop waits")
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-maintained)
	rows := 0
	require.NoError(t, watch.QueryRow(ctx, `SELECT count(*) FROM lakeshore.concurrency_keys`).Scan(&rows))
	require.Zero(t, rows, "both settled rows dropped")
}

// TestKeyCountersOldBuildEnd: a process of the build before migration 0015, running beside
// a new one during a rolling upgrade, ends keyed rows (running ones settled, claimable ones
// cancelled) with a plain UPDATE and leaves the counting to the trigger, which must still
// count it; the new build's own ends in the same database (setTerminalManyKeyed) are
// counted once, and a key left with nothing has no row, whichever build ended its last job.
func TestKeyCountersOldBuildEnd(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	ctx := t.Context()
	for i := range 8 {
		submitOne(t, d, plane.SubmitParams{ConcurrencyKey: fmt.Sprintf("k%d", i%2)})
	}
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 4})
	require.NoError(t, err)
	require.Len(t, jobs, 4)
	requireKeyCountersExact(t, url, "after the claim")
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	// The ends of the build before (its setTerminalMany, one running row and one claimable).
	oldEnd := func(from, to int) {
		t.Helper()
		tag, err := conn.Exec(ctx, `UPDATE lakeshore.invocations SET state = $2, finished_ms = 1, lease_token = NULL,
			lease_expires_ms = 0, attempt_deadline_ms = 0, waiting = false
			WHERE id = (SELECT id FROM lakeshore.invocations WHERE state = $1 ORDER BY id LIMIT 1)`, from, to)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
	}
	oldEnd(1, 2)
	requireKeyCountersExact(t, url, "after the old build's end of a running job")
	oldEnd(-2, 4)
	requireKeyCountersExact(t, url, "after the old build's cancel of a claimable job")
	// The new build's settles of the other running jobs (one of them the old build ended
	// already: its lease is gone).
	settle := make([]plane.SettleParams, len(jobs))
	for i, j := range jobs {
		settle[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
	}
	_, err = d.InvocationSettleMany(ctx, settle)
	require.NoError(t, err)
	requireKeyCountersExact(t, url, "after the new build's settles")
	// The setting is the transaction's own: a later plain end on the same connection after
	// one that set it is counted by the trigger again.
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT set_config('lakeshore.keyed_end', 'counted', true)`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	oldEnd(-2, 4)
	requireKeyCountersExact(t, url, "after a second cancel of the old build")
	// The rest ends, by both builds in turn: no key keeps a row.
	for old := true; ; old = !old {
		var left int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM lakeshore.invocations WHERE state IN (-2, 1)`).Scan(&left))
		if left == 0 {
			break
		}
		if old {
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM lakeshore.invocations WHERE state = 1`).Scan(&left); err == nil && left > 0 {
				oldEnd(1, 2)
			} else {
				oldEnd(-2, 4)
			}
			requireKeyCountersExact(t, url, "after an old build's end")
			continue
		}
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 1})
		require.NoError(t, err)
		for _, j := range jobs {
			_, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeFailed, Error: &plane.ErrorInfo{Message: "no"}}})
			require.NoError(t, err)
		}
		requireKeyCountersExact(t, url, "after a new build's end")
	}
	var rows int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM lakeshore.concurrency_keys`).Scan(&rows))
	require.Zero(t, rows, "counter rows left once every job ended")
}

// settleThenClaim settles pending and claims with claim, at random in one call
// (InvocationSettleAndClaim) or in two, and returns the jobs claimed.
func settleThenClaim(t *testing.T, d *Driver, rng *rand.Rand, pending []plane.SettleParams, claim *plane.ClaimParams) []*plane.Job {
	t.Helper()
	ctx := t.Context()
	if len(pending) > 0 && rng.IntN(2) == 0 {
		_, got, err := d.InvocationSettleAndClaim(ctx, pending, claim)
		require.NoError(t, err)
		return got
	}
	if len(pending) > 0 {
		_, err := d.InvocationSettleMany(ctx, pending)
		require.NoError(t, err)
	}
	got, err := d.InvocationClaimMany(ctx, claim)
	require.NoError(t, err)
	return got
}
