// Package persisttest is the conformance suite of persist.Store: every store (the file
// store, the HTTP store and the distributed store) runs Run and must pass it
// unchanged. It uses only the public persist API over the store under test, so what
// it checks is what a user of persist.Queue, Reader and KVView can rely on whatever
// the store.
package persisttest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// NewStore returns a fresh, empty store for one test case. Run closes it when the case
// ends (Close is idempotent, so a case may close it earlier).
type NewStore func(t *testing.T) persist.Store

// testCase is one conformance case of Run: its name and its test of a queue over a
// fresh store.
type testCase struct {
	name string
	fn   func(t *testing.T, q *persist.Queue)
}

// Run runs every conformance case against stores made by newStore, each case in its
// own subtest with its own store.
func Run(t *testing.T, newStore NewStore) {
	cases := []testCase{
		{"PutAndRead", testPutAndRead},
		{"PutIsAtomic", testPutIsAtomic},
		{"PutIDRepeats", testPutIDRepeats},
		{"PutFieldsAndProduced", testPutFieldsAndProduced},
		{"GetMetaConsumption", testGetMetaConsumption},
		{"GetMetaWait", testGetMetaWait},
		{"GetBatch", testGetBatch},
		{"GetDataInPartition", testGetDataInPartition},
		{"UnknownFieldWarned", testUnknownFieldWarned},
		{"SamplersByName", testSamplersByName},
		{"RankAwareDeferConsume", testRankAwareDeferConsume},
		{"GRPOPastIncompleteGroups", testGRPOPastIncompleteGroups},
		{"ClearSamplesAndPartition", testClear},
		{"KV", testKV},
		{"StreamWaits", testStreamWaits},
		{"BigIntegersStayExact", testBigIntegers},
		{"BadInput", testBadInput},
		{"Close", testClose},
	}
	cases = append(cases, rlCases()...)
	cases = append(cases, groupCases()...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			c.fn(t, persist.New(s))
		})
	}
}

func putN(t *testing.T, q *persist.Queue, partition string, n int, rec func(i int) persist.Record) []int64 {
	t.Helper()
	recs := make([]persist.Record, n)
	for i := range recs {
		recs[i] = rec(i)
	}
	idx, err := q.PutPartition(context.Background(), partition, recs)
	require.NoError(t, err)
	require.Len(t, idx, n)
	return idx
}

func metaIdx(t *testing.T, q *persist.Queue, req persist.MetaRequest) []int64 {
	t.Helper()
	m, err := q.Reader().GetMeta(context.Background(), &req)
	require.NoError(t, err)
	require.Equal(t, len(m.Indexes), m.Size)
	if m.Indexes == nil {
		return []int64{}
	}
	return m.Indexes
}

func indexes(rows []persist.Row) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.Index)
	}
	return out
}

func testPutAndRead(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	a := putN(t, q, "a", 3, func(i int) persist.Record {
		return persist.Record{"i": i, "f": float64(i) / 2, "s": "x", "b": []byte{byte(i)}, "l": []int64{int64(i), 1}}
	})
	require.Equal(t, []int64{0, 1, 2}, a)
	b := putN(t, q, "b", 2, func(i int) persist.Record { return persist.Record{"i": 10 + i} })
	require.Equal(t, []int64{3, 4}, b, "indexes are global and consecutive across partitions")
	idx, err := q.Put(ctx, persist.Record{"t": persist.Tensor{DType: "uint8", Shape: []int{2}, Data: []byte{7, 8}}})
	require.NoError(t, err)
	require.EqualValues(t, 5, idx)

	rows, err := q.Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5}, indexes(rows))
	require.Equal(t, int64(2), rows[2].Fields["i"])
	require.Equal(t, 1.0, rows[2].Fields["f"])
	require.Equal(t, []byte{2}, rows[2].Fields["b"])
	require.Equal(t, []int64{2, 1}, rows[2].Fields["l"])
	require.Equal(t, "a", rows[2].Partition)
	require.Equal(t, persist.Tensor{DType: "uint8", Shape: []int{2}, Data: []byte{7, 8}}, rows[5].Fields["t"])

	rows, err = q.Get(ctx, 1, 100, &persist.GetOpts{Partition: "b", Fields: []string{"i"}})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4}, indexes(rows))
	require.Equal(t, persist.Record{"i": int64(11)}, rows[1].Fields)
	rows, err = q.Get(ctx, 1, 2, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, indexes(rows))

	// Shards of two ranks are disjoint and together cover everything.
	var all []int64
	for rank := range 2 {
		rows, err := q.Get(ctx, 0, 100, &persist.GetOpts{Shard: persist.Shard{Rank: rank, WorldSize: 2}})
		require.NoError(t, err)
		all = append(all, indexes(rows)...)
	}
	slices.Sort(all)
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5}, all)

	b2, err := q.Read(ctx, 0, 3, &persist.GetOpts{Fields: []string{"i"}})
	require.NoError(t, err)
	require.Equal(t, 3, b2.Len())
	require.NotNil(t, b2.Column("i"))
	b2.Release()

	scanPastEnd(t, q)

	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 6, n)
	next, err := q.NextIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 6, next)
	s, err := q.Schema(ctx)
	require.NoError(t, err)
	k, ok := s.Kind("f")
	require.True(t, ok)
	require.Equal(t, persist.KindFloat64, k)
	require.NoError(t, q.Flush(ctx))
	rows, err = q.Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Len(t, rows, 6, "a flush changes nothing a reader sees")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 6, st.NextIndex)
	scanPastEnd(t, q)
}

// scanPastEnd checks, on a queue of 6 records (indexes 0–5), that a Scan from an offset
// at or past the end answers nothing and that offset as where the next scan continues,
// never an index below it (it answered the end of the log, 6, so a client following it
// read again below the offset it asked for), with and without a partition and a shard;
// and that the next offset of a scan that ends at the log's end is that end.
func scanPastEnd(t *testing.T, q *persist.Queue) {
	t.Helper()
	ctx := context.Background()
	for _, opts := range []*persist.GetOpts{nil, {Partition: "a"}, {Shard: persist.Shard{Rank: 1, WorldSize: 2}}} {
		for _, offset := range []int64{6, 7, 100} {
			b, next, err := q.Store().Scan(ctx, offset, 10, opts)
			require.NoError(t, err)
			require.Zero(t, b.Len(), "offset %d, %+v", offset, opts)
			b.Release()
			require.Equal(t, offset, next, "a scan from offset %d continues there (%+v)", offset, opts)
		}
	}
	b, next, err := q.Store().Scan(ctx, 4, 10, nil)
	require.NoError(t, err)
	require.Equal(t, 2, b.Len())
	b.Release()
	require.EqualValues(t, 6, next)
}

func testPutIsAtomic(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, "p", 2, func(i int) persist.Record { return persist.Record{"x": i} })
	_, err := q.PutBatch(ctx, []persist.Record{{"x": 1}, {"x": "not an int"}})
	require.ErrorIs(t, err, persist.ErrSchema)
	var se *persist.SchemaError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "x", se.Field)
	_, err = q.PutBatch(ctx, []persist.Record{{"y": 1}, {"y": make(chan int)}})
	require.ErrorIs(t, err, persist.ErrUnsupportedValue)
	next, err := q.NextIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, next, "a refused batch writes nothing")
	s, err := q.Schema(ctx)
	require.NoError(t, err)
	_, ok := s.Kind("y")
	require.False(t, ok, "nor changes the schema")
}

// testPutIDRepeats: a put repeating an idempotency id (a retry whose answer was lost)
// returns the indexes of the first put and writes nothing, also when the repeats race;
// a repeat naming another partition or number of records, and a bad id, are refused.
func testPutIDRepeats(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, "p", 2, func(i int) persist.Record { return persist.Record{"x": i} })
	id := persist.NewPutID()
	recs := []persist.Record{{"x": 10}, {"x": 11}, {"x": 12}}
	first, err := q.PutPartitionOnce(ctx, id, "p", recs)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3, 4}, first)
	again, err := q.PutPartitionOnce(ctx, id, "p", recs)
	require.NoError(t, err)
	require.Equal(t, first, again, "a repeated put id answers the first put's indexes")
	next, err := q.NextIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, next, "and writes nothing")
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, n)

	// Repeats racing each other (retries from several connections or servers): one
	// batch is written, every caller gets its indexes.
	id2 := persist.NewPutID()
	got := make([][]int64, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = q.PutPartitionOnce(ctx, id2, "p", []persist.Record{{"x": 20}, {"x": 21}}) })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		require.Equal(t, []int64{5, 6}, got[i])
	}
	rows, err := q.Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6}, indexes(rows), "no duplicate rows")
	require.Equal(t, int64(20), rows[5].Fields["x"])

	// A plain put and another id append as usual.
	other, err := q.PutPartitionOnce(ctx, persist.NewPutID(), "p", recs)
	require.NoError(t, err)
	require.Equal(t, []int64{7, 8, 9}, other)
	plain := putN(t, q, "p", 1, func(int) persist.Record { return persist.Record{"x": 0} })
	require.Equal(t, []int64{10}, plain)

	// A repeat that is not the same batch, and bad ids: refused, nothing written. The
	// repeat has its own code, put_id_reused (a rollout takes it as written before,
	// rl.Rollout), which a bad id never has.
	_, err = q.PutPartitionOnce(ctx, id, "p", recs[:2])
	requirePutIDReused(t, err, id)
	_, err = q.PutPartitionOnce(ctx, id, "q", recs)
	requirePutIDReused(t, err, id)
	for _, bad := range []string{"", "has space", "slash/id", string(make([]byte, 129))} {
		_, err = q.PutPartitionOnce(ctx, bad, "p", recs)
		requireInvalidField(t, err, "put_id")
		require.NotErrorIs(t, err, persist.ErrPutIDReused, "a bad id is not a reused one")
	}
	next, err = q.NextIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 11, next, "refused repeats write nothing")
	again, err = q.PutPartitionOnce(ctx, id, "p", recs)
	require.NoError(t, err)
	require.Equal(t, first, again, "the id is still remembered after flushes and other puts")
	require.NoError(t, q.Flush(ctx))
	again, err = q.PutPartitionOnce(ctx, id, "p", recs)
	require.NoError(t, err)
	require.Equal(t, first, again)
}

func testPutFieldsAndProduced(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	idx := putN(t, q, "p", 4, func(i int) persist.Record { return persist.Record{"prompt": i} })
	req := persist.MetaRequest{Fields: []string{"prompt", "reward"}, BatchSize: 4, Task: "t", Partition: "p"}
	require.Equal(t, []int64{}, metaIdx(t, q, req), "a field no sample has yet: nothing is ready")
	require.NoError(t, q.PutFields(ctx, "p", idx[1:3], []persist.Record{{"reward": 1.0}, {"reward": 2.0}}))
	prod, err := q.Produced(ctx, "p", idx, []string{"prompt", "reward"})
	require.NoError(t, err)
	require.Equal(t, [][]bool{{true, false}, {true, true}, {true, true}, {true, false}}, prod)
	m, err := q.Reader().GetMeta(ctx, &req)
	require.NoError(t, err)
	require.Equal(t, idx[1:3], m.Indexes)
	b, err := q.Reader().GetData(ctx, m)
	require.NoError(t, err)
	rows, err := b.Rows()
	b.Release()
	require.NoError(t, err)
	require.Equal(t, 2.0, rows[1].Fields["reward"])
	require.ErrorIs(t, q.PutFields(ctx, "p", []int64{99}, []persist.Record{{"reward": 1.0}}), persist.ErrNotFound)
	require.ErrorIs(t, q.PutFields(ctx, "other", idx[:1], []persist.Record{{"reward": 1.0}}), persist.ErrNotFound)
}

func testGetMetaConsumption(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, persist.DefaultPartition, 10, func(i int) persist.Record { return persist.Record{"x": i} })
	req := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train"}
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, q, req))
	require.Equal(t, []int64{4, 5, 6, 7}, metaIdx(t, q, req))
	other := req
	other.Task = "eval"
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, q, other), "consumption is per task")
	require.Equal(t, []int64{8, 9}, metaIdx(t, q, req), "a partial batch outside wait mode")
	require.Equal(t, []int64{}, metaIdx(t, q, req))
	n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.EqualValues(t, 10, n)
	require.NoError(t, q.ResetConsumption(ctx, "train", persist.DefaultPartition))
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, q, req))

	deferred := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "d", DeferConsume: true}
	require.Equal(t, []int64{0, 1}, metaIdx(t, q, deferred))
	require.Equal(t, []int64{0, 1}, metaIdx(t, q, deferred), "not consumed until marked")
	require.NoError(t, q.MarkConsumed(ctx, "d", persist.DefaultPartition, []int64{0, 1}))
	require.Equal(t, []int64{2, 3}, metaIdx(t, q, deferred))
	require.ErrorIs(t, q.MarkConsumed(ctx, "d", persist.DefaultPartition, []int64{100}), persist.ErrNotFound)

	b, m, err := q.Reader().GetBatch(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 3, Task: "g"})
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 2}, m.Indexes)
	require.Equal(t, 3, b.Len())
	b.Release()
}

func testGetMetaWait(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, persist.DefaultPartition, 2, func(i int) persist.Record { return persist.Record{"x": i} })
	req := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "t", Wait: true, Timeout: 100 * time.Millisecond}
	_, err := q.Reader().GetMeta(ctx, &req)
	require.ErrorIs(t, err, persist.ErrTimeout)
	require.Equal(t, []int64{0, 1}, metaIdx(t, q, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "u"}),
		"a timed-out wait hands out nothing")
	done := make(chan []int64, 1)
	go func() {
		r := req
		r.Timeout = 30 * time.Second
		m, err := q.Reader().GetMeta(ctx, &r)
		if err != nil {
			done <- nil
			return
		}
		done <- m.Indexes
	}()
	time.Sleep(50 * time.Millisecond)
	putN(t, q, persist.DefaultPartition, 2, func(i int) persist.Record { return persist.Record{"x": i} })
	select {
	case got := <-done:
		require.Equal(t, []int64{0, 1, 2, 3}, got)
	case <-time.After(20 * time.Second):
		t.Fatal("a waiting GetMeta did not see the rows put after it started")
	}
}

// testGetDataInPartition: GetData naming a partition reads only that partition's
// records: a global index of another partition is not found in it (as PutFields and
// ClearSamples answer), named in the error, and nothing is read; "" reads by global index
// whatever the partition (a read's partition filter); a partition no put can name is
// refused as invalid.
func testGetDataInPartition(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	r := q.Reader()
	a := putN(t, q, "a", 2, func(i int) persist.Record { return persist.Record{"x": i} })
	b := putN(t, q, "b", 2, func(i int) persist.Record { return persist.Record{"x": 10 + i} })
	fields := []persist.FieldMeta{{Name: "x"}}
	read := func(partition string, idx ...int64) ([]persist.Row, error) {
		t.Helper()
		batch, err := r.GetData(ctx, &persist.BatchMeta{Indexes: idx, Size: len(idx), Partition: partition, Fields: fields})
		if err != nil {
			return nil, err
		}
		defer batch.Release()
		return batch.Rows()
	}
	rows, err := read("b", b[1], b[0])
	require.NoError(t, err)
	require.Equal(t, []int64{b[1], b[0]}, indexes(rows))
	require.Equal(t, []string{"b", "b"}, []string{rows[0].Partition, rows[1].Partition})
	require.EqualValues(t, 11, rows[0].Fields["x"])

	_, err = read("b", b[0], a[1])
	require.ErrorIs(t, err, persist.ErrNotFound, "an index of partition a is not in b")
	var nf *persist.NotFoundError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, "b", nf.Partition)
	require.Equal(t, []int64{a[1]}, nf.Indexes, "the index not in the partition, only it")
	require.Contains(t, err.Error(), `in partition "b"`)
	_, err = read(persist.DefaultPartition, a[0])
	require.ErrorIs(t, err, persist.ErrNotFound, "nothing was put in the default partition")

	rows, err = read("", b[0], a[0])
	require.NoError(t, err, "no partition named: by global index, any partition")
	require.Equal(t, []int64{b[0], a[0]}, indexes(rows))
	require.Equal(t, []string{"b", "a"}, []string{rows[0].Partition, rows[1].Partition})

	_, err = read("../b", b[0])
	require.ErrorIs(t, err, persist.ErrInvalid, "a partition no put can name")
}

// testGetBatch: Reader.GetBatch (one request over HTTP) hands out and reads in one call:
// the values of the requested fields, the partition of every row, an empty batch (with no
// error) before any data, a wait that sees rows put after it started, a sampler's refusal.
func testGetBatch(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	r := q.Reader()
	b, m, err := r.GetBatch(ctx, &persist.MetaRequest{Fields: []string{"x", "y"}, BatchSize: 4, Task: "t"})
	require.NoError(t, err, "a consumer may start before its producers")
	require.Equal(t, 0, m.Size)
	require.Empty(t, m.Indexes)
	require.Equal(t, 0, b.Len())
	b.Release()

	putN(t, q, "p", 6, func(i int) persist.Record { return persist.Record{"x": i, "y": float64(i) / 2, "s": "str"} })
	b, m, err = r.GetBatch(ctx, &persist.MetaRequest{Fields: []string{"y", "x"}, BatchSize: 4, Task: "t", Partition: "p"})
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 2, 3}, m.Indexes)
	require.Equal(t, 4, m.Size)
	require.Equal(t, "p", m.Partition)
	require.Equal(t, m.Indexes, b.Indexes)
	require.Equal(t, []string{"y", "x"}, []string{b.Fields[0].Name, b.Fields[1].Name})
	rows, err := b.Rows()
	require.NoError(t, err)
	for i, row := range rows {
		require.Equal(t, "p", row.Partition)
		require.Equal(t, persist.Record{"x": int64(i), "y": float64(i) / 2}, row.Fields)
	}
	b.Release()

	done := make(chan []int64, 1)
	go func() {
		b, m, err := r.GetBatch(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "t", Partition: "p",
			Wait: true, Timeout: 30 * time.Second})
		if err != nil {
			done <- nil
			return
		}
		b.Release()
		done <- m.Indexes
	}()
	putN(t, q, "p", 2, func(i int) persist.Record { return persist.Record{"x": 10 + i} })
	select {
	case got := <-done:
		require.Equal(t, []int64{4, 5, 6, 7}, got)
	case <-time.After(25 * time.Second):
		t.Fatal("a waiting GetBatch did not see the rows put after it started")
	}

	_, _, err = r.GetBatch(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 3, Task: "g", Partition: "p",
		Sampler: persist.SamplerSpec{Name: persist.SamplerGRPOGroupN, Params: json.RawMessage(`{"n": 2}`)}})
	requireInvalid(t, err)
	n, err := q.Consumed(ctx, "g", "p")
	require.NoError(t, err)
	require.Zero(t, n, "a refused request hands nothing out")
}

func testSamplersByName(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	lens := []int{10, 1, 1, 1, 9, 2, 2, 2}
	putN(t, q, persist.DefaultPartition, len(lens), func(i int) persist.Record { return persist.Record{"tokens": make([]int64, lens[i])} })
	m := metaIdx(t, q, persist.MetaRequest{Fields: []string{"tokens"}, BatchSize: 8, Task: "s",
		Sampler: persist.SeqLenBalanced{LengthField: "tokens", Groups: 2}.Spec()})
	require.Equal(t, []int64{0, 6, 1, 2, 4, 5, 7, 3}, m)
	m = metaIdx(t, q, persist.MetaRequest{Fields: []string{"tokens"}, BatchSize: 4, Task: "g",
		Sampler: persist.SamplerSpec{Name: persist.SamplerGRPOGroupN, Params: json.RawMessage(`{"n": 2}`)}})
	require.Equal(t, []int64{0, 1, 2, 3}, m)
	for _, spec := range []persist.SamplerSpec{
		{Name: "no-such-sampler"},
		{Name: persist.SamplerGRPOGroupN, Params: json.RawMessage(`{"n": 2, "x": 1}`)},
		{Name: persist.SamplerGRPOGroupN, Params: json.RawMessage(`{"n": 3}`)}, // 4 is not a multiple of 3
	} {
		_, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"tokens"}, BatchSize: 4, Task: "e", Sampler: spec})
		require.ErrorIs(t, err, persist.ErrInvalid, "%+v", spec)
	}
}

func testRankAwareDeferConsume(t *testing.T, q *persist.Queue) { RankAwareDeferConsume(t, q, nil) }

// RankAwareDeferConsume checks the RankAware sampler with DeferConsume on q: the
// samples of one data-parallel group stay ready until marked consumed but are never
// offered to another group, sequential readers of the task are not affected by the
// holds, and a reset releases them. With reopen, the holds are checked again on the
// queue it returns (q closed and opened again: they survive a restart).
func RankAwareDeferConsume(t *testing.T, q *persist.Queue, reopen func() *persist.Queue) {
	t.Helper()
	ctx := context.Background()
	putN(t, q, persist.DefaultPartition, 12, func(i int) persist.Record { return persist.Record{"x": i} })
	req := func(dp, step int) persist.MetaRequest {
		return persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train", Sampler: persist.RankAware{}.Spec(),
			DPRank: dp, BatchIndex: step, DeferConsume: true}
	}
	g0 := metaIdx(t, q, req(0, 0))
	require.Equal(t, []int64{0, 1, 2, 3}, g0)
	require.Equal(t, g0, metaIdx(t, q, req(0, 0)), "every rank of a group gets the same batch")
	require.Equal(t, []int64{4, 5, 6, 7}, metaIdx(t, q, req(1, 0)), "another group gets a disjoint batch")
	require.NoError(t, q.MarkConsumed(ctx, "train", persist.DefaultPartition, g0))
	require.Equal(t, []int64{8, 9, 10, 11}, metaIdx(t, q, req(0, 1)))
	require.Equal(t, []int64{}, metaIdx(t, q, req(1, 1)), "every ready sample is held by a group")
	if reopen != nil {
		q = reopen() // held survives a restart, as the assignments do
	}
	require.Equal(t, []int64{}, metaIdx(t, q, req(2, 0)))
	require.Equal(t, []int64{4, 5}, metaIdx(t, q, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "train", DeferConsume: true}),
		"sequential readers of the same task are not affected by holds")
	require.NoError(t, q.ResetConsumption(ctx, "train", persist.DefaultPartition))
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, q, req(1, 1)), "reset releases every hold")
}

func testGRPOPastIncompleteGroups(t *testing.T, q *persist.Queue) {
	const blocks = 1100
	putN(t, q, persist.DefaultPartition, 4*blocks, func(i int) persist.Record {
		if i%4 == 3 {
			return persist.Record{"resp": i}
		}
		return persist.Record{"resp": i, "reward": 1.0}
	})
	last := putN(t, q, persist.DefaultPartition, 4, func(i int) persist.Record { return persist.Record{"resp": i, "reward": 2.0} })
	req := persist.MetaRequest{Fields: []string{"resp", "reward"}, BatchSize: 4, Task: "t", Sampler: persist.GRPOGroupN{N: 4}.Spec()}
	require.Equal(t, last, metaIdx(t, q, req), "at once")
	req.Task, req.Wait, req.Timeout = "w", true, 10*time.Second
	require.Equal(t, last, metaIdx(t, q, req), "in wait mode")
}

func testClear(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, "a", 6, func(i int) persist.Record { return persist.Record{"x": i} })
	putN(t, q, "b", 2, func(i int) persist.Record { return persist.Record{"x": i} })
	require.NoError(t, q.ClearSamples(ctx, "a", []int64{1, 2, 6, 99}))
	require.NoError(t, q.ClearSamples(ctx, "a", []int64{1}), "idempotent")
	rows, err := q.Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 3, 4, 5, 6, 7}, indexes(rows), "index 6 is in b: untouched")
	require.Equal(t, []int64{0, 3}, metaIdx(t, q, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "t", Partition: "a"}))
	_, err = q.Reader().GetData(ctx, &persist.BatchMeta{Indexes: []int64{1}, Fields: []persist.FieldMeta{{Name: "x", Kind: persist.KindInt64}}})
	require.ErrorIs(t, err, persist.ErrNotFound)
	require.NoError(t, q.ClearPartition(ctx, "a"))
	n, err := q.Consumed(ctx, "t", "a")
	require.NoError(t, err)
	require.Zero(t, n)
	rows, err = q.Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{6, 7}, indexes(rows))
	l, err := q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, l)
	require.Equal(t, []int64{8}, putN(t, q, "a", 1, func(int) persist.Record { return persist.Record{"x": 0} }), "indexes are never reused")
}

func testKV(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	kv := persist.KV(q)
	i, err := kv.Put(ctx, "p", "k1", persist.Record{"a": 1}, map[string]string{"src": "x"})
	require.NoError(t, err)
	idx, err := kv.BatchPut(ctx, "p", []string{"k2", "k1"}, []persist.Record{{"a": 2}, {"b": "y"}}, nil)
	require.NoError(t, err)
	require.Equal(t, i, idx[1], "a known key keeps its index")
	got, err := kv.BatchGet(ctx, "p", []string{"k1", "k2"}, nil)
	require.NoError(t, err)
	require.Equal(t, persist.Record{"a": int64(1), "b": "y"}, got[0].Fields)
	require.Equal(t, map[string]string{"src": "x"}, got[0].Tags)
	list, err := kv.List(ctx, "p")
	require.NoError(t, err)
	require.Len(t, list, 2)
	if pager, ok := q.Store().(persist.KVPager); ok { // a page: from an index on, at most limit keys
		k3, err := kv.Put(ctx, "other", "k3", persist.Record{"a": 3}, nil)
		require.NoError(t, err)
		page, err := pager.KVListPage(ctx, "", list[0].Index+1, 1)
		require.NoError(t, err)
		require.Equal(t, []string{list[1].Key}, keysOf(page))
		page, err = pager.KVListPage(ctx, "", list[1].Index+1, 5)
		require.NoError(t, err)
		require.Equal(t, []string{"k3"}, keysOf(page))
		page, err = pager.KVListPage(ctx, "p", list[0].Index, 0)
		require.NoError(t, err)
		require.Equal(t, keysOf(list), keysOf(page), "limit 0: every key of the partition")
		page, err = pager.KVListPage(ctx, "p", k3, 5)
		require.NoError(t, err)
		require.Empty(t, page)
		require.NoError(t, kv.Clear(ctx, "other", []string{"k3"}))
	}
	require.NoError(t, kv.Clear(ctx, "p", []string{"k1", "nope"}))
	_, err = kv.BatchGet(ctx, "p", []string{"k1"}, nil)
	require.ErrorIs(t, err, persist.ErrNotFound)
	var nf *persist.NotFoundError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, []string{"k1"}, nf.Keys)
	_, err = kv.Put(ctx, "p", "", persist.Record{"a": 1}, nil)
	require.ErrorIs(t, err, persist.ErrInvalid)
}

// keysOf returns the keys of entries, in order.
func keysOf(entries []persist.KVEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Key
	}
	return out
}

func testStreamWaits(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, persist.DefaultPartition, 3, func(i int) persist.Record { return persist.Record{"x": i} })
	s := q.Stream(&persist.StreamOpts{BatchSize: 2, Wait: true, IdleTimeout: 10 * time.Second})
	rows, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, indexes(rows))
	rows, err = s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{2}, indexes(rows))
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = q.Put(ctx, persist.Record{"x": 3})
	}()
	rows, err = s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{3}, indexes(rows))
	_, err = q.Stream(&persist.StreamOpts{Offset: 4}).Next(ctx)
	require.ErrorIs(t, err, io.EOF)
	short := q.Stream(&persist.StreamOpts{Offset: 4, Wait: true, IdleTimeout: 50 * time.Millisecond})
	_, err = short.Next(ctx)
	require.ErrorIs(t, err, io.EOF)
}

func testBigIntegers(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	const big = int64(1)<<53 + 1
	_, err := q.Put(ctx, persist.Record{"i": big})
	require.NoError(t, err)
	_, err = q.Put(ctx, persist.Record{"i": 0.5})
	require.ErrorIs(t, err, persist.ErrSchema)
	_, err = q.Put(ctx, persist.Record{"f": 0.5})
	require.NoError(t, err)
	_, err = q.Put(ctx, persist.Record{"f": big})
	require.ErrorIs(t, err, persist.ErrSchema)
	rows, err := q.Get(ctx, 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, big, rows[0].Fields["i"])
}

func testBadInput(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	_, err := q.PutPartition(ctx, "_bad", []persist.Record{{"x": 1}})
	requireInvalid(t, err)
	// The queue exists (a refused put creates none: over HTTP, every route but the puts
	// answers not_found for a queue no put created), so the checks below are the store's
	// checks of the call.
	putN(t, q, persist.DefaultPartition, 1, func(int) persist.Record { return persist.Record{"x": 1} })
	_, err = q.Put(ctx, persist.Record{"_index": 1})
	requireInvalid(t, err)
	// A NUL byte in a field name or a KV key (PostgreSQL's text holds none; SQLite's C
	// strings end at one) is invalid naming what holds it, on every write and KV path.
	_, err = q.Put(ctx, persist.Record{"a\x00b": 1})
	requireInvalidField(t, err, "record field name")
	requireInvalidField(t, q.PutFields(ctx, persist.DefaultPartition, []int64{0}, []persist.Record{{"y\x00": 1}}), "record field name")
	kv := persist.KV(q)
	_, err = kv.Put(ctx, persist.DefaultPartition, "k\x00", persist.Record{"x": 1}, nil)
	requireInvalidField(t, err, "key")
	_, err = kv.Put(ctx, persist.DefaultPartition, "k", persist.Record{"\x00": 1}, nil)
	requireInvalidField(t, err, "record field name")
	_, err = q.Store().KVGet(ctx, persist.DefaultPartition, []string{"k\x00"}, nil)
	requireInvalidField(t, err, "key")
	requireInvalidField(t, q.Store().KVClear(ctx, persist.DefaultPartition, []string{"\x00"}), "key")
	// Nor invalid UTF-8 in a KV key (PostgreSQL's text refuses it as an internal error; over
	// HTTP the body's decoder may refuse it first, naming the request body).
	_, err = kv.Put(ctx, persist.DefaultPartition, "k\xff", persist.Record{"x": 1}, nil)
	requireInvalid(t, err)
	_, err = q.Store().KVGet(ctx, persist.DefaultPartition, []string{"k\xff"}, nil)
	requireInvalid(t, err)
	requireInvalid(t, q.Store().KVClear(ctx, persist.DefaultPartition, []string{"k\xff"}))
	// Nor in a task name, a field name a read asks for, or a KV tag: every store refuses
	// them as invalid (the distributed store answered PostgreSQL's "invalid byte sequence
	// for encoding UTF8", an internal error, HTTP 500).
	for _, task := range []string{"t\x00", "t\xff"} {
		// Invalid UTF-8 may be refused before the store sees it (over HTTP the body's
		// decoder refuses it, naming the request body): invalid either way.
		check := func(err error, field string) {
			t.Helper()
			if strings.Contains(task, "\x00") {
				requireInvalidField(t, err, field)
			} else {
				requireInvalid(t, err)
			}
		}
		_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 1, Task: task})
		check(err, "task")
		check(q.MarkConsumed(ctx, task, persist.DefaultPartition, []int64{0}), "task")
		check(q.ResetConsumption(ctx, task, persist.DefaultPartition), "task")
		_, err = q.Consumed(ctx, task, persist.DefaultPartition)
		check(err, "task")
		check(q.DropGroup(ctx, task, persist.DefaultPartition, []int64{0}), "task")
		_, err = q.PutAdmitted(ctx, persist.DefaultPartition, []persist.Record{{"x": 1}}, &persist.PutOpts{Admission: &persist.Admission{Task: task, MaxUnconsumed: 10, MaxAhead: -1}})
		check(err, "admission_task")
	}
	_, err = q.Consumed(ctx, "", persist.DefaultPartition)
	requireInvalidField(t, err, "task")
	_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x", "y\x00"}, BatchSize: 1, Task: "t"})
	requireInvalidField(t, err, "fields")
	_, _, err = q.Reader().GetBatch(ctx, &persist.MetaRequest{Fields: []string{"\x00"}, BatchSize: 1, Task: "t"})
	requireInvalidField(t, err, "fields")
	_, err = q.Produced(ctx, persist.DefaultPartition, []int64{0}, []string{"x", "\x00"})
	requireInvalidField(t, err, "fields")
	for _, tags := range []map[string]string{{"s": "a\x00"}, {"\x00": "a"}, {"s": "\xff"}} {
		_, err = kv.Put(ctx, persist.DefaultPartition, "k", persist.Record{"x": 1}, tags)
		if tags["s"] == "\xff" {
			requireInvalid(t, err) // over HTTP: the body's decoder refuses it first
		} else {
			requireInvalidField(t, err, "tags")
		}
	}
	n, err := q.Consumed(ctx, "t", persist.DefaultPartition)
	require.NoError(t, err)
	require.Zero(t, n, "a refused call consumed nothing")
	_, err = q.Get(ctx, -1, 10, nil)
	requireInvalid(t, err)
	_, err = q.Get(ctx, 0, 0, nil)
	requireInvalid(t, err)
	_, err = q.Get(ctx, 0, 10, &persist.GetOpts{Shard: persist.Shard{Rank: 2, WorldSize: 2}})
	requireInvalid(t, err)
	for _, req := range []persist.MetaRequest{
		{BatchSize: 1, Task: "t"},
		{Fields: []string{"x"}, Task: "t"},
		{Fields: []string{"x"}, BatchSize: 1},
		{Fields: []string{"x"}, BatchSize: 1, Task: "t", Partition: "-x"},
	} {
		_, err := q.Reader().GetMeta(ctx, &req)
		requireInvalid(t, err)
	}
	requireInvalid(t, q.PutFields(ctx, persist.DefaultPartition, []int64{0}, nil))
	_, err = q.Reader().GetData(ctx, nil)
	requireInvalid(t, err)
	// A partition filter ("" for every partition) is a partition name like any other: a
	// listing of keys is refused for a name no partition can have, as a read is.
	for _, partition := range []string{"../..", "\x00", "_bad"} {
		_, err = q.Get(ctx, 0, 10, &persist.GetOpts{Partition: partition})
		requireInvalid(t, err)
		_, err = persist.KV(q).List(ctx, partition)
		requireInvalid(t, err)
		if pager, ok := q.Store().(persist.KVPager); ok {
			_, err = pager.KVListPage(ctx, partition, 0, 1)
			requireInvalid(t, err)
		}
	}
}

// requireInvalidField is requireInvalid of an error naming field.
func requireInvalidField(t *testing.T, err error, field string) {
	t.Helper()
	requireInvalid(t, err)
	var ie *persist.InvalidError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, field, ie.Field, "%v", err)
}

// requirePutIDReused checks err is the refusal of a put whose id names another batch.
func requirePutIDReused(t *testing.T, err error, id string) {
	t.Helper()
	require.ErrorIs(t, err, persist.ErrPutIDReused)
	require.ErrorIs(t, err, persist.ErrInvalid, "a bad argument too")
	require.Equal(t, persist.ErrPutIDReused.Code, persist.Code(err))
	var pr *persist.PutIDReusedError
	require.ErrorAs(t, err, &pr)
	require.Equal(t, id, pr.ID)
}

func requireInvalid(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, persist.ErrInvalid)
	var ie *persist.InvalidError
	require.True(t, errors.As(err, &ie), "an *InvalidError: %v", err)
}

func testClose(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, persist.DefaultPartition, 1, func(int) persist.Record { return persist.Record{"x": 1} })
	s := q.Stream(&persist.StreamOpts{Offset: 1, Wait: true})
	done := make(chan error, 1)
	go func() {
		_, err := s.Next(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, q.Close(ctx))
	require.NoError(t, q.Close(ctx), "idempotent")
	select {
	case err := <-done:
		require.ErrorIs(t, err, persist.ErrClosed, "a waiting stream ends with ErrClosed")
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting stream did not end at Close")
	}
	_, err := q.Put(ctx, persist.Record{"x": 1})
	require.ErrorIs(t, err, persist.ErrClosed)
	_, err = q.Get(ctx, 0, 1, nil)
	require.ErrorIs(t, err, persist.ErrClosed)
	_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 1, Task: "t"})
	require.ErrorIs(t, err, persist.ErrClosed)
}
