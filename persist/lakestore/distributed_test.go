package lakestore

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestSecondStoreSeesRows: a store (a second machine) opened before the rows were put
// by another store reads them, and a GetMeta waiting on it wakes on the other's put.
func TestSecondStoreSeesRows(t *testing.T) {
	ctx := context.Background()
	catalog, bucket := pgtest.Database(t), fileBucket(t)
	a := persist.New(openTest(t, catalog, bucket, "q", nil))
	b := persist.New(openTest(t, catalog, bucket, "q", nil))

	done := make(chan []int64, 1)
	go func() {
		m, err := b.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 3, Task: "t", Wait: true, Timeout: 20 * time.Second})
		if err != nil {
			done <- nil
			return
		}
		done <- m.Indexes
	}()
	time.Sleep(100 * time.Millisecond)
	_, err := a.PutBatch(ctx, []persist.Record{{"x": 1}, {"x": 2}, {"x": 3}})
	require.NoError(t, err)
	select {
	case got := <-done:
		require.Equal(t, []int64{0, 1, 2}, got)
	case <-time.After(15 * time.Second):
		t.Fatal("a GetMeta waiting on another store did not wake")
	}
	rows, err := b.Get(ctx, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	require.NoError(t, a.Flush(ctx))
	rows, err = b.Get(ctx, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, rows, 3, "after another store's flush, from the fragment")
	require.Equal(t, int64(3), rows[2].Fields["x"])
}

// TestTwoServersProducersConsumers: four producers on two stores ("servers") put
// records while three consumers with distinct tasks, each running one reader on each
// of two other stores, take batches with GetMeta; background flushes move rows from
// the tail into fragments meanwhile. Every task's consumed set equals the produced
// set, with no duplicate.
func TestTwoServersProducersConsumers(t *testing.T) {
	const producers, perProducer, batch = 4, 3000, 100
	ctx := context.Background()
	catalog, bucket := pgtest.Database(t), fileBucket(t)
	cfg := &Config{FlushRows: 2000, FlushInterval: 200 * time.Millisecond}
	prodStores := []*persist.Queue{persist.New(openTest(t, catalog, bucket, "q", cfg)), persist.New(openTest(t, catalog, bucket, "q", cfg))}
	consStores := []*persist.Queue{persist.New(openTest(t, catalog, bucket, "q", cfg)), persist.New(openTest(t, catalog, bucket, "q", cfg))}

	var mu sync.Mutex
	var produced []int64
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := prodStores[p%2]
			for i := 0; i < perProducer; i += batch {
				recs := make([]persist.Record, batch)
				for j := range recs {
					recs[j] = persist.Record{"p": p, "i": i + j}
				}
				idx, err := q.PutBatch(ctx, recs)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				produced = append(produced, idx...)
				mu.Unlock()
			}
		}()
	}
	const total = producers * perProducer
	tasks := []string{"actor", "critic", "ref"}
	consumed := make([][]int64, len(tasks))
	var cwg sync.WaitGroup
	for ti, task := range tasks {
		for _, q := range consStores {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				for {
					mu.Lock()
					n := len(consumed[ti])
					mu.Unlock()
					if n >= total {
						return
					}
					m, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"p", "i"}, BatchSize: 64, Task: task, Wait: true, Timeout: 300 * time.Millisecond})
					if err != nil {
						if persist.Code(err) == "timeout" {
							// the tail end: take what is left without waiting
							m, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"p", "i"}, BatchSize: 64, Task: task})
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
					mu.Lock()
					consumed[ti] = append(consumed[ti], m.Indexes...)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { cwg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		t.Fatal("consumers did not finish")
	}
	slices.Sort(produced)
	require.Len(t, produced, total)
	for i, x := range produced {
		require.EqualValues(t, i, x, "indexes are dense and unique across servers")
	}
	for ti := range tasks {
		got := slices.Clone(consumed[ti])
		slices.Sort(got)
		require.Equal(t, produced, got, "task %s consumed every record exactly once", tasks[ti])
	}
	// Every record reads back with its values.
	require.NoError(t, prodStores[0].Flush(ctx))
	rows, err := consStores[1].Get(ctx, 0, total, &persist.GetOpts{Fields: []string{"i"}})
	require.NoError(t, err)
	require.Len(t, rows, total)
}

// TestBucketUnavailable: while the object store answers nothing but errors, puts
// stay durable (in the tail table) and readable, flushes fail without losing
// anything; once it is back, a flush moves everything into fragments.
func TestBucketUnavailable(t *testing.T) {
	ctx := context.Background()
	f := startS3(t, "lake")
	s := openTest(t, pgtest.Database(t), f.url("lake"), "q", &Config{FlushInterval: 50 * time.Millisecond})
	q := persist.New(s)
	_, err := q.PutBatch(ctx, []persist.Record{{"x": 0}})
	require.NoError(t, err)
	require.NoError(t, q.Flush(ctx))

	f.down.Store(true)
	for i := 1; i <= 20; i++ {
		_, err := q.PutBatch(ctx, []persist.Record{{"x": i}})
		require.NoError(t, err, "a put does not need the object store")
	}
	require.Error(t, q.Flush(ctx), "a flush needs it")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 20, st.TailRows)
	rows, err := q.Get(ctx, 1, 100, nil)
	require.NoError(t, err, "rows in the tail read without the object store")
	require.Len(t, rows, 20)

	f.down.Store(false)
	waitFor(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.TailRows == 0
	})
	s.cache.Purge()
	rows, err = q.Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Len(t, rows, 21)
	for i, r := range rows {
		require.Equal(t, int64(i), r.Fields["x"])
	}
}

// TestSweepDeletesOrphans: objects no catalog row names (a flush that died between
// writing its fragment and publishing it) are deleted once their publication deadline
// passed (by the catalog's clock) and the grace period after it; an object whose flush
// may still publish it (deadline ahead), an unnamed object without a deadline that is
// younger than FlushTimeoutDefault plus the grace, published fragments and other
// queues' objects never are.
// It runs on a file:// bucket and on S3 (the deadline travels as object metadata).
func TestSweepDeletesOrphans(t *testing.T) {
	t.Run("file", func(t *testing.T) { testSweepDeletesOrphans(t, fileBucket(t)) })
	t.Run("s3", func(t *testing.T) { testSweepDeletesOrphans(t, startS3(t, "lake").url("lake")) })
}

func testSweepDeletesOrphans(t *testing.T, bucket string) {
	ctx := context.Background()
	s := openTest(t, pgtest.Database(t), bucket, "q", &Config{SweepGrace: time.Nanosecond, SweepInterval: -1})
	q := persist.New(s)
	_, err := q.PutBatch(ctx, []persist.Record{{"x": 1}, {"x": 2}})
	require.NoError(t, err)
	require.NoError(t, q.Flush(ctx))
	var catalogNow time.Time
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&catalogNow))
	deadline := func(d time.Duration) *blob.WriterOptions {
		return &blob.WriterOptions{Metadata: map[string]string{metaPublishBy: catalogNow.Add(d).UTC().Format(time.RFC3339Nano)}}
	}
	require.NoError(t, s.bucket.WriteAll(ctx, "q/r-dead.parquet", []byte("left by a dead flush"), deadline(-time.Second)))
	require.NoError(t, s.bucket.WriteAll(ctx, "q/r-flushing.parquet", []byte("a flush still running"), deadline(time.Minute)))
	require.NoError(t, s.bucket.WriteAll(ctx, "q/r-legacy.parquet", []byte("no deadline, young"), nil))
	require.NoError(t, s.bucket.WriteAll(ctx, "other/r-x.parquet", []byte("another queue's"), deadline(-time.Hour)))
	n, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for _, key := range []string{"other/r-x.parquet", "q/r-flushing.parquet", "q/r-legacy.parquet"} {
		ok, err := s.bucket.Exists(ctx, key)
		require.NoError(t, err)
		require.True(t, ok, "%s is kept", key)
	}
	ok, err := s.bucket.Exists(ctx, "q/r-dead.parquet")
	require.NoError(t, err)
	require.False(t, ok, "the dead flush's object is swept")
	require.NoError(t, s.bucket.Delete(ctx, "q/r-flushing.parquet"))
	require.NoError(t, s.bucket.Delete(ctx, "q/r-legacy.parquet"))
	require.Equal(t, namedObjects(t, s), bucketObjects(t, s.bucket, "q/"))
	rows, err := q.Get(ctx, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, rows, 2)
}

// TestCatalogRefusesLatePublication: a fragment row whose publication deadline passed
// is refused at COMMIT by the catalog itself (a deferred check on its clock), so a
// flush that stalled past its FlushTimeout — after its last statement, before its
// commit — cannot publish an object the sweeper may have deleted.
func TestCatalogRefusesLatePublication(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, pgtest.Database(t), "mem://", "q", nil)
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `INSERT INTO fragments(queue, object, kind, min_idx, max_idx, rows, bytes, fields, added_version, publish_by)
		VALUES ($1, 'q/r-late.parquet', 0, 0, 0, 1, 1, '{}', 1, clock_timestamp() + interval '50 milliseconds')`, s.name)
	require.NoError(t, err, "the deadline is checked at commit, not at the insert")
	time.Sleep(100 * time.Millisecond)
	err = tx.Commit(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), "after its deadline")
	require.Empty(t, namedObjects(t, s))

	// A flush whose transaction outlives FlushTimeout fails and keeps its rows in the tail.
	s2 := openTest(t, pgtest.Database(t), "mem://", "q", &Config{FlushTimeout: time.Nanosecond})
	_, err = persist.New(s2).PutBatch(ctx, []persist.Record{{"x": 1}})
	require.NoError(t, err)
	require.Error(t, s2.Flush(ctx))
	st, err := s2.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.TailRows)
}

func namedObjects(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	rows, err := s.pool.Query(context.Background(), `SELECT object FROM fragments WHERE queue = $1 ORDER BY object`, s.name)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		out = append(out, o)
	}
	return out
}

func bucketObjects(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var out []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		out = append(out, o.Key)
	}
	slices.Sort(out)
	return out
}
