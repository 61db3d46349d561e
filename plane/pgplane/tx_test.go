package pgplane

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestTransactionPipelines checks the transaction wrapper (Driver.do) whose BEGIN goes out
// with its first statements and whose COMMIT goes out with its last writes: whatever fails,
// in whichever round trip, the call returns that error and nothing of the transaction
// stays; a transaction aborted by an error its function ignored is not reported committed;
// and the connection goes back to the pool outside any transaction.
func TestTransactionPipelines(t *testing.T) {
	d, trips := trippedDriver(t)
	ctx := t.Context()
	_, err := d.pool.Exec(ctx, `CREATE TABLE scratch (id int PRIMARY KEY)`)
	require.NoError(t, err)
	count := func() int {
		var n int
		require.NoError(t, d.pool.QueryRow(ctx, `SELECT count(*) FROM scratch`).Scan(&n))
		return n
	}
	code := func(err error) string {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return pgErr.Code
		}
		return ""
	}
	insert := `INSERT INTO scratch VALUES ($1)`

	t.Run("committed in two round trips", func(t *testing.T) {
		for _, ids := range [][2]int{{-2, -1}, {1, 2}} { // the first prepares the statements
			trips.take()
			require.NoError(t, d.do(ctx, func(t *tx) error {
				t.exec(insert, ids[0])
				var n int
				if err := t.queryRow(`SELECT count(*) FROM scratch`).Scan(&n); err != nil {
					return err
				}
				t.exec(insert, ids[1])
				return nil
			}))
		}
		require.Equal(t, 2, trips.take(), "BEGIN, the first write and the read; the second write and COMMIT")
		_, err := d.pool.Exec(ctx, `DELETE FROM scratch WHERE id < 0`)
		require.NoError(t, err)
		require.Equal(t, 2, count())
	})

	t.Run("a write failing in the commit's pipeline", func(t *testing.T) {
		err := d.do(ctx, func(t *tx) error {
			t.exec(insert, 3)
			rows, err := t.query(`SELECT id FROM scratch`)
			if err != nil {
				return err
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			t.exec(insert, 1) // unique violation, sent with COMMIT
			t.exec(insert, 4)
			return nil
		})
		require.Equal(t, "23505", code(err), "%v", err)
		require.Equal(t, 2, count(), "the first write is rolled back too")
	})

	t.Run("the first statement failing with BEGIN", func(t *testing.T) {
		var n int
		err := d.do(ctx, func(t *tx) error { return t.queryRow(`SELECT 1/0`).Scan(&n) })
		require.Equal(t, "22012", code(err), "%v", err)
		err = d.do(ctx, func(t *tx) error {
			t.exec(insert, 5)
			_, err := t.execNow(`SELECT 1/0`)
			return err
		})
		require.Equal(t, "22012", code(err), "%v", err)
		require.Equal(t, 2, count())
	})

	t.Run("a statement failing in a batch behind queued writes", func(t *testing.T) {
		err := d.do(ctx, func(t *tx) error {
			t.exec(insert, 6)
			t.exec(insert, 1) // unique violation, ahead of the batch
			b := &pgx.Batch{}
			b.Queue(`SELECT 1`)
			br := t.sendBatch(b)
			var one int
			scanErr := br.QueryRow().Scan(&one)
			return errors.Join(scanErr, br.Close())
		})
		require.Equal(t, "23505", code(err), "%v", err)
		require.Equal(t, 2, count())
	})

	t.Run("an error ignored aborts the commit", func(t *testing.T) {
		err := d.do(ctx, func(t *tx) error {
			if _, err := t.execNow(insert, 7); err != nil {
				return err
			}
			_, _ = t.execNow(`SELECT 1/0`) // ignored: the transaction is aborted
			t.exec(insert, 8)
			return nil
		})
		require.Error(t, err, "a transaction aborted before COMMIT is not committed")
		err = d.do(ctx, func(t *tx) error {
			if _, err := t.execNow(insert, 9); err != nil {
				return err
			}
			_, _ = t.execNow(`SELECT 1/0`)
			return nil // only COMMIT is left to send
		})
		require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
		require.Equal(t, 2, count())
	})

	t.Run("an error of the function rolls back what was sent", func(t *testing.T) {
		refused := errors.New("refused")
		err := d.do(ctx, func(t *tx) error {
			if _, err := t.execNow(insert, 10); err != nil {
				return err
			}
			t.exec(insert, 11)
			return refused
		})
		require.ErrorIs(t, err, refused)
		require.Equal(t, 2, count())
	})

	t.Run("a first statement that ran nothing, its error ignored", func(t *testing.T) {
		refused := errors.New("refused")
		var first error
		err := d.do(ctx, func(x *tx) error {
			_, first = x.execNow(`SELECT * FROM no_such_table`) // does not prepare: nothing ran, BEGIN neither
			if _, err := x.execNow(insert, 12); err != nil {    // begins the transaction
				return err
			}
			return refused
		})
		require.Equal(t, "42P01", code(first), "%v", first)
		require.ErrorIs(t, err, refused)
		require.Equal(t, 2, count(), "the write after the failed BEGIN was in the transaction, rolled back")
	})

	t.Run("writes queued ahead of a first statement that ran nothing", func(t *testing.T) {
		// The statement fails to prepare before anything of its pipeline (BEGIN, the writes
		// queued ahead of it) ran: the writes are still the transaction's, never dropped
		// by a COMMIT that reports success without them.
		var first error
		err := d.do(ctx, func(x *tx) error {
			x.exec(insert, 13)
			_, first = x.execNow(`SELECT * FROM no_such_table`)
			return nil
		})
		require.Equal(t, "42P01", code(first), "%v", first)
		require.NoError(t, err)
		require.Equal(t, 3, count(), "the queued write is committed with the transaction")
		_, err = d.pool.Exec(ctx, `DELETE FROM scratch WHERE id = 13`)
		require.NoError(t, err)
	})

	t.Run("writes queued ahead of a later statement that did not prepare", func(t *testing.T) {
		// Begun already: the failed PARSE aborts the transaction, so the writes it took
		// are never committed without the caller seeing an error, even one that ignored
		// the statement's.
		err := d.do(ctx, func(x *tx) error {
			if _, err := x.execNow(insert, 14); err != nil {
				return err
			}
			x.exec(insert, 15)
			_, _ = x.execNow(`SELECT * FROM no_such_table`)
			return nil
		})
		require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
		require.Equal(t, 2, count())
	})

	t.Run("a transaction that sends nothing", func(t *testing.T) {
		trips.take()
		require.NoError(t, d.do(ctx, func(*tx) error { return nil }))
		require.Zero(t, trips.take())
	})

	// Every connection went back to the pool idle, outside a transaction: the pool's
	// connections all answer a statement outside one.
	conns := d.pool.Stat().TotalConns()
	for range conns {
		c, err := d.pool.Acquire(ctx)
		require.NoError(t, err)
		defer c.Release()
		require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus())
		_, err = c.Exec(ctx, `SAVEPOINT inside`)
		require.Equal(t, "25P01", code(err), "a connection of the pool is inside a transaction: %v", err)
	}
}
