package filestore

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
)

// cell says where the value of one (row, field) comes from: an Arrow array of a
// fragment (arr, row) or a decoded tail value (val), and its kind as stored there.
type cell struct {
	arr  arrow.Array
	row  int
	val  any
	kind persist.Kind
	seq  int64 // -1 for a sample's own row; the tail sequence of a field update otherwise
	set  bool
}

// readColumns reads fields for the sorted, unique indexes idx, all of which must exist
// in s. It returns one array per field (of the field's current kind).
func (q *fileQueue) readColumns(ctx context.Context, s *snapshot, idx []int64, fields []persist.Field) ([]arrow.Array, error) {
	if len(idx) == 0 {
		out := make([]arrow.Array, len(fields))
		for i, f := range fields {
			out[i] = array.MakeArrayOfNull(memory.DefaultAllocator, record.ArrowType(f.Kind), 0)
		}
		return out, nil
	}
	fpos := make(map[string]int, len(fields))
	for i, f := range fields {
		fpos[f.Name] = i
	}
	cells := make([][]cell, len(fields))
	for i := range cells {
		cells[i] = make([]cell, len(idx))
	}
	lo, hi := idx[0], idx[len(idx)-1]
	find := func(x int64) int {
		i := sort.Search(len(idx), func(i int) bool { return idx[i] >= x })
		if i < len(idx) && idx[i] == x {
			return i
		}
		return -1
	}
	// 1. Samples' own rows, from the tail.
	for _, e := range s.tail {
		if e.kind != tail.EntryRows || e.lo > hi || e.lo+e.n <= lo {
			continue
		}
		for i := sort.Search(len(idx), func(i int) bool { return idx[i] >= e.lo }); i < len(idx) && idx[i] < e.lo+e.n; i++ {
			for _, fv := range e.recs[idx[i]-e.lo] {
				if p, ok := fpos[fv.Name]; ok {
					cells[p][i] = cell{val: fv.Val, kind: fv.Kind, seq: -1, set: true}
				}
			}
		}
	}
	// 2. Samples' own rows, from row fragments; 3. field updates from field fragments.
	for _, fm := range s.frags {
		if fm.maxI < lo || fm.minI > hi {
			continue
		}
		var want []int
		for _, f := range fields {
			if fm.fields[f.Name] {
				want = append(want, fpos[f.Name])
			}
		}
		if len(want) == 0 {
			continue
		}
		h, err := q.cache.handle(fm.file)
		if err != nil {
			return nil, err
		}
		start := sort.Search(len(idx), func(i int) bool { return idx[i] >= fm.minI })
		end := sort.Search(len(idx), func(i int) bool { return idx[i] > fm.maxI })
		sub, off := idx[start:end], start
		curRG := -1
		cols := make([]arrow.Array, len(fields))
		var seqs []int64
		err = q.cache.locate(ctx, h, sub, func(i, rg, row int) error {
			if rg != curRG {
				curRG = rg
				for _, p := range want {
					a, err := q.cache.column(ctx, h, rg, fields[p].Name)
					if err != nil {
						return err
					}
					cols[p] = a
				}
				if fm.kind == fragFields {
					a, err := q.cache.column(ctx, h, rg, record.ColSeq)
					if err != nil {
						return err
					}
					seqs = a.(*array.Int64).Int64Values()
				}
			}
			i += off
			for _, p := range want {
				a := cols[p]
				if a == nil {
					continue
				}
				if fm.kind == fragRows {
					if !a.IsNull(row) {
						cells[p][i] = cell{arr: a, row: row, kind: h.kinds[fields[p].Name], seq: -1, set: true}
					}
					continue
				}
				if a.IsNull(row) {
					continue
				}
				if c := &cells[p][i]; !c.set || seqs[row] > c.seq {
					*c = cell{arr: a, row: row, kind: h.kinds[fields[p].Name], seq: seqs[row], set: true}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// 4. Field updates still in the tail.
	for _, e := range s.tail {
		if e.kind != tail.EntryFields || e.minI > hi || e.maxI < lo {
			continue
		}
		for j, x := range e.idx {
			i := find(x)
			if i < 0 {
				continue
			}
			for _, fv := range e.recs[j] {
				p, ok := fpos[fv.Name]
				if !ok {
					continue
				}
				if c := &cells[p][i]; !c.set || e.seq > c.seq {
					*c = cell{val: fv.Val, kind: fv.Kind, seq: e.seq, set: true}
				}
			}
		}
	}
	out := make([]arrow.Array, len(fields))
	for p, f := range fields {
		out[p] = buildColumn(f.Kind, cells[p])
	}
	return out, nil
}

// buildColumn makes the array of one field from its cells, slicing a fragment's array
// without copying when every cell is a consecutive row of the same array and kind.
func buildColumn(k persist.Kind, cells []cell) arrow.Array {
	if len(cells) == 0 {
		return array.MakeArrayOfNull(memory.DefaultAllocator, record.ArrowType(k), 0)
	}
	if first := cells[0]; first.set && first.arr != nil && first.kind == k {
		ok := true
		for i, c := range cells {
			if !c.set || c.arr != first.arr || c.row != first.row+i || c.kind != k {
				ok = false
				break
			}
		}
		if ok {
			return array.NewSlice(first.arr, int64(first.row), int64(first.row+len(cells)))
		}
	}
	b := array.NewBuilder(memory.DefaultAllocator, record.ArrowType(k))
	defer b.Release()
	b.Reserve(len(cells))
	for _, c := range cells {
		switch {
		case !c.set:
			b.AppendNull()
		case c.arr != nil:
			record.AppendArrow(b, k, c.arr, c.row, c.kind)
		default:
			record.AppendValue(b, k, record.ConvertValue(c.val, c.kind, k))
		}
	}
	return b.NewArray()
}

// maxReadRetries bounds how often a read retries after a fragment it planned to read
// was compacted away.
const maxReadRetries = 5

// readBatch reads fields of the sorted unique indexes chosen by pick inside one
// consistent snapshot. pick gets the snapshot head and returns the indexes.
func (q *fileQueue) readBatch(ctx context.Context, fields []string, pick func(tx queryer, s *snapshot) ([]int64, error)) (*persist.Batch, error) {
	return q.readBatchCounted(ctx, fields, pick, true)
}

// readBatchCounted is readBatch, counting the rows in Stats.Gets only when count is set
// (a read ahead counts when it is handed out).
func (q *fileQueue) readBatchCounted(ctx context.Context, fields []string, pick func(tx queryer, s *snapshot) ([]int64, error), count bool) (*persist.Batch, error) {
	for attempt := 0; ; attempt++ {
		b, err := q.readBatchOnce(ctx, fields, pick)
		if errors.Is(err, errFragmentGone) {
			if attempt < maxReadRetries {
				continue // compacted away after our snapshot: take a new one
			}
			return nil, fmt.Errorf("%w: a fragment named by the manifest is missing: %v", persist.ErrCorrupt, err)
		}
		if err == nil && count {
			q.metrics.gets.Add(int64(b.Len()))
		}
		return b, err
	}
}

func (q *fileQueue) readBatchOnce(ctx context.Context, names []string, pick func(tx queryer, s *snapshot) ([]int64, error)) (*persist.Batch, error) {
	var b *persist.Batch
	err := q.view(ctx, func(tx queryer) error {
		s, err := q.loadHead(ctx, tx)
		if err != nil {
			return err
		}
		fields, err := record.SelectFields(s.schema, names)
		if err != nil {
			return err
		}
		idx, err := pick(tx, s)
		if err != nil {
			return err
		}
		b = &persist.Batch{Indexes: idx, Fields: fields}
		if len(idx) > 0 {
			if err := q.loadRange(ctx, tx, s, idx[0], idx[len(idx)-1]); err != nil {
				return err
			}
		}
		if b.Partitions, err = partitionsOf(ctx, tx, idx); err != nil {
			return err
		}
		cols, err := q.readColumns(ctx, s, idx, fields)
		if err != nil {
			return err
		}
		b.Record = record.MakeRecord(idx, fields, cols)
		return nil
	})
	return b, err
}

// reorderBatch returns the batch with rows in the order of indexes (which must be a
// permutation of b.Indexes); b is released.
func reorderBatch(b *persist.Batch, indexes []int64) *persist.Batch {
	pos := make(map[int64]int, len(b.Indexes))
	for i, x := range b.Indexes {
		pos[x] = i
	}
	cols := make([]arrow.Array, len(b.Fields))
	parts := make([]string, len(indexes))
	for i, x := range indexes {
		parts[i] = b.Partitions[pos[x]]
	}
	for c, f := range b.Fields {
		src := b.Record.Column(c + 1)
		cells := make([]cell, len(indexes))
		for i, x := range indexes {
			p := pos[x]
			if !src.IsNull(p) {
				cells[i] = cell{arr: src, row: p, kind: f.Kind, set: true}
			}
		}
		cols[c] = buildColumn(f.Kind, cells)
	}
	out := &persist.Batch{Indexes: append([]int64(nil), indexes...), Partitions: parts, Fields: b.Fields,
		Record: record.MakeRecord(indexes, b.Fields, cols)}
	b.Release()
	return out
}
