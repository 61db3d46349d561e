package filestore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestPutFieldsDuplicateIndexLaterWins: an index given twice in one PutFields is
// merged in order, so the later record's value of a field wins (as for any later put
// of a (sample, field)) — in the tail, after a flush and after compaction.
func TestPutFieldsDuplicateIndexLaterWins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1, CompactFragments: -1})
	_, err := persist.New(q).PutBatch(ctx, []persist.Record{{"x": 0}, {"x": 1}})
	require.NoError(t, err)
	require.NoError(t, q.PutFields(ctx, persist.DefaultPartition, []int64{1, 0, 1},
		[]persist.Record{{"r": 1, "s": "a"}, {"r": 10}, {"r": 2, "t": nil}}))
	want := []persist.Row{
		{Index: 0, Partition: persist.DefaultPartition, Fields: persist.Record{"x": int64(0), "r": int64(10)}},
		{Index: 1, Partition: persist.DefaultPartition, Fields: persist.Record{"x": int64(1), "r": int64(2), "s": "a"}},
	}
	check := func(stage string) {
		rows, err := persist.New(q).Get(ctx, 0, 10, nil)
		require.NoError(t, err, stage)
		require.Equal(t, want, rows, stage)
	}
	check("tail")
	require.NoError(t, q.Flush(ctx))
	check("flushed")
	_, err = persist.New(q).PutBatch(ctx, []persist.Record{{"x": 2}})
	require.NoError(t, err)
	require.NoError(t, q.Flush(ctx))
	require.NoError(t, q.Compact(ctx))
	want = append(want, persist.Row{Index: 2, Partition: persist.DefaultPartition, Fields: persist.Record{"x": int64(2)}})
	check("compacted")
}
