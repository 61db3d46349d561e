package record

import (
	"fmt"
	"slices"

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
			v, err := ValueAt(arr, i, f.Kind)
			if err != nil {
				return nil, fmt.Errorf("decode field %q of index %d: %w", f.Name, b.Indexes[i], err)
			}
			out[i].Fields[f.Name] = v
		}
	}
	return out, nil
}

// ValuesAt returns the values of field for indexes, in their order: nil where the batch's
// row has no value or where the batch has no row of an index. Numbers (int64, float64) of
// a batch of that one field come straight from the column, without rows. Errors: as Rows.
func (b *Batch) ValuesAt(field string, indexes []int64) ([]any, error) {
	out := make([]any, len(indexes))
	if col := b.Column(field); col != nil && len(b.Fields) == 1 && (b.Fields[0].Kind == KindInt64 || b.Fields[0].Kind == KindFloat64) {
		pos := make(map[int64]int, len(b.Indexes))
		for i, x := range b.Indexes {
			pos[x] = i
		}
		for i, x := range indexes {
			if p, ok := pos[x]; ok && !col.IsNull(p) {
				v, err := ValueAt(col, p, b.Fields[0].Kind)
				if err != nil {
					return nil, err
				}
				out[i] = v
			}
		}
		return out, nil
	}
	rows, err := b.Rows()
	if err != nil {
		return nil, err
	}
	byIndex := make(map[int64]any, len(rows))
	for _, r := range rows {
		byIndex[r.Index] = r.Fields[field]
	}
	for i, x := range indexes {
		out[i] = byIndex[x]
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

// ValueAt converts element i of arr (of kind k, not null) to its Go value.
func ValueAt(arr arrow.Array, i int, k Kind) (any, error) {
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
		return WireDecode(arr.(*array.Binary).Value(i))
	case KindInt64List:
		l := arr.(*array.List)
		s, e := l.ValueOffsets(i)
		return append([]int64{}, l.ListValues().(*array.Int64).Int64Values()[s:e]...), nil
	case KindFloat64List:
		l := arr.(*array.List)
		s, e := l.ValueOffsets(i)
		return append([]float64{}, l.ListValues().(*array.Float64).Float64Values()[s:e]...), nil
	case KindTensor:
		return TensorAt(arr.(*array.Struct), i), nil
	case KindNDArray, KindWireTensor:
		return WireTensorValue(k, TensorAt(arr.(*array.Struct), i)), nil
	}
	return nil, fmt.Errorf("unknown kind %s", k)
}

func TensorAt(sa *array.Struct, i int) Tensor {
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

// MakeRecord assembles the Arrow record of a batch: the _index column, then one column
// per field (cols, in the order of fields).
func MakeRecord(idx []int64, fields []Field, cols []arrow.Array) arrow.RecordBatch {
	af := make([]arrow.Field, 0, len(fields)+1)
	af = append(af, arrow.Field{Name: ColIndex, Type: arrow.PrimitiveTypes.Int64})
	for _, f := range fields {
		af = append(af, ArrowField(f))
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

// SelectFields resolves requested field names against the schema; nil means all.
func SelectFields(s Schema, names []string) ([]Field, error) {
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

// EmptyBatch returns the Batch of indexes (with their partitions) whose fields have no
// values: a column of each field's Arrow type and no rows (a read that found nothing).
func EmptyBatch(fields []Field, indexes []int64, partitions []string) *Batch {
	cols := make([]arrow.Array, len(fields))
	for p, f := range fields {
		b := array.NewBuilder(memory.DefaultAllocator, ArrowType(f.Kind))
		cols[p] = b.NewArray()
		b.Release()
	}
	return &Batch{Indexes: indexes, Partitions: partitions, Fields: fields, Record: MakeRecord(indexes, fields, cols)}
}

// ConcatBatches joins parts, batches of the same fields (as the parts of one read split
// into several requests are), into one batch with their rows in order. The parts stay
// the caller's to release; a single part with rows is shared (its record retained), not
// copied. Parts without rows are skipped (an empty read may not know the fields); when
// every part is empty the first is shared. Errors: parts whose fields differ (the
// queue's schema changed between the requests).
func ConcatBatches(parts []*Batch) (*Batch, error) {
	if len(parts) == 0 {
		return nil, &InvalidError{Field: "parts", Value: 0, Rule: "at least one batch"}
	}
	var full []*Batch
	for _, b := range parts {
		if b.Len() > 0 {
			full = append(full, b)
		}
	}
	if len(full) == 0 {
		full = parts[:1]
	}
	first := full[0]
	if len(full) == 1 {
		out := *first
		if out.Record != nil {
			out.Record.Retain()
		}
		return &out, nil
	}
	out := &Batch{Fields: first.Fields}
	for _, b := range full {
		if !slices.Equal(b.Fields, first.Fields) {
			return nil, fmt.Errorf("record: the parts of one read have different fields (%v, then %v): the queue's schema changed between them; read again", first.Fields, b.Fields)
		}
		out.Indexes = append(out.Indexes, b.Indexes...)
		out.Partitions = append(out.Partitions, b.Partitions...)
	}
	cols := make([]arrow.Array, first.Record.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	chunks := make([]arrow.Array, len(full))
	for c := range cols {
		for i, b := range full {
			chunks[i] = b.Record.Column(c)
		}
		col, err := array.Concatenate(chunks, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("record: join the parts of one read: %w", err)
		}
		cols[c] = col
	}
	out.Record = array.NewRecordBatch(first.Record.Schema(), cols, int64(len(out.Indexes)))
	return out, nil
}
