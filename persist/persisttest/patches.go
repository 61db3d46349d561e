package persisttest

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// PatchesAcrossHandles checks that two handles a and b of one queue (two processes or
// replicas, as far as the store can tell) that patch the same partial rollout at once,
// each times from each, lose no segment version: the store's patch lock (LockPatches)
// serializes their read-modify-writes.
func PatchesAcrossHandles(t *testing.T, a, b *persist.Queue, each int) {
	t.Helper()
	ctx := context.Background()
	idx, err := a.PutPartial(ctx, "", []persist.Record{{"x": 1}}, 0, false, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for _, q := range []*persist.Queue{a, b} {
		wg.Go(func() {
			for range each {
				require.NoError(t, q.PatchPartial(ctx, "", idx, nil, 1, false))
			}
		})
	}
	wg.Wait()
	batch, err := a.Reader().GetData(ctx, &persist.BatchMeta{Indexes: idx, Size: 1, Partition: persist.DefaultPartition,
		Fields: []persist.FieldMeta{{Name: persist.SegmentVersionsField}}})
	require.NoError(t, err)
	rows, err := batch.Rows()
	batch.Release()
	require.NoError(t, err)
	segs, ok := rows[0].Fields[persist.SegmentVersionsField].([]int64)
	require.True(t, ok, "segment versions are a list of integers")
	require.Len(t, segs, 1+2*each, "every patch's segment version is kept")
}
