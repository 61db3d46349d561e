package pgplane

import (
	"context"
	"encoding/json"
	"strconv"
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
// argument, the time now, written out) under its generic plan in a transaction it rolls
// back and returns the pages it read (shared buffers hit and read) and the due rows it left
// waiting.
func promotePages(t *testing.T, conn *pgx.Conn, statement, types, arguments string) (pages, left int) {
	t.Helper()
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	_, err = tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `PREPARE promote_plan(`+types+`) AS `+statement)
	require.NoError(t, err)
	var explained string
	now := time.Now().UnixMilli()
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE promote_plan(`+arguments+
		strconv.FormatInt(now, 10)+`)`).Scan(&explained))
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM lakeshore.invocations WHERE waiting AND available_ms <= $1`, now).Scan(&left))
	var plans []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(explained), &plans))
	require.Len(t, plans, 1)
	require.NoError(t, tx.Rollback(ctx))
	_, err = conn.Exec(context.Background(), `DEALLOCATE promote_plan`)
	require.NoError(t, err)
	return plans[0].Plan.Hit + plans[0].Plan.Read, left
}
