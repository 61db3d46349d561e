package arrowbody

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// arrowStreamOf encodes rec as an IPC stream (with opts for the writer).
func arrowStreamOf(t testing.TB, rec arrow.RecordBatch, opts ...ipc.Option) []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(rec.Schema())}, opts...)...)
	require.NoError(t, w.Write(rec))
	require.NoError(t, w.Write(rec)) // two batches: the second message is checked like the first
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// everyKindBatch is a record batch with a column of every accepted Arrow type, nulls
// included, and an _index column.
func everyKindBatch(t testing.TB) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	tensor := arrow.StructOf(record.TensorArrowType().Fields()...)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: persist.IndexColumn, Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "li", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "lf", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "t", Type: tensor, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for i := range 3 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i == 1 { // a row of nulls
			for c := 1; c < sc.NumFields(); c++ {
				b.Field(c).AppendNull()
			}
			continue
		}
		b.Field(1).(*array.BooleanBuilder).Append(i == 0)
		b.Field(2).(*array.Int8Builder).Append(int8(-i))
		b.Field(3).(*array.Uint32Builder).Append(uint32(i))
		b.Field(4).(*array.Float64Builder).Append(float64(i) / 2)
		b.Field(5).(*array.StringBuilder).Append(strings.Repeat("s", i+1))
		b.Field(6).(*array.LargeStringBuilder).Append("large")
		b.Field(7).(*array.BinaryBuilder).Append([]byte{byte(i), 1})
		lb := b.Field(8).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Int64Builder).AppendValues([]int64{1, 2, int64(i)}, nil)
		fb := b.Field(9).(*array.ListBuilder)
		fb.Append(true)
		fb.ValueBuilder().(*array.Float32Builder).Append(1.5)
		sb := b.Field(10).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append("float32")
		shape := sb.FieldBuilder(1).(*array.ListBuilder)
		shape.Append(true)
		shape.ValueBuilder().(*array.Int64Builder).Append(1)
		sb.FieldBuilder(2).(*array.BinaryBuilder).Append([]byte{0, 0, 0x80, 0x3f})
	}
	return b.NewRecordBatch()
}

// TestArrowStreamEveryKind reads a stream with every accepted type back into records.
func TestArrowStreamEveryKind(t *testing.T) {
	t.Parallel()
	rec := everyKindBatch(t)
	defer rec.Release()
	recs, idx, err := RecordsFromArrowStream("request body", arrowStreamOf(t, rec), true)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 2, 0, 1, 2}, idx)
	require.Len(t, recs, 6)
	require.Equal(t, persist.Record{}, recs[1])
	require.Equal(t, "sss", recs[2]["s"])
	require.Equal(t, []int64{1, 2, 2}, recs[2]["li"])
	require.Equal(t, []float64{1.5}, recs[0]["lf"])
	require.Equal(t, []int{1}, recs[0]["t"].(persist.Tensor).Shape)
}

// TestArrowStreamDeclaredLengths is the attack of a body that declares more than it
// holds: 4 bytes of metadata length 0x7ffffff0, then 100 bytes. It is refused with 400
// invalid naming the problem, without allocating what the length declares.
func TestArrowStreamDeclaredLengths(t *testing.T) {
	body := make([]byte, 104)
	binary.LittleEndian.PutUint32(body, 0x7ffffff0)
	cont := append([]byte{0xff, 0xff, 0xff, 0xff}, body...) // with the continuation marker
	for _, b := range [][]byte{body, cont} {
		allocated := allocatedBy(func() {
			_, _, err := RecordsFromArrowStream("request body", b, false)
			require.ErrorIs(t, err, persist.ErrInvalid)
			var inv *persist.InvalidError
			require.ErrorAs(t, err, &inv)
			require.Equal(t, "request body", inv.Field)
			require.Contains(t, err.Error(), "message 1 declares 2147483632 bytes of metadata, and the body holds 100 more")
		})
		require.Less(t, allocated, uint64(1<<20), "bytes allocated for a 108-byte body")
	}
}

// allocatedBy returns the bytes allocated while f runs. It reads the process's counters,
// so a test that uses it must not be parallel (others' allocations would count).
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestArrowStreamRefused checks the streams that are refused with what was wrong.
func TestArrowStreamRefused(t *testing.T) {
	t.Parallel()
	rec := everyKindBatch(t)
	defer rec.Release()
	good := arrowStreamOf(t, rec)
	for name, c := range map[string]struct {
		body []byte
		want string
	}{
		"compressed": {arrowStreamOf(t, rec, ipc.WithLZ4()), "compressed record batch"},
		"truncated":  {good[:len(good)/2], "declares"},
		"not a schema first": {func() []byte {
			sc := arrowStreamOf(t, rec)
			n := 8 + int(binary.LittleEndian.Uint32(sc[4:])) // the schema message has no body
			return sc[n:]
		}(), "message 1 is not a schema"},
		"uint64 column": {func() []byte {
			b := array.NewUint64Builder(memory.DefaultAllocator)
			defer b.Release()
			b.Append(1)
			a := b.NewArray()
			defer a.Release()
			r := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "u", Type: arrow.PrimitiveTypes.Uint64}}, nil), []arrow.Array{a}, 1)
			defer r.Release()
			return arrowStreamOf(t, r)
		}(), "invalid column u \"uint64\": bool, int8…int64"},
		// Two columns of one name: the second silently replaced the first in every
		// record (found by a trial put of pyarrow's Table.from_arrays with names
		// ["a", "a"]; JSON bodies refuse duplicate member names already).
		"duplicate column": {func() []byte {
			b := array.NewInt64Builder(memory.DefaultAllocator)
			defer b.Release()
			b.Append(1)
			a := b.NewArray()
			defer a.Release()
			f := arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}
			r := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{f, f}, nil), []arrow.Array{a, a}, 1)
			defer r.Release()
			return arrowStreamOf(t, r)
		}(), `invalid column a: each column name once`},
		// A null element of a list of numbers was stored as 0 ([1, null, 3] read back
		// as [1, 0, 3]): pyarrow makes every list's elements nullable.
		"null in a list": {func() []byte {
			b := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int64)
			defer b.Release()
			b.Append(true)
			b.ValueBuilder().(*array.Int64Builder).AppendValues([]int64{1, 0, 3}, []bool{true, false, true})
			a := b.NewArray()
			defer a.Release()
			r := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "l", Type: a.DataType(), Nullable: true}}, nil), []arrow.Array{a}, 1)
			defer r.Release()
			return arrowStreamOf(t, r)
		}(), `invalid column l: a list of integers or floats without null elements`},
	} {
		_, _, err := RecordsFromArrowStream("request body", c.body, true)
		require.ErrorIs(t, err, persist.ErrInvalid, name)
		require.Contains(t, err.Error(), c.want, name)
	}
}

// TestArrowStreamCorrupted corrupts a valid stream at every position, byte by byte and
// with large 32- and 64-bit words (lengths, offsets, counts), and checks that every
// result is the records or an *persist.InvalidError of the checks: never a panic, never an
// error of the decoder's that the checks did not foresee (those mean arrow-go hit a
// length it trusted), never more than a small multiple of the body allocated.
func TestArrowStreamCorrupted(t *testing.T) { // not parallel: allocatedBy
	rec := everyKindBatch(t)
	defer rec.Release()
	good := arrowStreamOf(t, rec)
	words := []uint64{0, 1, 0x7f, 0xff, 0x7fffffff, 0x7ffffff0, 0xffffffff, 1 << 40, 0x7fffffffffffffff, 1 << 63, ^uint64(0)}
	check := func(b []byte) {
		var err error
		allocated := allocatedBy(func() { _, _, err = RecordsFromArrowStream("request body", b, true) })
		require.Less(t, allocated, uint64(64*len(b)+1<<20))
		if err == nil {
			return
		}
		var inv *persist.InvalidError
		require.ErrorAs(t, err, &inv)
		for _, internal := range []string{"runtime error", "arrow/ipc", "does not decode", "panic"} {
			require.NotContains(t, err.Error(), internal)
		}
	}
	b := make([]byte, len(good))
	for p := range good {
		copy(b, good)
		b[p] ^= 0xff
		check(b)
		for _, w := range words {
			copy(b, good)
			if p+4 <= len(b) {
				binary.LittleEndian.PutUint32(b[p:], uint32(w))
				check(b)
			}
			if p+8 <= len(b) {
				copy(b, good)
				binary.LittleEndian.PutUint64(b[p:], w)
				check(b)
			}
		}
	}
}

// FuzzRecordsFromArrowStream feeds arbitrary bodies: never a panic, only the
// *persist.InvalidError of a check (never the fallback for a decoder error a check missed).
func FuzzRecordsFromArrowStream(f *testing.F) {
	rec := everyKindBatch(f)
	defer rec.Release()
	f.Add(arrowStreamOf(f, rec))
	f.Add([]byte{0xf0, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, err := RecordsFromArrowStream("request body", b, false)
		var inv *persist.InvalidError
		if err != nil && (!errors.As(err, &inv) || strings.Contains(err.Error(), "does not decode")) {
			t.Fatalf("%T: %v", err, err)
		}
	})
}
