package lakestore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// startServer starts a real server on loopback whose data queues live in the
// distributed store target (postgres://…?blob=…), as `lakeshore serve --data target`
// does, and stops it at cleanup.
func startServer(t testing.TB, target string) string {
	t.Helper()
	back, err := sqliteplane.Open(context.Background(), ":memory:", nil)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	stores, err := NewStores(target, &Config{Logger: logger})
	require.NoError(t, err)
	srv := server.New(back, &server.Config{Logger: logger, DataStores: stores})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Stop()
		ts.Close()
		require.NoError(t, srv.Close(context.Background()))
		back.Close()
	})
	return ts.URL
}

// targetOf returns the target of catalog and bucket with extra settings.
func targetOf(t testing.TB, catalog, bucket string, settings ...string) string {
	t.Helper()
	u, err := url.Parse(catalog)
	require.NoError(t, err)
	q := u.Query()
	q.Set("blob", bucket)
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// TestConformanceOverHTTP runs the Store conformance suite through the HTTP store in
// front of a server whose data queues are on the distributed store: every behaviour
// (samplers, consumption, KV, waits, put ids, errors) crosses HTTP and the catalog.
func TestConformanceOverHTTP(t *testing.T) {
	persisttest.Run(t, func(t *testing.T) persist.Store {
		base := startServer(t, targetOf(t, pgtest.Database(t), fileBucket(t), "flush_interval=-1"))
		s, err := httpstore.Open(context.Background(), base, "q", nil)
		require.NoError(t, err)
		return s
	})
}

// routeTransport sends each request to the server route chooses (a load balancer that
// is not sticky): the same HTTP store talks to several replicas.
type routeTransport struct {
	route func(r *http.Request) string // → base URL
}

func (rt *routeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	u, _ := url.Parse(rt.route(r))
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
	return http.DefaultTransport.RoundTrip(r)
}

// TestStreamWaitAcrossReplicas: a waiting Stream of an HTTP store behind a load balancer
// reads on one server and long-polls the change version on another; a put made
// through a third client on the second server wakes it at once. The change versions
// of the distributed store come from the catalog, so they are the same on every
// server (per-server counters started at each server's open time would leave the
// long-poll waiting for a version the second server reaches only after as many
// commits as nanoseconds passed between the two opens).
func TestStreamWaitAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	target := targetOf(t, pgtest.Database(t), fileBucket(t), "flush_interval=-1")
	a, b := startServer(t, target), startServer(t, target)
	// b opens the queue first, so a per-server version of a would be far ahead of b's.
	onB, err := persist.Open(ctx, "q", &persist.Config{URL: b}, httpstore.Driver())
	require.NoError(t, err)
	defer onB.Close(ctx)
	_, err = onB.PutBatch(ctx, []persist.Record{{"x": 0}})
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)
	lb := &http.Client{Transport: &routeTransport{route: func(r *http.Request) string {
		if strings.HasSuffix(r.URL.Path, "/changes") {
			return b
		}
		return a
	}}}
	reader, err := persist.Open(ctx, "q", &persist.Config{URL: a, HTTPClient: lb}, httpstore.Driver())
	require.NoError(t, err)
	defer reader.Close(ctx)

	s := reader.Stream(&persist.StreamOpts{Offset: 0, BatchSize: 10, Wait: true, IdleTimeout: 20 * time.Second})
	rows, err := s.Next(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	got := make(chan []persist.Row, 1)
	go func() {
		rows, err := s.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- rows
	}()
	time.Sleep(200 * time.Millisecond) // the stream is waiting on b's change version
	_, err = onB.PutBatch(ctx, []persist.Record{{"x": 1}})
	require.NoError(t, err)
	select {
	case rows := <-got:
		require.Len(t, rows, 1)
		require.Equal(t, int64(1), rows[0].Index)
	case <-time.After(10 * time.Second):
		t.Fatal("a stream waiting through another replica was not woken by the put")
	}

	// Both servers answer the same version for the same commits.
	version := func(base string) string {
		resp, err := http.Get(base + "/v1/namespaces/default/data/q/schema")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.Header.Get("Lakeshore-Data-Version")
	}
	require.Eventually(t, func() bool { return version(a) == version(b) }, 5*time.Second, 10*time.Millisecond)
}

// TestBucketUnavailableThroughServer: the object store answers only errors for a span
// ($LAKESTORE_OUTAGE, default 2 s; the figure is 10 s) while a client keeps
// putting through a server on the distributed store. Every put succeeds (durable in
// the catalog's tail), the tail and the flush failures show in Stats and in the
// server's metrics, rows read from the tail meanwhile, and once the store is back the
// background flush moves everything into fragments.
func TestBucketUnavailableThroughServer(t *testing.T) {
	outage := 2 * time.Second
	if v := os.Getenv("LAKESTORE_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		outage = d
	}
	ctx := context.Background()
	f := startS3(t, "lake")
	base := startServer(t, targetOf(t, pgtest.Database(t), f.url("lake"), "flush_interval=50ms", "flush_timeout=1s"))
	q, err := persist.Open(ctx, "q", &persist.Config{URL: base}, httpstore.Driver())
	require.NoError(t, err)
	defer q.Close(ctx)
	_, err = q.PutBatch(ctx, []persist.Record{{"x": int64(0)}})
	require.NoError(t, err)
	require.NoError(t, q.Flush(ctx))

	f.down.Store(true)
	start, n := time.Now(), int64(1)
	for time.Since(start) < outage {
		recs := make([]persist.Record, 10)
		for j := range recs {
			recs[j] = persist.Record{"x": n + int64(j)}
		}
		idx, err := q.PutBatch(ctx, recs)
		require.NoError(t, err, "a put does not need the object store")
		require.Equal(t, n, idx[0])
		n += 10
		time.Sleep(20 * time.Millisecond)
	}
	var st persist.Stats
	waitFor(t, func() bool { // a flush attempt may take up to flush_timeout to fail
		st, err = q.Stats(ctx)
		require.NoError(t, err)
		return st.FlushFailures > 0
	})
	require.Equal(t, n-1, st.TailRows, "every put of the outage waits in the tail")
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), fmt.Sprintf(`lakeshore_data_tail_rows{namespace="default",queue="q"} %d`, n-1))
	require.Regexp(t, `lakeshore_data_flush_failures_total\{namespace="default",queue="q"\} [1-9]`, string(body))
	rows, err := q.Get(ctx, 1, int(n), nil)
	require.NoError(t, err, "rows in the tail read without the object store")
	require.Len(t, rows, int(n-1))

	f.down.Store(false)
	waitFor(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.TailRows == 0
	})
	rows, err = q.Get(ctx, 0, int(n)+1, nil)
	require.NoError(t, err)
	require.Len(t, rows, int(n))
	for i, r := range rows {
		require.Equal(t, int64(i), r.Fields["x"])
	}
	t.Logf("%s outage: %d records put meanwhile, %d flush failures", outage, n-1, st.FlushFailures)
}

// TestStoresOpenExisting: opened for a read (create false), a queue the catalog does not
// have is a *persist.NotFoundError naming it and no catalog row is added; a put creates
// it, after which the read opens it.
func TestStoresOpenExisting(t *testing.T) {
	t.Parallel()
	catalog := pgtest.Database(t)
	stores, err := NewStores(targetOf(t, catalog, fileBucket(t)), nil)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = stores.Open(ctx, "team-a", "nosuch", false)
	var nf *persist.NotFoundError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, "nosuch", nf.Queue)
	names, err := stores.List(ctx, "team-a")
	require.NoError(t, err)
	require.Empty(t, names, "no catalog row was added")
	s, err := stores.Open(ctx, "team-a", "nosuch", true)
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))
	s, err = stores.Open(ctx, "team-a", "nosuch", false)
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))
}

// TestCatalogRefusedThroughServer: a server whose --data catalog refuses its password, or
// has no such database, answers every data route 502 unavailable, never 401 unauthorized
// (which tells a client its own token was refused, so it neither retries nor moves to
// another replica) nor 500, and the password never shows (the answer says the storage is
// unavailable; the server's log line names the fault). Fails before Stores' serving: 401
// and 500.
func TestCatalogRefusedThroughServer(t *testing.T) {
	const secret = "wrong-password-s3cr3t"
	refused, missing := pgtest.Refused(t, secret)
	for _, c := range []struct{ name, catalog string }{
		{"WrongCredentials", refused},
		{"MissingDatabase", missing},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := startServer(t, targetOf(t, c.catalog, "mem://"))
			for _, req := range []struct{ method, path, body string }{
				{http.MethodGet, "/v1/namespaces/default/data/q/stats", ""},
				{http.MethodPost, "/v1/namespaces/default/data/q/records", `{"records":[{"x":1}]}`},
				{http.MethodGet, "/v1/namespaces/default/data", ""},
			} {
				r, err := http.NewRequest(req.method, base+req.path, strings.NewReader(req.body))
				require.NoError(t, err)
				r.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(r)
				require.NoError(t, err)
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				require.Equal(t, http.StatusBadGateway, resp.StatusCode, "%s %s: %s", req.method, req.path, body)
				require.Contains(t, string(body), `"code":"unavailable"`)
				require.NotContains(t, string(body), secret)
			}
		})
	}
}
