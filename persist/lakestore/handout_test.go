package lakestore

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestViewBatchFailureRollsBack: a query failing inside viewBatch's pipeline fails it,
// the rest of the pipeline does not run, and no pooled connection is left inside the
// snapshot's transaction (the next reads work and see new commits).
func TestViewBatchFailureRollsBack(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, pgtest.Database(t), fileBucket(t), "q", nil)
	ran := false
	err := s.viewBatch(ctx, func(b *pgx.Batch) {
		b.Queue(`SELECT 1 / 0`)
		b.Queue(`SELECT 1`).QueryRow(func(pgx.Row) error { ran = true; return nil })
	})
	require.ErrorContains(t, err, "division by zero")
	require.False(t, ran)
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus())
		c.Release()
	}
	for i := range 3 { // every connection of the pool, new commits between the reads
		_, err := s.PutPartition(ctx, persist.DefaultPartition, []persist.Record{{"x": int64(i)}}, nil)
		require.NoError(t, err)
		var next int64
		require.NoError(t, s.viewBatch(ctx, func(b *pgx.Batch) {
			b.Queue(queueRowSQL, s.name).QueryRow(func(row pgx.Row) error {
				st, err := s.scanQueue(row)
				if err == nil {
					next = st.next
				}
				return err
			})
		}))
		require.Equal(t, int64(i+1), next)
	}
}
