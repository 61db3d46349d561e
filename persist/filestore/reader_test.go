package filestore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

func putN(t *testing.T, q *fileQueue, partition string, n int, rec func(i int) persist.Record) []int64 {
	t.Helper()
	recs := make([]persist.Record, n)
	for i := range recs {
		recs[i] = rec(i)
	}
	idx, err := q.PutPartition(context.Background(), partition, recs, nil)
	require.NoError(t, err)
	return idx
}

func metaIdx(t *testing.T, r *fileReader, req persist.MetaRequest) []int64 {
	t.Helper()
	m, err := r.GetMeta(context.Background(), &req)
	require.NoError(t, err)
	require.Equal(t, len(m.Indexes), m.Size)
	if m.Indexes == nil {
		return []int64{}
	}
	return m.Indexes
}

func TestGetMetaConsumption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	putN(t, q, persist.DefaultPartition, 10, func(i int) persist.Record { return persist.Record{"a": i, "b": float64(i)} })
	r := q.fileReader()
	req := persist.MetaRequest{Fields: []string{"a", "b"}, BatchSize: 4, Task: "t1"}
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, r, req))
	require.Equal(t, []int64{4, 5, 6, 7}, metaIdx(t, r, req))
	require.Equal(t, []int64{8, 9}, metaIdx(t, r, req), "without wait, a partial batch")
	require.Equal(t, []int64{}, metaIdx(t, r, req))
	// Tasks are independent.
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, r, persist.MetaRequest{Fields: []string{"a"}, BatchSize: 4, Task: "t2"}))
	n, err := q.Consumed(ctx, "t1", persist.DefaultPartition)
	require.NoError(t, err)
	require.Equal(t, int64(10), n)

	// Consumption survives a restart.
	q = reopen(t, q)
	r = q.fileReader()
	require.Equal(t, []int64{4, 5, 6, 7}, metaIdx(t, r, persist.MetaRequest{Fields: []string{"a"}, BatchSize: 4, Task: "t2"}))
	require.Equal(t, []int64{}, metaIdx(t, r, req))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"default/t1": 10, "default/t2": 8}, st.ConsumedByTask)

	require.NoError(t, q.ResetConsumption(ctx, "t1", persist.DefaultPartition))
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, r, req))

	// GetData reads the requested fields in the meta's order.
	m := &persist.BatchMeta{Indexes: []int64{7, 2, 5}, Fields: []persist.FieldMeta{{Name: "a", Kind: persist.KindInt64}}, Partition: persist.DefaultPartition}
	b, err := r.GetData(ctx, m)
	require.NoError(t, err)
	defer b.Release()
	rows, err := b.Rows()
	require.NoError(t, err)
	require.Equal(t, []persist.Row{
		{Index: 7, Partition: "default", Fields: persist.Record{"a": int64(7)}},
		{Index: 2, Partition: "default", Fields: persist.Record{"a": int64(2)}},
		{Index: 5, Partition: "default", Fields: persist.Record{"a": int64(5)}},
	}, rows)
}

func TestDeferConsume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	putN(t, q, persist.DefaultPartition, 4, func(i int) persist.Record { return persist.Record{"a": i} })
	r := q.fileReader()
	req := persist.MetaRequest{Fields: []string{"a"}, BatchSize: 2, Task: "t", DeferConsume: true}
	require.Equal(t, []int64{0, 1}, metaIdx(t, r, req))
	require.Equal(t, []int64{0, 1}, metaIdx(t, r, req), "not consumed until marked")
	require.NoError(t, q.MarkConsumed(ctx, "t", persist.DefaultPartition, []int64{0, 1}))
	require.Equal(t, []int64{2, 3}, metaIdx(t, r, req))
	err := q.MarkConsumed(ctx, "t", persist.DefaultPartition, []int64{99})
	require.ErrorIs(t, err, persist.ErrNotFound)
}

func TestFieldReadinessWithPutFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tailAndFragments(t, func(t *testing.T, q *fileQueue, maybeFlush func()) {
		putN(t, q, "rollouts", 4, func(i int) persist.Record { return persist.Record{"prompt": "p", "resp": i} })
		maybeFlush()
		r := q.fileReader()
		req := persist.MetaRequest{Fields: []string{"resp", "reward"}, BatchSize: 4, Task: "train", Partition: "rollouts"}
		require.Equal(t, []int64{}, metaIdx(t, r, req), "reward not produced yet")

		// A reward model adds rewards to two samples.
		require.NoError(t, q.PutFields(ctx, "rollouts", []int64{2, 0}, []persist.Record{{"reward": 0.5}, {"reward": 1.5}}))
		maybeFlush()
		b, meta, err := persist.New(r.q).Reader().GetBatch(ctx, &req)
		require.NoError(t, err)
		require.Equal(t, []int64{0, 2}, meta.Indexes)
		rows, err := b.Rows()
		require.NoError(t, err)
		b.Release()
		require.Equal(t, persist.Record{"resp": int64(0), "reward": 1.5}, rows[0].Fields)
		require.Equal(t, persist.Record{"resp": int64(2), "reward": 0.5}, rows[1].Fields)

		// A later PutFields overwrites (latest wins), also across tail and fragments.
		require.NoError(t, q.PutFields(ctx, "rollouts", []int64{0}, []persist.Record{{"reward": 9.0, "resp": 100}}))
		maybeFlush()
		require.NoError(t, q.PutFields(ctx, "rollouts", []int64{0}, []persist.Record{{"reward": 10.0}}))
		got, err := persist.New(q).Get(ctx, 0, 1, nil)
		require.NoError(t, err)
		require.Equal(t, persist.Record{"prompt": "p", "resp": int64(100), "reward": 10.0}, got[0].Fields)
		maybeFlush() // in Fragments: the update is read from the fragment now
		got, err = persist.New(q).Get(ctx, 0, 1, nil)
		require.NoError(t, err)
		require.Equal(t, persist.Record{"prompt": "p", "resp": int64(100), "reward": 10.0}, got[0].Fields)

		// Unknown index or wrong partition: rejected, nothing written.
		err = q.PutFields(ctx, "rollouts", []int64{1, 50}, []persist.Record{{"reward": 1.0}, {"reward": 1.0}})
		require.ErrorIs(t, err, persist.ErrNotFound)
		require.ErrorContains(t, err, "index 50")
		err = q.PutFields(ctx, "other", []int64{1}, []persist.Record{{"reward": 1.0}})
		require.ErrorIs(t, err, persist.ErrNotFound)
		require.Equal(t, []int64{}, metaIdx(t, r, req), "index 1 got no reward")
	})
}

func TestPartitionIsolation(t *testing.T) {
	t.Parallel()
	q := openTemp(t, nil)
	putN(t, q, "p1", 3, func(i int) persist.Record { return persist.Record{"x": i} })
	putN(t, q, "p2", 3, func(i int) persist.Record { return persist.Record{"x": 10 + i} })
	putN(t, q, "p1", 2, func(i int) persist.Record { return persist.Record{"x": 20 + i} })
	r := q.fileReader()
	require.Equal(t, []int64{0, 1, 2, 6, 7}, metaIdx(t, r, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 10, Task: "t", Partition: "p1"}))
	require.Equal(t, []int64{3, 4, 5}, metaIdx(t, r, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 10, Task: "t", Partition: "p2"}))
	require.Equal(t, []int64{}, metaIdx(t, r, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 10, Task: "t", Partition: "p3"}))
}

func TestGetMetaWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	r := q.fileReader()
	type result struct {
		m   *persist.BatchMeta
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "t", Wait: true, Timeout: 10 * time.Second})
		done <- result{m, err}
	}()
	putN(t, q, persist.DefaultPartition, 2, func(i int) persist.Record { return persist.Record{"x": i} })
	select {
	case res := <-done:
		t.Fatalf("GetMeta returned with 2 of 4 samples: %+v %v", res.m, res.err)
	default:
	}
	putN(t, q, persist.DefaultPartition, 3, func(i int) persist.Record { return persist.Record{"x": i} })
	res := <-done
	require.NoError(t, res.err)
	require.Equal(t, []int64{0, 1, 2, 3}, res.m.Indexes)

	// Timeout: ErrTimeout and nothing handed out.
	start := time.Now()
	_, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "t", Wait: true, Timeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, persist.ErrTimeout)
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	require.Equal(t, []int64{4}, metaIdx(t, r, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "t"}))

	// Waiting for a field no sample has yet, then a PutFields provides it.
	go func() {
		m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x", "y"}, BatchSize: 2, Task: "u", Wait: true})
		done <- result{m, err}
	}()
	require.NoError(t, q.PutFields(ctx, persist.DefaultPartition, []int64{3, 1}, []persist.Record{{"y": 1}, {"y": 2}}))
	res = <-done
	require.NoError(t, res.err)
	require.Equal(t, []int64{1, 3}, res.m.Indexes)
}

func TestBatchMetaTensors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	putN(t, q, persist.DefaultPartition, 3, func(i int) persist.Record {
		return persist.Record{"obs": persist.Tensor{DType: "float32", Shape: []int{2, 2}, Data: make([]byte, 16)}, "n": i, "l": []int{i}}
	})
	m, err := q.fileReader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"obs", "n", "l"}, BatchSize: 3, Task: "t"})
	require.NoError(t, err)
	require.Equal(t, []persist.FieldMeta{
		{Name: "obs", Kind: persist.KindTensor, DType: "float32", Shape: []int{2, 2}},
		{Name: "n", Kind: persist.KindInt64, DType: "int64", Shape: []int{}},
		{Name: "l", Kind: persist.KindInt64List},
	}, m.Fields)
	require.Equal(t, []string{"obs", "n", "l"}, m.FieldNames())
}

func TestGetMetaInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	r := q.fileReader()
	for _, req := range []persist.MetaRequest{
		{BatchSize: 1, Task: "t"},
		{Fields: []string{"x"}, Task: "t"},
		{Fields: []string{"x"}, BatchSize: 1},
		{Fields: []string{"x"}, BatchSize: 1, Task: "t", Partition: "a b"},
	} {
		_, err := r.GetMeta(ctx, &req)
		require.True(t, errors.Is(err, persist.ErrInvalid), "%+v: %v", req, err)
	}
}

func TestProduced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	putN(t, q, "p", 3, func(i int) persist.Record {
		if i == 1 {
			return persist.Record{"a": i}
		}
		return persist.Record{"a": i, "b": "x"}
	})
	putN(t, q, "other", 1, func(i int) persist.Record { return persist.Record{"a": 1, "b": "y"} })
	require.NoError(t, q.PutFields(ctx, "p", []int64{1}, []persist.Record{{"c": 1.0}}))
	got, err := q.Produced(ctx, "p", []int64{0, 1, 2, 3, 99}, []string{"a", "b", "c"})
	require.NoError(t, err)
	require.Equal(t, [][]bool{
		{true, true, false},
		{true, false, true},
		{true, true, false},
		{false, false, false}, // index 3 is in another partition
		{false, false, false},
	}, got)
	require.NoError(t, fileKVOf(q).Clear(ctx, "p", []string{"nokey"})) // idempotent no-op
}

func TestGetBatchBeforeAnyData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	// A consumer that starts before the producers: no such field yet, no error.
	b, m, err := persist.New(q).Reader().GetBatch(ctx, &persist.MetaRequest{Fields: []string{"src", "n"}, BatchSize: 4, Task: "t"})
	require.NoError(t, err)
	require.Equal(t, 0, m.Size)
	require.Equal(t, 0, b.Len())
	rows, err := b.Rows()
	require.NoError(t, err)
	require.Empty(t, rows)
	b.Release()
}
