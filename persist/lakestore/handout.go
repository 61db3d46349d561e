package lakestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// The hand-out transaction of GetMeta sends its statements in pipelines (pgx batches):
// the reads that decide the ready set in one round trip, the writes that record the
// hand-out in another. PostgreSQL runs a pipeline's statements one after another, in
// order, each with its own read-committed snapshot, as when they are sent one at a time:
// the consumer's row lock (the pipeline's second statement) is held before any read
// after it runs, and a failed statement fails the rest (the transaction is aborted) and
// the batch returns the first error.

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

// readHandOut takes the row lock of (rq.Partition, rq.Task) and reads the hand-out's
// state, in one round trip (the weight version's row is created, when staleness needs it
// and there is none, in one more).
func (s *Store) readHandOut(ctx context.Context, tx pgx.Tx, rq *persist.MetaRequest) (*handOutState, error) {
	h := &handOutState{fields: map[string]record.IndexSet{}}
	b := &pgx.Batch{}
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

// recordHandOut writes, in one round trip, what a hand-out of chosen records: the
// task's consumption (unless deferred), its leases, and the change notification.
func (s *Store) recordHandOut(ctx context.Context, tx pgx.Tx, rq *persist.MetaRequest, chosen, consumed record.IndexSet, notify bool) error {
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
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("record the hand-out: %w", err)
	}
	return nil
}
