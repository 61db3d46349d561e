package filestore

import (
	"context"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
)

var _ persist.SampleSource = (*fileSampleSource)(nil)

// fileSampleSource is the file store's SampleSource: the state of one GetMeta, read
// from one snapshot of meta.db (a read transaction, or the write transaction when
// GetMeta falls back to choosing inside it) before the sampler runs. An assignment
// the sampler makes is recorded here and written by the GetMeta's write transaction
// (recordMeta), which first checks that the snapshot still holds for the chosen
// samples.
type fileSampleSource struct {
	Task, Partition    string
	DPRank, BatchIndex int
	q                  *fileQueue
	schema             persist.Schema // the snapshot's schema: Values of a field not in it is nil
	partSpans          record.IndexSet
	ready              record.IndexSet // every ready sample; Ready is its first window
	stored             []int64         // the group's stored assignment, if storedOK
	storedOK           bool
	held               record.IndexSet // the holds of (Partition, Task)
	assigned           []int64         // what the sampler assigned (nil: nothing)
	version            int64           // the queue's current weight version
	versionsStable     bool            // no PutFields ever changed a weight version: the cache holds
	dropped            []int64         // stale samples to mark consumed (StaleDrop)
	droppedGroups      [][]int64       // groups to mark consumed (GroupDropper)
	unused             []int64         // over-sampled samples to mark consumed (GroupDropper)
}

var _ persist.GroupDropper = (*fileSampleSource)(nil)

// DropGroups implements GroupDropper.
func (in *fileSampleSource) DropGroups(groups [][]int64) {
	in.droppedGroups = append(in.droppedGroups, groups...)
}

// DropUnused implements GroupDropper.
func (in *fileSampleSource) DropUnused(indexes []int64) { in.unused = append(in.unused, indexes...) }

// drops reports whether the sampler left anything to drop.
func (in *fileSampleSource) drops() bool {
	return in.dropsUnserved() || len(in.unused) > 0
}

// dropsUnserved reports whether the sampler left drops that hold without a hand-out
// (written even when a waiting GetMeta hands nothing out): stale samples and dropped
// groups — not the unused samples of an over-sampled group, which go with its hand-out
// (dropped alone, they would leave the group short of N ready samples for ever).
func (in *fileSampleSource) dropsUnserved() bool {
	return len(in.dropped) > 0 || len(in.droppedGroups) > 0
}

// ReadyAfter returns, ascending, up to n ready samples with an index greater than
// after (-1 for the first), and whether more ready samples follow them. Samplers that
// may need more than the window Ready (GRPOGroupN, when incomplete groups fill it) page
// through every ready sample with it.
func (in *fileSampleSource) ReadyAfter(after int64, n int) ([]int64, bool) {
	rest := in.ready.From(after + 1)
	page := rest.First(n)
	return page, int64(len(page)) < rest.Count()
}

// Values returns the values of field for indexes (nil where a sample has no value),
// for samplers that group or balance by content. A field that is not in the
// snapshot's schema has no value in any sample (a staleness bound before any record
// carries a weight version, a sampler's length or group field no record has yet), as
// in every store; it was a read's *InvalidError naming fields, which refused the whole
// GetMeta.
func (in *fileSampleSource) Values(ctx context.Context, field string, indexes []int64) ([]any, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	if _, ok := in.schema.Kind(field); !ok {
		return make([]any, len(indexes)), nil
	}
	if field == persist.WeightVersionField && in.versionsStable {
		return in.versionValues(ctx, indexes)
	}
	return in.readValues(ctx, field, indexes)
}

// readValues reads the values of field for indexes from the store.
func (in *fileSampleSource) readValues(ctx context.Context, field string, indexes []int64) ([]any, error) {
	sorted := record.SortedUnique(append([]int64(nil), indexes...))
	b, err := in.q.readBatch(ctx, []string{field}, func(tx queryer, s *snapshot) ([]int64, error) {
		return sorted, nil
	})
	if err != nil {
		return nil, err
	}
	defer b.Release()
	// Numbers straight from the column (the weight versions a staleness bound judges,
	// rewards): no row maps. Other kinds through Rows, which decodes codec values.
	return b.ValuesAt(field, indexes)
}

// Ordinals returns, for each of indexes, its position among all samples of the
// partition (0 for the partition's first sample), counting cleared ones.
func (in *fileSampleSource) Ordinals(indexes []int64) []int64 {
	return in.partSpans.Below(indexes)
}

// Assignment returns the indexes stored for (Task, Partition, DPRank, BatchIndex) by
// an earlier GetMeta of any process, and whether there is one.
func (in *fileSampleSource) Assignment() ([]int64, bool, error) {
	return append([]int64(nil), in.stored...), in.storedOK, nil
}

// assignment reads the stored assignment of (partition, task, dpRank, batchIndex).
func (t *wtx) assignment(partition, task string, dpRank, batchIndex int) ([]int64, bool, error) {
	var b []byte
	err := t.queryRow(`SELECT indexes FROM assignments WHERE partition = ? AND task = ? AND dp_rank = ? AND batch_index = ?`,
		partition, task, dpRank, batchIndex).Scan(&b)
	if err != nil {
		if isNoRows(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read assignment: %w", err)
	}
	idx, err := tail.DecodeIndexes(b)
	if err != nil {
		return nil, false, fmt.Errorf("%w: assignment: %v", persist.ErrCorrupt, err)
	}
	return idx, true, nil
}

// Assign stores indexes as the assignment of (Task, Partition, DPRank, BatchIndex), in
// the same transaction that hands them out, and marks them held (see ReadyUnheld).
// ResetConsumption and ClearPartition clear assignments.
func (in *fileSampleSource) Assign(indexes []int64) error {
	in.assigned = append([]int64{}, indexes...)
	return nil
}

// ReadyUnheld returns, ascending, the first n ready samples that no stored assignment
// of (Task, Partition) holds: with DeferConsume, samples handed to one data-parallel
// group stay ready until consumed, and must not be offered to another group.
func (in *fileSampleSource) ReadyUnheld(n int) ([]int64, error) {
	return in.ready.Minus(in.held).First(n), nil
}

// addHeld merges s into the held spans of (partition, task).
func (t *wtx) addHeld(partition, task string, s record.IndexSet) error {
	return mergeSpans(t, s, `SELECT lo, hi FROM held WHERE partition = ? AND task = ? AND hi >= ? AND lo <= ?`,
		`DELETE FROM held WHERE partition = ? AND task = ? AND lo = ?`,
		`INSERT INTO held(partition, task, lo, hi) VALUES (?, ?, ?, ?)`, partition, task)
}

// backfillHeld fills the held spans from the stored assignments once, for a queue
// created before they existed.
func (q *fileQueue) backfillHeld(ctx context.Context) error {
	return q.w.do(ctx, func(t *wtx) error {
		done, err := metaGet(t.ctx, t, "held_backfilled")
		if err != nil || done != 0 {
			return err
		}
		rows, err := t.query(`SELECT partition, task, indexes FROM assignments`)
		if err != nil {
			return fmt.Errorf("read assignments: %w", err)
		}
		type key struct{ partition, task string }
		byKey := map[key][]int64{}
		for rows.Next() {
			var k key
			var b []byte
			if err := rows.Scan(&k.partition, &k.task, &b); err != nil {
				rows.Close()
				return fmt.Errorf("read assignments: %w", err)
			}
			idx, err := tail.DecodeIndexes(b)
			if err != nil {
				rows.Close()
				return fmt.Errorf("%w: assignment: %v", persist.ErrCorrupt, err)
			}
			byKey[k] = append(byKey[k], idx...)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read assignments: %w", err)
		}
		for k, idx := range byKey {
			if err := t.addHeld(k.partition, k.task, record.SetOf(idx)); err != nil {
				return err
			}
		}
		return metaSet(t.ctx, t, "held_backfilled", 1)
	})
}
