package sqliteplane

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestQueryPlansDelayedAndList extends TestQueryPlans to the statements of delayed
// invocations and of listing: each walks an index, never the table, never a sort.
func TestQueryPlansDelayedAndList(t *testing.T) {
	t.Parallel()
	d := openTemp(t, nil)
	ctx := context.Background()
	for name, query := range map[string]string{
		"promote due":      `SELECT seq FROM invocations WHERE state = -1 AND available_ms <= ?1 ORDER BY available_ms LIMIT ?2`,
		"earliest due":     `SELECT min(available_ms) FROM invocations WHERE state = -1`,
		"delayed deadline": `SELECT id FROM invocations WHERE state = -1 AND deadline_ms > 0 AND deadline_ms <= ?1 LIMIT ?2`,
		"list newest":      listNewest,
		"list oldest":      listOldest,
		"count queued":     `SELECT COALESCE(SUM(n), 0) FROM counts WHERE namespace = ?1 AND queue = ?2 AND state IN (?3, ?4)`,
		"list row":         `SELECT ` + listColumns + ` FROM invocations WHERE id = ?1`,
	} {
		rows, err := d.readDB.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, "default", "q", 0, 1, 1)
		require.NoError(t, err, name)
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, rows.Close())
		text := strings.Join(plan, "; ")
		require.NotContains(t, text, "TEMP B-TREE", "%s sorts rows: %s", name, text)
		require.NotRegexp(t, `SCAN (invocations|frames|counts)\b`, text, "%s scans a table: %s", name, text)
		require.Contains(t, text, "SEARCH", "%s: %s", name, text)
	}
}

// TestClaimRangeHoldsNoDelayedJobs: the rows a claim walks (its queue's state-0 index range)
// are exactly the claimable ones. Delayed submits and retries waiting out a backoff must
// not be among them, or every claim walks past them all (issue 11: 547 ms per empty claim
// at 1,000,000 jobs in backoff, when they sat in the claim index filtered by available_ms).
func TestClaimRangeHoldsNoDelayedJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := openTemp(t, &Config{Now: clock.Now, MaintenanceInterval: time.Hour, Backoff: plane.Backoff{Base: time.Hour, Max: time.Hour}})
	const n = 300
	batch := make([]plane.SubmitParams, n)
	for i := range batch {
		batch[i] = plane.SubmitParams{Payload: []byte{0x80}}
	}
	_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
	require.NoError(t, err)
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: n})
	require.NoError(t, err)
	require.Len(t, jobs, n)
	settles := make([]plane.SettleParams, n)
	for i, j := range jobs {
		settles[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeRetry} // into a 1 h backoff
	}
	_, err = d.InvocationSettleMany(ctx, settles)
	require.NoError(t, err)
	for i := range batch {
		batch[i].Delay = time.Hour
	}
	_, err = d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
	require.NoError(t, err)

	claimRange := func() int {
		var walked int
		require.NoError(t, d.readDB.QueryRowContext(ctx, `SELECT count(*) FROM invocations WHERE namespace = 'default' AND queue = 'q' AND state = 0`).Scan(&walked))
		return walked
	}
	require.Zero(t, claimRange(), "a claim would walk past jobs that are not claimable")
	n2, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.Equal(t, int64(2*n), n2, "delayed and backed-off jobs count as queued")
	jobs, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q"})
	require.NoError(t, err)
	require.Empty(t, jobs)

	// Once due they are promoted (by the claim itself here) and claimable, oldest first.
	clock.Advance(2 * time.Hour)
	jobs, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 2 * n})
	require.NoError(t, err)
	require.Len(t, jobs, promoteBatchClaim, "a claim promotes a bounded batch")
	require.NoError(t, d.Maintain(ctx))
	jobs, err = d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 2 * n})
	require.NoError(t, err)
	require.Len(t, jobs, 2*n-promoteBatchClaim, "maintenance promoted the rest")
}

// TestAlarmPromotesAndHandsOff: with the real clock, a claimer parked on an empty queue gets
// a delayed job when it comes due, from the writer's alarm, without any other write.
func TestAlarmPromotesAndHandsOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTemp(t, &Config{MaintenanceInterval: time.Hour})
	res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
		Invocations: []plane.SubmitParams{{Delay: 200 * time.Millisecond}}})
	require.NoError(t, err)
	start := time.Now()
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, res[0].ID, jobs[0].ID)
	// From the alarm, not at the wait's end: half the wait tells them apart, whatever a
	// loaded machine under the race detector adds to the 200 ms (2 s did not).
	require.Less(t, time.Since(start), 30*time.Second)
}

// TestMigrationMovesBackedOffJobs: a file written by the schema before delayed states (a
// retry in backoff is state 0 with a future available_ms) is migrated into the delayed
// state, with its counts, and its workers keep their registrations.
func TestMigrationMovesBackedOffJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, db, conn := oldSchema(t, "004")
	future := time.Now().Add(time.Hour).UnixMilli()
	for _, stmt := range []string{
		`INSERT INTO invocations (id, namespace, queue, state, max_attempts, available_ms, created_ms)
			VALUES ('01J00000000000000000000001', 'default', 'q', 0, 3, ` + fmt.Sprint(future) + `, 1),
			       ('01J00000000000000000000002', 'default', 'q', 0, 3, 1, 1)`,
		`INSERT INTO counts (namespace, queue, state, priority, n) VALUES ('default', 'q', 0, 0, 2)`,
		`INSERT INTO workers (id, namespace, host, pid, queues, started_ms, seen_ms) VALUES ('w1', 'a', 'h', 1, '[]', 1, 1)`,
	} {
		_, err := conn.ExecContext(ctx, stmt)
		require.NoError(t, err)
	}
	require.NoError(t, conn.Close())
	require.NoError(t, db.Close())

	d := openAt(t, path)
	var state int
	require.NoError(t, d.readDB.QueryRowContext(ctx, `SELECT state FROM invocations WHERE id = '01J00000000000000000000001'`).Scan(&state))
	require.Equal(t, planekit.StateDelayed, state)
	n, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "only the job that was not in backoff is claimable")
	require.Equal(t, "01J00000000000000000000002", jobs[0].ID)
	var workers int
	require.NoError(t, d.readDB.QueryRowContext(ctx, `SELECT count(*) FROM workers WHERE namespace = 'a' AND id = 'w1'`).Scan(&workers))
	require.Equal(t, 1, workers)
}

// oldSchema makes a database file migrated only by the migrations named before before
// (a file an older binary wrote), and returns its path, the database and a connection of
// its writer, both to be closed by the caller.
func oldSchema(t *testing.T, before string) (string, *sqlitedb.DB, *sql.Conn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sqlitedb.Open(path, nil)
	require.NoError(t, err)
	conn, err := db.Write.Conn(context.Background())
	require.NoError(t, err)
	old := fstest.MapFS{}
	entries, err := migrations.ReadDir("migrations")
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name() < before {
			body, err := migrations.ReadFile("migrations/" + e.Name())
			require.NoError(t, err)
			old[e.Name()] = &fstest.MapFile{Data: body}
		}
	}
	require.NoError(t, sqlitedb.Migrate(context.Background(), conn, old))
	return path, db, conn
}

func openAt(t *testing.T, path string) *Driver {
	t.Helper()
	d, err := Open(context.Background(), path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

// TestMigrationKeyedPriorityRange: a file whose keyed jobs were queued under migration 013
// (two indexes of keyed jobs, no priority range in the key's counter row) is migrated by
// 014, which gives each key the range of its queued jobs' priorities: fifo claims across
// its levels keep id order, and a key of one level reads that level.
func TestMigrationKeyedPriorityRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, db, conn := oldSchema(t, "014")
	// Inserted as 013's driver did (state 0; the triggers count the key and move the rows
	// to -2), with the counts the driver kept.
	_, err := conn.ExecContext(ctx, `INSERT INTO invocations (id, namespace, queue, state, priority, max_attempts, available_ms, created_ms, concurrency_key)
		VALUES ('01J00000000000000000000001', 'default', 'q', 0, 1, 3, 1, 1, 'mixed'),
		       ('01J00000000000000000000002', 'default', 'q', 0, 5, 3, 1, 1, 'mixed'),
		       ('01J00000000000000000000003', 'default', 'q', 0, 1, 3, 1, 1, 'mixed'),
		       ('01J00000000000000000000004', 'default', 'q', 0, 2, 3, 1, 1, 'one'),
		       ('01J00000000000000000000005', 'default', 'q', 0, 2, 3, 1, 1, 'one')`)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `INSERT INTO counts (namespace, queue, state, priority, n) VALUES
		('default', 'q', 0, 1, 2), ('default', 'q', 0, 5, 1), ('default', 'q', 0, 2, 2)`)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	require.NoError(t, db.Close())

	d := openAt(t, path)
	ranges := map[string][2]float64{}
	rows, err := d.readDB.QueryContext(ctx, `SELECT concurrency_key, priority_low, priority_high FROM concurrency_keys`)
	require.NoError(t, err)
	for rows.Next() {
		var key string
		var low, high float64
		require.NoError(t, rows.Scan(&key, &low, &high))
		ranges[key] = [2]float64{low, high}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string][2]float64{"mixed": {1, 5}, "one": {2, 2}}, ranges)
	var got []string
	for range 5 {
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Kind: plane.KindFIFO, Max: 1})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		got = append(got, jobs[0].ID)
	}
	// Round-robin over the two keys (each key's head in id order).
	require.ElementsMatch(t, []string{"01J00000000000000000000001", "01J00000000000000000000004"}, got[:2])
	require.ElementsMatch(t, []string{"01J00000000000000000000002", "01J00000000000000000000005"}, got[2:4])
	require.Equal(t, "01J00000000000000000000003", got[4])
}

// Keys at the same pass take their turns in the order they reached it (migration 016), not
// by name: "z" joined before "a", so each round starts with "z".
func TestKeyTurnsInArrivalOrder(t *testing.T) {
	ctx := context.Background()
	d := openAt(t, filepath.Join(t.TempDir(), "turns.db"))
	for _, key := range []string{"z", "a", "m"} {
		ps := make([]plane.SubmitParams, 3)
		for i := range ps {
			ps[i] = plane.SubmitParams{ConcurrencyKey: key}
		}
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: ps})
		require.NoError(t, err)
	}
	var order []string
	for range 9 {
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Kind: plane.KindFIFO, Max: 1})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		order = append(order, jobs[0].ConcurrencyKey)
	}
	require.Equal(t, []string{"z", "a", "m", "z", "a", "m", "z", "a", "m"}, order)
}
