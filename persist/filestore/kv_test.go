package filestore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

func TestKV(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tailAndFragments(t, func(t *testing.T, q *fileQueue, maybeFlush func()) {
		kv := fileKVOf(q)
		i42, err := persist.KV(persist.New(kv.q)).Put(ctx, "prod", "sess-42", persist.Record{"tokens": []int{1, 2}, "score": 1}, map[string]string{"status": "running"})
		require.NoError(t, err)
		require.Equal(t, int64(0), i42)
		idx, err := kv.BatchPut(ctx, "prod", []string{"sess-43", "sess-44"}, []persist.Record{{"score": 3}, {"score": 4}}, nil)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 2}, idx)
		maybeFlush()

		// Putting again merges fields (new value wins) and tags, and keeps the index.
		again, err := persist.KV(persist.New(kv.q)).Put(ctx, "prod", "sess-42", persist.Record{"score": 2.5, "reward": 1.0}, map[string]string{"status": "complete", "model": "m"})
		require.NoError(t, err)
		require.Equal(t, i42, again)
		maybeFlush()
		// A tag-only put leaves the data alone.
		_, err = persist.KV(persist.New(kv.q)).Put(ctx, "prod", "sess-43", nil, map[string]string{"status": "complete"})
		require.NoError(t, err)

		got, err := kv.BatchGet(ctx, "prod", []string{"sess-43", "sess-42"}, nil)
		require.NoError(t, err)
		require.Equal(t, []persist.KVEntry{
			{Partition: "prod", Key: "sess-43", Index: 1, Tags: map[string]string{"status": "complete"}, Fields: persist.Record{"score": 3.0}},
			{Partition: "prod", Key: "sess-42", Index: 0, Tags: map[string]string{"status": "complete", "model": "m"},
				Fields: persist.Record{"tokens": []int64{1, 2}, "score": 2.5, "reward": 1.0}},
		}, got)

		// Other partition: separate key space.
		o, err := persist.KV(persist.New(kv.q)).Put(ctx, "dev", "sess-42", persist.Record{"score": 9}, nil)
		require.NoError(t, err)
		require.Equal(t, int64(3), o)

		list, err := kv.List(ctx, "prod")
		require.NoError(t, err)
		require.Len(t, list, 3)
		require.Equal(t, []string{"sess-42", "sess-43", "sess-44"}, []string{list[0].Key, list[1].Key, list[2].Key})
		require.Equal(t, map[string]string{}, list[2].Tags)
		all, err := kv.List(ctx, "")
		require.NoError(t, err)
		require.Len(t, all, 4)

		// Clear: tombstones; other indexes never shift; idempotent.
		require.NoError(t, kv.Clear(ctx, "prod", []string{"sess-43", "nope"}))
		require.NoError(t, kv.Clear(ctx, "prod", []string{"sess-43"}))
		maybeFlush()
		_, err = kv.BatchGet(ctx, "prod", []string{"sess-43", "sess-44", "gone"}, nil)
		require.ErrorIs(t, err, persist.ErrNotFound)
		require.ErrorContains(t, err, `"sess-43"`)
		require.ErrorContains(t, err, `"gone"`)
		got, err = kv.BatchGet(ctx, "prod", []string{"sess-44"}, []string{"score"})
		require.NoError(t, err)
		require.Equal(t, int64(2), got[0].Index)
		require.Equal(t, persist.Record{"score": 4.0}, got[0].Fields)
		rows, err := persist.New(q).Get(ctx, 0, 10, nil)
		require.NoError(t, err)
		var indexes []int64
		for _, r := range rows {
			indexes = append(indexes, r.Index)
		}
		require.Equal(t, []int64{0, 2, 3}, indexes)
		n, err := q.Len(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)

		// A cleared sample is never handed to a reader, and consumption keeps
		// pointing at the right rows.
		m, err := q.fileReader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"score"}, BatchSize: 10, Task: "t", Partition: "prod"})
		require.NoError(t, err)
		require.Equal(t, []int64{0, 2}, m.Indexes)

		// Re-putting a cleared key makes a new sample with a new index.
		ni, err := persist.KV(persist.New(kv.q)).Put(ctx, "prod", "sess-43", persist.Record{"score": 30}, nil)
		require.NoError(t, err)
		require.Equal(t, int64(4), ni)
	})
}

func TestKVSchemaConflictWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	kv := fileKVOf(q)
	_, err := persist.KV(persist.New(kv.q)).Put(ctx, "p", "a", persist.Record{"x": "text"}, nil)
	require.NoError(t, err)
	_, err = kv.BatchPut(ctx, "p", []string{"b", "a"}, []persist.Record{{"x": "ok"}, {"x": 5}}, nil)
	require.ErrorIs(t, err, persist.ErrSchema)
	list, err := kv.List(ctx, "p")
	require.NoError(t, err)
	require.Len(t, list, 1, "key b was not created")
	_, err = kv.BatchPut(ctx, "p", []string{"a"}, []persist.Record{{"x": 1}, {"x": 2}}, nil)
	require.ErrorIs(t, err, persist.ErrInvalid)
}
