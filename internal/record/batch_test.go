package record

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// int64Batch is a batch of field name (int64) with the value of each row its index.
func int64Batch(name string, indexes ...int64) *Batch {
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	defer ib.Release()
	ib.AppendValues(indexes, nil)
	idx := ib.NewArray()
	defer idx.Release()
	vb := array.NewInt64Builder(memory.DefaultAllocator)
	defer vb.Release()
	vb.AppendValues(indexes, nil)
	vals := vb.NewArray()
	defer vals.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: ColIndex, Type: arrow.PrimitiveTypes.Int64},
		{Name: name, Type: ArrowType(KindInt64), Metadata: arrow.NewMetadata([]string{MetaKind}, []string{string(KindInt64)})}}, nil)
	parts := make([]string, len(indexes))
	for i := range parts {
		parts[i] = "p"
	}
	return &Batch{Indexes: indexes, Partitions: parts, Fields: []Field{{Name: name, Kind: KindInt64}},
		Record: array.NewRecordBatch(sc, []arrow.Array{idx, vals}, int64(len(indexes)))}
}

// TestConcatBatches: the parts' rows in order, empty parts skipped, a lone part shared,
// and parts of different fields refused.
func TestConcatBatches(t *testing.T) {
	t.Parallel()
	a, empty, b := int64Batch("x", 3, 1), EmptyBatch(nil, []int64{}, []string{}), int64Batch("x", 1, 7, 1)
	defer a.Release()
	defer b.Release()
	out, err := ConcatBatches([]*Batch{a, empty, b})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 1, 1, 7, 1}, out.Indexes)
	rows, err := out.Rows()
	require.NoError(t, err)
	for _, r := range rows {
		require.Equal(t, r.Index, r.Fields["x"])
	}
	out.Release()

	one, err := ConcatBatches([]*Batch{empty, a})
	require.NoError(t, err)
	require.Equal(t, a.Indexes, one.Indexes)
	one.Release() // shared: a's record is still there
	require.EqualValues(t, 2, a.Record.NumRows())

	none, err := ConcatBatches([]*Batch{empty})
	require.NoError(t, err)
	require.Zero(t, none.Len())
	none.Release()
	empty.Release()

	y := int64Batch("y", 2)
	defer y.Release()
	_, err = ConcatBatches([]*Batch{a, y})
	require.ErrorContains(t, err, "schema changed")
}
