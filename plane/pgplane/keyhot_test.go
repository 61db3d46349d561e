package pgplane

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/stretchr/testify/require"
)

// TestKeyedStartInPlace: a claim's start of a keyed job that leaves its key ready (below its
// limit, with claimable jobs left) rewrites the key's counter row in place — a HOT update,
// no new entry in any index of concurrency_keys — since migration 0021 took the turn (pass,
// joined) out of the ready index. Before, every such start was a non-HOT update.
func TestKeyedStartInPlace(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	ctx := t.Context()
	for range 3 {
		submitOne(t, d, plane.SubmitParams{ConcurrencyKey: "k"})
	}
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	var id string
	require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM lakeshore.invocations WHERE state = -2 ORDER BY id LIMIT 1 FOR UPDATE`).Scan(&id))
	// The claim's start statement, as tx.begin sends it for one keyed row.
	_, err = tx.Exec(ctx, d.sql.setRunningKeyed, int64(1), []string{id}, []string{"token"}, []int64{4102444800000}, []string{"w"},
		[]string{"default"}, []string{"q"}, []string{"k"}, []int64{1})
	require.NoError(t, err)
	var updated, hot int64
	var queued, running int64
	var ready bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables
		WHERE schemaname = 'lakeshore' AND relname = 'concurrency_keys'`).Scan(&updated, &hot))
	require.NoError(t, tx.QueryRow(ctx, `SELECT queued, running, ready FROM lakeshore.concurrency_keys
		WHERE namespace = 'default' AND queue = 'q' AND concurrency_key = 'k'`).Scan(&queued, &running, &ready))
	require.Equal(t, []int64{2, 1}, []int64{queued, running}, "the start counted")
	require.True(t, ready, "the key still ready")
	require.EqualValues(t, 1, updated, "one counter row updated")
	require.EqualValues(t, 1, hot, "the key's counter row rewritten in place (HOT)")
}
