package filestore

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
)

// This file exports the pieces of the file store that other stores (persist/lakestore)
// share with it, so that every store normalizes, encodes, checks and writes records the
// same way: record preparation and the tail encoding, schema evolution with the
// big-integer rule, Parquet fragments (written to any io.Writer, read from any
// io.ReaderAt), Arrow batches, shard ownership, request validation and SampleInput
// for samplers run by another store.

// StoredRecord is one record as stores keep it: its fields normalized (values of one
// kind each, sorted by name). The zero value has no fields.
type StoredRecord struct{ r record.NormRecord }

// FieldNames returns the names of the record's fields, sorted.
func (s StoredRecord) FieldNames() []string {
	out := make([]string, len(s.r))
	for i, fv := range s.r {
		out[i] = fv.Name
	}
	return out
}

// Value returns the normalized value of field name (bool, int64, float64, string,
// []byte, []int64, []float64, Tensor, or the wire-codec bytes of a codec value), its
// kind, and whether the record has it.
func (s StoredRecord) Value(name string) (any, persist.Kind, bool) {
	for _, fv := range s.r {
		if fv.Name == name {
			if c, ok := fv.Val.(record.CodecValue); ok {
				return c.Bytes, fv.Kind, true
			}
			return fv.Val, fv.Kind, true
		}
	}
	return nil, "", false
}

// Merge returns s with the fields of later added or replacing its own.
func (s StoredRecord) Merge(later StoredRecord) StoredRecord {
	if len(s.r) == 0 {
		return later
	}
	out := make(record.NormRecord, 0, len(s.r)+len(later.r))
	i, j := 0, 0
	for i < len(s.r) || j < len(later.r) {
		switch {
		case j == len(later.r) || (i < len(s.r) && s.r[i].Name < later.r[j].Name):
			out = append(out, s.r[i])
			i++
		case i == len(s.r) || later.r[j].Name < s.r[i].Name:
			out = append(out, later.r[j])
			j++
		default:
			out = append(out, later.r[j])
			i++
			j++
		}
	}
	return StoredRecord{r: out}
}

// PreparedRecords is a batch of records normalized, checked against each other and
// encoded (the tail encoding of the file store), ready to be stored.
type PreparedRecords struct{ p *putPrepared }

// PrepareRecords normalizes and encodes recs. Errors: *InvalidError (a field name),
// *UnsupportedValueError, *SchemaError (records of the batch disagree on a field's
// type); each names the record by its position.
func PrepareRecords(recs []persist.Record) (*PreparedRecords, error) {
	p, err := prepare("", recs)
	if err != nil {
		return nil, err
	}
	return &PreparedRecords{p: p}, nil
}

// CheckPut refuses what every store refuses of a put of recs into partition with opts,
// whatever its queue holds: persist.CheckPut's checks of the arguments, then the records
// prepared as every store prepares them (field names, values, kinds that disagree within
// the put). A put into a queue that does not exist yet is checked with it before the queue
// is created, so that a refused put creates nothing (the server's put routes, `lakeshore
// data put`). Such a queue holds no record and is at version 0, so a put its back-pressure
// refuses there (opts.Admission: a record meant for a version more than MaxAhead above 0)
// is refused here too, *persist.BackpressureError, unless it waits for room (Block: the
// queue is created for the trainer's version to reach it); before 2026-12-07 that put
// created the empty queue it was refused by.
func CheckPut(partition string, recs []persist.Record, opts *persist.PutOpts) error {
	args, err := persist.CheckPut(partition, recs, opts)
	if err != nil || len(recs) == 0 {
		return err
	}
	if _, err := PrepareRecords(recs); err != nil {
		return err
	}
	if a := args.Admission; a != nil && !a.Block {
		return persist.Admitted(a, partition, len(recs), args.Target, 0, 0)
	}
	return nil
}

// PrepareFieldUpdates checks the arguments of a PutFields (one record per index) and
// prepares them; an index given more than once is merged in order (its later record
// wins), so the returned indexes are unique.
func PrepareFieldUpdates(indexes []int64, fields []persist.Record) ([]int64, *PreparedRecords, error) {
	if len(indexes) != len(fields) {
		return nil, nil, &persist.InvalidError{Field: "fields", Value: len(fields), Rule: fmt.Sprintf("one record per index (%d)", len(indexes))}
	}
	indexes, fields = mergeDuplicateIndexes(indexes, fields)
	p, err := PrepareRecords(fields)
	if err != nil {
		return nil, nil, err
	}
	return indexes, p, nil
}

// Len returns the number of records.
func (p *PreparedRecords) Len() int { return len(p.p.recs) }

// Encoded returns the records in the tail encoding (DecodeRecords reads it back).
func (p *PreparedRecords) Encoded() []byte { return p.p.data }

// Records returns the normalized records.
func (p *PreparedRecords) Records() []StoredRecord {
	out := make([]StoredRecord, len(p.p.recs))
	for i, r := range p.p.recs {
		out[i] = StoredRecord{r: r}
	}
	return out
}

// EvolveSchema checks the records against schema s and returns the schema after them
// (new fields appended, int64 widened to float64), whether it changed, and the fields
// in which the records hold an integer beyond ±2^53 (to remember: such a field must
// never widen). bigIntField reports whether a field was remembered so by an earlier
// put. Errors: *SchemaError, and nothing may be written then.
func (p *PreparedRecords) EvolveSchema(s persist.Schema, bigIntField func(field string) (bool, error)) (persist.Schema, bool, []string, error) {
	ns, changed, err := record.Evolve(s, []record.NormRecord{p.p.kinds})
	if err != nil {
		return s, false, nil, err
	}
	final := s
	if changed {
		final = ns
	}
	var bigs []string
	for field, v := range p.p.bigInts {
		if k, _ := final.Kind(field); k == persist.KindFloat64 || k == persist.KindFloat64List {
			have, ok := s.Kind(field)
			if !ok {
				have = record.IntKindOf(k)
			}
			return s, false, nil, &persist.SchemaError{Field: field, Have: have, Got: record.OtherKind(have),
				Reason: fmt.Sprintf("the integer %d is beyond ±2^53 and a float64 column would round it (allowed: integers within ±2^53, or int64 only in this field)", v)}
		}
		bigs = append(bigs, field)
	}
	sort.Strings(bigs)
	if changed {
		for _, f := range s.Fields {
			if k, _ := ns.Kind(f.Name); k != f.Kind && (k == persist.KindFloat64 || k == persist.KindFloat64List) {
				big, err := bigIntField(f.Name)
				if err != nil {
					return s, false, nil, err
				}
				if big {
					return s, false, nil, &persist.SchemaError{Field: f.Name, Have: f.Kind, Got: k,
						Reason: "the field holds integers beyond ±2^53, which a float64 column would round (allowed: integers only in this field)"}
				}
			}
		}
	}
	return final, changed, bigs, nil
}

// DecodeRecords reads records written by PreparedRecords.Encoded (or several such
// encodings concatenated). Strings and byte slices alias b. Errors wrap ErrCorrupt.
func DecodeRecords(b []byte) ([]StoredRecord, error) {
	recs, err := tail.DecodeRecords(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", persist.ErrCorrupt, err)
	}
	out := make([]StoredRecord, len(recs))
	for i, r := range recs {
		out[i] = StoredRecord{r: r}
	}
	return out, nil
}

// NewBatch builds a Batch of fields for indexes (with their partitions) from stored
// records (recs[i] belongs to indexes[i]); values are converted to the fields' kinds
// (int64 widened to float64). A field a record lacks is null.
func NewBatch(fields []persist.Field, indexes []int64, partitions []string, recs []StoredRecord) *persist.Batch {
	cols := make([]arrow.Array, len(fields))
	for p, f := range fields {
		b := array.NewBuilder(memory.DefaultAllocator, record.ArrowType(f.Kind))
		b.Reserve(len(recs))
		for _, r := range recs {
			found := false
			for _, fv := range r.r {
				if fv.Name == f.Name {
					record.AppendValue(b, f.Kind, record.ConvertValue(fv.Val, fv.Kind, f.Kind))
					found = true
					break
				}
			}
			if !found {
				b.AppendNull()
			}
		}
		cols[p] = b.NewArray()
		b.Release()
	}
	return &persist.Batch{Indexes: indexes, Partitions: partitions, Fields: fields, Record: record.MakeRecord(indexes, fields, cols)}
}

// FragmentKind says what a Parquet fragment holds.
type FragmentKind int

const (
	// FragmentRows holds samples' own records: columns _index, _partition, fields.
	FragmentRows FragmentKind = fragRows
	// FragmentFields holds field updates: columns _index, _seq (the update's sequence;
	// the highest wins), fields.
	FragmentFields FragmentKind = fragFields
)

// FragmentRow is one row of a fragment.
type FragmentRow struct {
	Index     int64
	Partition string // FragmentRows
	Seq       int64  // FragmentFields
	Record    StoredRecord
}

// WriteFragment writes rows (sorted by Index, then Seq) as a Parquet fragment of kind
// with the given fields (the file store's format: Snappy, statistics, each column's
// kind in its metadata, lakeshore.kinds in the file's) to w. rowGroupRows ≤ 0 means
// 65,536.
func WriteFragment(w io.Writer, kind FragmentKind, fields []persist.Field, rows []FragmentRow, rowGroupRows int) error {
	if rowGroupRows <= 0 {
		rowGroupRows = 1 << 16
	}
	fw, sc, err := newFragmentWriter(nopCloser{w}, int(kind), fields, rowGroupRows)
	if err != nil {
		return err
	}
	frs := make([]fragRow, len(rows))
	for i, r := range rows {
		frs[i] = fragRow{idx: r.Index, part: r.Partition, seq: r.Seq, rec: r.Record.r}
	}
	if err := writeFragmentRows(fw, sc, int(kind), fields, frs, rowGroupRows); err != nil {
		fw.Close()
		return err
	}
	if err := fw.Close(); err != nil {
		return fmt.Errorf("close fragment: %w", err)
	}
	return nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// ReadFragment reads every row of a fragment written by WriteFragment (or by the file
// store). Errors wrap ErrCorrupt.
func ReadFragment(r parquet.ReaderAtSeeker) (FragmentKind, []FragmentRow, error) {
	pr, err := file.NewParquetReader(r)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read fragment: %v", persist.ErrCorrupt, err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read fragment: %v", persist.ErrCorrupt, err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return 0, nil, fmt.Errorf("%w: read fragment: %v", persist.ErrCorrupt, err)
	}
	defer tbl.Release()
	sc := tbl.Schema()
	kind := FragmentRows
	if sc.NumFields() < 2 || sc.Field(0).Name != record.ColIndex {
		return 0, nil, fmt.Errorf("%w: read fragment: no %s column", persist.ErrCorrupt, record.ColIndex)
	}
	if sc.Field(1).Name == record.ColSeq {
		kind = FragmentFields
	}
	type col struct {
		name string
		kind persist.Kind
	}
	cols := make([]col, sc.NumFields())
	for i := 2; i < sc.NumFields(); i++ {
		f := sc.Field(i)
		k, ok := f.Metadata.GetValue(record.MetaKind)
		if !ok {
			return 0, nil, fmt.Errorf("%w: read fragment: column %q has no kind", persist.ErrCorrupt, f.Name)
		}
		cols[i] = col{name: f.Name, kind: persist.Kind(k)}
	}
	rows := make([]FragmentRow, 0, tbl.NumRows())
	tr := array.NewTableReader(tbl, 1<<16)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		idx := rec.Column(0).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			fr := FragmentRow{Index: idx.Value(i)}
			if kind == FragmentRows {
				fr.Partition = rec.Column(1).(*array.String).Value(i)
			} else {
				fr.Seq = rec.Column(1).(*array.Int64).Value(i)
			}
			var nr record.NormRecord
			for c := 2; c < len(cols); c++ {
				arr := rec.Column(c)
				if arr.IsNull(i) {
					continue
				}
				v, err := storedValueAt(arr, i, cols[c].kind)
				if err != nil {
					return 0, nil, fmt.Errorf("%w: read fragment column %q: %v", persist.ErrCorrupt, cols[c].name, err)
				}
				nr = append(nr, record.FieldValue{Name: cols[c].name, Kind: cols[c].kind, Val: v})
			}
			sort.Slice(nr, func(a, b int) bool { return nr[a].Name < nr[b].Name })
			fr.Record = StoredRecord{r: nr}
			rows = append(rows, fr)
		}
	}
	return kind, rows, nil
}

// storedValueAt returns element i of arr in its normalized (stored) form, copying
// what aliases the array.
func storedValueAt(arr arrow.Array, i int, k persist.Kind) (any, error) {
	switch k {
	case persist.KindString:
		return string([]byte(arr.(*array.String).Value(i))), nil
	case persist.KindBytes:
		return append([]byte{}, arr.(*array.Binary).Value(i)...), nil
	case persist.KindCodec:
		return record.CodecValue{Bytes: append([]byte{}, arr.(*array.Binary).Value(i)...)}, nil
	case persist.KindTensor, persist.KindNDArray, persist.KindWireTensor:
		t := record.TensorAt(arr.(*array.Struct), i)
		t.Data = append([]byte{}, t.Data...)
		return t, nil
	}
	return record.ValueAt(arr, i, k)
}
