package httpstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// dataServer is a real `lakeshore serve` handler on loopback serving data queues from a
// temporary directory.
type dataServer struct {
	url    string
	dir    string
	srv    *server.Server
	client *http.Client
}

// startDataServer starts a server with cfg (DataDir set to a temporary directory when
// empty) and stops it at cleanup.
func startDataServer(t testing.TB, cfg *server.Config) *dataServer {
	t.Helper()
	back, err := sqliteplane.Open(context.Background(), ":memory:", nil)
	require.NoError(t, err)
	var c server.Config
	if cfg != nil {
		c = *cfg
	}
	if c.DataDir == "" {
		c.DataDir = t.TempDir()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv := server.New(back, &c)
	ts := httptest.NewServer(srv)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(func() {
		srv.Stop()
		ts.Close()
		require.NoError(t, srv.Close(context.Background()))
		client.CloseIdleConnections()
		back.Close()
	})
	return &dataServer{url: ts.URL, dir: c.DataDir, srv: srv, client: client}
}

// open opens queue name on the server with cfg's namespace and token.
func (d *dataServer) open(t testing.TB, name string, cfg *persist.Config) persist.Store {
	t.Helper()
	var c persist.Config
	if cfg != nil {
		c = *cfg
	}
	c.URL, c.HTTPClient = d.url, d.client
	s, err := httpstore.Open(context.Background(), d.url, name, &c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// TestHTTPStoreConformance runs the Store conformance suite on the HTTP store against a
// real server on loopback, one queue per case.
func TestHTTPStoreConformance(t *testing.T) {
	t.Parallel()
	d := startDataServer(t, nil)
	n := 0
	persisttest.Run(t, func(t *testing.T) persist.Store {
		n++
		return d.open(t, "q"+strconv.Itoa(n), nil) // one queue per case, however many cases
	})
}

// loseAnswers is a transport that lets the server handle a request but loses the
// answer of the first lose puts (as when the server is killed right after its commit,
// or the connection breaks on the way back).
type loseAnswers struct {
	lose atomic.Int32
	puts atomic.Int32
}

func (l *loseAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/records") {
		return resp, err
	}
	l.puts.Add(1)
	if l.lose.Add(-1) < 0 {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, io.ErrUnexpectedEOF
}

// TestHTTPStorePutRetriedByID: a put whose answer is lost (the server committed it) is
// repeated by the HTTP store with the same put id, and the server answers the first
// put's indexes: the caller gets them, the queue holds the batch once. A caller's own
// retry of a failed PutPartitionOnce is as safe.
func TestHTTPStorePutRetriedByID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startDataServer(t, nil)
	lose := &loseAnswers{}
	lose.lose.Store(2)
	s, err := httpstore.Open(ctx, d.url, "q", &persist.Config{HTTPClient: &http.Client{Transport: lose}})
	require.NoError(t, err)
	q := persist.New(s)
	defer q.Close(ctx)
	idx, err := q.PutBatch(ctx, []persist.Record{{"x": 1}, {"x": 2}})
	require.NoError(t, err, "the store retries a put whose answer was lost")
	require.Equal(t, []int64{0, 1}, idx)
	require.EqualValues(t, 3, lose.puts.Load(), "two lost answers, then the repeat's")
	idx, err = q.PutBatch(ctx, []persist.Record{{"x": 3, "tensor": persist.Tensor{DType: "uint8", Shape: []int{1}, Data: []byte{1}}}})
	require.NoError(t, err)
	require.Equal(t, []int64{2}, idx, "no duplicate: the next batch follows at once")
	rows, err := q.Get(ctx, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, rows, 3)

	// Every attempt lost: the caller sees the transport error, and its own retry with
	// the same id gets the indexes written by the first attempt.
	lose.lose.Store(100)
	id := persist.NewPutID()
	_, err = q.PutPartitionOnce(ctx, id, "default", []persist.Record{{"x": 4}})
	require.Error(t, err)
	lose.lose.Store(0)
	idx, err = q.PutPartitionOnce(ctx, id, "default", []persist.Record{{"x": 4}})
	require.NoError(t, err)
	require.Equal(t, []int64{3}, idx)
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
}

// startHTTPChild re-executes the test binary in a child role of child_test.go, with the
// server's URL as its directory argument; stdout is returned as a scanner.
func startHTTPChild(t *testing.T, role, url, arg string, env ...string) (*exec.Cmd, *bufio.Scanner, *strings.Builder) {
	t.Helper()
	cmd := persisttest.ChildCommand(role, url, arg, env...)
	sc, stderr := persisttest.StartChild(t, cmd)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, sc, stderr
}

// TestHTTPSecondProcessSeesLaterRows: a process that opened the queue over HTTP (through
// LAKESHORE_URL) and follows it with a waiting Stream sees the rows another process puts
// after it opened.
func TestHTTPSecondProcessSeesLaterRows(t *testing.T) {
	t.Parallel()
	d := startDataServer(t, nil)
	cmd, out, stderr := startHTTPChild(t, "httpfollower", d.url, "30")
	require.True(t, out.Scan(), "the follower did not start: %s", stderr)
	require.Equal(t, "ready", out.Text())
	q := persist.New(d.open(t, "q", nil))
	var want []int64
	for i := range 3 {
		recs := make([]persist.Record, 10)
		for j := range recs {
			recs[j] = persist.Record{"k": i*10 + j}
		}
		idx, err := q.PutBatch(context.Background(), recs)
		require.NoError(t, err)
		want = append(want, idx...)
		time.Sleep(50 * time.Millisecond)
	}
	var got []int64
	for len(got) < len(want) && out.Scan() {
		n, err := strconv.ParseInt(out.Text(), 10, 64)
		require.NoError(t, err)
		got = append(got, n)
	}
	require.NoError(t, cmd.Wait(), "follower: %s", stderr)
	require.Equal(t, want, got)
}

// TestHTTPProducersAndConsumers: four producers on two servers over one data directory
// put 100,000 records while three consumer processes with distinct tasks, on either
// server, take them in batches: every consumer's set equals the produced set, without a
// duplicate.
func TestHTTPProducersAndConsumers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("100,000 records over HTTP")
	}
	dir := t.TempDir()
	servers := []*dataServer{startDataServer(t, &server.Config{DataDir: dir}), startDataServer(t, &server.Config{DataDir: dir})}
	const total, producers = 100_000, 4
	// The queue exists before the consumers start.
	servers[0].open(t, "q", nil)
	type result struct {
		task string
		idx  []int64
		err  error
	}
	results := make(chan result, 3)
	for c, task := range []string{"actor", "critic", "ref"} {
		cmd, out, stderr := startHTTPChild(t, "httpconsumer", servers[c%2].url, task, "PERSIST_TEST_COUNT="+strconv.Itoa(total))
		go func() {
			var idx []int64
			for out.Scan() {
				n, err := strconv.ParseInt(out.Text(), 10, 64)
				if err != nil {
					results <- result{task: task, err: err}
					return
				}
				idx = append(idx, n)
			}
			err := cmd.Wait()
			if err != nil {
				err = fmt.Errorf("%w: %s", err, stderr)
			}
			results <- result{task, idx, err}
		}()
	}
	produced := make(chan []int64, producers)
	for p := range producers {
		go func() {
			q := persist.New(servers[p%2].open(t, "q", nil))
			var mine []int64
			for k := 0; k < total/producers; k += 500 {
				recs := make([]persist.Record, 500)
				for j := range recs {
					recs[j] = persist.Record{"k": p*total + k + j, "p": p}
				}
				idx, err := q.PutBatch(context.Background(), recs)
				if err != nil {
					t.Error(err)
					break
				}
				mine = append(mine, idx...)
			}
			produced <- mine
		}()
	}
	var all []int64
	for range producers {
		all = append(all, <-produced...)
	}
	slices.Sort(all)
	require.Len(t, all, total)
	for range 3 {
		select {
		case r := <-results:
			require.NoError(t, r.err, r.task)
			got := slices.Clone(r.idx)
			slices.Sort(got)
			require.Equal(t, len(got), len(slices.Compact(slices.Clone(got))), "%s got an index twice", r.task)
			require.Equal(t, all, got, "%s consumed exactly the produced set", r.task)
		case <-time.After(2 * time.Minute):
			t.Fatal("a consumer did not finish")
		}
	}
}

// TestHTTPStoreRetriesReads: reads (safe to repeat) ride out a server that answers 503
// shutting_down a few times, and so do puts (safe to repeat by their put id: written
// once); a field update (not safe to repeat) is not repeated.
func TestHTTPStoreRetriesReads(t *testing.T) {
	t.Parallel()
	back, err := sqliteplane.Open(context.Background(), ":memory:", nil)
	require.NoError(t, err)
	srv := server.New(back, &server.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var refuse, puts atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/records") && r.Method == "POST" {
			puts.Add(1)
		}
		if refuse.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"code": "shutting_down", "message": "server shutting down: retry"}`))
			return
		}
		srv.ServeHTTP(w, r)
	}))
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		ts.Close()
		require.NoError(t, srv.Close(context.Background()))
		client.CloseIdleConnections()
		back.Close()
	})
	s, err := httpstore.Open(context.Background(), ts.URL, "q", &persist.Config{HTTPClient: client})
	require.NoError(t, err)
	q := persist.New(s)
	defer q.Close(context.Background())
	ctx := context.Background()
	_, err = q.PutBatch(ctx, []persist.Record{{"x": 1}, {"x": 2}})
	require.NoError(t, err)
	refuse.Store(3)
	rows, err := q.Get(ctx, 0, 10, nil)
	require.NoError(t, err, "a read rides out three refusals")
	require.Len(t, rows, 2)
	refuse.Store(1)
	before := puts.Load()
	idx, err := q.Put(ctx, persist.Record{"x": 3})
	require.NoError(t, err, "a put is repeated (by its put id)")
	require.EqualValues(t, 2, idx)
	require.Equal(t, before+2, puts.Load())
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "and written once")
	refuse.Store(1)
	err = q.PutFields(ctx, persist.DefaultPartition, []int64{0}, []persist.Record{{"y": 1}})
	require.Error(t, err, "a field update is not repeated")
	ok, err := q.Produced(ctx, persist.DefaultPartition, []int64{0}, []string{"y"})
	require.NoError(t, err)
	require.False(t, ok[0][0])
}

// TestHTTPTrainerSIGKILLBetweenReadAndCommit: a trainer process reading leased batches
// over HTTP is SIGKILLed holding an uncommitted batch; the restarted one reads exactly
// that batch first, and every sample is committed once (persisttest.TrainerCrash).
func TestHTTPTrainerSIGKILLBetweenReadAndCommit(t *testing.T) {
	d := startDataServer(t, nil)
	q := persist.New(d.open(t, "q", nil))
	persisttest.TrainerCrash(t, q, func(holdAt int) *persisttest.TrainerProcess {
		return persisttest.StartTrainer(t, persisttest.ChildCommand("httptrainer", d.url, strconv.Itoa(holdAt)))
	})
}

// TestHTTPScanPagesPastTheServersBound: a Scan with a limit above persist.ScanLimitMax (the
// server refuses such a limit) answers a page of ScanLimitMax records and where the next
// starts, and following it reads every record once; Queue.Stream does so by itself (this
// test fails on the code that sent the caller's limit: the server answered invalid).
func TestHTTPScanPagesPastTheServersBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startDataServer(t, nil)
	s := d.open(t, "big", nil)
	total := persist.ScanLimitMax + 7
	recs := make([]persist.Record, total)
	for i := range recs {
		recs[i] = persist.Record{"x": int64(i)}
	}
	_, err := s.PutPartition(ctx, persist.DefaultPartition, recs, nil)
	require.NoError(t, err)
	var offset int64
	seen := 0
	for {
		b, next, err := s.Scan(ctx, offset, 1<<31-1, nil)
		require.NoError(t, err)
		n := b.Len()
		b.Release()
		require.LessOrEqual(t, n, persist.ScanLimitMax)
		if n == 0 {
			break
		}
		seen += n
		offset = next
	}
	require.Equal(t, total, seen)

	st := persist.New(s).Stream(&persist.StreamOpts{BatchSize: 2 * persist.ScanLimitMax})
	seen = 0
	for {
		rows, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		for _, r := range rows {
			require.Equal(t, int64(seen), r.Index)
			seen++
		}
	}
	require.Equal(t, total, seen)
}

// TestHTTPLargeReadsSplitPastTheServersBound: the server answers at most
// persist.ScanLimitMax rows per request (indexes of POST …/data, keys of POST …/kv/get,
// a page of GET …/kv, batch_size of POST …/batch, size of POST …/replay); the HTTP store
// splits its callers' larger reads into requests the server accepts and returns
// everything, in order, as in process. Fails on the code that sent each call as one
// request (the server answered invalid).
func TestHTTPLargeReadsSplitPastTheServersBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startDataServer(t, nil)
	s := d.open(t, "large", nil)
	total := 2*persist.ScanLimitMax + 7
	keys := make([]string, total)
	recs := make([]persist.Record, total)
	for i := range recs {
		keys[i] = fmt.Sprintf("k%05d", i)
		recs[i] = persist.Record{"x": int64(i)}
	}
	idx, err := s.KVPut(ctx, persist.DefaultPartition, keys, recs, nil)
	require.NoError(t, err)
	require.Len(t, idx, total)
	requireX := func(b *persist.Batch, indexes []int64) {
		t.Helper()
		require.Equal(t, indexes, b.Indexes)
		rows, err := b.Rows()
		require.NoError(t, err)
		for i, r := range rows {
			require.Equal(t, r.Index, r.Fields["x"], "row %d", i)
		}
	}

	// GetData of more indexes than one answer holds, in a chosen order with repeats.
	want := make([]int64, 0, total+3)
	for i := total - 1; i >= 0; i-- {
		want = append(want, int64(i))
	}
	want = append(want, 0, 5, 0)
	b, err := s.GetData(ctx, &persist.BatchMeta{Indexes: want, Fields: []persist.FieldMeta{{Name: "x"}}, Partition: persist.DefaultPartition})
	require.NoError(t, err)
	requireX(b, want)
	b.Release()

	// KVGet and KVList of more keys than one answer holds.
	es, err := s.KVGet(ctx, persist.DefaultPartition, keys, nil)
	require.NoError(t, err)
	require.Len(t, es, total)
	for i, e := range es {
		require.Equal(t, keys[i], e.Key)
		require.Equal(t, int64(i), e.Fields["x"])
	}
	es, err = s.KVList(ctx, persist.DefaultPartition)
	require.NoError(t, err)
	require.Len(t, es, total)
	for i, e := range es {
		require.Equal(t, keys[i], e.Key)
	}
	page, err := s.(persist.KVPager).KVListPage(ctx, "", 5, persist.ScanLimitMax+3)
	require.NoError(t, err)
	require.Len(t, page, persist.ScanLimitMax+3)
	require.Equal(t, int64(5), page[0].Index)

	// A batch larger than one answer: GetMeta, then GetData in parts; all of it handed out.
	b, m, err := persist.New(s).Reader().GetBatch(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: total + 10, Task: "train"})
	require.NoError(t, err)
	all := make([]int64, total)
	for i := range all {
		all[i] = int64(i)
	}
	require.Equal(t, all, m.Indexes)
	requireX(b, all)
	b.Release()
	m, err = s.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 1, Task: "train"})
	require.NoError(t, err)
	require.Empty(t, m.Indexes, "every sample was handed out")

	// A replay larger than one answer: parts of at most ScanLimitMax draws; with a seed it
	// repeats, and its first part is the draw of the same seed in one request.
	q := persist.New(s)
	size := 2*persist.ScanLimitMax + 3
	rs, err := q.Replay(ctx, &persist.ReplayRequest{Size: size, Fields: []string{"x"}, Seed: 42})
	require.NoError(t, err)
	require.Len(t, rs.Draws, size)
	requireX(rs.Batch, rs.Draws)
	again, err := q.Replay(ctx, &persist.ReplayRequest{Size: size, Fields: []string{}, Seed: 42})
	require.NoError(t, err)
	require.Equal(t, rs.Draws, again.Draws)
	one, err := q.Replay(ctx, &persist.ReplayRequest{Size: persist.ScanLimitMax, Fields: []string{}, Seed: 42})
	require.NoError(t, err)
	require.Equal(t, rs.Draws[:persist.ScanLimitMax], one.Draws)
	require.NotEqual(t, rs.Draws[:persist.ScanLimitMax], rs.Draws[persist.ScanLimitMax:2*persist.ScanLimitMax], "parts draw with different seeds")
	for _, r := range []*persist.ReplaySample{rs, again, one} {
		r.Batch.Release()
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestHTTPKVListKeyPutBetweenPages: KVList over HTTP reads the server's pages of keys by
// index; a key put again between two pages (it moves to a new, higher index) was listed
// twice, once from each page, where the store lists each key once. KVList keeps its
// latest entry (this test fails on the old code).
func TestHTTPKVListKeyPutBetweenPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startDataServer(t, nil)
	writer := d.open(t, "kvpages", nil)
	total := persist.ScanLimitMax + 1
	keys := make([]string, total)
	recs := make([]persist.Record, total)
	for i := range recs {
		keys[i] = fmt.Sprintf("k%05d", i)
		recs[i] = persist.Record{"x": int64(i)}
	}
	_, err := writer.KVPut(ctx, persist.DefaultPartition, keys, recs, nil)
	require.NoError(t, err)

	var pages atomic.Int64
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := d.client.Transport.RoundTrip(r)
		if err == nil && r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/kv") && pages.Add(1) == 1 {
			// Between the first page and the second, k00000 is cleared and put again.
			require.NoError(t, writer.KVClear(ctx, persist.DefaultPartition, []string{"k00000"}))
			_, err := writer.KVPut(ctx, persist.DefaultPartition, []string{"k00000"}, []persist.Record{{"x": int64(-1)}}, nil)
			require.NoError(t, err)
		}
		return resp, err
	})}
	reader, err := httpstore.Open(ctx, d.url, "kvpages", &persist.Config{URL: d.url, HTTPClient: client})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reader.Close(context.Background()) })

	es, err := reader.KVList(ctx, persist.DefaultPartition)
	require.NoError(t, err)
	require.GreaterOrEqual(t, pages.Load(), int64(2), "the list was read in pages")
	seen := map[string]int64{}
	for _, e := range es {
		_, dup := seen[e.Key]
		require.False(t, dup, "key %s listed twice", e.Key)
		seen[e.Key] = e.Index
	}
	require.Len(t, seen, total)
	require.Equal(t, int64(total), seen["k00000"], "the key's latest entry")

	// The same key in two partitions is two keys of the list of every partition.
	_, err = writer.KVPut(ctx, "other", []string{"k00000"}, []persist.Record{{"x": int64(7)}}, nil)
	require.NoError(t, err)
	es, err = reader.KVList(ctx, "")
	require.NoError(t, err)
	require.Len(t, es, total+1)
}

// TestMetaRequestRefusedBeforeTheQueueExists: a GetMeta (and a GetBatch) whose request
// every store refuses — no fields, batch size 0, a bad task, a negative rank — is
// refused with *persist.InvalidError naming the field when no put has created the queue
// yet, as in process. On the code before persist.CheckMetaRequest the server answered the
// missing queue's 404 before reading the request and the store took it for an empty queue:
// an empty batch, or a wait for the whole timeout (this test fails on that code).
func TestMetaRequestRefusedBeforeTheQueueExists(t *testing.T) {
	t.Parallel()
	d := startDataServer(t, nil)
	s := d.open(t, "never-put", nil)
	good := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 1, Task: "train"}
	for _, c := range []struct {
		field string
		edit  func(r *persist.MetaRequest)
	}{
		{"fields", func(r *persist.MetaRequest) { r.Fields = nil }},
		{"batch_size", func(r *persist.MetaRequest) { r.BatchSize = 0 }},
		{"task", func(r *persist.MetaRequest) { r.Task = "" }},
		{"dp_rank", func(r *persist.MetaRequest) { r.DPRank = -1 }},
		{"partition", func(r *persist.MetaRequest) { r.Partition = "../up" }},
	} {
		rq := good
		c.edit(&rq)
		_, err := s.GetMeta(t.Context(), &rq)
		var ie *persist.InvalidError
		require.ErrorAs(t, err, &ie, c.field)
		require.Equal(t, c.field, ie.Field)
	}
	meta, err := s.GetMeta(t.Context(), &good)
	require.NoError(t, err, "a good request to a queue no put has created is an empty batch")
	require.Empty(t, meta.Indexes)
}

// TestHTTPStoreAnswerNotLakeshore: a URL where another web service answers 200 with an HTML
// page is said as such (before: "decode answer: msgp: attempted to decode type \"int\" with
// method for \"map\"", found by `lakeshore data stats` pointed at another web server).
func TestHTTPStoreAnswerNotLakeshore(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<html><body>Welcome</body></html>"))
	}))
	defer ts.Close()
	s, err := httpstore.Open(context.Background(), ts.URL, "q", &persist.Config{})
	if err == nil {
		_, err = s.Schema(context.Background())
		s.Close(context.Background())
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "not a Lakeshore answer (Content-Type text/html")
	require.NotContains(t, err.Error(), "msgp")
}
