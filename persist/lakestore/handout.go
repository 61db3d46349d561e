package lakestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// The hand-out transaction of GetMeta sends its statements in pipelines (pgx batches):
// its BEGIN and the reads that decide the ready set in one round trip, the writes that
// record the hand-out and its COMMIT in another. PostgreSQL runs a pipeline's statements
// one after another, in order, each with its own read-committed snapshot, as when they
// are sent one at a time:
// the consumer's row lock (the pipeline's second statement) is held before any read
// after it runs, and a failed statement fails the rest (the transaction is aborted) and
// the batch returns the first error.

// handOutTx is the hand-out's read-committed transaction on a connection of the pool:
// its BEGIN is sent with the reads' pipeline (readHandOut, the transaction's first
// statements) and, when a batch is handed out, its COMMIT with the writes' pipeline
// (recordHandOut, the last); otherwise handOut commits or rolls it back. It answers the
// sampler's questions (querier) in between.
type handOutTx struct {
	conn *pgxpool.Conn
	done bool // committed
}

// Exec runs on the transaction's connection (querier).
func (t *handOutTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

// Query runs on the transaction's connection (querier).
func (t *handOutTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow runs on the transaction's connection (querier).
func (t *handOutTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

// SendBatch runs on the transaction's connection (querier).
func (t *handOutTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// queueBegin queues the transaction's BEGIN in b, an empty batch.
func (t *handOutTx) queueBegin(b *pgx.Batch) { b.Queue(`BEGIN`) }

// queueCommit queues the transaction's COMMIT last in b; a COMMIT that rolled back (the
// transaction had failed) is an error. The caller sets done once b succeeded.
func (t *handOutTx) queueCommit(b *pgx.Batch) {
	b.Queue(`COMMIT`).Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
}

// handOut runs fn in a hand-out transaction (handOutTx) and commits it unless fn did; fn's
// error rolls everything back (fn commits only as its last step: after a commit it
// returns nil). After a commit it wakes this process's waiters, as write does.
func (s *Store) handOut(ctx context.Context, fn func(tx *handOutTx) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.failure(ctx, fmt.Errorf("lakestore: begin: %w", err))
	}
	tx := &handOutTx{conn: conn}
	defer func() {
		if !tx.done && !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(context.Background(), `ROLLBACK`)
		}
		conn.Release() // a connection left in a transaction is closed, not pooled
	}()
	if err := fn(tx); err != nil {
		return s.failureOn(ctx, conn.Conn(), err)
	}
	if !tx.done {
		b := &pgx.Batch{}
		tx.queueCommit(b)
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return s.failure(ctx, fmt.Errorf("lakestore: commit: %w", err))
		}
		tx.done = true
	}
	s.committed()
	return nil
}

// handOutState is what the hand-out reads under the consumer's row lock.
type handOutState struct {
	queue    *queueState
	segs     []segment       // the partition's segments
	consumed record.IndexSet // consumed by the task
	// version is the queue's weight version, held FOR SHARE (read only with staleness).
	version int64
	tomb    record.IndexSet            // the queue's tombstones
	leased  record.IndexSet            // the task's active leases
	fields  map[string]record.IndexSet // each requested field's produced table spans
}

// readHandOut begins tx, takes the row lock of (rq.Partition, rq.Task) and reads the hand-out's
// state, in one round trip (the weight version's row is created, when staleness needs it
// and there is none, in one more).
func (s *Store) readHandOut(ctx context.Context, tx *handOutTx, rq *persist.MetaRequest) (*handOutState, error) {
	h := &handOutState{fields: map[string]record.IndexSet{}}
	b := &pgx.Batch{}
	tx.queueBegin(b)
	b.Queue(createConsumerSQL, s.name, rq.Partition, rq.Task)
	b.Queue(lockConsumerSQL, s.name, rq.Partition, rq.Task).QueryRow(func(row pgx.Row) error {
		var one int
		if err := row.Scan(&one); err != nil {
			return fmt.Errorf("lock consumer: %w", err)
		}
		return nil
	})
	b.Queue(queueRowSQL, s.name).QueryRow(func(row pgx.Row) error {
		var err error
		h.queue, err = s.scanQueue(row)
		return err
	})
	sql, args := s.segmentsQuery(rq.Partition, 0, 1<<62)
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		var err error
		h.segs, err = scanSegments(rows)
		return err
	})
	b.Queue(consumedSQL, s.name, rq.Partition, rq.Task).Query(func(rows pgx.Rows) error {
		var err error
		h.consumed, err = scanSpans(rows)
		return err
	})
	noVersion := false
	if rq.Staleness != nil {
		// Held FOR SHARE until commit: SetVersion waits for this hand-out.
		b.Queue(versionSQL+` FOR SHARE`, s.name).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&h.version)
			if errors.Is(err, pgx.ErrNoRows) {
				noVersion = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("read version: %w", err)
			}
			return nil
		})
	}
	b.Queue(tombstonesSQL, s.name).Query(func(rows pgx.Rows) error {
		var err error
		h.tomb, err = scanSpans(rows)
		return err
	})
	if len(rq.Fields) > 0 {
		b.Queue(`SELECT field, lo, hi FROM produced WHERE queue = $1 AND field = ANY($2::text[])`, s.name, rq.Fields).Query(func(rows pgx.Rows) error {
			spans := map[string][]record.Span{}
			for rows.Next() {
				var f string
				var sp record.Span
				if err := rows.Scan(&f, &sp.Lo, &sp.Hi); err != nil {
					return fmt.Errorf("read produced: %w", err)
				}
				spans[f] = append(spans[f], sp)
			}
			for f, sp := range spans {
				h.fields[f] = record.SpansOf(sp)
			}
			return rows.Err()
		})
	}
	b.Queue(activeLeasesSQL, s.name, rq.Partition, rq.Task).Query(func(rows pgx.Rows) error {
		var err error
		h.leased, err = scanSpans(rows)
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if noVersion {
		var err error
		if h.version, err = s.currentVersion(ctx, tx, true); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// ready returns the samples of the hand-out's partition ready for its task with every
// one of fields: not cleared, not consumed, produced, not leased.
func (h *handOutState) ready(fields []string) record.IndexSet {
	for _, f := range fields {
		if _, ok := h.queue.schema.Kind(f); !ok {
			return nil // a field no sample has yet: nothing is ready
		}
	}
	ready := spansOfSegments(h.segs).Minus(h.tomb).Minus(h.consumed)
	for _, f := range fields {
		ready = ready.Intersect(producedWith(h.segs, f, h.fields[f]))
	}
	return ready.Minus(h.leased)
}

// recordHandOut writes what a hand-out of chosen records: the task's consumption
// (unless deferred), its leases, and the change notification; and commits tx: one round
// trip. It is the transaction's last step.
func (s *Store) recordHandOut(ctx context.Context, tx *handOutTx, rq *persist.MetaRequest, chosen, consumed record.IndexSet, notify bool) error {
	b := &pgx.Batch{}
	if !rq.DeferConsume {
		if fresh := chosen.Minus(consumed); len(fresh) > 0 {
			sql, args := spansInsert("consumed", "queue, partition, task", fresh, s.name, rq.Partition, rq.Task)
			b.Queue(sql, args...)
		}
	}
	if rq.Lease > 0 && len(chosen) > 0 {
		s.queueLease(b, rq.Partition, rq.Task, chosen, rq.Lease)
	}
	if notify {
		b.Queue(announceSQL, notifyChannel, s.name)
	}
	tx.queueCommit(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record the hand-out: %w", err)
	}
	tx.done = true
	return nil
}
