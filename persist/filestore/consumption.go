package filestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// Consumption is tracked per (partition, task) in meta.db as merged spans of global
// indexes (table consumed), so it survives restarts and is shared by every process:
// a sample handed to a task by GetMeta in one process is never handed to the same task
// by another. Tasks are independent: each task consumes every sample once.

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// markConsumed merges idx into the consumed spans of (partition, task).
func (t *wtx) markConsumed(partition, task string, s record.IndexSet) error {
	return mergeSpans(t, s, `SELECT lo, hi FROM consumed WHERE partition = ? AND task = ? AND hi >= ? AND lo <= ?`,
		`DELETE FROM consumed WHERE partition = ? AND task = ? AND lo = ?`,
		`INSERT INTO consumed(partition, task, lo, hi) VALUES (?, ?, ?, ?)`, partition, task)
}

// MarkConsumed records that task has consumed indexes of partition, for readers that
// set MetaRequest.DeferConsume and mark only after processing. Marking twice is
// harmless. Errors: *InvalidError, *NotFoundError for indexes not in partition,
// ErrClosed.
func (q *fileQueue) MarkConsumed(ctx context.Context, task, partition string, indexes []int64) error {
	if err := persist.CheckTaskPartition(task, partition); err != nil {
		return err
	}
	if len(indexes) == 0 {
		return nil
	}
	set := record.SetOf(indexes)
	return q.write(ctx, func(t *wtx) error {
		if err := t.requireInPartition(partition, set); err != nil {
			return err
		}
		t.rows = true // wake producers blocked by back-pressure
		return t.markConsumed(partition, task, set)
	})
}

// ResetConsumption forgets what task consumed in partition, and the task's sampler
// assignments there, so a new run reads every sample again. Errors: *InvalidError,
// ErrClosed.
func (q *fileQueue) ResetConsumption(ctx context.Context, task, partition string) error {
	if err := persist.CheckTaskPartition(task, partition); err != nil {
		return err
	}
	return q.write(ctx, func(t *wtx) error {
		if _, err := t.exec(`DELETE FROM consumed WHERE partition = ? AND task = ?`, partition, task); err != nil {
			return fmt.Errorf("reset consumption: %w", err)
		}
		if _, err := t.exec(`DELETE FROM assignments WHERE partition = ? AND task = ?`, partition, task); err != nil {
			return fmt.Errorf("reset assignments: %w", err)
		}
		if _, err := t.exec(`DELETE FROM held WHERE partition = ? AND task = ?`, partition, task); err != nil {
			return fmt.Errorf("reset assignments: %w", err)
		}
		if _, err := t.exec(`DELETE FROM leases WHERE partition = ? AND task = ?`, partition, task); err != nil {
			return fmt.Errorf("reset leases: %w", err)
		}
		t.changed(partition) // wake waiting readers: samples are ready again
		return nil
	})
}

// Consumed returns how many samples of partition task has consumed.
func (q *fileQueue) Consumed(ctx context.Context, task, partition string) (int64, error) {
	if err := persist.CheckTaskPartition(task, partition); err != nil {
		return 0, err
	}
	if err := q.calls.Enter(); err != nil {
		return 0, err
	}
	defer q.calls.Leave()
	var n sql.NullInt64
	err := q.rdb.QueryRowContext(ctx, `SELECT SUM(hi - lo) FROM consumed WHERE partition = ? AND task = ?`, partition, task).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count consumed: %w", err)
	}
	return n.Int64, nil
}
