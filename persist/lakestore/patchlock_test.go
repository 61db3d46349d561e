package lakestore

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestPatchesAcrossStores: two stores of one distributed queue (two replicas) patch the
// same partial rollout at once; the PostgreSQL advisory lock of LockPatches serializes
// their read-modify-writes, so no segment version is lost.
func TestPatchesAcrossStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, bucket := pgtest.Database(t), fileBucket(t)
	a := persist.New(openTest(t, db, bucket, "q", nil))
	b := persist.New(openTest(t, db, bucket, "q", nil))
	idx, err := a.PutPartial(ctx, "", []persist.Record{{"x": 1}}, 0, false, nil)
	require.NoError(t, err)
	const each = 10
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
	require.Len(t, rows[0].Fields[persist.SegmentVersionsField], 1+2*each, "every patch's segment version is kept")
}
