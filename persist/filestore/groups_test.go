package filestore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestGroupDecisionsAcrossHandles: readers of one task on two handles of one file
// queue (each with its own writer, as two processes) agree on every group: each group
// with a signal is served once, each flat group is dropped and counted once.
func TestGroupDecisionsAcrossHandles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a := openTemp(t, &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1})
	b := openTemp(t, &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1})
	const groups, n, use = 60, 4, 3
	flat := map[string]bool{}
	member := map[int64]string{}
	for i := range groups {
		uid := fmt.Sprintf("g%d", i)
		rewards := []float64{0, 1, 1, 0}
		if i%4 == 0 {
			rewards, flat[uid] = []float64{2, 2, 2, 2}, true
		}
		recs := make([]persist.Record, n)
		for j := range recs {
			recs[j] = persist.Record{"uid": uid, "reward": rewards[j]}
		}
		idx, err := a.PutPartition(ctx, persist.DefaultPartition, recs, nil)
		require.NoError(t, err)
		for _, x := range idx {
			member[x] = uid
		}
	}
	spec := persist.GRPOGroupN{N: n, GroupField: "uid", Use: use, DropZeroVariance: "reward"}.Spec()
	var mu sync.Mutex
	served := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range []persist.Store{a, b, a, b} {
		wg.Go(func() {
			r := persist.New(s).Reader()
			for {
				m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"uid", "reward"}, BatchSize: use, Task: "train", Sampler: spec})
				if !assertNoError(t, err) || m.Size == 0 {
					return
				}
				mu.Lock()
				for _, x := range m.Indexes {
					served[member[x]]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	nFlat := 0
	for i := range groups {
		uid := fmt.Sprintf("g%d", i)
		if flat[uid] {
			nFlat++
			require.Zero(t, served[uid], "flat group %s is never served", uid)
		} else {
			require.Equal(t, use, served[uid], "group %s is served once", uid)
		}
	}
	st, err := b.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, nFlat, st.GroupsDropped)
	require.EqualValues(t, (groups-nFlat)*(n-use), st.SamplesUnused)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
