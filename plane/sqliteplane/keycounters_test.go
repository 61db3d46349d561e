package sqliteplane

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// keyCounterDrift returns a description of every difference between the keys' counter rows
// (concurrency_keys) and the invocations they count, and of every keyed row left in state 0
// (which no claim reads), or "" when they agree. A row counting nothing is kept only while
// it holds rate state (a drawn bucket, a hold: migration 017).
func keyCounterDrift(t *testing.T, d *Driver) string {
	t.Helper()
	ctx := context.Background()
	rows, err := d.readDB.QueryContext(ctx, `
		WITH actual AS (SELECT namespace, queue, concurrency_key,
				SUM(state IN (-2, 0)) AS queued, SUM(state = 1) AS running
			FROM invocations WHERE concurrency_key IS NOT NULL GROUP BY 1, 2, 3
			HAVING SUM(state IN (-2, 0)) + SUM(state = 1) > 0)
		SELECT a.namespace, a.queue, a.concurrency_key, a.queued, a.running, k.queued, k.running
			FROM actual a LEFT JOIN concurrency_keys k USING (namespace, queue, concurrency_key)
			WHERE k.queued IS NULL OR k.queued <> a.queued OR k.running <> a.running
		UNION ALL
		SELECT k.namespace, k.queue, k.concurrency_key, 0, 0, k.queued, k.running FROM concurrency_keys k
			WHERE NOT (k.queued = 0 AND k.running = 0 AND (k.tokens >= 0 OR k.next_ms > 0)) AND NOT EXISTS (SELECT 1 FROM invocations i WHERE i.namespace = k.namespace AND i.queue = k.queue
				AND i.concurrency_key = k.concurrency_key AND i.state IN (-2, 0, 1))
		UNION ALL
		SELECT namespace, queue, concurrency_key || ' (state 0 row ' || id || ')', -1, -1, -1, -1 FROM invocations
			WHERE concurrency_key IS NOT NULL AND state = 0`)
	require.NoError(t, err)
	defer rows.Close()
	var out string
	for rows.Next() {
		var ns, q, key string
		var aq, ar int64
		var kq, kr *int64
		require.NoError(t, rows.Scan(&ns, &q, &key, &aq, &ar, &kq, &kr))
		row := "none"
		if kq != nil {
			row = fmt.Sprintf("%d/%d", *kq, *kr)
		}
		out += fmt.Sprintf("%s/%s key %q: actual %d queued %d running, counter row %s\n", ns, q, key, aq, ar, row)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestKeyCountersFollowEveryPath drives keyed jobs through every path that moves one, at
// random on a fake clock (immediate, delayed, debounced and deduplicated submits, deadlines
// of queued and delayed jobs, claims of each order, every settle outcome with and without
// delays and held keys, settle-and-claim, cancels, kills, lease expiry, attempt timeouts,
// maintenance and claim-time promotion, limit changes), and after each step compares every
// key's counter row (migration 016: one only while the key has claimable or running jobs)
// and QueueStatsList with the jobs themselves; at the end, with no limits, every job
// finishes and no counter row is left. LAKESHORE_KEY_SEEDS sets the number of seeds.
func TestKeyCountersFollowEveryPath(t *testing.T) {
	seeds := 8
	if testing.Short() {
		// .ci/run's race-detector pass (-short) runs two seeds: each run drives the plane
		// from one goroutine, so more seeds give the detector no new interleaving, and
		// they were most of this package's time under it (each seed 1–3 minutes with
		// -race); the plain run (scripts/test.sh, no -short) checks all eight.
		seeds = 2
	}
	if s := os.Getenv("LAKESHORE_KEY_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			keyCountersRandomRun(t, uint64(seed))
		})
	}
}

// keyCountersRandomRun is one run of TestKeyCountersFollowEveryPath.
func keyCountersRandomRun(t *testing.T, seed uint64) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := openTemp(t, &Config{Now: clock.Now, MaintenanceInterval: time.Hour, Retention: time.Hour,
		Backoff: plane.Backoff{Base: time.Second, Max: 3 * time.Second}})
	r := rand.New(rand.NewPCG(seed, 7))
	keys := []string{"a", "b", "c", ""}
	queues := []string{"q1", "q2"}
	held := map[string]*plane.Job{}
	var ids []string
	var log []string
	pick := func() string { return keys[r.IntN(len(keys))] }
	submit := func() {
		q := queues[r.IntN(len(queues))]
		n := 1 + r.IntN(4)
		ps := make([]plane.SubmitParams, n)
		for i := range ps {
			p := plane.SubmitParams{ConcurrencyKey: pick(), Priority: float64(r.IntN(3)), MaxAttempts: 1 + r.IntN(3)}
			switch r.IntN(8) {
			case 0, 1:
				p.Delay = time.Duration(1+r.IntN(3000)) * time.Millisecond
			case 2:
				p.Key = "dk" + fmt.Sprint(r.IntN(4))
				p.Debounce = time.Duration(1+r.IntN(3000)) * time.Millisecond
			case 3:
				p.Key = "uk" + fmt.Sprint(r.IntN(4))
				p.UniqueFor = time.Duration(1+r.IntN(3)) * time.Second
				if r.IntN(2) == 0 {
					p.Delay = time.Duration(1+r.IntN(3000)) * time.Millisecond
				}
			}
			if r.IntN(4) == 0 {
				p.Deadline = clock.Now().Add(time.Duration(1+r.IntN(4000)) * time.Millisecond)
			}
			if r.IntN(6) == 0 {
				p.AttemptTimeout = time.Duration(500+r.IntN(2000)) * time.Millisecond
			}
			ps[i] = p
		}
		// A debounced submit goes alone (one per call).
		if ps[0].Debounce > 0 {
			ps = ps[:1]
		}
		res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: q, Invocations: ps})
		if err != nil {
			log = append(log, fmt.Sprintf("submit %s: %v", q, err))
			return
		}
		for i, x := range res {
			ids = append(ids, x.ID)
			log = append(log, fmt.Sprintf("submit %s %s key=%q delay=%v debounce=%v uniq=%v deadline=%v existing=%v",
				q, x.ID[len(x.ID)-4:], ps[i].ConcurrencyKey, ps[i].Delay, ps[i].Debounce, ps[i].UniqueFor, !ps[i].Deadline.IsZero(), x.Existing))
		}
	}
	settle := func(j *plane.Job) plane.SettleParams {
		p := plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.Outcome(1 + r.IntN(6))}
		if p.Outcome == plane.OutcomeRetry && r.IntN(2) == 0 {
			p.RetryDelay = time.Duration(r.IntN(2000)) * time.Millisecond
		}
		if p.Outcome == plane.OutcomeRateLimited {
			p.RetryDelay = time.Duration(1+r.IntN(2000)) * time.Millisecond
			switch r.IntN(3) {
			case 0:
				p.RateLimitKey = j.ConcurrencyKey
			case 1:
				p.RateLimitKey = pick()
			}
		}
		return p
	}
	randomHeld := func() *plane.Job {
		for _, j := range held {
			return j
		}
		return nil
	}
	for step := range 400 {
		switch op := r.IntN(14); op {
		case 0, 1, 2:
			submit()
		case 3, 4:
			jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: queues[r.IntN(2)],
				Kind: []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority}[r.IntN(3)], Max: 1 + r.IntN(4), LeaseTTL: time.Duration(1+r.IntN(4)) * time.Second})
			require.NoError(t, err)
			for _, j := range jobs {
				held[j.ID] = j
				log = append(log, fmt.Sprintf("claim %s key=%q", j.ID[len(j.ID)-4:], j.ConcurrencyKey))
			}
		case 5, 6:
			if j := randomHeld(); j != nil {
				p := settle(j)
				res, err := d.InvocationSettleMany(ctx, []plane.SettleParams{p})
				require.NoError(t, err)
				delete(held, j.ID)
				log = append(log, fmt.Sprintf("settle %s outcome=%d delay=%v hold=%q: %v", j.ID[len(j.ID)-4:], p.Outcome, p.RetryDelay, p.RateLimitKey, res[0]))
			}
		case 7:
			j := randomHeld()
			var ps []plane.SettleParams
			if j != nil {
				ps = append(ps, settle(j))
				delete(held, j.ID)
			}
			res, jobs, err := d.InvocationSettleAndClaim(ctx, ps, &plane.ClaimParams{Namespace: "default", Queue: queues[r.IntN(2)], Max: 1 + r.IntN(2)})
			require.NoError(t, err)
			log = append(log, fmt.Sprintf("settle-and-claim %v -> %d", res, len(jobs)))
			for _, j := range jobs {
				held[j.ID] = j
			}
		case 8:
			if len(ids) > 0 {
				id := ids[r.IntN(len(ids))]
				ok, err := d.InvocationCancel(ctx, id)
				if err == nil || !isNotFound(err) {
					require.NoError(t, err)
				}
				log = append(log, fmt.Sprintf("cancel %s: %v", id[len(id)-4:], ok))
			}
		case 9:
			if j := randomHeld(); j != nil {
				ok, err := d.InvocationKill(ctx, j.ID)
				require.NoError(t, err)
				log = append(log, fmt.Sprintf("kill %s: %v", j.ID[len(j.ID)-4:], ok))
			}
		case 10, 11:
			adv := time.Duration(r.IntN(1500)) * time.Millisecond
			clock.Advance(adv)
			log = append(log, fmt.Sprintf("advance %v", adv))
		case 12:
			require.NoError(t, d.Maintain(ctx))
			log = append(log, "maintain")
		case 13:
			a := plane.Admission{}
			switch r.IntN(4) {
			case 0:
				a.ConcurrencyLimit = int64(1 + r.IntN(2))
			case 1:
				a.ConcurrencyLimits = map[string]int64{pick(): int64(1 + r.IntN(2))}
				delete(a.ConcurrencyLimits, "")
				a.KeyWeights = map[string]float64{"a": 2}
			case 2:
				a.KeyRateLimit = 1
			}
			q := queues[r.IntN(2)]
			_, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: q, Admission: a})
			require.NoError(t, err)
			log = append(log, fmt.Sprintf("admission %s %+v", q, a))
		}
		if drift := keyCounterDrift(t, d); drift != "" {
			tail := log
			if len(tail) > 25 {
				tail = tail[len(tail)-25:]
			}
			t.Fatalf("seed %d step %d: key counters drifted:\n%s\nlast operations:\n%s", seed, step, drift, joinLines(tail))
		}
		requireStatsMatchCounters(t, d)
	}
	// Liveness: with no limits, everything ends.
	for _, q := range queues {
		_, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: q})
		require.NoError(t, err)
	}
	for _, j := range held {
		_, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
		require.NoError(t, err)
	}
	for range 50 {
		clock.Advance(10 * time.Second)
		require.NoError(t, d.Maintain(ctx))
		for _, q := range queues {
			jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: q, Max: 100})
			require.NoError(t, err)
			for _, j := range jobs {
				_, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
				require.NoError(t, err)
			}
		}
	}
	var open int
	require.NoError(t, d.readDB.QueryRowContext(ctx, `SELECT count(*) FROM invocations WHERE state < 2`).Scan(&open))
	require.Zero(t, open, "seed %d: jobs never finished", seed)
	require.Empty(t, keyCounterDrift(t, d))
	var left int
	require.NoError(t, d.readDB.QueryRowContext(ctx, `SELECT count(*) FROM concurrency_keys`).Scan(&left))
	require.Zero(t, left)
}

// isNotFound reports whether err is plane.ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, plane.ErrNotFound) }

// joinLines joins lines, each ended by a newline.
func joinLines(l []string) string {
	s := ""
	for _, x := range l {
		s += x + "\n"
	}
	return s
}

// requireStatsMatchCounters: QueueStatsList's Keys equal the counts of the jobs, plus the
// keys a worker's "slow down" holds back now (next_ms after the driver's clock) listed
// with the counts of their jobs, none when the only one waits out the hold (read before
// and after the stats, again when a promotion by the writer's alarm came between).
func requireStatsMatchCounters(t *testing.T, d *Driver) {
	t.Helper()
	ctx := context.Background()
	actual := func() map[string][2]int64 {
		want := map[string][2]int64{}
		rows, err := d.readDB.QueryContext(ctx, `SELECT queue, concurrency_key, SUM(state IN (-2, 0)), SUM(state = 1) FROM invocations
			WHERE namespace = 'default' AND concurrency_key IS NOT NULL AND state IN (-2, 0, 1) GROUP BY 1, 2`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var q, k string
			var a, b int64
			require.NoError(t, rows.Scan(&q, &k, &a, &b))
			want[q+"/"+k] = [2]int64{a, b}
		}
		held, err := d.readDB.QueryContext(ctx, `SELECT queue, concurrency_key FROM concurrency_keys
			WHERE namespace = 'default' AND next_ms > ?`, d.cfg.Now().UnixMilli())
		require.NoError(t, err)
		defer held.Close()
		for held.Next() {
			var q, k string
			require.NoError(t, held.Scan(&q, &k))
			want[q+"/"+k] = want[q+"/"+k] // listed, with the counts of its jobs if it has any
		}
		require.NoError(t, held.Err())
		return want
	}
	for try := 0; ; try++ {
		before := actual()
		stats, err := d.QueueStatsList(ctx, "default")
		require.NoError(t, err)
		got := map[string][2]int64{}
		for _, s := range stats {
			for _, k := range s.Keys {
				got[s.Queue+"/"+k.Key] = [2]int64{k.Queued, k.Running}
			}
		}
		after := actual()
		if fmt.Sprint(before) != fmt.Sprint(after) && try < 10 {
			continue
		}
		require.Equal(t, after, got, "QueueStatsList keys")
		return
	}
}

// TestMigrationDropsDelayedKeysRows: a file written under 015, whose key with only delayed
// jobs has a counter row counting nothing, beside keys with claimable and running jobs, is
// migrated by 016: the empty row goes, the others keep their counts, and the delayed jobs
// join when due and are claimed.
func TestMigrationDropsDelayedKeysRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, db, conn := oldSchema(t, "016")
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	future := now.Add(time.Hour).UnixMilli()
	_, err := conn.ExecContext(ctx, `INSERT INTO invocations (id, namespace, queue, state, priority, max_attempts, available_ms, created_ms, concurrency_key)
		VALUES ('01J00000000000000000000001', 'default', 'q', -1, 1, 3, ?1, 1, 'delayed-only'),
		       ('01J00000000000000000000002', 'default', 'q', -1, 1, 3, ?1, 1, 'mixed'),
		       ('01J00000000000000000000003', 'default', 'q', -2, 1, 3, 1, 1, 'mixed'),
		       ('01J00000000000000000000004', 'default', 'q', -2, 1, 3, 1, 1, 'running')`, future)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `UPDATE invocations SET state = 1, lease_token = 't', lease_expires_ms = ?1 WHERE id = '01J00000000000000000000004'`, future*2)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `INSERT INTO counts (namespace, queue, state, priority, n) VALUES
		('default', 'q', -1, 1, 2), ('default', 'q', 0, 1, 1), ('default', 'q', 1, 1, 1)`)
	require.NoError(t, err)
	var rowsBefore int
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT count(*) FROM concurrency_keys`).Scan(&rowsBefore))
	require.Equal(t, 3, rowsBefore, "015 made a 0/0 row for the delayed-only key")
	require.NoError(t, conn.Close())
	require.NoError(t, db.Close())

	clock := &fakeClock{now: now}
	d, err := Open(ctx, path, &Config{Now: clock.Now, MaintenanceInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	require.Empty(t, keyCounterDrift(t, d))
	var n int
	require.NoError(t, d.readDB.QueryRowContext(ctx, `SELECT count(*) FROM concurrency_keys WHERE concurrency_key = 'delayed-only'`).Scan(&n))
	require.Zero(t, n)
	clock.Advance(2 * time.Hour)
	require.NoError(t, d.Maintain(ctx))
	require.Empty(t, keyCounterDrift(t, d))
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	require.Empty(t, keyCounterDrift(t, d))
	requireStatsMatchCounters(t, d)
}

// TestRateLimitHoldOfAnEmptiedKey: a worker's "slow down" for the key of its only job
// holds the key back (RateLimitKey): a job of the key submitted during the hold waits, and
// starts once the hold has passed. The hold is stored in the key's counter row (next_ms),
// which the triggers deleted as the key emptied (the job goes into its delay) before
// migration 017, so the hold was lost and the job started at once; a hold of a key with no
// row (nothing queued or running) now makes one.
func TestRateLimitHoldOfAnEmptiedKey(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := openTemp(t, &Config{Now: clock.Now, MaintenanceInterval: time.Hour})
	_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
		Invocations: []plane.SubmitParams{{ConcurrencyKey: "api"}}})
	require.NoError(t, err)
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q"})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	res, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token,
		Outcome: plane.OutcomeRateLimited, RetryDelay: 10 * time.Second, RateLimitKey: "api"}})
	require.NoError(t, err)
	require.NoError(t, res[0])
	_, err = d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
		Invocations: []plane.SubmitParams{{ConcurrencyKey: "api"}}})
	require.NoError(t, err)
	jobs, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q"})
	require.NoError(t, err)
	require.Empty(t, jobs, "the key is held back for 10 s")
	require.Equal(t, 1, counterRows(t, d))
	clock.Advance(10 * time.Second)
	jobs, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 2, "the hold has passed: the retried job and the new one start")
	for _, j := range jobs {
		_, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
		require.NoError(t, err)
	}
	require.NoError(t, d.Maintain(ctx))
	require.Zero(t, counterRows(t, d), "maintenance drops the row of a key with no job and no hold")
	require.Empty(t, keyCounterDrift(t, d))
}

// counterRows is how many concurrency keys have a counter row.
func counterRows(t *testing.T, d *Driver) int {
	t.Helper()
	var n int
	require.NoError(t, d.readDB.QueryRowContext(context.Background(), `SELECT count(*) FROM concurrency_keys`).Scan(&n))
	return n
}

// TestAlarmPromotesDelayedKeyedJob: a parked claimer gets a delayed keyed job when it comes
// due (its key has no counter row until then, migration 016), under a limit that another
// key has reached.
func TestAlarmPromotesDelayedKeyedJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTemp(t, &Config{MaintenanceInterval: time.Hour})
	_, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q", Admission: plane.Admission{ConcurrencyLimit: 1}})
	require.NoError(t, err)
	_, err = d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
		Invocations: []plane.SubmitParams{{ConcurrencyKey: "other"}, {ConcurrencyKey: "other"}}})
	require.NoError(t, err)
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
		Invocations: []plane.SubmitParams{{ConcurrencyKey: "late", Delay: 300 * time.Millisecond}}})
	require.NoError(t, err)
	start := time.Now()
	jobs, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, res[0].ID, jobs[0].ID)
	// When it comes due, not at the wait's end: half the wait tells them apart, whatever a
	// loaded machine under the race detector adds to the 300 ms (3 s did not).
	require.Less(t, time.Since(start), 30*time.Second)
	require.Empty(t, keyCounterDrift(t, d))
}

// TestKeyBucketOfAnEmptiedKey: under key_rate_limit 1/s (burst 1), a key whose jobs come
// one at a time starts at most one a second. The bucket is stored in the key's counter
// row, which the triggers deleted when the key had nothing claimable or running before
// migration 017, so each new job of an emptied key found a full bucket (5 starts in 0.5 s).
// Maintenance drops the row once the bucket is full again.
func TestKeyBucketOfAnEmptiedKey(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := openTemp(t, &Config{Now: clock.Now, MaintenanceInterval: time.Hour})
	_, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q", Admission: plane.Admission{KeyRateLimit: 1, KeyBurst: 1}})
	require.NoError(t, err)
	started := 0
	for range 5 {
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
			Invocations: []plane.SubmitParams{{ConcurrencyKey: "api"}}})
		require.NoError(t, err)
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q"})
		require.NoError(t, err)
		for _, j := range jobs {
			started++
			_, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
			require.NoError(t, err)
		}
		clock.Advance(100 * time.Millisecond)
	}
	require.Equal(t, 1, started, "one start a second")
	require.NoError(t, d.Maintain(ctx))
	require.Equal(t, 1, counterRows(t, d), "the key's row is kept while it has jobs")
	clock.Advance(500 * time.Millisecond) // a second after the first start
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 4})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "one more start after a second")
	_, err = d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}})
	require.NoError(t, err)
	for range 3 {
		clock.Advance(time.Second)
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 4})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		_, err = d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}})
		require.NoError(t, err)
	}
	require.NoError(t, d.Maintain(ctx))
	require.Equal(t, 1, counterRows(t, d), "the bucket is empty: the row is kept")
	require.Empty(t, keyCounterDrift(t, d))
	clock.Advance(time.Second)
	require.NoError(t, d.Maintain(ctx))
	require.Zero(t, counterRows(t, d), "the bucket is full again: maintenance drops the row")
}

// TestDropSettledKeysPastHeldRows: the maintenance pass looks at a bounded number of kept
// counter rows (its batch); rows it must keep — keys held back for months — do not stop it
// from reaching the settled rows after them, which it drops within a few passes. Before,
// each pass read the same first rows (LIMIT without a cursor), so once more keys than a
// batch were held, every other kept row stayed until those holds ended: up to 366 days.
func TestDropSettledKeysPastHeldRows(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := openTemp(t, &Config{Now: clock.Now, MaintenanceInterval: time.Hour})
	d.maintainer.batch = 3
	hold := func(key string, delay time.Duration) {
		t.Helper()
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
			Invocations: []plane.SubmitParams{{}}})
		require.NoError(t, err)
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q"})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		res, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token,
			Outcome: plane.OutcomeRateLimited, RetryDelay: delay, RateLimitKey: key}})
		require.NoError(t, err)
		require.NoError(t, res[0])
	}
	for i := range 3 {
		hold(fmt.Sprintf("a%d", i), 300*24*time.Hour)
	}
	hold("b", time.Second)
	hold("c", time.Second)
	require.Equal(t, 5, counterRows(t, d))
	clock.Advance(2 * time.Second)
	for range 3 {
		require.NoError(t, d.Maintain(ctx))
	}
	require.Equal(t, 3, counterRows(t, d), "the ended holds' rows are dropped; the months-long ones kept")
	require.Empty(t, keyCounterDrift(t, d))
}
