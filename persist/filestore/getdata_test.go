package filestore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestGetDataNilMeta: a nil BatchMeta is an *InvalidError, not a panic.
func TestGetDataNilMeta(t *testing.T) {
	t.Parallel()
	q := openTemp(t, nil)
	_, err := q.fileReader().GetData(context.Background(), nil)
	require.ErrorIs(t, err, persist.ErrInvalid)
}

// TestGetDataMissingIndexes: GetData of a BatchMeta naming an index that was never put
// (or is negative) or that was cleared fails with *NotFoundError naming it, instead of
// returning rows without fields or a cleared sample's data.
func TestGetDataMissingIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	kv := fileKVOf(q)
	ids, err := kv.BatchPut(ctx, persist.DefaultPartition, []string{"a", "b", "c"}, []persist.Record{{"x": 0}, {"x": 1}, {"x": 2}}, nil)
	require.NoError(t, err)
	require.NoError(t, kv.Clear(ctx, persist.DefaultPartition, []string{"b"}))
	r := q.fileReader()
	fields := []persist.FieldMeta{{Name: "x", Kind: persist.KindInt64}}
	for _, flushed := range []bool{false, true} {
		if flushed {
			require.NoError(t, q.Flush(ctx))
		}
		for _, idx := range [][]int64{{ids[1]}, {99}, {-1}, {ids[0], ids[1], ids[2]}} {
			_, err := r.GetData(ctx, &persist.BatchMeta{Size: len(idx), Indexes: idx, Fields: fields})
			require.ErrorIs(t, err, persist.ErrNotFound, "flushed %v, indexes %v", flushed, idx)
			var nf *persist.NotFoundError
			require.ErrorAs(t, err, &nf)
			require.Len(t, nf.Indexes, 1)
		}
		b, err := r.GetData(ctx, &persist.BatchMeta{Size: 2, Indexes: []int64{ids[2], ids[0]}, Fields: fields})
		require.NoError(t, err)
		rows, err := b.Rows()
		require.NoError(t, err)
		b.Release()
		require.Equal(t, []persist.Row{
			{Index: ids[2], Partition: persist.DefaultPartition, Fields: persist.Record{"x": int64(2)}},
			{Index: ids[0], Partition: persist.DefaultPartition, Fields: persist.Record{"x": int64(0)}},
		}, rows)
	}
}
