package filestore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestGRPOPagesPastIncompleteGroups (issue 11 item 11): a complete group behind more
// incomplete groups than the sampler's first window holds is still handed out, at
// once and in wait mode, grouped by field (in block mode: the store suite's case
// GRPOPastIncompleteGroups).
func TestGRPOPagesPastIncompleteGroups(t *testing.T) {
	t.Parallel()
	t.Run("field", func(t *testing.T) {
		t.Parallel()
		q := openTemp(t, &persist.Config{FlushRows: -1, FlushInterval: -1})
		r := q.fileReader()
		// 8,300 prompts with one response each (the other generations failed), then
		// one prompt with all 4.
		const prompts = 8300
		putN(t, q, persist.DefaultPartition, prompts, func(i int) persist.Record { return persist.Record{"uid": fmt.Sprint("p", i), "resp": i} })
		last := putN(t, q, persist.DefaultPartition, 4, func(i int) persist.Record { return persist.Record{"uid": "complete", "resp": i} })
		req := persist.MetaRequest{Fields: []string{"resp"}, BatchSize: 4, Task: "t", Sampler: persist.GRPOGroupN{N: 4, GroupField: "uid"}.Spec()}
		require.Equal(t, last, metaIdx(t, r, req))
		req.Task, req.Wait, req.Timeout = "w", true, 10*time.Second
		require.Equal(t, last, metaIdx(t, r, req))
	})
}

// TestClearSamples: cleared samples vanish from every read, their KV keys are
// forgotten, other indexes stay, clearing is idempotent, and compaction leaves their
// rows out.
func TestClearSamples(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushRows: -1, FlushInterval: -1, CompactFragments: -1})
	r := q.fileReader()
	for f := 0; f < 4; f++ {
		putN(t, q, "a", 10, func(i int) persist.Record { return persist.Record{"x": f*10 + i} })
		require.NoError(t, q.Flush(ctx))
	}
	putN(t, q, "b", 5, func(i int) persist.Record { return persist.Record{"x": 100 + i} }) // 40..44
	_, err := persist.KV(persist.New(q)).Put(ctx, "a", "k3", persist.Record{"x": 3}, nil)  // 45
	require.NoError(t, err)
	require.NoError(t, q.Flush(ctx))

	// Indexes of another partition and unknown ones are ignored.
	require.NoError(t, q.ClearSamples(ctx, "a", []int64{1, 2, 3, 12, 40, 45, 9999}))
	require.NoError(t, q.ClearSamples(ctx, "a", []int64{1, 2}), "idempotent")
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 46-5, n)
	rows, err := persist.New(q).Get(ctx, 0, 100, &persist.GetOpts{Partition: "a"})
	require.NoError(t, err)
	var got []int64
	for _, row := range rows {
		got = append(got, row.Index)
	}
	require.NotContains(t, got, int64(1))
	require.NotContains(t, got, int64(12))
	require.Len(t, got, 41-5)
	_, err = fileKVOf(q).BatchGet(ctx, "a", []string{"k3"}, nil)
	require.ErrorIs(t, err, persist.ErrNotFound, "the key of a cleared sample is forgotten")
	_, err = r.GetData(ctx, &persist.BatchMeta{Indexes: []int64{2}, Fields: []persist.FieldMeta{{Name: "x", Kind: persist.KindInt64}}})
	require.ErrorIs(t, err, persist.ErrNotFound)
	m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 5, Task: "t", Partition: "a"})
	require.NoError(t, err)
	require.Equal(t, []int64{0, 4, 5, 6, 7}, m.Indexes)
	rows, err = persist.New(q).Get(ctx, 40, 1, nil)
	require.NoError(t, err)
	require.Equal(t, int64(40), rows[0].Index, "partition b is untouched")

	st0, err := q.Stats(ctx)
	require.NoError(t, err)
	require.NoError(t, q.Compact(ctx))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, st0.FragmentRows-5, st.FragmentRows, "compaction reclaims the cleared rows")
	after, err := persist.New(q).Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Len(t, after, 41)
	q = reopen(t, q)
	checkNoOrphans(t, q)
	again, err := persist.New(q).Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Equal(t, after, again)
}

// TestClearPartition: every sample of the partition goes, with its consumption and
// assignments; other partitions stay; compaction of only cleared rows leaves no
// fragment behind.
func TestClearPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushRows: -1, FlushInterval: -1, CompactFragments: -1})
	r := q.fileReader()
	for f := 0; f < 3; f++ {
		putN(t, q, "gone", 10, func(i int) persist.Record { return persist.Record{"x": i} })
		require.NoError(t, q.Flush(ctx))
	}
	putN(t, q, "kept", 3, func(i int) persist.Record { return persist.Record{"x": i} }) // 30..32, in the tail
	m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "t", Partition: "gone", Sampler: persist.RankAware{}.Spec()})
	require.NoError(t, err)
	require.Len(t, m.Indexes, 4)
	require.NoError(t, q.ClearPartition(ctx, "gone"))
	require.NoError(t, q.ClearPartition(ctx, "never-used"))
	n, err := q.Consumed(ctx, "t", "gone")
	require.NoError(t, err)
	require.Zero(t, n)
	rows, err := persist.New(q).Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	require.Equal(t, int64(30), rows[0].Index)
	// New samples of the cleared partition are new indexes.
	idx := putN(t, q, "gone", 2, func(i int) persist.Record { return persist.Record{"x": i} })
	require.Equal(t, []int64{33, 34}, idx)
	m, err = r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "t", Partition: "gone", Sampler: persist.RankAware{}.Spec()})
	require.NoError(t, err)
	require.Equal(t, []int64{33, 34}, m.Indexes, "the old assignment is forgotten")

	require.NoError(t, q.Compact(ctx))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Fragments, "the three cleared fragments merged into nothing")
	q = reopen(t, q)
	checkNoOrphans(t, q)
	rows, err = persist.New(q).Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Len(t, rows, 5)
}
