package lakestore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// terminateCatalog ends every session of the catalog's database but admin's own
// (pg_terminate_backend, waiting for each backend to exit): the stores' pooled connections
// and their LISTEN connections are dead, and their next statement finds it out.
func terminateCatalog(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	_, err := admin.Exec(t.Context(), `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	require.NoError(t, err)
}

// requireCatalogUnavailable checks that err is the typed error of a lost catalog
// connection: it matches plane.ErrUnavailable, its code is unavailable, it names the
// catalog's host and port and shows neither the password nor pgx's own message.
func requireCatalogUnavailable(t *testing.T, catalog string, err error, call string) {
	t.Helper()
	require.ErrorIs(t, err, plane.ErrUnavailable, "%s: a lost catalog connection is retryable: %v", call, err)
	require.Equal(t, "unavailable", persist.Code(err), call)
	u, perr := url.Parse(catalog)
	require.NoError(t, perr)
	require.Contains(t, err.Error(), u.Host, call)
	require.Contains(t, err.Error(), "lakestore: catalog: ", call)
	require.NotContains(t, err.Error(), pgtest.Password, call)
	require.NotContains(t, err.Error(), "failed to", "%s: pgx's own message: %v", call, err)
}

// TestCatalogConnectionTerminated: every store call whose catalog connection was
// terminated under it (pg_terminate_backend, as a PostgreSQL restart or a network reset
// does) answers an error matching plane.ErrUnavailable (code unavailable) — before, pgx's
// error came through as it was (code internal, 500 over HTTP) — and the store works again
// at the next attempts, as the pool replaces its connections.
func TestCatalogConnectionTerminated(t *testing.T) {
	ctx := context.Background()
	catalog := pgtest.Database(t)
	s := openTest(t, catalog, fileBucket(t), "q", &Config{SweepInterval: -1})
	admin, err := pgx.Connect(ctx, catalog)
	require.NoError(t, err)
	defer admin.Close(context.Background())

	recs := make([]persist.Record, 20)
	for i := range recs {
		recs[i] = persist.Record{"x": int64(i)}
	}
	_, err = s.PutPartition(ctx, persist.DefaultPartition, recs, nil)
	require.NoError(t, err)
	part := persist.DefaultPartition
	meta := &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "t", Partition: part}
	release := func(b *persist.Batch) {
		if b != nil {
			b.Release()
		}
	}
	putID := persist.NewPutID()
	calls := []struct {
		name string
		call func() error
	}{
		{"PutPartition", func() error {
			_, err := s.PutPartition(ctx, part, []persist.Record{{"x": int64(100)}}, &persist.PutOpts{ID: putID})
			return err
		}},
		{"PutFields", func() error { return s.PutFields(ctx, part, []int64{0}, []persist.Record{{"y": int64(1)}}) }},
		{"Scan", func() error { b, _, err := s.Scan(ctx, 0, 10, nil); release(b); return err }},
		{"GetMeta", func() error { _, err := s.GetMeta(ctx, meta); return err }},
		{"GetBatch", func() error { b, _, err := s.GetBatch(ctx, meta); release(b); return err }},
		{"GetData", func() error {
			b, err := s.GetData(ctx, &persist.BatchMeta{Partition: part, Indexes: []int64{0, 1}, Fields: []persist.FieldMeta{{Name: "x", Kind: persist.KindInt64}}})
			release(b)
			return err
		}},
		{"Produced", func() error { _, err := s.Produced(ctx, part, []int64{0}, []string{"x"}); return err }},
		{"MarkConsumed", func() error { return s.MarkConsumed(ctx, "t2", part, []int64{3}) }},
		{"Consumed", func() error { _, err := s.Consumed(ctx, "t", part); return err }},
		{"ResetConsumption", func() error { return s.ResetConsumption(ctx, "t2", part) }},
		{"ClearSamples", func() error { return s.ClearSamples(ctx, part, []int64{19}) }},
		{"KVPut", func() error {
			_, err := s.KVPut(ctx, "kv", []string{"k"}, []persist.Record{{"v": int64(1)}}, nil)
			return err
		}},
		{"KVGet", func() error { _, err := s.KVGet(ctx, "kv", []string{"k"}, nil); return err }},
		{"KVList", func() error { _, err := s.KVList(ctx, ""); return err }},
		{"KVClear", func() error { return s.KVClear(ctx, "kv", []string{"gone"}) }},
		{"Schema", func() error { _, err := s.Schema(ctx); return err }},
		{"Counts", func() error { _, _, err := s.Counts(ctx); return err }},
		{"Stats", func() error { _, err := s.Stats(ctx); return err }},
		{"Flush", func() error { return s.Flush(ctx) }},
		{"Sweep", func() error { _, err := s.Sweep(ctx); return err }},
		{"ChangeVersion", func() error { _, err := s.ChangeVersion(ctx); return err }},
		{"SetVersion", func() error { return s.SetVersion(ctx, 1) }},
		{"Version", func() error { _, err := s.Version(ctx); return err }},
		{"FieldRevision", func() error { _, _, err := s.FieldRevision(ctx, "x"); return err }},
		{"LockPatches", func() error {
			unlock, err := s.LockPatches(ctx, part)
			if err == nil {
				unlock()
			}
			return err
		}},
	}
	for _, c := range calls {
		// The call must meet a dead connection: the pool pings a connection idle for over
		// a second before handing it out, so a slow round is tried again.
		var err error
		for round := 0; round < 3 && err == nil; round++ {
			_, err = s.Schema(ctx) // the pool's most recent connection is up
			require.NoError(t, err, c.name)
			terminateCatalog(t, admin)
			err = c.call()
		}
		require.Error(t, err, "%s met no terminated connection in 3 rounds", c.name)
		requireCatalogUnavailable(t, catalog, err, c.name)
		for try := 0; ; try++ {
			err := c.call()
			if err == nil {
				break
			}
			requireCatalogUnavailable(t, catalog, err, c.name)
			require.Less(t, try, 10, "%s: the pool replaces its connections", c.name)
		}
	}
	next, live, err := s.Counts(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 22, next, "the 20 records, one put with an id however often retried, one KV entry")
	require.EqualValues(t, 21, live, "less the cleared sample")
}

// TestCatalogConnectionTerminatedOverHTTP: through a server on the distributed store, a
// request whose catalog connection was terminated answers 502 with the stable code
// unavailable and the fixed message (the host, user and pgx's words only in the server's
// log), never 500 internal; the HTTP store retries the calls that are safe to repeat (a
// put carries its put id, so a retry after a lost answer writes nothing twice) and the
// records are written once; a call it does not repeat (a KV put) gives the caller the
// unavailable error, and the server works again at the next request.
func TestCatalogConnectionTerminatedOverHTTP(t *testing.T) {
	ctx := context.Background()
	catalog := pgtest.Database(t)
	base := startServer(t, targetOf(t, catalog, fileBucket(t), "flush_interval=-1", "sweep_interval=-1"))
	admin, err := pgx.Connect(ctx, catalog)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	q, err := persist.Open(ctx, "q", &persist.Config{URL: base}, httpstore.Driver())
	require.NoError(t, err)
	defer q.Close(ctx)
	_, err = q.PutBatch(ctx, []persist.Record{{"x": int64(0)}})
	require.NoError(t, err)

	get := func(path string) (int, http.Header, api.ErrorBody) {
		resp, err := http.Get(base + "/v1/namespaces/default/data/q" + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var body api.ErrorBody
		if resp.StatusCode != http.StatusOK {
			require.NoError(t, json.Unmarshal(data, &body), string(data))
		}
		return resp.StatusCode, resp.Header, body
	}
	for _, path := range []string{"/schema", "/stats", "/records?offset=0&limit=10"} {
		status := http.StatusOK
		var body api.ErrorBody
		for round := 0; round < 3 && status == http.StatusOK; round++ {
			status, _, _ = get("/schema") // the server's pooled connection is up
			require.Equal(t, http.StatusOK, status)
			terminateCatalog(t, admin)
			status, _, body = get(path)
		}
		require.Equal(t, api.Status(plane.ErrUnavailable.Code), status, "%s: %+v", path, body)
		require.Equal(t, http.StatusBadGateway, status, "the status of unavailable (docs/http-api.md)")
		require.Equal(t, "unavailable", body.Code, path)
		require.Equal(t, "the queue's storage is unavailable; retry", body.Message, "the host and pgx's words stay in the log")
		for try := 0; status != http.StatusOK; try++ {
			require.Less(t, try, 10, "%s: the server's pool replaces its connections", path)
			status, _, body = get(path)
			if status != http.StatusOK {
				require.Equal(t, "unavailable", body.Code, path)
			}
		}
	}

	// A put retried by the HTTP store (its put id) is written once.
	written := 1
	for i := range 3 {
		_, err := q.Schema(ctx)
		require.NoError(t, err)
		terminateCatalog(t, admin)
		idx, err := q.PutBatch(ctx, []persist.Record{{"x": int64(i + 1)}, {"x": int64(i + 1)}})
		require.NoError(t, err, "the HTTP store retries an unavailable put")
		require.Len(t, idx, 2)
		written += 2
	}
	rows, err := q.Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	require.Len(t, rows, written, "no put written twice")

	// A KV put is not repeated by the HTTP store: its caller sees unavailable.
	kv := persist.KV(q)
	var kvErr error
	for round := 0; round < 3 && kvErr == nil; round++ {
		_, err := q.Schema(ctx)
		require.NoError(t, err)
		terminateCatalog(t, admin)
		_, kvErr = kv.Put(ctx, "kv", fmt.Sprintf("k%d", round), persist.Record{"v": int64(round)}, nil)
	}
	require.ErrorIs(t, kvErr, plane.ErrUnavailable, "%v", kvErr)
	require.Eventually(t, func() bool {
		_, err := kv.Put(ctx, "kv", "after", persist.Record{"v": int64(1)}, nil)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the server works again")
}

// TestPutCommitAnswerLost breaks a put's catalog transaction at two exact points
// (pgtest.FaultProxy): the session terminated before its COMMIT, and the COMMIT done but
// its answer lost. Both answer an error matching plane.ErrUnavailable; the first wrote
// nothing, and after either, the put repeated with its id (persist.PutOpts.ID, which the
// HTTP store always sends) answers the same indexes and writes nothing twice.
func TestPutCommitAnswerLost(t *testing.T) {
	ctx := context.Background()
	catalog := pgtest.Database(t)
	proxy, via := pgtest.NewFaultProxy(t, catalog)
	s := openTest(t, via, fileBucket(t), "q", &Config{SweepInterval: -1})
	part := persist.DefaultPartition
	_, err := s.PutPartition(ctx, part, []persist.Record{{"x": int64(0)}}, nil)
	require.NoError(t, err)
	next := func() int64 {
		t.Helper()
		n, _, err := s.Counts(ctx)
		require.NoError(t, err)
		return n
	}
	for _, c := range []struct {
		fault   pgtest.Fault
		written int64 // records the failed put wrote
	}{{pgtest.FaultTerminateBeforeCommit, 0}, {pgtest.FaultLoseCommitAnswer, 2}} {
		before := next()
		id := persist.NewPutID()
		recs := []persist.Record{{"x": int64(1)}, {"x": int64(2)}}
		proxy.Arm(c.fault)
		_, err := s.PutPartition(ctx, part, recs, &persist.PutOpts{ID: id})
		require.Equal(t, c.fault, proxy.Await())
		requireCatalogUnavailable(t, via, err, fmt.Sprint("fault ", c.fault))
		after := next()
		require.Equal(t, before+c.written, after, "fault %d", c.fault)
		var idx []int64
		for try := 0; ; try++ { // the pool may hold more dead connections
			idx, err = s.PutPartition(ctx, part, recs, &persist.PutOpts{ID: id})
			if err == nil {
				break
			}
			requireCatalogUnavailable(t, via, err, "the repeat")
			require.Less(t, try, 10)
		}
		require.Equal(t, []int64{before, before + 1}, idx, "the repeat answers the indexes of the put that committed, or makes them")
		require.Equal(t, before+2, next(), "fault %d: written once", c.fault)
	}
}

// TestCatalogRestart restarts PostgreSQL under a store that keeps putting: each put
// either succeeds or answers an error matching plane.ErrUnavailable (code unavailable:
// the connections dropped, nothing accepting connections while it is down, a server
// starting up), is repeated with its id until it succeeds, and is written exactly once;
// the store works after the restart.
func TestCatalogRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the test server; skipped with -short")
	}
	ctx := context.Background()
	catalog := pgtest.Database(t)
	s := openTest(t, catalog, fileBucket(t), "q", &Config{SweepInterval: -1})
	srv := pgtest.Shared(t)
	part := persist.DefaultPartition
	unavailable := 0
	put := func(i int) {
		t.Helper()
		id := persist.NewPutID()
		for try := 0; ; try++ {
			_, err := s.PutPartition(ctx, part, []persist.Record{{"x": int64(i)}}, &persist.PutOpts{ID: id})
			if err == nil {
				return
			}
			unavailable++
			require.ErrorIs(t, err, plane.ErrUnavailable, "put %d: %v", i, err)
			require.Equal(t, "unavailable", persist.Code(err))
			require.NotContains(t, err.Error(), pgtest.Password)
			require.Less(t, try, 1500, "put %d: the catalog is back within 30 s", i)
			time.Sleep(20 * time.Millisecond)
		}
	}
	put(0)
	restarted := make(chan error, 1)
	go func() { restarted <- srv.Restart() }()
	n := 1
	for done := false; !done; n++ {
		select {
		case err := <-restarted:
			require.NoError(t, err)
			done = true
		default:
		}
		put(n)
	}
	next, live, err := s.Counts(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n, next, "every put written once")
	require.EqualValues(t, n, live)
	require.NotZero(t, unavailable, "the puts met the restart")
	t.Logf("%d puts across the restart, %d attempts answered unavailable", n, unavailable)
}
