package filestore

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestPatchesAcrossHandles: two handles of one file queue (two processes, as far as the
// store can tell) patch the same partial rollout at once; the partition's patch lock
// (LockPatches) serializes their read-modify-writes, so no segment version is lost.
func TestPatchesAcrossHandles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a := persist.New(openTemp(t, &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1}))
	b := persist.New(openTemp(t, &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1}))
	idx, err := a.PutPartial(ctx, "", []persist.Record{{"x": 1}}, 0, false, nil)
	require.NoError(t, err)
	const each = 15
	var wg sync.WaitGroup
	for _, q := range []*persist.Queue{a, b} {
		wg.Go(func() {
			for range each {
				require.NoError(t, q.PatchPartial(ctx, "", idx, nil, 1, false))
			}
		})
	}
	wg.Wait()
	batch, err := a.Store().GetData(ctx, &persist.BatchMeta{Indexes: idx, Size: 1, Partition: persist.DefaultPartition,
		Fields: []persist.FieldMeta{{Name: persist.SegmentVersionsField}}})
	require.NoError(t, err)
	rows, err := batch.Rows()
	batch.Release()
	require.NoError(t, err)
	segs, ok := int64List(rows[0].Fields[persist.SegmentVersionsField])
	require.True(t, ok)
	require.Len(t, segs, 1+2*each, "every patch's segment version is kept")
}

// int64List reads a list of integers as a row gives it ([]int64, or []any of integers).
func int64List(v any) ([]int64, bool) {
	switch x := v.(type) {
	case []int64:
		return x, true
	case []any:
		out := make([]int64, 0, len(x))
		for _, e := range x {
			n, ok := persist.VersionValue(e)
			if !ok {
				return nil, false
			}
			out = append(out, n)
		}
		return out, true
	}
	return nil, false
}
