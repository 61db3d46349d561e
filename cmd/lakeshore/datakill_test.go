package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/persist/lakestore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// The tests of this file SIGKILL `lakeshore serve` processes serving the data plane
// (package persist through its HTTP store, on the file store and on the distributed
// store) and crash PostgreSQL under them, while clients put, consume and drive the RL
// state (weight versions, staleness, back-pressure), and check that no acknowledged
// record, consumption or version is lost, nothing is written or handed out twice, and
// no half-written record or fragment is ever visible.

// dataServer is a killable `lakeshore serve` of data queues: its clients (the HTTP store
// repeats what is safe to repeat, puts by their put id) reach it again after a restart.
type dataServer struct{ *killable }

// newDataServer starts `lakeshore serve --target target args…` (the data store's flags) on
// a loopback port it then keeps.
func newDataServer(t *testing.T, target string, args ...string) *dataServer {
	t.Helper()
	return &dataServer{startKillable(t, target, args...)}
}

// open opens queue name through the server; it is closed when the test ends.
func (d *dataServer) open(ctx context.Context, name string) *persist.Queue {
	d.t.Helper()
	q, err := persist.Open(ctx, name, &persist.Config{URL: "http://" + d.addr}, httpstore.Driver())
	require.NoError(d.t, err)
	d.t.Cleanup(func() { _ = q.Close(context.Background()) })
	return q
}

// dataStore is one store a dataServer serves: the file store (--data-dir) or the
// distributed store (--data postgres://…?blob=file://…).
type dataStore struct {
	name string
	// start starts a server on a fresh store.
	start func(t *testing.T) *dataServer
}

// dataStores are the stores the tests of this file run on.
var dataStores = []dataStore{
	{"file", func(t *testing.T) *dataServer {
		return newDataServer(t, filepath.Join(t.TempDir(), lakeshore.DefaultDBName), "--data-dir", t.TempDir())
	}},
	{"distributed", func(t *testing.T) *dataServer {
		target, db, _ := distributedTarget(t, "flush_interval=20ms", "flush_timeout=1s")
		return newDataServer(t, db, "--data", target)
	}},
}

// onEachDataStore runs fn, as a subtest of t per store of dataStores (skipped with
// -short), with a context bounded by a 3-minute hang guard, a server on a fresh store and
// its queue "rollouts" opened through it.
func onEachDataStore(t *testing.T, fn func(t *testing.T, ctx context.Context, srv *dataServer, q *persist.Queue)) {
	if testing.Short() {
		t.Skip("starts and kills servers")
	}
	for _, st := range dataStores {
		t.Run(st.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			srv := st.start(t)
			fn(t, ctx, srv, srv.open(ctx, "rollouts"))
		})
	}
}

// putNumbered puts total records {"v": i, "pad": pad} (i from 0), 200 a batch.
func putNumbered(t *testing.T, ctx context.Context, q *persist.Queue, total int) {
	t.Helper()
	for lo := 0; lo < total; lo += 200 {
		recs := make([]persist.Record, min(200, total-lo))
		for j := range recs {
			recs[j] = persist.Record{"v": int64(lo + j), "pad": pad}
		}
		_, err := q.PutBatch(ctx, recs)
		require.NoError(t, err)
	}
}

// awaitState polls cond (observable state: counts the test's clients keep) until it holds,
// failing t when ctx ends first.
func awaitState(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting: %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// producers are clients (startProducers) that put batches of records {"v": value, "pad":
// …} with distinct values, each with its own put id, repeating a failed batch with the
// same id (after a short back-off) until it is acknowledged — through server kills and
// restarts; a put answered an error no retry changes stops them (fatal). finish makes
// each finish the batch it is on and return.
type producers struct {
	next     atomic.Int64 // the next batch's first value
	acked    atomic.Int64 // records acknowledged
	failures atomic.Int64 // attempts that answered an error
	mu       sync.Mutex
	indexes  map[int64]int64 // value → the index its put answered
	stop     atomic.Bool
	fatal    atomic.Pointer[error] // an answer no retry can change: the test fails with it
	wg       sync.WaitGroup
}

// retryable reports whether a client repeats a call that failed with err: no answer from
// the server (it was killed), or an answer saying it or its storage is away for now.
func retryable(err error) bool {
	var pe *plane.Error
	if !errors.As(err, &pe) {
		return true // a transport error
	}
	return pe.Code == plane.ErrUnavailable.Code || pe.Code == api.ErrShuttingDown.Code || pe.Code == api.ErrTooManyLongPolls.Code
}

// failed fails t with the producers' fatal error, if any.
func (p *producers) failed(t *testing.T) {
	t.Helper()
	if err := p.fatal.Load(); err != nil {
		t.Fatalf("a put answered an error no retry changes: %v", *err)
	}
}

// pad is every record's second field: a read of a record shows it whole or not at all.
var pad = strings.Repeat("x", 64)

// startProducers starts n producers of batches of batch records putting into q.
func startProducers(t *testing.T, ctx context.Context, q *persist.Queue, n, batch int) *producers {
	p := &producers{indexes: map[int64]int64{}}
	for range n {
		p.wg.Go(func() {
			for !p.stop.Load() && ctx.Err() == nil {
				lo := p.next.Add(int64(batch)) - int64(batch)
				recs := make([]persist.Record, batch)
				for j := range recs {
					recs[j] = persist.Record{"v": lo + int64(j), "pad": pad}
				}
				id := persist.NewPutID()
				for ctx.Err() == nil {
					idx, err := q.PutPartitionOnce(ctx, id, persist.DefaultPartition, recs)
					if err != nil {
						if !retryable(err) {
							p.fatal.CompareAndSwap(nil, &err)
							return
						}
						p.failures.Add(1)
						time.Sleep(20 * time.Millisecond) // a client's back-off, not a synchronisation
						continue
					}
					p.mu.Lock()
					for j, x := range idx {
						p.indexes[lo+int64(j)] = x
					}
					p.mu.Unlock()
					p.acked.Add(int64(batch))
					break
				}
			}
		})
	}
	return p
}

// finish stops the producers and waits until each acknowledged its last batch.
func (p *producers) finish(t *testing.T, ctx context.Context) {
	t.Helper()
	p.stop.Store(true)
	p.wg.Wait()
	p.failed(t)
	require.NoError(t, ctx.Err(), "the producers finished their batches")
}

// requireExactlyOnce checks the queue against every batch the producers began (each was
// acknowledged in the end): every value is in the queue once, at the index its put
// answered, whole, and the indexes are dense (no record of a doubled put anywhere).
func (p *producers) requireExactlyOnce(t *testing.T, ctx context.Context, q *persist.Queue) {
	t.Helper()
	total := p.next.Load()
	require.EqualValues(t, total, p.acked.Load(), "every batch begun was acknowledged")
	next, err := q.NextIndex(ctx)
	require.NoError(t, err)
	require.Equal(t, total, next, "the queue holds exactly the records put: none doubled by a repeated put")
	seen := map[int64]int64{}
	for off := int64(0); off < next; off += persist.ScanLimitMax {
		rows, err := q.Get(ctx, off, persist.ScanLimitMax, nil)
		require.NoError(t, err)
		for _, r := range rows {
			v, ok := r.Fields["v"].(int64)
			require.True(t, ok, "row %d has its value: %+v", r.Index, r.Fields)
			require.Equal(t, pad, r.Fields["pad"], "row %d is whole", r.Index)
			_, dup := seen[v]
			require.False(t, dup, "record %d is in the queue twice (indexes %d and %d)", v, seen[v], r.Index)
			seen[v] = r.Index
		}
	}
	require.Len(t, seen, int(total), "every record reads back")
	p.mu.Lock()
	defer p.mu.Unlock()
	for v, idx := range p.indexes {
		require.Equal(t, idx, seen[v], "record %d is at the index its put answered", v)
	}
}

// TestServeDataKilledWhileProducing SIGKILLs `lakeshore serve` ($LAKESHORE_DATA_KILLS
// times, default 3) while two clients put batches through it without pause (the
// distributed store flushing every 20 ms), restarting it on the same address each time.
// Each client repeats a batch that failed with its put id until it is acknowledged (the
// HTTP store also repeats it by itself while the server is away). In the end every
// record is in the queue exactly once, at the index its put answered, whole.
func TestServeDataKilledWhileProducing(t *testing.T) {
	kills := envInt(t, "LAKESHORE_DATA_KILLS", 3)
	onEachDataStore(t, func(t *testing.T, ctx context.Context, srv *dataServer, q *persist.Queue) {
		p := startProducers(t, ctx, q, 2, 40)
		for k := range kills {
			target := int64(400 * (k + 1))
			awaitState(t, ctx, "puts acknowledged before the kill", func() bool { p.failed(t); return p.acked.Load() >= target })
			srv.kill()
			srv.restart()
		}
		target := p.acked.Load() + 400
		awaitState(t, ctx, "puts acknowledged after the last restart", func() bool { p.failed(t); return p.acked.Load() >= target })
		p.finish(t, ctx)
		p.requireExactlyOnce(t, ctx, q)
		t.Logf("%d kills, %d records, %d failed attempts repeated by the clients", kills, p.acked.Load(), p.failures.Load())
	})
}

// TestServeDataKilledWhileConsuming SIGKILLs `lakeshore serve` while two consumers of
// one task take batches through it (GetBatch, no lease: a batch is consumed when it is
// handed out). No record is handed to the task twice across the restarts; the records
// never seen by a consumer are at most the batches of the GetBatch calls that failed
// (handed out by a server whose answer was cut by the kill); and the task's consumption
// counts every record once: nothing acknowledged lost, nothing marked that no hand-out
// took. A second task then reads every record once.
func TestServeDataKilledWhileConsuming(t *testing.T) {
	kills := envInt(t, "LAKESHORE_DATA_KILLS", 3)
	onEachDataStore(t, func(t *testing.T, ctx context.Context, srv *dataServer, q *persist.Queue) {
		const total, batch = 4000, 20
		putNumbered(t, ctx, q, total)

		var mu sync.Mutex
		handed := map[int64]int{} // index → how many times it was handed to "train"
		var nHanded, failed atomic.Int64
		var final atomic.Bool // the last restart is done: an empty batch ends a consumer
		errs := make(chan error, 2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req := &persist.MetaRequest{Task: "train", BatchSize: batch, Fields: []string{"v", "pad"}}
					b, m, err := q.Reader().GetBatch(ctx, req)
					if err != nil {
						failed.Add(1)
						time.Sleep(20 * time.Millisecond) // a client's back-off
						continue
					}
					rows, err := b.Rows()
					b.Release()
					if err != nil {
						errs <- err
						return
					}
					for k, r := range rows {
						if r.Index != m.Indexes[k] || r.Fields["v"] != r.Index || r.Fields["pad"] != pad {
							errs <- fmt.Errorf("row %d of a batch is %+v, not the whole record of index %d", k, r, m.Indexes[k])
							return
						}
					}
					mu.Lock()
					for _, x := range m.Indexes {
						if handed[x]++; handed[x] > 1 {
							errs <- fmt.Errorf("record %d was handed to task train twice", x)
							mu.Unlock()
							return
						}
					}
					mu.Unlock()
					nHanded.Add(int64(len(m.Indexes)))
					if len(m.Indexes) == 0 && final.Load() {
						return
					}
				}
			})
		}
		for k := range kills {
			target := int64(total * (k + 1) / (kills + 2))
			awaitState(t, ctx, "batches handed out before the kill", func() bool {
				if len(errs) > 0 {
					t.Fatal(<-errs)
				}
				return nHanded.Load() >= target
			})
			srv.kill()
			srv.restart()
		}
		final.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.NoError(t, ctx.Err())

		var unseen int
		for x := range int64(total) {
			switch n := handed[x]; {
			case n > 1:
				t.Fatalf("record %d was handed to task train %d times", x, n)
			case n == 0:
				unseen++
			}
		}
		require.LessOrEqual(t, int64(unseen), failed.Load()*batch,
			"only a batch whose answer a kill cut is consumed unseen (%d failed calls)", failed.Load())
		consumed, err := q.Consumed(ctx, "train", persist.DefaultPartition)
		require.NoError(t, err)
		require.EqualValues(t, total, consumed, "the task's consumption counts every record once")

		seen := map[int64]bool{}
		for {
			b, m, err := q.Reader().GetBatch(ctx, &persist.MetaRequest{Task: "critic", BatchSize: 1000, Fields: []string{"v"}})
			require.NoError(t, err)
			b.Release()
			if len(m.Indexes) == 0 {
				break
			}
			for _, x := range m.Indexes {
				require.False(t, seen[x], "record %d handed to task critic twice", x)
				seen[x] = true
			}
		}
		require.Len(t, seen, total, "another task's consumption is its own")
		t.Logf("%d kills, %d records handed out, %d consumed unseen, %d failed calls", kills, nHanded.Load(), unseen, failed.Load())
	})
}

// TestServeDataKilledWhileTrainingLeased SIGKILLs `lakeshore serve` while a trainer reads
// leased batches through it (GetBatchLeased, lease 1 s) and commits each after its
// "step", repeating a failed commit until it is answered. A batch whose answer a kill cut
// comes back when its lease expires; a commit cut by a kill is repeated on the restarted
// server. In the end the trainer committed every record exactly once, and the task's
// consumption counts each once: leased reads are exactly-once across server kills.
func TestServeDataKilledWhileTrainingLeased(t *testing.T) {
	kills := envInt(t, "LAKESHORE_DATA_KILLS", 3)
	onEachDataStore(t, func(t *testing.T, ctx context.Context, srv *dataServer, q *persist.Queue) {
		const total, batch = 1000, 20
		putNumbered(t, ctx, q, total)
		var nCommitted, failed atomic.Int64
		fail := make(chan error, 1)
		committed := make([]int, total)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r := q.Reader()
			for nCommitted.Load() < total && ctx.Err() == nil {
				req := &persist.MetaRequest{Task: "train", BatchSize: batch, Fields: []string{"v", "pad"}}
				b, m, err := r.GetBatchLeased(ctx, req, time.Second)
				if err != nil || len(m.Indexes) == 0 { // a kill, or every ready record leased
					if err != nil {
						failed.Add(1)
					}
					time.Sleep(20 * time.Millisecond) // a client's back-off
					continue
				}
				b.Release()
				for r.Commit(ctx, m) != nil && ctx.Err() == nil {
					failed.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
				for _, x := range m.Indexes {
					if committed[x]++; committed[x] > 1 {
						fail <- fmt.Errorf("record %d committed twice: handed out again after its commit", x)
						return
					}
				}
				nCommitted.Add(int64(len(m.Indexes)))
			}
		}()
		for k := range kills {
			target := int64(total * (k + 1) / (kills + 2))
			awaitState(t, ctx, "batches committed before the kill", func() bool {
				if len(fail) > 0 {
					t.Fatal(<-fail)
				}
				return nCommitted.Load() >= target
			})
			srv.kill()
			srv.restart()
		}
		<-done
		if len(fail) > 0 {
			t.Fatal(<-fail)
		}
		require.NoError(t, ctx.Err())
		for x, n := range committed {
			require.Equal(t, 1, n, "record %d committed once", x)
		}
		consumed, err := q.Consumed(ctx, "train", persist.DefaultPartition)
		require.NoError(t, err)
		require.EqualValues(t, total, consumed)
		t.Logf("%d kills, %d failed calls repeated", kills, failed.Load())
	})
}

// TestServeDataRLStateKilled SIGKILLs `lakeshore serve` right after each step of the RL
// protocol was acknowledged: a weight version set is there after the restart and cannot
// go back; records older than a staleness bound are not served after a restart (they
// are dropped, and the drop is durable with the hand-out); a producer held by
// back-pressure is still held after a restart, is repeated by its put id across the
// kill, and is admitted once — exactly once — when the trainer consumes.
func TestServeDataRLStateKilled(t *testing.T) {
	onEachDataStore(t, func(t *testing.T, ctx context.Context, srv *dataServer, q *persist.Queue) {
		crash := func() { srv.kill(); srv.restart() }

		// Weight versions.
		require.NoError(t, q.SetVersion(ctx, 3))
		crash()
		v, err := q.Version(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 3, v, "the version set before the kill")
		err = q.SetVersion(ctx, 2)
		require.Error(t, err)
		require.Equal(t, "invalid", persist.Code(err), "a version cannot go back after a restart: %v", err)
		require.NoError(t, q.SetVersion(ctx, 3), "setting the same version again is a no-op")

		// Staleness: 4 records at each version 0…5, the queue at version 5, bound 1.
		for ver := range int64(6) {
			recs := make([]persist.Record, 4)
			for j := range recs {
				recs[j] = persist.Record{"v": ver*4 + int64(j)}
			}
			_, err := q.PutVersioned(ctx, persist.DefaultPartition, recs, ver, -1, nil)
			require.NoError(t, err)
		}
		require.NoError(t, q.SetVersion(ctx, 5))
		crash()
		req := &persist.MetaRequest{Task: "train", BatchSize: 100, Fields: []string{persist.WeightVersionField},
			Staleness: &persist.Staleness{Max: 1}}
		b, m, err := q.Reader().GetBatch(ctx, req)
		require.NoError(t, err)
		rows, err := b.Rows()
		b.Release()
		require.NoError(t, err)
		require.Len(t, rows, 8, "the records of versions 4 and 5: %v", m.Indexes)
		for _, r := range rows {
			require.GreaterOrEqual(t, r.Fields[persist.WeightVersionField], int64(4), "record %d is within the bound", r.Index)
		}
		crash()
		stats, err := q.Stats(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 16, stats.StaleDropped, "the drops of the hand-out are durable")
		consumed, err := q.Consumed(ctx, "train", persist.DefaultPartition)
		require.NoError(t, err)
		require.EqualValues(t, 24, consumed, "served and dropped records are consumed for the task")
		b, m, err = q.Reader().GetBatch(ctx, req)
		require.NoError(t, err)
		b.Release()
		require.Empty(t, m.Indexes, "nothing stale, nothing twice, after the restart")

		// Back-pressure: at most 8 unconsumed records of task "bp" in partition "bp".
		const part = "bp"
		adm := func(block bool) *persist.Admission {
			return &persist.Admission{Task: "bp", MaxUnconsumed: 8, MaxAhead: -1, Block: block, Timeout: 2 * time.Minute}
		}
		put := func(id string, block bool, vals ...int64) ([]int64, error) {
			recs := make([]persist.Record, len(vals))
			for j, x := range vals {
				recs[j] = persist.Record{"v": x}
			}
			return q.Store().PutPartition(ctx, part, recs, &persist.PutOpts{ID: id, Admission: adm(block)})
		}
		_, err = put(persist.NewPutID(), false, 0, 1, 2, 3, 4, 5, 6, 7)
		require.NoError(t, err)
		_, err = put(persist.NewPutID(), false, 8)
		require.ErrorIs(t, err, persist.ErrQueueFull, "the buffer is full")
		crash()
		_, err = put(persist.NewPutID(), false, 8)
		require.ErrorIs(t, err, persist.ErrQueueFull, "back-pressure holds after a restart")

		// A producer held by the full buffer while the server is killed: the HTTP store
		// repeats it by its put id while the server is away (or the client does, once
		// those repeats ran out); it is admitted once the trainer consumes.
		heldID := persist.NewPutID()
		type result struct {
			idx []int64
			err error
		}
		held := make(chan result, 1)
		go func() {
			idx, err := put(heldID, true, 8, 9)
			held <- result{idx, err}
		}()
		crash()
		b, m, err = q.Reader().GetBatch(ctx, &persist.MetaRequest{Task: "bp", Partition: part, BatchSize: 8, Fields: []string{"v"}})
		require.NoError(t, err)
		b.Release()
		require.Len(t, m.Indexes, 8, "the trainer takes the buffer")
		var got result
		select {
		case got = <-held:
		case <-ctx.Done():
			t.Fatal("the held put never went through once the trainer consumed: back-pressure deadlocked after the restart")
		}
		if got.err != nil {
			require.NotErrorIs(t, got.err, persist.ErrQueueFull, "the buffer has room")
			got.idx, got.err = put(heldID, true, 8, 9)
		}
		require.NoError(t, got.err)
		require.Len(t, got.idx, 2)
		_, err = put(persist.NewPutID(), false, 10, 11, 12, 13, 14, 15)
		require.NoError(t, err)
		crash()
		idx, err := put(heldID, false, 8, 9)
		require.NoError(t, err, "a repeat of an admitted put is answered even while the buffer is full")
		require.Equal(t, got.idx, idx, "a repeat of the admitted put answers its indexes")
		consumed, err = q.Consumed(ctx, "bp", part)
		require.NoError(t, err)
		require.EqualValues(t, 8, consumed)
		next, err := q.NextIndex(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 24+8+2+6, next, "the held put was admitted once; the refused ones wrote nothing")
	})
}

// catalogObjects lists the fragments the catalog names for queue rollouts of namespace
// default, and the .parquet objects in the bucket.
func catalogObjects(t *testing.T, ctx context.Context, pool *pgxpool.Pool, bucketDir string) (named, objects []string) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT object FROM lakestore.fragments WHERE queue = '_ns/default/rollouts' ORDER BY object`)
	require.NoError(t, err)
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		named = append(named, o)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, filepath.WalkDir(bucketDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			rel, _ := filepath.Rel(bucketDir, p)
			objects = append(objects, filepath.ToSlash(rel))
		}
		return err
	}))
	slices.Sort(objects)
	return named, objects
}

// sweepUntilClean runs the distributed store's sweeper (SweepGrace 1 ns: each object is
// still kept until its own flush's publication deadline) until the bucket holds exactly
// the objects the catalog names, and returns how many objects it found unnamed first.
func sweepUntilClean(t *testing.T, ctx context.Context, db, bucketDir string) int {
	t.Helper()
	s, err := lakestore.Open(ctx, "rollouts", &lakestore.Config{Catalog: db, Blob: "file://" + bucketDir, Namespace: "default",
		SweepGrace: time.Nanosecond, SweepInterval: -1, FlushInterval: -1})
	require.NoError(t, err)
	defer s.Close(ctx)
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	defer pool.Close()
	named, objects := catalogObjects(t, ctx, pool, bucketDir)
	orphans := len(objects) - len(named)
	for !slices.Equal(named, objects) {
		for _, o := range named {
			require.Contains(t, objects, o, "a fragment the catalog names is in the bucket")
		}
		_, err := s.Sweep(ctx)
		require.NoError(t, err)
		select {
		case <-ctx.Done():
			t.Fatalf("the sweeper left orphans: %v named, %v in the bucket", named, objects)
		case <-time.After(50 * time.Millisecond):
		}
		named, objects = catalogObjects(t, ctx, pool, bucketDir)
	}
	return orphans
}

// TestServeDataKilledBetweenUploadAndCommit stops a flush of `lakeshore serve --data
// postgres://…` exactly between its fragment's upload and its catalog commit (the test
// holds the queue's catalog row, which the flush's transaction updates after the upload:
// the object appears in the bucket, the flush waits), and SIGKILLs the server there. The
// object is an orphan: no read ever sees it (the records are read from the tail, once),
// the sweeper deletes it once its flush's publication deadline passed, and the next
// flush publishes the records.
func TestServeDataKilledBetweenUploadAndCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills servers")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	target, db, bucketDir := distributedTarget(t, "flush_interval=1h", "flush_timeout=2s")
	srv := newDataServer(t, db, "--data", target)
	q := srv.open(ctx, "rollouts")
	p := startProducers(t, ctx, q, 1, 50)
	awaitState(t, ctx, "puts", func() bool { p.failed(t); return p.acked.Load() >= 200 })
	p.finish(t, ctx)

	lock, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer lock.Close(context.Background())
	tx, err := lock.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM lakestore.queues WHERE queue = '_ns/default/rollouts' FOR UPDATE`)
	require.NoError(t, err)
	flushed := make(chan error, 1)
	go func() { flushed <- q.Flush(ctx) }()
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	defer pool.Close()
	awaitState(t, ctx, "the flush's object in the bucket", func() bool {
		_, objects := catalogObjects(t, ctx, pool, bucketDir)
		return len(objects) > 0
	})
	srv.kill()
	require.NoError(t, tx.Rollback(ctx)) // the killed server's transaction goes on and finds its client gone
	named, objects := catalogObjects(t, ctx, pool, bucketDir)
	require.Empty(t, named, "the flush never committed")
	require.NotEmpty(t, objects)
	srv.restart()
	<-flushed // cut by the kill; the HTTP store may have repeated it on the restarted server

	p.requireExactlyOnce(t, ctx, q) // the orphan is not read: every record once, from the tail
	orphans := sweepUntilClean(t, ctx, db, bucketDir)
	require.Positive(t, orphans, "the upload left an orphan")
	require.NoError(t, q.Flush(ctx))
	p.requireExactlyOnce(t, ctx, q)
	named, objects = catalogObjects(t, ctx, pool, bucketDir)
	require.NotEmpty(t, named, "the records are published by the next flush")
	require.Equal(t, named, objects)
}

// TestServeDataPostgresCrash crashes the catalog's PostgreSQL (pg_ctl stop -m immediate,
// then crash recovery at its start; $LAKESHORE_DATA_KILLS times, default 3) under
// `lakeshore serve --data postgres://…` while two clients put through it and it flushes
// every 20 ms: commits of puts and of flushes are cut at every stage. Every record is
// in the queue exactly once in the end (a put whose commit answer was lost is repeated
// by its put id), and after the sweeper the bucket holds exactly the fragments the
// catalog names.
func TestServeDataPostgresCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes the test server; skipped with -short")
	}
	kills := envInt(t, "LAKESHORE_DATA_KILLS", 3)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	target, db, bucketDir := distributedTarget(t, "flush_interval=20ms", "flush_timeout=1s")
	pg := pgtest.Shared(t)
	srv := newDataServer(t, db, "--data", target)
	q := srv.open(ctx, "rollouts")
	p := startProducers(t, ctx, q, 2, 40)
	for range kills {
		target := p.acked.Load() + 400
		awaitState(t, ctx, "puts acknowledged before the crash", func() bool { p.failed(t); return p.acked.Load() >= target })
		require.NoError(t, pg.Crash())
		require.NoError(t, pg.Resume())
	}
	target2 := p.acked.Load() + 400
	awaitState(t, ctx, "puts acknowledged after the last crash", func() bool { p.failed(t); return p.acked.Load() >= target2 })
	p.finish(t, ctx)
	select {
	case <-srv.p.done:
		t.Fatal("lakeshore serve exited with its catalog's crash")
	default:
	}
	p.requireExactlyOnce(t, ctx, q)
	orphans := sweepUntilClean(t, ctx, db, bucketDir)
	require.NoError(t, q.Flush(ctx))
	p.requireExactlyOnce(t, ctx, q)
	t.Logf("%d crashes, %d records, %d failed attempts repeated, %d orphans swept", kills, p.acked.Load(), p.failures.Load(), orphans)
}

// TestServeDataCatalogCommitLost cuts the catalog transactions of puts made through
// `lakeshore serve --data postgres://…` at two exact points, through a pgtest.FaultProxy
// between the server and PostgreSQL ($LAKESHORE_DATA_KILLS times each, default 3): the
// session terminated before its COMMIT (nothing written), and the COMMIT done with its
// answer lost (written, and the server cannot know it). The clients keep putting; every
// record is in the queue exactly once in the end: the put whose answer was lost is
// repeated by its put id (by the HTTP store, on the server's 502 unavailable) and answered
// the indexes it got.
func TestServeDataCatalogCommitLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	kills := envInt(t, "LAKESHORE_DATA_KILLS", 3)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	db := pgtest.Database(t)
	proxy, via := pgtest.NewFaultProxy(t, db)
	u, err := url.Parse(via)
	require.NoError(t, err)
	qs := u.Query()
	qs.Set("blob", "file://"+t.TempDir())
	qs.Set("flush_interval", "1h") // the next COMMIT is a put's
	u.RawQuery = qs.Encode()
	srv := newDataServer(t, db, "--data", u.String())
	q := srv.open(ctx, "rollouts")
	p := startProducers(t, ctx, q, 2, 40)
	for range kills {
		for _, f := range []pgtest.Fault{pgtest.FaultTerminateBeforeCommit, pgtest.FaultLoseCommitAnswer} {
			target := p.acked.Load() + 200
			awaitState(t, ctx, "puts acknowledged before the fault", func() bool { p.failed(t); return p.acked.Load() >= target })
			proxy.Arm(f)
			require.Equal(t, f, proxy.Await())
		}
	}
	target := p.acked.Load() + 200
	awaitState(t, ctx, "puts acknowledged after the last fault", func() bool { p.failed(t); return p.acked.Load() >= target })
	p.finish(t, ctx)
	p.requireExactlyOnce(t, ctx, q)
	t.Logf("%d faults of each kind, %d records, %d failed attempts repeated by the clients", kills, p.acked.Load(), p.failures.Load())
}
