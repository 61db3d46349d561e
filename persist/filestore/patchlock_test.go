package filestore

import (
	"testing"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// TestPatchesAcrossHandles: two handles of one file queue (two processes, as far as the
// store can tell) patch the same partial rollout at once; the partition's patch lock
// (LockPatches) serializes their read-modify-writes, so no segment version is lost.
func TestPatchesAcrossHandles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := persist.New(openTemp(t, &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1}))
	b := persist.New(openTemp(t, &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1}))
	persisttest.PatchesAcrossHandles(t, a, b, 15)
}
