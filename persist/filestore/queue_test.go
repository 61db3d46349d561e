package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

func allKinds(i int) persist.Record {
	return persist.Record{
		"b":   i%2 == 0,
		"i":   i,
		"f":   float64(i) + 0.5,
		"s":   fmt.Sprintf("s%d", i),
		"raw": []byte{byte(i), 1, 2},
		"li":  []int{i, i + 1},
		"lf":  []float32{float32(i), 0.25},
		"t":   persist.Tensor{DType: "uint8", Shape: []int{1, 3}, Data: []byte{byte(i), 4, 5}},
	}
}

func wantKinds(i int) persist.Record {
	return persist.Record{
		"b":   i%2 == 0,
		"i":   int64(i),
		"f":   float64(i) + 0.5,
		"s":   fmt.Sprintf("s%d", i),
		"raw": []byte{byte(i), 1, 2},
		"li":  []int64{int64(i), int64(i + 1)},
		"lf":  []float64{float64(i), 0.25},
		"t":   persist.Tensor{DType: "uint8", Shape: []int{1, 3}, Data: []byte{byte(i), 4, 5}},
	}
}

func TestPutGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("Flushed=%v", flush), func(t *testing.T) {
			t.Parallel()
			q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
			idx, err := persist.New(q).Put(ctx, allKinds(0))
			require.NoError(t, err)
			require.Equal(t, int64(0), idx)
			var recs []persist.Record
			for i := 1; i < 10; i++ {
				recs = append(recs, allKinds(i))
			}
			ids, err := persist.New(q).PutBatch(ctx, recs)
			require.NoError(t, err)
			require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}, ids)
			if flush {
				require.NoError(t, q.Flush(ctx))
				st, err := q.Stats(ctx)
				require.NoError(t, err)
				require.Equal(t, int64(0), st.TailRows)
				require.Equal(t, int64(10), st.FragmentRows)
			}
			rows, err := persist.New(q).Get(ctx, 0, 100, nil)
			require.NoError(t, err)
			require.Len(t, rows, 10)
			for i, r := range rows {
				require.Equal(t, int64(i), r.Index)
				require.Equal(t, persist.DefaultPartition, r.Partition)
				require.Equal(t, wantKinds(i), r.Fields, "row %d", i)
			}
			rows, err = persist.New(q).Get(ctx, 3, 2, &persist.GetOpts{Fields: []string{"s", "i"}})
			require.NoError(t, err)
			require.Equal(t, []persist.Row{
				{Index: 3, Partition: "default", Fields: persist.Record{"s": "s3", "i": int64(3)}},
				{Index: 4, Partition: "default", Fields: persist.Record{"s": "s4", "i": int64(4)}},
			}, rows)
			n, err := q.Len(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(10), n)
		})
	}
}

func TestPutGetAcrossTailAndFragments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1, RowGroupRows: 7})
	var want []int64
	for round := 0; round < 4; round++ {
		var recs []persist.Record
		for i := 0; i < 25; i++ {
			recs = append(recs, persist.Record{"x": round*100 + i})
		}
		ids, err := persist.New(q).PutBatch(ctx, recs)
		require.NoError(t, err)
		for i := range ids {
			want = append(want, int64(round*100+i))
		}
		if round%2 == 0 {
			require.NoError(t, q.Flush(ctx))
		}
	}
	rows, err := persist.New(q).Get(ctx, 0, 1000, nil)
	require.NoError(t, err)
	require.Len(t, rows, 100)
	for i, r := range rows {
		require.Equal(t, int64(i), r.Index)
		require.Equal(t, want[i], r.Fields["x"])
	}
	// Reading from an offset inside a fragment and across into the tail.
	rows, err = persist.New(q).Get(ctx, 20, 10, nil)
	require.NoError(t, err)
	require.Len(t, rows, 10)
	require.Equal(t, int64(20), rows[0].Index)
	require.Equal(t, int64(104), rows[9].Fields["x"])
}

func TestCloseNeverLosesRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	q, err := openFile(ctx, "q", &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1})
	require.NoError(t, err)
	var wg sync.WaitGroup
	const writers, per = 8, 50
	for w := 0; w < writers; w++ {
		wg.Go(func() {
			for i := 0; i < per; i++ {
				_, err := persist.New(q).Put(ctx, persist.Record{"w": w, "i": i})
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	require.NoError(t, q.Close(ctx))
	require.NoError(t, q.Close(ctx), "Close is idempotent")
	_, err = persist.New(q).Put(ctx, persist.Record{"w": 1})
	require.ErrorIs(t, err, persist.ErrClosed)

	// Close flushed: the files alone hold every row.
	q2 := openTemp(t, &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1})
	st, err := q2.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(0), st.TailRows)
	require.Equal(t, int64(writers*per), st.FragmentRows)
	rows, err := persist.New(q2).Get(ctx, 0, 10_000, nil)
	require.NoError(t, err)
	seen := map[[2]int64]bool{}
	for _, r := range rows {
		seen[[2]int64{r.Fields["w"].(int64), r.Fields["i"].(int64)}] = true
	}
	require.Len(t, seen, writers*per)
}

func TestSchemaEvolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	_, err := persist.New(q).Put(ctx, persist.Record{"name": "a", "score": 1})
	require.NoError(t, err)
	require.NoError(t, q.Flush(ctx)) // score is stored as int64 in the first fragment
	_, err = persist.New(q).Put(ctx, persist.Record{"name": "b", "score": 2.5, "extra": true})
	require.NoError(t, err)

	s, err := q.Schema(ctx)
	require.NoError(t, err)
	require.Equal(t, []persist.Field{{Name: "name", Kind: persist.KindString}, {Name: "score", Kind: persist.KindFloat64}, {Name: "extra", Kind: persist.KindBool}}, s.Fields)

	// Incompatible: the put fails naming the field and both types, and writes nothing.
	_, err = persist.New(q).PutBatch(ctx, []persist.Record{{"name": "c", "score": 3}, {"name": 7, "score": 1}})
	require.ErrorIs(t, err, persist.ErrSchema)
	var se *persist.SchemaError
	require.True(t, errors.As(err, &se))
	require.Equal(t, "name", se.Field)
	require.Equal(t, persist.KindString, se.Have)
	require.Equal(t, persist.KindInt64, se.Got)
	require.Contains(t, err.Error(), `"name"`)
	require.Contains(t, err.Error(), "string")
	require.Contains(t, err.Error(), "int64")
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)

	// Later puts keep working, with the same and with new fields.
	_, err = persist.New(q).Put(ctx, persist.Record{"name": "d", "score": 4})
	require.NoError(t, err)
	require.NoError(t, q.Flush(ctx))
	rows, err := persist.New(q).Get(ctx, 0, 10, nil)
	require.NoError(t, err)
	require.Equal(t, []persist.Record{
		{"name": "a", "score": 1.0},
		{"name": "b", "score": 2.5, "extra": true},
		{"name": "d", "score": 4.0},
	}, []persist.Record{rows[0].Fields, rows[1].Fields, rows[2].Fields})
	require.Equal(t, []int64{0, 1, 2}, []int64{rows[0].Index, rows[1].Index, rows[2].Index})
}

func TestSchemaConflictConcurrent(t *testing.T) {
	t.Parallel()
	// A rejected put grouped into the same transaction as good puts undoes only itself.
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	_, err := persist.New(q).Put(ctx, persist.Record{"v": 1})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var good, bad int
	for g := 0; g < 16; g++ {
		wg.Go(func() {
			for i := 0; i < 20; i++ {
				var rec persist.Record
				if (g+i)%3 == 0 {
					rec = persist.Record{"v": "text"}
				} else {
					rec = persist.Record{"v": i}
				}
				_, err := persist.New(q).Put(ctx, rec)
				mu.Lock()
				if err != nil {
					require.ErrorIs(t, err, persist.ErrSchema)
					bad++
				} else {
					good++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(good+1), n)
	require.Positive(t, bad)
	rows, err := persist.New(q).Get(ctx, 0, 1000, nil)
	require.NoError(t, err)
	for _, r := range rows {
		require.IsType(t, int64(0), r.Fields["v"])
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := openFile(ctx, "../x", &persist.Config{Dir: t.TempDir()})
	require.ErrorIs(t, err, persist.ErrInvalid)
	_, err = openFile(ctx, "q", &persist.Config{})
	require.ErrorIs(t, err, persist.ErrInvalid)
	_, err = openFile(ctx, "q", &persist.Config{Dir: t.TempDir(), FlushRows: -5})
	require.ErrorContains(t, err, "FlushRows")
	q := openTemp(t, nil)
	_, err = persist.New(q).Put(ctx, persist.Record{"_index": 1})
	require.ErrorIs(t, err, persist.ErrInvalid)
	_, err = persist.New(q).Put(ctx, persist.Record{"c": make(chan int)})
	require.ErrorIs(t, err, persist.ErrUnsupportedValue)
	_, err = q.PutPartition(ctx, "bad/part", []persist.Record{{"a": 1}}, nil)
	require.ErrorIs(t, err, persist.ErrInvalid)
	_, err = persist.New(q).Get(ctx, 0, 0, nil)
	require.ErrorIs(t, err, persist.ErrInvalid)
	_, err = persist.New(q).Get(ctx, 0, 1, &persist.GetOpts{Fields: []string{"nope"}})
	require.ErrorIs(t, err, persist.ErrInvalid)
}

func TestAutoFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("ByRows", func(t *testing.T) {
		t.Parallel()
		q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: 100})
		wait := flushWaiter(t, q)
		for i := 0; i < 10; i++ {
			recs := make([]persist.Record, 15)
			for j := range recs {
				recs[j] = persist.Record{"x": i*15 + j}
			}
			_, err := persist.New(q).PutBatch(ctx, recs)
			require.NoError(t, err)
		}
		wait(1)
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		require.GreaterOrEqual(t, st.FragmentRows, int64(100))
	})
	t.Run("ByInterval", func(t *testing.T) {
		t.Parallel()
		q := openTemp(t, &persist.Config{FlushInterval: 20 * time.Millisecond, FlushRows: -1})
		wait := flushWaiter(t, q)
		_, err := persist.New(q).Put(ctx, persist.Record{"x": 1})
		require.NoError(t, err)
		wait(1)
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), st.FragmentRows)
		require.Equal(t, int64(0), st.TailRows)
		require.False(t, st.LastFlush.IsZero())
	})
}

// flushWaiter returns a function that waits (on the queue's change notifications, not
// by sleeping) until the queue has completed n flushes.
func flushWaiter(t *testing.T, q *fileQueue) func(n int64) {
	return func(n int64) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			ch := q.hub.wait()
			if q.metrics.flushes.Load() >= n {
				return
			}
			select {
			case <-ch:
			case <-deadline:
				t.Fatalf("waited 10 s for %d flushes, saw %d", n, q.metrics.flushes.Load())
			}
		}
	}
}

func TestStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("NoWait", func(t *testing.T) {
		t.Parallel()
		q := openTemp(t, nil)
		for i := 0; i < 25; i++ {
			_, err := persist.New(q).Put(ctx, persist.Record{"i": i})
			require.NoError(t, err)
		}
		s := persist.New(q).Stream(&persist.StreamOpts{BatchSize: 10})
		var got []int64
		for _, r := range streamAll(t, s, 10) {
			got = append(got, r.Fields["i"].(int64))
		}
		require.Len(t, got, 25)
		for i, v := range got {
			require.Equal(t, int64(i), v)
		}
	})
	t.Run("WaitAndIdleTimeout", func(t *testing.T) {
		t.Parallel()
		q := openTemp(t, nil)
		s := persist.New(q).Stream(&persist.StreamOpts{BatchSize: 100, Wait: true, IdleTimeout: 500 * time.Millisecond})
		got := make(chan int64, 100)
		done := make(chan error, 1)
		go func() {
			for {
				rows, err := s.Next(ctx)
				if err != nil {
					done <- err
					return
				}
				for _, r := range rows {
					got <- r.Fields["i"].(int64)
				}
			}
		}()
		for i := 0; i < 5; i++ {
			_, err := persist.New(q).Put(ctx, persist.Record{"i": i})
			require.NoError(t, err)
			require.Equal(t, int64(i), <-got) // the waiting stream wakes for each put
		}
		start := time.Now()
		require.ErrorIs(t, <-done, io.EOF)
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	})
	t.Run("CloseEndsWait", func(t *testing.T) {
		t.Parallel()
		q, err := openFile(ctx, "q", &persist.Config{Dir: t.TempDir()})
		require.NoError(t, err)
		s := persist.New(q).Stream(&persist.StreamOpts{Wait: true})
		done := make(chan error, 1)
		go func() {
			_, err := s.Next(ctx)
			done <- err
		}()
		require.NoError(t, q.Close(ctx))
		require.ErrorIs(t, <-done, persist.ErrClosed)
	})
}

func TestPartitionsInGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	a, err := q.PutPartition(ctx, "a", []persist.Record{{"x": 1}, {"x": 2}}, nil)
	require.NoError(t, err)
	b, err := q.PutPartition(ctx, "b", []persist.Record{{"x": 3}}, nil)
	require.NoError(t, err)
	c, err := q.PutPartition(ctx, "a", []persist.Record{{"x": 4}}, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, a)
	require.Equal(t, []int64{2}, b)
	require.Equal(t, []int64{3}, c)
	rows, err := persist.New(q).Get(ctx, 0, 10, &persist.GetOpts{Partition: "a"})
	require.NoError(t, err)
	require.Equal(t, []persist.Row{
		{Index: 0, Partition: "a", Fields: persist.Record{"x": int64(1)}},
		{Index: 1, Partition: "a", Fields: persist.Record{"x": int64(2)}},
		{Index: 3, Partition: "a", Fields: persist.Record{"x": int64(4)}},
	}, rows)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"a": 3, "b": 1}, st.Partitions)
}

func TestNoOrphansAfterCleanRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	for i := 0; i < 3; i++ {
		_, err := persist.New(q).Put(ctx, persist.Record{"x": i})
		require.NoError(t, err)
		require.NoError(t, q.Flush(ctx))
	}
	entries, err := os.ReadDir(filepath.Join(q.Dir(), "data"))
	require.NoError(t, err)
	require.Len(t, entries, 3)
	for _, e := range entries {
		require.Equal(t, ".parquet", filepath.Ext(e.Name()))
	}
}

func TestDurabilityModes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, mode := range []persist.Durability{persist.Durable, persist.Buffered} {
		t.Run(map[persist.Durability]string{persist.Durable: "Durable", persist.Buffered: "Buffered"}[mode], func(t *testing.T) {
			t.Parallel()
			q := openTemp(t, &persist.Config{Durability: mode})
			var sync int
			require.NoError(t, q.rdb.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
			require.Equal(t, map[persist.Durability]int{persist.Durable: 2, persist.Buffered: 1}[mode], sync, "synchronous=FULL (2) or NORMAL (1)")
			_, err := persist.New(q).PutBatch(ctx, []persist.Record{{"x": 1}, {"x": 2}})
			require.NoError(t, err)
			q = reopen(t, q)
			n, err := q.Len(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(2), n)
		})
	}
	_, err := openFile(ctx, "q", &persist.Config{Dir: t.TempDir(), Durability: 7})
	require.ErrorIs(t, err, persist.ErrInvalid)
}

func TestTwoHandlesOneProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a := openTemp(t, &persist.Config{Dir: dir, FlushRows: 40, FlushInterval: 5 * time.Millisecond})
	b := openTemp(t, &persist.Config{Dir: dir, FlushRows: 40, FlushInterval: 5 * time.Millisecond})
	var wg sync.WaitGroup
	for h, q := range []*fileQueue{a, b} {
		wg.Go(func() {
			for i := 0; i < 100; i++ {
				_, err := persist.New(q).PutBatch(ctx, []persist.Record{{"h": h, "i": i}, {"h": h, "i": i}})
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	for _, q := range []*fileQueue{a, b} {
		rows, err := persist.New(q).Get(ctx, 0, 1000, nil)
		require.NoError(t, err)
		require.Len(t, rows, 400, "each handle sees every row")
		for i, r := range rows {
			require.Equal(t, int64(i), r.Index)
		}
	}
}

func TestMissingFragmentIsCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	_, err := persist.New(q).Put(ctx, persist.Record{"x": 1})
	require.NoError(t, err)
	require.NoError(t, q.Flush(ctx))
	files, err := filepath.Glob(filepath.Join(q.Dir(), "data", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	require.NoError(t, os.Remove(files[0]))
	_, err = persist.New(q).Get(ctx, 0, 1, nil)
	require.ErrorIs(t, err, persist.ErrCorrupt)
}
