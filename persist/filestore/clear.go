package filestore

import (
	"context"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// ClearSamples drops samples of partition for good, as TransferQueue's clear_samples
// does: they get tombstones (they vanish from Get, Stream, GetMeta, GetData and Len;
// every other index stays as it was), KV keys naming them are forgotten, and the next
// compaction of the fragments holding them leaves their rows out, reclaiming the
// storage. Use it for abandoned samples, such as the incomplete groups of failed
// generations that a GRPO sampler would otherwise examine at every GetMeta. Indexes
// that are not in partition (or already cleared) are ignored, so ClearSamples is
// idempotent. Errors: *InvalidError, ErrClosed.
func (q *fileQueue) ClearSamples(ctx context.Context, partition string, indexes []int64) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	if len(indexes) == 0 {
		return nil
	}
	set := record.SetOf(indexes)
	return q.write(ctx, func(t *wtx) error {
		in, err := t.partitionSet(partition, set)
		if err != nil {
			return err
		}
		return t.clearSpans(partition, in)
	})
}

// ClearPartition drops every sample of partition, as ClearSamples would, and forgets
// the partition's consumption and sampler assignments of every task. Samples put into
// partition afterwards are new samples with new indexes. Clearing an empty or unknown
// partition does nothing. Errors: *InvalidError, ErrClosed.
func (q *fileQueue) ClearPartition(ctx context.Context, partition string) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	return q.write(ctx, func(t *wtx) error {
		if err := t.syncPuts(); err != nil {
			return err
		}
		segs, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM segments WHERE partition = ? ORDER BY lo`, partition)
		if err != nil {
			return err
		}
		tomb, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM tombstones ORDER BY lo`)
		if err != nil {
			return err
		}
		if err := t.clearSpans(partition, segs.Minus(tomb)); err != nil {
			return err
		}
		for _, table := range []string{"consumed", "assignments", "held", "leases"} {
			if _, err := t.exec(`DELETE FROM `+table+` WHERE partition = ?`, partition); err != nil {
				return fmt.Errorf("clear partition %s: %w", table, err)
			}
		}
		return nil
	})
}

// clearSpans tombstones s (samples of partition that exist and are not cleared) and
// forgets the KV keys naming them.
func (t *wtx) clearSpans(partition string, s record.IndexSet) error {
	if len(s) == 0 {
		return nil
	}
	for _, sp := range s {
		if _, err := t.exec(`DELETE FROM kv WHERE partition = ? AND idx >= ? AND idx < ?`, partition, sp.Lo, sp.Hi); err != nil {
			return fmt.Errorf("forget cleared keys: %w", err)
		}
	}
	if err := t.addTombstones(s); err != nil {
		return err
	}
	t.changed(partition) // wake waiters: what they wait for may now be decided
	return nil
}
