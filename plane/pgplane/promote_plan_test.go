package pgplane

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestPromoteReadsNoRowNotDue: a claim's promote (promote, promoteHolding) behind 10,000
// delayed jobs none of which is due reads a few pages, not the table, under the generic
// plan a prepared statement runs with after its fifth execution (pgx prepares every
// statement). Its leftDue report was an EXISTS, whose ORDER BY and LIMIT PostgreSQL drops
// (simplify_EXISTS_query): planned for a first match among the default third of the rows
// an unknown $3 lets through, it read the whole table (a sequential scan, about 250 pages here)
// to find none, +0.7 ms a claim (docs/benchmarks-pg.md). Read in available_ms order with
// LIMIT 1 it takes the waiting index and stops at the first row not due.
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
	for name, statement := range map[string]string{"promote": d.sql.promote, "promoteHolding": d.sql.promoteHolding} {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `PREPARE promote_plan(text, text, bigint) AS `+statement)
		require.NoError(t, err)
		var explained string
		require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE promote_plan('default', 'q', `+
			strconv.FormatInt(time.Now().UnixMilli(), 10)+`)`).Scan(&explained))
		var plans []struct {
			Plan struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		require.NoError(t, json.Unmarshal([]byte(explained), &plans))
		require.Len(t, plans, 1)
		require.Less(t, plans[0].Plan.Hit+plans[0].Plan.Read, 50, "%s: pages read behind 10,000 rows not due", name)
		require.NoError(t, tx.Rollback(ctx))
		_, err = conn.Exec(context.Background(), `DEALLOCATE promote_plan`)
		require.NoError(t, err)
	}
}
