package lakestore

import (
	"testing"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// TestPatchesAcrossStores: two stores of one distributed queue (two replicas) patch the
// same partial rollout at once; the PostgreSQL advisory lock of LockPatches serializes
// their read-modify-writes, so no segment version is lost.
func TestPatchesAcrossStores(t *testing.T) {
	t.Parallel()
	db, bucket := pgtest.Database(t), fileBucket(t)
	a := persist.New(openTest(t, db, bucket, "q", nil))
	b := persist.New(openTest(t, db, bucket, "q", nil))
	persisttest.PatchesAcrossHandles(t, a, b, 10)
}
