package persist

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPatchesAcrossHandles: two handles of one file queue (two processes, as far as the
// store can tell) patch the same partial rollout at once; the partition's patch lock
// (LockPatches) serializes their read-modify-writes, so no segment version is lost.
func TestPatchesAcrossHandles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a := New(openTemp(t, &Config{Dir: dir, FlushInterval: -1, FlushRows: -1}))
	b := New(openTemp(t, &Config{Dir: dir, FlushInterval: -1, FlushRows: -1}))
	idx, err := a.PutPartial(ctx, "", []Record{{"x": 1}}, 0, false, nil)
	require.NoError(t, err)
	const each = 15
	var wg sync.WaitGroup
	for _, q := range []*Queue{a, b} {
		wg.Go(func() {
			for range each {
				require.NoError(t, q.PatchPartial(ctx, "", idx, nil, 1, false))
			}
		})
	}
	wg.Wait()
	batch, err := a.s.GetData(ctx, &BatchMeta{Indexes: idx, Size: 1, Partition: DefaultPartition,
		Fields: []FieldMeta{{Name: SegmentVersionsField}}})
	require.NoError(t, err)
	rows, err := batch.Rows()
	batch.Release()
	require.NoError(t, err)
	segs, ok := int64List(rows[0].Fields[SegmentVersionsField])
	require.True(t, ok)
	require.Len(t, segs, 1+2*each, "every patch's segment version is kept")
}
