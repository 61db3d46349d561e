package persist

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Row is one record as read back: its global index, its partition and its fields (only
// the fields that are produced; a field without a value is absent from the map). Values
// come back as bool, int64, float64, string, []byte, []int64, []float64, Tensor (or the
// wire codec's tensor type that was put) or the decoded codec value. Byte slices and
// tensor data may share memory with the read's Arrow buffers: do not modify them.
type Row struct {
	Index     int64
	Partition string
	Fields    Record
}

// Batch is the result of a columnar read: Record has an int64 column "_index" and one
// column per requested field, in the order of Fields, with rows in the order of
// Indexes. Columns are sliced from the fragments' decoded Arrow arrays without copying
// when a batch comes from one run of consecutive rows of one fragment.
type Batch struct {
	Indexes    []int64
	Partitions []string
	Fields     []Field
	Record     arrow.RecordBatch
}

// Len returns the number of rows.
func (b *Batch) Len() int { return len(b.Indexes) }

// Release releases the Arrow record. The batch must not be used afterwards.
func (b *Batch) Release() {
	if b.Record != nil {
		b.Record.Release()
		b.Record = nil
	}
}

// Rows converts the batch into rows. Errors: a codec value that no longer decodes.
func (b *Batch) Rows() ([]Row, error) {
	out := make([]Row, len(b.Indexes))
	for i := range out {
		out[i] = Row{Index: b.Indexes[i], Partition: b.Partitions[i], Fields: make(Record, len(b.Fields))}
	}
	for c, f := range b.Fields {
		arr := b.Record.Column(c + 1)
		for i := range out {
			if arr.IsNull(i) {
				continue
			}
			v, err := valueAt(arr, i, f.Kind)
			if err != nil {
				return nil, fmt.Errorf("decode field %q of index %d: %w", f.Name, b.Indexes[i], err)
			}
			out[i].Fields[f.Name] = v
		}
	}
	return out, nil
}

// Column returns the Arrow column of field name, or nil.
func (b *Batch) Column(name string) arrow.Array {
	for c, f := range b.Fields {
		if f.Name == name {
			return b.Record.Column(c + 1)
		}
	}
	return nil
}

// valueAt converts element i of arr (of kind k, not null) to its Go value.
func valueAt(arr arrow.Array, i int, k Kind) (any, error) {
	switch k {
	case KindBool:
		return arr.(*array.Boolean).Value(i), nil
	case KindInt64:
		return arr.(*array.Int64).Value(i), nil
	case KindFloat64:
		return arr.(*array.Float64).Value(i), nil
	case KindString:
		return arr.(*array.String).Value(i), nil
	case KindBytes:
		return arr.(*array.Binary).Value(i), nil
	case KindCodec:
		return wireDecode(arr.(*array.Binary).Value(i))
	case KindInt64List:
		l := arr.(*array.List)
		s, e := l.ValueOffsets(i)
		return append([]int64{}, l.ListValues().(*array.Int64).Int64Values()[s:e]...), nil
	case KindFloat64List:
		l := arr.(*array.List)
		s, e := l.ValueOffsets(i)
		return append([]float64{}, l.ListValues().(*array.Float64).Float64Values()[s:e]...), nil
	case KindTensor:
		return tensorAt(arr.(*array.Struct), i), nil
	case KindNDArray, KindWireTensor:
		return wireTensorValue(k, tensorAt(arr.(*array.Struct), i)), nil
	}
	return nil, fmt.Errorf("unknown kind %s", k)
}

func tensorAt(sa *array.Struct, i int) Tensor {
	var t Tensor
	t.DType = sa.Field(0).(*array.String).Value(i)
	l := sa.Field(1).(*array.List)
	s, e := l.ValueOffsets(i)
	for _, d := range l.ListValues().(*array.Int64).Int64Values()[s:e] {
		t.Shape = append(t.Shape, int(d))
	}
	t.Data = sa.Field(2).(*array.Binary).Value(i)
	return t
}

// cell says where the value of one (row, field) comes from: an Arrow array of a
// fragment (arr, row) or a decoded tail value (val), and its kind as stored there.
type cell struct {
	arr  arrow.Array
	row  int
	val  any
	kind Kind
	seq  int64 // -1 for a sample's own row; the tail sequence of a field update otherwise
	set  bool
}

// readColumns reads fields for the sorted, unique indexes idx, all of which must exist
// in s. It returns one array per field (of the field's current kind).
func (q *fileQueue) readColumns(ctx context.Context, s *snapshot, idx []int64, fields []Field) ([]arrow.Array, error) {
	if len(idx) == 0 {
		out := make([]arrow.Array, len(fields))
		for i, f := range fields {
			out[i] = array.MakeArrayOfNull(memory.DefaultAllocator, arrowType(f.Kind), 0)
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
		if e.kind != entryRows || e.lo > hi || e.lo+e.n <= lo {
			continue
		}
		for i := sort.Search(len(idx), func(i int) bool { return idx[i] >= e.lo }); i < len(idx) && idx[i] < e.lo+e.n; i++ {
			for _, fv := range e.recs[idx[i]-e.lo] {
				if p, ok := fpos[fv.name]; ok {
					cells[p][i] = cell{val: fv.val, kind: fv.kind, seq: -1, set: true}
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
					a, err := q.cache.column(ctx, h, rg, colSeq)
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
		if e.kind != entryFields || e.minI > hi || e.maxI < lo {
			continue
		}
		for j, x := range e.idx {
			i := find(x)
			if i < 0 {
				continue
			}
			for _, fv := range e.recs[j] {
				p, ok := fpos[fv.name]
				if !ok {
					continue
				}
				if c := &cells[p][i]; !c.set || e.seq > c.seq {
					*c = cell{val: fv.val, kind: fv.kind, seq: e.seq, set: true}
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
func buildColumn(k Kind, cells []cell) arrow.Array {
	if len(cells) == 0 {
		return array.MakeArrayOfNull(memory.DefaultAllocator, arrowType(k), 0)
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
	b := array.NewBuilder(memory.DefaultAllocator, arrowType(k))
	defer b.Release()
	b.Reserve(len(cells))
	for _, c := range cells {
		switch {
		case !c.set:
			b.AppendNull()
		case c.arr != nil:
			appendArrow(b, k, c.arr, c.row, c.kind)
		default:
			appendValue(b, k, convertValue(c.val, c.kind, k))
		}
	}
	return b.NewArray()
}

// appendArrow appends element row of arr (stored as kind from) to b (of kind to).
func appendArrow(b array.Builder, to Kind, arr arrow.Array, row int, from Kind) {
	if arr.IsNull(row) {
		b.AppendNull()
		return
	}
	switch to {
	case KindBool:
		b.(*array.BooleanBuilder).Append(arr.(*array.Boolean).Value(row))
	case KindInt64:
		b.(*array.Int64Builder).Append(arr.(*array.Int64).Value(row))
	case KindFloat64:
		if from == KindInt64 {
			b.(*array.Float64Builder).Append(float64(arr.(*array.Int64).Value(row)))
		} else {
			b.(*array.Float64Builder).Append(arr.(*array.Float64).Value(row))
		}
	case KindString:
		b.(*array.StringBuilder).Append(arr.(*array.String).Value(row))
	case KindBytes, KindCodec:
		b.(*array.BinaryBuilder).Append(arr.(*array.Binary).Value(row))
	case KindInt64List, KindFloat64List:
		v, _ := valueAt(arr, row, from)
		appendValue(b, to, convertValue(v, from, to))
	case KindTensor, KindNDArray, KindWireTensor:
		appendValue(b, to, tensorAt(arr.(*array.Struct), row))
	}
}

// maxReadRetries bounds how often a read retries after a fragment it planned to read
// was compacted away.
const maxReadRetries = 5

// readBatch reads fields of the sorted unique indexes chosen by pick inside one
// consistent snapshot. pick gets the snapshot head and returns the indexes.
func (q *fileQueue) readBatch(ctx context.Context, fields []string, pick func(tx queryer, s *snapshot) ([]int64, error)) (*Batch, error) {
	for attempt := 0; ; attempt++ {
		b, err := q.readBatchOnce(ctx, fields, pick)
		if errors.Is(err, errFragmentGone) {
			if attempt < maxReadRetries {
				continue // compacted away after our snapshot: take a new one
			}
			return nil, fmt.Errorf("%w: a fragment named by the manifest is missing: %v", ErrCorrupt, err)
		}
		if err == nil {
			q.metrics.gets.Add(int64(b.Len()))
		}
		return b, err
	}
}

func (q *fileQueue) readBatchOnce(ctx context.Context, names []string, pick func(tx queryer, s *snapshot) ([]int64, error)) (*Batch, error) {
	var b *Batch
	err := q.view(ctx, func(tx queryer) error {
		s, err := q.loadHead(ctx, tx)
		if err != nil {
			return err
		}
		fields, err := selectFields(s.schema, names)
		if err != nil {
			return err
		}
		idx, err := pick(tx, s)
		if err != nil {
			return err
		}
		b = &Batch{Indexes: idx, Fields: fields}
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
		b.Record = makeRecord(idx, fields, cols)
		return nil
	})
	return b, err
}

func makeRecord(idx []int64, fields []Field, cols []arrow.Array) arrow.RecordBatch {
	af := make([]arrow.Field, 0, len(fields)+1)
	af = append(af, arrow.Field{Name: colIndex, Type: arrow.PrimitiveTypes.Int64})
	for _, f := range fields {
		af = append(af, arrowField(f))
	}
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.AppendValues(idx, nil)
	ia := ib.NewArray()
	ib.Release()
	all := append([]arrow.Array{ia}, cols...)
	rec := array.NewRecordBatch(arrow.NewSchema(af, nil), all, int64(len(idx)))
	for _, a := range all {
		a.Release()
	}
	return rec
}

// selectFields resolves requested field names against the schema; nil means all.
func selectFields(s Schema, names []string) ([]Field, error) {
	if names == nil {
		return append([]Field(nil), s.Fields...), nil
	}
	out := make([]Field, 0, len(names))
	for _, n := range names {
		k, ok := s.Kind(n)
		if !ok {
			return nil, &InvalidError{Field: "fields", Value: n, Rule: "names of fields in the queue schema (" + s.String() + ")"}
		}
		out = append(out, Field{Name: n, Kind: k})
	}
	return out, nil
}

// reorder returns the batch with rows in the order of indexes (which must be a
// permutation of b.Indexes); b is released.
func (b *Batch) reorder(indexes []int64) *Batch {
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
	out := &Batch{Indexes: append([]int64(nil), indexes...), Partitions: parts, Fields: b.Fields,
		Record: makeRecord(indexes, b.Fields, cols)}
	b.Release()
	return out
}
