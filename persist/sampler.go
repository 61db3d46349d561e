package persist

import (
	"context"
	"fmt"
)

// Sampler chooses which ready samples a GetMeta hands out. Implement it to add a
// strategy; Sequential, RankAware and GRPOGroupN are built in. Sample runs inside the
// GetMeta write transaction (so concurrent readers in any process never hand out the
// same sample twice to one task); it must be quick and must not call the Queue.
type Sampler interface {
	// Sample returns up to in.BatchSize global indexes chosen from in.Ready (or a
	// stored assignment, see SampleInput.Assignment). Returning fewer is allowed (a
	// partial batch); in wait mode GetMeta then waits for more samples.
	Sample(ctx context.Context, in *SampleInput) ([]int64, error)
}

// WindowSampler is an optional interface: a Sampler that needs to see more than the
// default number of ready samples (4×BatchSize, at least 1,024) says how many.
type WindowSampler interface {
	Sampler
	Window(batchSize int) int
}

// SampleInput is what a Sampler sees.
type SampleInput struct {
	// Ready lists, ascending, samples of Partition whose requested fields are all
	// produced, that Task has not consumed and that are not cleared — the first
	// Window of them.
	Ready []int64
	// MoreReady reports that more ready samples exist beyond Ready.
	MoreReady bool
	// BatchSize is the requested batch size.
	BatchSize int
	// Task and Partition are the consumption key.
	Task, Partition string
	// DPRank and BatchIndex identify the data-parallel group and step (MetaRequest).
	DPRank, BatchIndex int

	t         *wtx
	q         *fileQueue
	partSpans idxset
	ready     idxset       // every ready sample; Ready is its first window
	src       SampleSource // set by NewSampleInput: another store answers
}

// ReadyAfter returns, ascending, up to n ready samples with an index greater than
// after (-1 for the first), and whether more ready samples follow them. Samplers that
// may need more than the window Ready (GRPOGroupN, when incomplete groups fill it) page
// through every ready sample with it.
func (in *SampleInput) ReadyAfter(after int64, n int) ([]int64, bool) {
	if in.src != nil {
		return in.src.ReadyAfter(after, n)
	}
	all := in.ready
	if all == nil {
		all = setOf(in.Ready)
	}
	rest := all.from(after + 1)
	page := rest.first(n)
	return page, int64(len(page)) < rest.count()
}

// Values returns the values of field for indexes (nil where a sample has no value),
// for samplers that group or balance by content.
func (in *SampleInput) Values(ctx context.Context, field string, indexes []int64) ([]any, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	if in.src != nil {
		return in.src.Values(ctx, field, indexes)
	}
	sorted := sortedUnique(append([]int64(nil), indexes...))
	b, err := in.q.readBatch(ctx, []string{field}, func(tx queryer, s *snapshot) ([]int64, error) {
		return sorted, nil
	})
	if err != nil {
		return nil, err
	}
	defer b.Release()
	rows, err := b.Rows()
	if err != nil {
		return nil, err
	}
	byIdx := make(map[int64]any, len(rows))
	for _, r := range rows {
		byIdx[r.Index] = r.Fields[field]
	}
	out := make([]any, len(indexes))
	for i, x := range indexes {
		out[i] = byIdx[x]
	}
	return out, nil
}

// Ordinals returns, for each of indexes, its position among all samples of the
// partition (0 for the partition's first sample), counting cleared ones.
func (in *SampleInput) Ordinals(indexes []int64) []int64 {
	if in.src != nil {
		return in.src.Ordinals(indexes)
	}
	out := make([]int64, len(indexes))
	for i, x := range indexes {
		var before int64
		for _, sp := range in.partSpans {
			if sp.lo > x {
				break
			}
			before += min(sp.hi, x) - sp.lo
		}
		out[i] = before
	}
	return out
}

// Assignment returns the indexes stored for (Task, Partition, DPRank, BatchIndex) by
// an earlier GetMeta of any process, and whether there is one.
func (in *SampleInput) Assignment() ([]int64, bool, error) {
	if in.src != nil {
		return in.src.Assignment()
	}
	var b []byte
	err := in.t.queryRow(`SELECT indexes FROM assignments WHERE partition = ? AND task = ? AND dp_rank = ? AND batch_index = ?`,
		in.Partition, in.Task, in.DPRank, in.BatchIndex).Scan(&b)
	if err != nil {
		if isNoRows(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read assignment: %w", err)
	}
	idx, err := decodeIndexes(b)
	if err != nil {
		return nil, false, fmt.Errorf("%w: assignment: %v", ErrCorrupt, err)
	}
	return idx, true, nil
}

// Assign stores indexes as the assignment of (Task, Partition, DPRank, BatchIndex), in
// the same transaction that hands them out, and marks them held (see ReadyUnheld).
// ResetConsumption and ClearPartition clear assignments.
func (in *SampleInput) Assign(indexes []int64) error {
	if in.src != nil {
		return in.src.Assign(indexes)
	}
	if _, err := in.t.exec(`INSERT OR REPLACE INTO assignments(partition, task, dp_rank, batch_index, indexes) VALUES (?, ?, ?, ?, ?)`,
		in.Partition, in.Task, in.DPRank, in.BatchIndex, encodeIndexes(indexes)); err != nil {
		return fmt.Errorf("store assignment: %w", err)
	}
	return in.t.addHeld(in.Partition, in.Task, setOf(indexes))
}

// ReadyUnheld returns, ascending, the first n ready samples that no stored assignment
// of (Task, Partition) holds: with DeferConsume, samples handed to one data-parallel
// group stay ready until consumed, and must not be offered to another group.
func (in *SampleInput) ReadyUnheld(n int) ([]int64, error) {
	if in.src != nil {
		return in.src.ReadyUnheld(n)
	}
	held, err := loadSpans(in.t.ctx, in.t, `SELECT lo, hi FROM held WHERE partition = ? AND task = ? ORDER BY lo`, in.Partition, in.Task)
	if err != nil {
		return nil, err
	}
	all := in.ready
	if all == nil {
		all = setOf(in.Ready)
	}
	return all.minus(held).first(n), nil
}

// addHeld merges s into the held spans of (partition, task).
func (t *wtx) addHeld(partition, task string, s idxset) error {
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
			idx, err := decodeIndexes(b)
			if err != nil {
				rows.Close()
				return fmt.Errorf("%w: assignment: %v", ErrCorrupt, err)
			}
			byKey[k] = append(byKey[k], idx...)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read assignments: %w", err)
		}
		for k, idx := range byKey {
			if err := t.addHeld(k.partition, k.task, setOf(idx)); err != nil {
				return err
			}
		}
		return metaSet(t.ctx, t, "held_backfilled", 1)
	})
}

// Sequential hands out the lowest ready indexes first.
type Sequential struct{}

// Sample returns the first BatchSize ready indexes.
func (Sequential) Sample(_ context.Context, in *SampleInput) ([]int64, error) {
	n := min(in.BatchSize, len(in.Ready))
	return append([]int64(nil), in.Ready[:n]...), nil
}

var _ Sampler = Sequential{}
