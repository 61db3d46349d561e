package filestore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// Read-ahead (readahead.go) must hand out exactly what GetBatch without it would: a
// batch chosen ahead is dropped once the partition changed (a reset, a put, a clear, a
// MarkConsumed), and it consumes nothing until it is handed out.
func TestGetBatchReadAheadIsInvisible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	q := openTemp(t, &persist.Config{Dir: dir})
	putN(t, q, persist.DefaultPartition, 20, func(i int) persist.Record { return persist.Record{"a": i} })
	req := &persist.MetaRequest{Fields: []string{"a"}, BatchSize: 4, Task: "train"}
	get := func() []int64 {
		t.Helper()
		b, m, err := q.GetBatch(ctx, req)
		require.NoError(t, err)
		defer b.Release()
		require.Equal(t, m.Indexes, b.Indexes)
		rows, err := b.Rows()
		require.NoError(t, err)
		for i, r := range rows {
			require.EqualValues(t, m.Indexes[i], r.Fields["a"])
		}
		return m.Indexes
	}
	require.Equal(t, []int64{0, 1, 2, 3}, get())
	require.Equal(t, []int64{4, 5, 6, 7}, get()) // the batch read ahead
	// Only what was handed out is consumed, though the next batch is chosen ahead.
	n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.EqualValues(t, 8, n)
	// A reset after the batch was chosen ahead: the next batch starts again at 0.
	require.NoError(t, q.ResetConsumption(ctx, "train", persist.DefaultPartition))
	require.Equal(t, []int64{0, 1, 2, 3}, get())
	// Samples consumed by hand meanwhile are skipped.
	require.NoError(t, q.MarkConsumed(ctx, "train", persist.DefaultPartition, []int64{4, 5, 6, 7}))
	require.Equal(t, []int64{8, 9, 10, 11}, get())
	// Another request than the one read ahead gets its own batch.
	req.BatchSize = 2
	require.Equal(t, []int64{12, 13}, get())
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4+4+4+4+2, st.Gets) // a read ahead counts once handed out
	n, err = q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.EqualValues(t, 14, n)
}
