package pgplane

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestPromoteReadsNoRowNotDue: a promote (a claim's promote and promoteHolding,
// maintenance's promoteDue) behind 10,000 delayed jobs reads a few pages, not the table,
// under the generic plan a prepared statement runs with after its fifth execution (pgx
// prepares every statement).
//
// None due: the claim's leftDue report was an EXISTS, whose ORDER BY and LIMIT PostgreSQL
// drops (simplify_EXISTS_query): planned for a first match among the default third of the
// rows an unknown $3 lets through, it read the whole table (a sequential scan, about 250
// pages here) to find none, +0.7 ms a claim (docs/benchmarks-pg.md). Read in available_ms
// order with LIMIT 1 it takes the waiting index and stops at the first row not due.
//
// Five due: the statements' UPDATE took its rows as `id IN (SELECT id FROM due)`, planned
// for due's batch of 1,000 as a hash join over a sequential scan of the whole table (about
// 320 pages for the statement here); `id = ANY (ARRAY(SELECT id FROM due))` is a
// primary-key probe a row (about 100 pages for the statement, most of them the update's
// own writes: the moved rows' index entries).
func TestPromoteReadsNoRowNotDue(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	ctx := t.Context()
	batch := make([]plane.SubmitParams, 1000)
	for i := range batch {
		batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, Delay: time.Hour}
	}
	for range 10 {
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
		require.NoError(t, err)
	}
	conn := mustConn(t, url)
	_, err := conn.Exec(ctx, `VACUUM ANALYZE lakeshore.invocations`)
	require.NoError(t, err)
	statements := []struct{ name, statement, types, arguments string }{
		{"promote", d.sql.promote, "text, text, bigint", "'default', 'q', "},
		{"promoteHolding", d.sql.promoteHolding, "text, text, bigint", "'default', 'q', "},
		{"promoteDue", d.sql.promoteDue, "bigint", ""},
	}
	for _, s := range statements {
		pages, _ := promotePages(t, conn, s.statement, s.types, s.arguments)
		require.Less(t, pages, 50, "%s: pages read behind 10,000 rows not due", s.name)
	}

	for range 5 {
		submitOne(t, d, plane.SubmitParams{Delay: time.Millisecond})
	}
	time.Sleep(10 * time.Millisecond)
	for _, s := range statements {
		pages, left := promotePages(t, conn, s.statement, s.types, s.arguments)
		t.Logf("%s: %d pages moving 5 due rows", s.name, pages)
		assert.Less(t, pages, 160, "%s: pages read moving 5 due rows behind 10,000 rows not due", s.name)
		assert.Zero(t, left, "%s: due rows left waiting", s.name)
	}
}

// promotePages runs statement (a promote, its parameters' types, and all but its last
// argument, the time now, written out) under its generic plan (genericPlanPages) and
// returns the pages it read and the due rows it left waiting.
func promotePages(t *testing.T, conn *pgx.Conn, statement, types, arguments string) (pages, left int) {
	t.Helper()
	now := time.Now().UnixMilli()
	pages = genericPlanPages(t, conn, statement, types, arguments+strconv.FormatInt(now, 10), func(tx pgx.Tx) {
		require.NoError(t, tx.QueryRow(t.Context(), `SELECT count(*) FROM lakeshore.invocations WHERE waiting AND available_ms <= $1`, now).Scan(&left))
	})
	return pages, left
}

// genericPlanPages runs statement (with its parameters' types and its arguments written
// out) under its generic plan, the one a prepared statement runs with after its fifth
// execution (pgx prepares every statement), in a transaction it rolls back, calls after in
// that transaction, and returns the pages the statement read (shared buffers hit and read):
// its plan's and those of its data-modifying CTEs, which PostgreSQL runs after the plan
// when the query does not read them (they are the plan's InitPlans, not counted in it then).
func genericPlanPages(t *testing.T, conn *pgx.Conn, statement, types, arguments string, after func(pgx.Tx)) int {
	t.Helper()
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	_, err = tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `PREPARE generic_plan(`+types+`) AS `+statement)
	require.NoError(t, err)
	var explained string
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE generic_plan(`+arguments+`)`).Scan(&explained))
	after(tx)
	var plans []struct {
		Plan planPages
	}
	require.NoError(t, json.Unmarshal([]byte(explained), &plans))
	require.Len(t, plans, 1)
	require.NoError(t, tx.Rollback(ctx))
	_, err = conn.Exec(context.Background(), `DEALLOCATE generic_plan`)
	require.NoError(t, err)
	return plans[0].Plan.pages()
}

// planPages is a node of a plan explained in JSON: its buffers (counting those of the nodes
// it ran) and its children.
type planPages struct {
	Hit          int         `json:"Shared Hit Blocks"`
	Read         int         `json:"Shared Read Blocks"`
	Relationship string      `json:"Parent Relationship"`
	Subplan      string      `json:"Subplan Name"`
	CTE          string      `json:"CTE Name"`
	Plans        []planPages `json:"Plans"`
}

// pages returns the pages a plan read: its root's, and those of each CTE below it that no
// CTE Scan reads (a data-modifying CTE the query does not read, which PostgreSQL runs to
// completion after the plan, outside its root's count).
func (p planPages) pages() int {
	scanned := map[string]bool{}
	var walk func(planPages)
	walk = func(n planPages) {
		if n.CTE != "" {
			scanned["CTE "+n.CTE] = true
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(p)
	pages := p.Hit + p.Read
	for _, c := range p.Plans {
		if c.Relationship == "InitPlan" && strings.HasPrefix(c.Subplan, "CTE ") && !scanned[c.Subplan] {
			pages += c.Hit + c.Read
		}
	}
	return pages
}

// TestTrimReadsNoRowKept: maintenance's trim and trimTopics, with five invocations and
// five topics to delete behind 10,000 of each kept and 40,020 frames, read a few pages, not
// the tables, under the generic plan, and delete those rows and their frames alone. Their
// DELETEs took their rows as a join with the CTE of the rows to delete (USING, IN), which
// PostgreSQL planned for a batch of 1,000 as hash joins over sequential scans of the whole
// tables: 1,158 pages for trim (invocations, then frames), 507 for trimTopics (topics, then
// frames); = ANY (ARRAY(…)) probes the primary keys: 91 and 57.
func TestTrimReadsNoRowKept(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	ctx := t.Context()
	// finish submits n jobs, claims and acks them, and returns their ids.
	finish := func(n int) []string {
		batch := make([]plane.SubmitParams, n)
		for i := range batch {
			batch[i] = plane.SubmitParams{Payload: []byte{0xc0}}
		}
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
		require.NoError(t, err)
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: n})
		require.NoError(t, err)
		require.Len(t, jobs, n)
		settles := make([]plane.SettleParams, n)
		ids := make([]string, n)
		for i, j := range jobs {
			settles[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
			ids[i] = j.ID
		}
		errs, err := d.InvocationSettleMany(ctx, settles)
		require.NoError(t, err)
		for _, err := range errs {
			require.NoError(t, err)
		}
		return ids
	}
	victims := finish(5)
	time.Sleep(10 * time.Millisecond)
	cutoff := time.Now().UnixMilli()
	time.Sleep(10 * time.Millisecond)
	for range 10 {
		finish(1000)
	}
	// Frames and topics are written here as their tables hold them: three value frames an
	// invocation, 10,005 topics (five not updated since before cutoff) of one frame each.
	conn := mustConn(t, url)
	for _, statement := range []string{
		`INSERT INTO lakeshore.frames (journal, seq, kind, value, attempt, time_ms)
			SELECT id, seq, 0, '\xc0', 1, finished_ms FROM lakeshore.invocations, generate_series(1, 3) AS seq`,
		`INSERT INTO lakeshore.topics (journal, next_seq, closed, updated_ms)
			SELECT 'topic-' || n, 2, false, CASE WHEN n <= 5 THEN ` + strconv.FormatInt(cutoff-1, 10) + ` ELSE ` +
			strconv.FormatInt(cutoff+1, 10) + ` END FROM generate_series(1, 10005) AS n`,
		`INSERT INTO lakeshore.frames (journal, seq, kind, value, attempt, time_ms)
			SELECT journal, 1, 0, '\xc0', 0, updated_ms FROM lakeshore.topics`,
		`VACUUM ANALYZE lakeshore.invocations, lakeshore.frames, lakeshore.topics`,
	} {
		_, err := conn.Exec(ctx, statement)
		require.NoError(t, err)
	}
	count := func(tx pgx.Tx, query string, arguments ...any) (n int) {
		require.NoError(t, tx.QueryRow(ctx, query, arguments...).Scan(&n))
		return n
	}

	pages := genericPlanPages(t, conn, d.sql.trim, "bigint, text, text, bigint", strconv.FormatInt(cutoff, 10)+", '', '', 1000", func(tx pgx.Tx) {
		assert.Zero(t, count(tx, `SELECT count(*) FROM lakeshore.invocations WHERE id = ANY($1)`, victims), "trimmed invocations left")
		assert.Zero(t, count(tx, `SELECT count(*) FROM lakeshore.frames WHERE journal = ANY($1)`, victims), "trimmed invocations' frames left")
		assert.Equal(t, 10000, count(tx, `SELECT count(*) FROM lakeshore.invocations`), "invocations kept")
		assert.Equal(t, 40020-15, count(tx, `SELECT count(*) FROM lakeshore.frames`), "frames kept")
	})
	t.Logf("trim: %d pages deleting 5 invocations", pages)
	assert.Less(t, pages, 150, "trim: pages read deleting 5 invocations behind 10,000 kept")

	pages = genericPlanPages(t, conn, d.sql.trimTopics, "bigint", strconv.FormatInt(cutoff, 10), func(tx pgx.Tx) {
		assert.Zero(t, count(tx, `SELECT count(*) FROM lakeshore.topics WHERE updated_ms < $1`, cutoff), "trimmed topics left")
		assert.Zero(t, count(tx, `SELECT count(*) FROM lakeshore.frames WHERE journal LIKE 'topic-%' AND time_ms < $1`, cutoff), "trimmed topics' frames left")
		assert.Equal(t, 10000, count(tx, `SELECT count(*) FROM lakeshore.topics`), "topics kept")
		assert.Equal(t, 40020-5, count(tx, `SELECT count(*) FROM lakeshore.frames`), "frames kept")
	})
	t.Logf("trimTopics: %d pages deleting 5 topics", pages)
	assert.Less(t, pages, 150, "trimTopics: pages read deleting 5 topics behind 10,000 kept")

	// 1,000 of the kept invocations finished before the cutoff too but still hold their
	// keys for a dedup window (planekit.KeyNotHeld): the trim reads none of them
	// (invocations_trimmable holds no row with a hold) and deletes the same 5. Before
	// migration 0022 it read them all, through invocations_finished, in every pass: 157
	// pages here (85 since, 91 with no held row), and a pass's time at hundreds of thousands.
	_, err := conn.Exec(ctx, `UPDATE lakeshore.invocations SET finished_ms = $1, key_held_until = $2
		WHERE id IN (SELECT id FROM lakeshore.invocations WHERE NOT id = ANY($3) ORDER BY id LIMIT 1000)`, cutoff-1, cutoff+3_600_000, victims)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `VACUUM ANALYZE lakeshore.invocations`)
	require.NoError(t, err)
	pages = genericPlanPages(t, conn, d.sql.trim, "bigint, text, text, bigint", strconv.FormatInt(cutoff, 10)+", '', '', 1000", func(tx pgx.Tx) {
		assert.Zero(t, count(tx, `SELECT count(*) FROM lakeshore.invocations WHERE id = ANY($1)`, victims), "trimmed invocations left")
		assert.Equal(t, 10000, count(tx, `SELECT count(*) FROM lakeshore.invocations`), "invocations kept, the held ones too")
	})
	t.Logf("trim: %d pages deleting 5 invocations past 1,000 held", pages)
	assert.Less(t, pages, 120, "trim: pages read deleting 5 invocations past 1,000 held: the held rows are not read")
}
