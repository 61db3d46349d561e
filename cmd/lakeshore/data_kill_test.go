package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/persist/lakestore"
)

// distributedTarget returns a target postgres://…?blob=file://{bucket}&settings… on a
// fresh catalog database, and the bucket's directory.
func distributedTarget(t *testing.T, settings ...string) (target, db, bucketDir string) {
	t.Helper()
	db = pgtest.Database(t)
	bucketDir = t.TempDir()
	u, err := url.Parse(db)
	require.NoError(t, err)
	q := u.Query()
	q.Set("blob", "file://"+bucketDir)
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String(), db, bucketDir
}

// envInt reads a scale of a test from the environment (for bigger manual runs).
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

// TestServeDataKilledMidPut SIGKILLs `lakeshore serve --data postgres://…` while a client
// puts batches through it over HTTP without pause (and the server flushes every 20 ms),
// several times ($LAKESHORE_DATA_KILLS, default 3), restarting a server each time. The
// client gives every batch a put id and, after a failure, repeats the batch with its id
// on the next server. Every acknowledged record is in the queue once, the batch in
// flight at each kill is in it once, no record is in it twice, and after the sweeper the
// bucket holds exactly the fragments the catalog names.
func TestServeDataKilledMidPut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills servers")
	}
	kills := envInt(t, "LAKESHORE_DATA_KILLS", 3)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	target, db, bucketDir := distributedTarget(t, "flush_interval=20ms", "flush_timeout=1s")

	const batch = 50
	acked := map[int64]int64{} // value → index
	next := 0                  // the next record's value
	type batchInFlight struct {
		id string
		lo int
	}
	var pending *batchInFlight
	for round := 0; round <= kills; round++ {
		srv := startServe(t, db, "--data", target)
		q, err := persist.Open(ctx, "rollouts", &persist.Config{URL: srv.url}, httpstore.Driver())
		require.NoError(t, err)
		put := func(id string, lo int) ([]int64, error) {
			recs := make([]persist.Record, batch)
			for j := range recs {
				recs[j] = persist.Record{"v": int64(lo + j), "pad": strings.Repeat("x", 64)}
			}
			return q.PutPartitionOnce(ctx, id, persist.DefaultPartition, recs)
		}
		if pending != nil { // the batch in flight at the kill: repeated with its id
			idx, err := put(pending.id, pending.lo)
			require.NoError(t, err, "round %d: the repeat of the batch in flight", round)
			for j, x := range idx {
				acked[int64(pending.lo+j)] = x
			}
			pending = nil
		}
		if round == kills {
			require.NoError(t, q.Close(ctx))
			break
		}
		killed := make(chan struct{})
		go func() {
			time.Sleep(time.Duration(200+150*round) * time.Millisecond)
			_ = srv.cmd.Process.Signal(syscall.SIGKILL)
			close(killed)
		}()
		for {
			id := persist.NewPutID()
			idx, err := put(id, next)
			if err != nil {
				<-killed
				pending = &batchInFlight{id: id, lo: next}
				next += batch
				break
			}
			for j, x := range idx {
				acked[int64(next+j)] = x
			}
			next += batch
		}
		<-srv.done
		_ = q.Close(ctx)
	}
	require.Greater(t, len(acked), kills*batch, "puts went through between the kills")

	s, err := lakestore.Open(ctx, "rollouts", &lakestore.Config{Catalog: db, Blob: "file://" + bucketDir, Namespace: "default",
		SweepGrace: time.Nanosecond, SweepInterval: -1, FlushInterval: -1})
	require.NoError(t, err)
	defer s.Close(ctx)
	pq := persist.New(s)
	total, err := pq.NextIndex(ctx)
	require.NoError(t, err)
	rows, err := pq.Get(ctx, 0, int(total)+1, &persist.GetOpts{Fields: []string{"v"}})
	require.NoError(t, err)
	seen := map[int64]int64{}
	for _, r := range rows {
		v := r.Fields["v"].(int64)
		_, dup := seen[v]
		require.False(t, dup, "record %d is in the queue twice (indexes %d and %d)", v, seen[v], r.Index)
		seen[v] = r.Index
	}
	for v, idx := range acked {
		got, ok := seen[v]
		require.True(t, ok, "acknowledged record %d lost", v)
		require.Equal(t, idx, got, "record %d at the index its put answered", v)
	}
	t.Logf("%d kills, %d records acknowledged, %d in the queue", kills, len(acked), len(rows))

	// The sweeper leaves exactly the named fragments once the killed flushes' deadlines
	// (1 s after their start) passed.
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	defer pool.Close()
	named := func() []string {
		rows, err := pool.Query(ctx, `SELECT object FROM lakestore.fragments WHERE queue = '_ns/default/rollouts' ORDER BY object`)
		require.NoError(t, err)
		var out []string
		for rows.Next() {
			var o string
			require.NoError(t, rows.Scan(&o))
			out = append(out, o)
		}
		require.NoError(t, rows.Err())
		return out
	}
	objects := func() []string {
		var out []string
		require.NoError(t, filepath.WalkDir(bucketDir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
				rel, _ := filepath.Rel(bucketDir, p)
				out = append(out, filepath.ToSlash(rel))
			}
			return err
		}))
		slices.Sort(out)
		return out
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := s.Sweep(ctx)
		require.NoError(t, err)
		if slices.Equal(named(), objects()) {
			break
		}
		if time.Now().After(deadline) {
			require.Equal(t, named(), objects(), "no orphan after the sweeper, no named fragment missing")
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, pq.Flush(ctx))
	rows, err = pq.Get(ctx, 0, int(total)+1, &persist.GetOpts{Fields: []string{"v"}})
	require.NoError(t, err)
	require.Len(t, rows, len(seen), "every row reads back from the fragments")
}

// TestServeDataProducersConsumers is the classic across machines: four `lakeshore serve`
// processes on one distributed store (one catalog, one bucket; background flushes every
// 100 ms), four producers putting on the first two servers and three consumers with
// distinct tasks, each reading with one rank on each of the other two servers, over
// $LAKESHORE_DATA_RECORDS records (default 8,000; the figure is 100,000). Every
// task's consumed set equals the produced set, with no duplicate, and every batch's rows
// are the records of its indexes.
func TestServeDataProducersConsumers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four servers")
	}
	const producers, batch = 4, 200
	total := envInt(t, "LAKESHORE_DATA_RECORDS", 8000)
	total -= total % (producers * batch)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	target, db, _ := distributedTarget(t, "flush_interval=100ms")
	var servers []*servedProcess
	for range 4 {
		servers = append(servers, startServe(t, db, "--data", target))
	}
	open := func(s *servedProcess) *persist.Queue {
		q, err := persist.Open(ctx, "rollouts", &persist.Config{URL: s.url}, httpstore.Driver())
		require.NoError(t, err)
		t.Cleanup(func() { _ = q.Close(context.Background()) })
		return q
	}

	var mu sync.Mutex
	var produced []int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for p := range producers {
		q := open(servers[p%2])
		wg.Go(func() {
			for i := 0; i < total/producers; i += batch {
				recs := make([]persist.Record, batch)
				for j := range recs {
					recs[j] = persist.Record{"p": int64(p), "i": int64(i + j)}
				}
				idx, err := q.PutBatch(ctx, recs)
				if err != nil {
					errs <- fmt.Errorf("producer %d: %w", p, err)
					return
				}
				mu.Lock()
				produced = append(produced, idx...)
				mu.Unlock()
			}
		})
	}
	tasks := []string{"actor", "critic", "ref"}
	consumed := make([][]int64, len(tasks))
	var cwg sync.WaitGroup
	for ti, task := range tasks {
		for _, s := range servers[2:] {
			q := open(s)
			cwg.Go(func() {
				for {
					mu.Lock()
					n := len(consumed[ti])
					mu.Unlock()
					if n >= total {
						return
					}
					req := &persist.MetaRequest{Fields: []string{"p", "i"}, BatchSize: 64, Task: task, Wait: true, Timeout: 500 * time.Millisecond}
					b, m, err := q.Reader().GetBatch(ctx, req)
					if errors.Is(err, persist.ErrTimeout) {
						req.Wait = false // the tail end: take what is left
						b, m, err = q.Reader().GetBatch(ctx, req)
					}
					if err != nil {
						errs <- fmt.Errorf("task %s: %w", task, err)
						return
					}
					rows, err := b.Rows()
					b.Release()
					if err != nil {
						errs <- err
						return
					}
					for k, row := range rows {
						if row.Index != m.Indexes[k] || row.Fields["p"] == nil || row.Fields["i"] == nil {
							errs <- fmt.Errorf("task %s: row %d of a batch is %+v, not the record of index %d", task, k, row, m.Indexes[k])
							return
						}
					}
					mu.Lock()
					consumed[ti] = append(consumed[ti], m.Indexes...)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { cwg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the consumers did not finish")
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	slices.Sort(produced)
	require.Len(t, produced, total)
	for i, x := range produced {
		require.EqualValues(t, i, x, "indexes are dense and unique across servers")
	}
	for ti, task := range tasks {
		got := slices.Clone(consumed[ti])
		slices.Sort(got)
		require.Equal(t, produced, got, "task %s consumed every record exactly once across two servers", task)
	}
}
