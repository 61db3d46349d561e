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

// TestHandOutFailureRecordsNothing: a hand-out whose writes fail (a trigger on the
// consumption table) and one whose COMMIT fails (the same trigger deferred to the commit,
// which the writes' pipeline carries) return the error, record no consumption, hand out
// no batch, and leave no pooled connection inside the transaction; once the trigger is
// gone the same samples are handed out.
func TestHandOutFailureRecordsNothing(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, pgtest.Database(t), fileBucket(t), "q", nil)
	recs := make([]persist.Record, 8)
	for i := range recs {
		recs[i] = persist.Record{"x": int64(i)}
	}
	_, err := s.PutPartition(ctx, persist.DefaultPartition, recs, nil)
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`)
	require.NoError(t, err)
	q := persist.New(s)
	req := func() *persist.MetaRequest {
		return &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train"}
	}
	for _, trigger := range []string{
		`CREATE TRIGGER refuse BEFORE INSERT ON consumed FOR EACH ROW EXECUTE FUNCTION refuse()`,
		`CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON consumed DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse()`,
	} {
		_, err = s.pool.Exec(ctx, trigger)
		require.NoError(t, err)
		b, meta, err := q.Reader().GetBatch(ctx, req())
		require.ErrorContains(t, err, "refused", trigger)
		require.Nil(t, b)
		require.Nil(t, meta)
		_, err = q.Reader().GetMeta(ctx, req())
		require.ErrorContains(t, err, "refused", trigger)
		n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
		require.NoError(t, err)
		require.Zero(t, n, trigger)
		for _, c := range s.pool.AcquireAllIdle(ctx) {
			require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus())
			c.Release()
		}
		_, err = s.pool.Exec(ctx, `DROP TRIGGER refuse ON consumed`)
		require.NoError(t, err)
	}
	b, meta, err := q.Reader().GetBatch(ctx, req())
	require.NoError(t, err)
	defer b.Release()
	require.Equal(t, []int64{0, 1, 2, 3}, meta.Indexes)
	n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
}
