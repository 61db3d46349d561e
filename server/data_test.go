package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// D is the path of the data queue used by the tests.
const D = "/v1/namespaces/default/data/rollouts"

// dataSetup is setup with a data directory; the data queues are closed at cleanup.
func dataSetup(t testing.TB, cfg *server.Config) *testBundle {
	t.Helper()
	var c server.Config
	if cfg != nil {
		c = *cfg
	}
	c.DataDir = t.TempDir()
	b := setup(t, &c)
	t.Cleanup(func() { require.NoError(t, b.srv.Close(context.Background())) })
	return b
}

// dataErr decodes a data error body.
func dataErr(t *testing.T, r *response, status int, code string) api.DataErrorBody {
	t.Helper()
	require.Equal(t, status, r.status, "body %s", r.body)
	var eb api.DataErrorBody
	require.NoError(t, json.Unmarshal(r.body, &eb), "body %s", r.body)
	require.Equal(t, code, eb.Code, "message %q", eb.Message)
	require.NotEmpty(t, eb.Message)
	require.NotContains(t, eb.Message, "persist.", "no Go type names in messages")
	return eb
}

func arrowBody(t *testing.T, rec arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	require.NoError(t, w.Write(rec))
	require.NoError(t, w.Close())
	rec.Release()
	return buf.Bytes()
}

func int64Record(name string, vals ...int64) arrow.RecordBatch {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(vals, nil)
	a := b.NewArray()
	defer a.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: name, Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil),
		[]arrow.Array{a}, int64(len(vals)))
}

// TestDataBadInput: every kind of bad input over HTTP is a typed error with persist's code,
// and writes nothing.
func TestDataBadInput(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, nil)
	r := b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1, "tokens": [1, 2]}, {"x": 2, "tokens": [3]}]}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.JSONEq(t, `{"indexes": [0, 1]}`, string(r.body))

	state := func() (int64, string) {
		r := b.do(t, "GET", D+"/stats", "", nil, "")
		require.Equal(t, 200, r.status)
		var st api.DataStats
		require.NoError(t, json.Unmarshal(r.body, &st))
		r = b.do(t, "GET", D+"/schema", "", nil, "")
		require.Equal(t, 200, r.status)
		return st.NextIndex, string(r.body)
	}
	next0, schema0 := state()
	require.EqualValues(t, 2, next0)
	require.JSONEq(t, `{"fields": [{"name": "tokens", "kind": "list<int64>"}, {"name": "x", "kind": "int64"}]}`, schema0)

	meta := func(body string) *response {
		return b.do(t, "POST", D+"/meta", api.ContentTypeJSON, []byte(body), "")
	}
	e := dataErr(t, meta(`{"fields": ["x"], "batch_size": 2, "task": "t", "sampler": {"name": "no-such"}}`), 400, "invalid")
	require.Contains(t, e.Message, "no-such")
	e = dataErr(t, meta(`{"fields": ["x"], "batch_size": 2, "task": "t", "sampler": {"name": "grpo-group-n", "params": {"n": 2, "x": 1}}}`), 400, "invalid")
	require.Contains(t, e.Message, `"x"`)
	dataErr(t, meta(`{"fields": ["x"], "batch_size": 4, "task": "t", "sampler": {"name": "grpo-group-n", "params": {"n": 3}}}`), 400, "invalid")
	dataErr(t, meta(`{"fields": ["x"], "batch_size": 0, "task": "t"}`), 400, "invalid")
	dataErr(t, meta(`{"fields": ["x"], "batch_size": 1, "task": "t", "partition": "../x"}`), 400, "invalid")

	put := func(body string) *response {
		return b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(body), "")
	}
	e = dataErr(t, put(`{"records": [{"x": 3}, {"x": "three"}]}`), 400, "incompatible_type")
	require.Equal(t, &api.DataErrorDetails{Field: "x", Have: "int64", Got: "string"}, e.Details)
	dataErr(t, put(`{"records": [{"tokens": "abc"}]}`), 400, "incompatible_type")
	e = dataErr(t, put(`{"records": [{"x": 3}, {"_index": 1}]}`), 400, "invalid")
	require.Contains(t, e.Message, "_index")
	dataErr(t, put(`{"partition": ".hidden", "records": [{"x": 3}]}`), 400, "invalid")
	dataErr(t, put(`{"records": [{"x": 3}, 7]}`), 400, "invalid")
	dataErr(t, put(`{"records": [{"x": 18446744073709551615}]}`), 400, "unsupported_value")
	// A tensor whose data does not match its shape.
	b.do(t, "POST", D+"/records", api.ContentTypeJSON,
		[]byte(`{"records": [{"t": {"$ndarray": {"dtype": "float32", "shape": [3], "data": "AAAAAA=="}}}]}`), "").requireError(t, 400, "invalid")
	// PutFields with as many records as indexes only.
	dataErr(t, b.do(t, "POST", D+"/fields", api.ContentTypeJSON, []byte(`{"indexes": [0, 1], "records": [{"y": 1}]}`), ""), 400, "invalid")
	dataErr(t, b.do(t, "POST", D+"/fields", api.ContentTypeJSON, []byte(`{"indexes": [7], "records": [{"y": 1}]}`), ""), 404, "not_found")
	// A record over the size limit.
	big := `{"records": [{"s": "` + strings.Repeat("a", 16<<20+10) + `"}]}`
	e = dataErr(t, put(big), 400, "invalid")
	require.Equal(t, "records[0]", e.Details.Field)
	// A body beyond the body limit.
	r = put(`{"records": [{"s": "` + strings.Repeat("a", 18<<20) + `"}]}`)
	require.Equal(t, 413, r.status)

	// Arrow streams: garbage, a column of another type than the schema's, a type with no
	// kind, PutFields without _index.
	arrowPut := func(path string, body []byte) *response {
		return b.do(t, "POST", D+path, api.ContentTypeArrow, body, "")
	}
	dataErr(t, arrowPut("/records", []byte("not arrow")), 400, "invalid")
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	sb.AppendValues([]string{"a"}, nil)
	sa := sb.NewArray()
	e = dataErr(t, arrowPut("/records", arrowBody(t, array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.BinaryTypes.String}}, nil), []arrow.Array{sa}, 1))), 400, "incompatible_type")
	require.Equal(t, "x", e.Details.Field)
	sa.Release()
	db := array.NewDate32Builder(memory.DefaultAllocator)
	db.Append(1)
	da := db.NewArray()
	e = dataErr(t, arrowPut("/records", arrowBody(t, array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "d", Type: arrow.FixedWidthTypes.Date32}}, nil), []arrow.Array{da}, 1))), 400, "invalid")
	require.Contains(t, e.Message, "column d")
	da.Release()
	dataErr(t, arrowPut("/fields", arrowBody(t, int64Record("y", 1))), 400, "invalid")

	next, schema := state()
	require.Equal(t, next0, next, "nothing was written")
	require.JSONEq(t, schema0, schema, "nor did the schema change")

	// A good Arrow put and field update, and an Arrow read back.
	r = arrowPut("/records", arrowBody(t, int64Record("x", 5, 6)))
	require.Equal(t, 200, r.status, "%s", r.body)
	require.JSONEq(t, `{"indexes": [2, 3]}`, string(r.body))
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.AppendValues([]int64{3}, nil)
	ia := ib.NewArray()
	fb := array.NewFloat64Builder(memory.DefaultAllocator)
	fb.AppendValues([]float64{0.5}, nil)
	fa := fb.NewArray()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "_index", Type: arrow.PrimitiveTypes.Int64}, {Name: "reward", Type: arrow.PrimitiveTypes.Float64}}, nil),
		[]arrow.Array{ia, fa}, 1)
	ia.Release()
	fa.Release()
	r = arrowPut("/fields", arrowBody(t, rec))
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.do(t, "GET", D+"/records?offset=3&limit=10&fields=x,reward", "", nil, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, api.ContentTypeArrow, r.header.Get("Content-Type"))
	require.Equal(t, "4", r.header.Get(api.HeaderNextOffset))
	rd, err := ipc.NewReader(bytes.NewReader(r.body))
	require.NoError(t, err)
	require.True(t, rd.Next())
	got := rd.RecordBatch()
	require.EqualValues(t, 1, got.NumRows())
	require.Equal(t, []string{"_index", "_partition", "x", "reward"}, []string{got.Schema().Field(0).Name, got.Schema().Field(1).Name, got.Schema().Field(2).Name, got.Schema().Field(3).Name})
	require.Equal(t, 0.5, got.Column(3).(*array.Float64).Value(0))
	rd.Release()
	// The same as JSON rows.
	hr, err := http.NewRequest("GET", b.ts.URL+D+"/records?offset=3&limit=10", nil)
	require.NoError(t, err)
	hr.Header.Set("Accept", api.ContentTypeJSON)
	resp, err := b.ts.Client().Do(hr)
	require.NoError(t, err)
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.JSONEq(t, `{"rows": [{"index": 3, "partition": "default", "fields": {"x": 6, "reward": 0.5}}], "next": 4}`, string(data))
}

// TestDataAuth: data:put and data:read are the data routes' permissions, per namespace and
// queue; namespaces are separate; names that would leave the data root are refused.
func TestDataAuth(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, &server.Config{AdminToken: adminSecret})
	producer, _ := b.mint(t, "team-a", "roll*", 0, plane.PermissionDataPut)
	reader, _ := b.mint(t, "team-a", "*", 0, plane.PermissionDataRead)
	jobs, _ := b.mint(t, "team-a", "*", 0, plane.PermissionSubmit, plane.PermissionRead, plane.PermissionConsume)
	A := "/v1/namespaces/team-a/data/rollouts"
	body := []byte(`{"records": [{"x": 1}]}`)
	require.Equal(t, 200, b.do(t, "POST", A+"/records", api.ContentTypeJSON, body, producer).status)
	b.do(t, "POST", A+"/records", api.ContentTypeJSON, body, reader).requireError(t, 403, "forbidden")
	b.do(t, "POST", A+"/records", api.ContentTypeJSON, body, jobs).requireError(t, 403, "forbidden")
	b.do(t, "POST", "/v1/namespaces/team-a/data/other/records", api.ContentTypeJSON, body, producer).requireError(t, 403, "forbidden")
	b.do(t, "POST", "/v1/namespaces/team-b/data/rollouts/records", api.ContentTypeJSON, body, producer).requireError(t, 403, "forbidden")
	b.do(t, "GET", A+"/records", "", nil, producer).requireError(t, 403, "forbidden")
	r := b.do(t, "GET", A+"/records", "", nil, reader)
	require.Equal(t, 200, r.status)
	b.do(t, "GET", A+"/records", "", nil, "").requireError(t, 401, "unauthorized")

	// The same queue name in another namespace is another queue.
	require.Equal(t, 200, b.do(t, "POST", "/v1/namespaces/team-b/data/rollouts/records", api.ContentTypeJSON, []byte(`{"records": [{"y": "s"}]}`), adminSecret).status)
	r = b.do(t, "GET", "/v1/namespaces/team-b/data/rollouts/schema", "", nil, adminSecret)
	require.JSONEq(t, `{"fields": [{"name": "y", "kind": "string"}]}`, string(r.body))
	r = b.do(t, "GET", "/v1/namespaces/team-a/data", "", nil, reader)
	require.JSONEq(t, `{"queues": ["rollouts"]}`, string(r.body))

	// Metrics: a data token sees its queue's series, not another namespace's.
	r = b.do(t, "GET", "/metrics", "", nil, producer)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), `lakeshore_data_records_put_total{namespace="team-a",queue="rollouts"} 1`)
	require.NotContains(t, string(r.body), `namespace="team-b"`)
	// The RL drops, from the queue's Stats: a dropped group counts once.
	require.Equal(t, 200, b.do(t, "POST", A+"/groups/drop", api.ContentTypeJSON, []byte(`{"task": "train", "indexes": [0]}`), reader).status)
	require.Equal(t, 200, b.do(t, "POST", A+"/groups/drop", api.ContentTypeJSON, []byte(`{"task": "train", "indexes": [0]}`), reader).status)
	r = b.do(t, "GET", "/metrics", "", nil, producer)
	require.Contains(t, string(r.body), `lakeshore_data_groups_dropped_total{namespace="team-a",queue="rollouts"} 1`)
	require.Contains(t, string(r.body), `lakeshore_data_samples_unused_total{namespace="team-a",queue="rollouts"} 0`)
	require.Contains(t, string(r.body), `lakeshore_data_stale_dropped_total{namespace="team-a",queue="rollouts"} 0`)

	for _, p := range []string{"/v1/namespaces/..%2F..%2Fetc/data/q/schema", "/v1/namespaces/.x/data/q/schema", "/v1/namespaces/a/data/..%2Fb/schema", "/v1/namespaces/a/data/_q/schema"} {
		r := b.do(t, "GET", p, "", nil, adminSecret)
		require.Contains(t, []int{400, 404}, r.status, "%s: %s", p, r.body)
	}
}

// TestDataStream: GET …/stream answers one Arrow IPC stream, a record batch per arrival,
// and ends after idle_timeout without a new record.
func TestDataStream(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, nil)
	put := func(body string) {
		r := b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(body), "")
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	put(`{"records": [{"x": 1}, {"x": 2}]}`)
	open := func(idle int) (*ipc.Reader, func() []int64) {
		resp, err := b.ts.Client().Get(fmt.Sprintf("%s%s/stream?offset=1&batch_size=10&idle_timeout=%d", b.ts.URL, D, idle))
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, api.ContentTypeArrow, resp.Header.Get("Content-Type"))
		rd, err := ipc.NewReader(resp.Body)
		require.NoError(t, err)
		t.Cleanup(rd.Release)
		var got []int64
		return rd, func() []int64 {
			t.Helper()
			require.True(t, rd.Next(), "a batch: %v", rd.Err())
			col := rd.RecordBatch().Column(0).(*array.Int64)
			got = append(got, col.Int64Values()...)
			return got
		}
	}
	// A put made while the stream waits is delivered as it commits: the stream has no
	// polling, so without the commit's notification it would end at its idle timeout
	// (30 s) with nothing more.
	_, read := open(30)
	require.Equal(t, []int64{1}, read())
	go func() {
		time.Sleep(100 * time.Millisecond)
		put(`{"records": [{"x": 3}, {"x": 4}]}`)
	}()
	require.Equal(t, []int64{1, 2, 3}, read())
	// Without a new record the stream ends after its idle timeout.
	rd, read := open(1)
	require.Equal(t, []int64{1, 2, 3}, read())
	require.False(t, rd.Next(), "the stream ends after the idle timeout")
	require.NoError(t, rd.Err())
}

// TestDataOpenAPI: JSON exchanges of the data routes validate against the generated
// OpenAPI document (requests and answers).
func TestDataOpenAPI(t *testing.T) {
	t.Parallel()
	doc, err := libopenapi.NewDocument(api.OpenAPI())
	require.NoError(t, err)
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	b := dataSetup(t, &server.Config{AdminToken: adminSecret})
	call := func(method, path, body string) {
		t.Helper()
		req, err := http.NewRequest(method, b.ts.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", api.ContentTypeJSON)
		}
		req.Header.Set("Accept", api.ContentTypeJSON)
		req.Header.Set("Authorization", "Bearer "+adminSecret)
		resp, err := b.ts.Client().Do(req)
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, "%s %s: %s", method, path, data)
		vreq, err := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
		require.NoError(t, err)
		vreq.Header = req.Header.Clone()
		resp.Body = io.NopCloser(bytes.NewReader(data))
		ok, verrs := v.ValidateHttpRequestResponse(vreq, resp)
		var msgs []string
		for _, e := range verrs {
			msgs = append(msgs, e.Message+": "+e.Reason)
			for _, se := range e.SchemaValidationErrors {
				msgs = append(msgs, "  "+se.Reason+" at "+se.FieldPath)
			}
		}
		require.True(t, ok, "%s %s → %s\n%s", method, path, data, strings.Join(msgs, "\n"))
	}
	call("POST", D+"/records?partition=p", `{"records": [{"x": 1, "t": [1, 2]}, {"x": 2}]}`)
	call("POST", D+"/fields", `{"partition": "p", "indexes": [0], "records": [{"y": 0.5}]}`)
	call("GET", D+"/records?offset=0&limit=10&fields=x", "")
	call("POST", D+"/data", `{"indexes": [1, 0], "fields": ["x"]}`)
	call("POST", D+"/meta", `{"fields": ["x"], "batch_size": 2, "task": "t", "partition": "p", "sampler": {"name": "grpo-group-n", "params": {"n": 2}}}`)
	call("POST", D+"/produced", `{"partition": "p", "indexes": [0, 1], "fields": ["x", "y"]}`)
	call("POST", D+"/consumption/mark", `{"task": "u", "partition": "p", "indexes": [0]}`)
	call("GET", D+"/consumption?task=u&partition=p", "")
	call("POST", D+"/consumption/reset", `{"task": "u", "partition": "p"}`)
	call("POST", D+"/kv", `{"partition": "kv", "keys": ["a"], "records": [{"z": "s"}], "tags": [{"src": "x"}]}`)
	call("POST", D+"/kv/get", `{"partition": "kv", "keys": ["a"]}`)
	call("GET", D+"/kv?partition=kv", "")
	call("POST", D+"/kv/clear", `{"partition": "kv", "keys": ["a"]}`)
	call("POST", D+"/clear", `{"partition": "p", "indexes": [1]}`)
	call("DELETE", D+"/partitions/p", "")
	call("GET", D+"/schema", "")
	call("POST", D+"/flush", "")
	call("GET", D+"/stats", "")
	call("GET", D+"/changes?after=-1&wait=0", "")
	call("GET", "/v1/namespaces/default/data", "")
}

// TestDataArrowDeclaredLengths: an Arrow body that declares more than it holds (4 bytes
// of metadata length 0x7ffffff0, then 100 bytes) is refused with 400 invalid naming the
// problem, on every route that takes Arrow, without allocating what it declares and
// without Go internals in the message. Not parallel: it measures the process's
// allocations.
func TestDataArrowDeclaredLengths(t *testing.T) {
	b := dataSetup(t, nil)
	// The queue exists, so that POST D/fields reads its body (a refused put creates no
	// queue, and D/fields answers 404 for a queue that does not exist).
	r := b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	body := make([]byte, 104)
	binary.LittleEndian.PutUint32(body, 0x7ffffff0)
	for _, path := range []string{"/records", "/fields"} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		e := dataErr(t, b.do(t, "POST", D+path, api.ContentTypeArrow, body, ""), 400, "invalid")
		runtime.ReadMemStats(&after)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "bytes allocated for a 108-byte body")
		require.Contains(t, e.Message, "message 1 declares 2147483632 bytes of metadata, and the body holds 100 more")
		require.Equal(t, "request body", e.Details.Field)
		for _, internal := range []string{"runtime error", "arrow/ipc", "slice bounds"} {
			require.NotContains(t, e.Message, internal)
		}
	}
	// KV puts take no Arrow body.
	b.do(t, "POST", D+"/kv", api.ContentTypeArrow, body, "").requireError(t, 415, "unsupported_media_type")
}

// countingStores are file stores under root that count the stores open.
type countingStores struct {
	root string
	open atomic.Int64
}

func (c *countingStores) Open(ctx context.Context, namespace, queue string, create bool) (persist.Store, error) {
	dir := filepath.Join(c.root, namespace)
	if !create {
		if _, err := os.Stat(filepath.Join(dir, queue)); err != nil {
			return nil, &persist.NotFoundError{Queue: queue}
		}
	}
	s, err := filestore.Open(ctx, queue, &persist.Config{Dir: dir, Existing: !create})
	if err != nil {
		return nil, err
	}
	c.open.Add(1)
	return &countedStore{Store: s, c: c}, nil
}

func (c *countingStores) List(context.Context, string) ([]string, error) { return []string{}, nil }

type countedStore struct {
	persist.Store
	c    *countingStores
	once sync.Once
}

func (s *countedStore) Close(ctx context.Context) error {
	s.once.Do(func() { s.c.open.Add(-1) })
	return s.Store.Close(ctx)
}

// TestDataReadsCreateNothing: a read of a data queue that does not exist is 404
// not_found naming the queue (details.queue), on every read route and every put route
// that needs samples, and creates nothing (GET version answers 0); puts (records, KV)
// create the queue.
func TestDataReadsCreateNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, &server.Config{DataDir: dir})
	t.Cleanup(func() { require.NoError(t, b.srv.Close(context.Background())) })
	const N = "/v1/namespaces/team-a/data/nosuch"
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/stats", ""}, {"GET", "/schema", ""}, {"GET", "/records", ""}, {"GET", "/records?wait=60", ""},
		{"GET", "/stream?idle_timeout=60", ""}, {"GET", "/changes?wait=60", ""}, {"GET", "/kv", ""}, {"GET", "/consumption?task=t", ""},
		{"POST", "/data", `{"indexes": [0]}`}, {"POST", "/meta", `{"fields": ["x"], "batch_size": 1, "task": "t"}`},
		{"POST", "/meta", `{"fields": ["x"], "batch_size": 1, "task": "t", "wait": true, "timeout": 60}`}, {"POST", "/batch", `{"fields": ["x"], "batch_size": 1, "task": "t"}`},
		{"POST", "/kv/get", `{"keys": ["k"]}`}, {"POST", "/produced", `{"indexes": [0]}`},
		{"POST", "/consumption/mark", `{"task": "t", "indexes": [0]}`}, {"POST", "/fields", `{"indexes": [0], "records": [{"y": 1}]}`},
		{"POST", "/flush", ``}, {"POST", "/clear", `{"indexes": [0]}`}, {"POST", "/kv/clear", `{"keys": ["k"]}`},
		{"DELETE", "/partitions/p", ""},
	} {
		start := time.Now()
		e := dataErr(t, b.do(t, c.method, N+c.path, api.ContentTypeJSON, []byte(c.body), ""), 404, "not_found")
		// Half the wait: a bound on the wait, not on how fast a loaded machine answers
		// (4 s of a 5 s wait was too tight under the race detector).
		require.Less(t, time.Since(start), 30*time.Second, "%s %s answers at once, not after its 60 s wait", c.method, c.path)
		require.Equal(t, "nosuch", e.Details.Queue, "%s %s", c.method, c.path)
		require.Contains(t, e.Message, `data queue "nosuch" does not exist`)
	}
	// The weight version of a queue not created yet is 0 (docs/http-api.md; the SDKs'
	// answer), not 404.
	r := b.do(t, "GET", N+"/version", "", nil, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.JSONEq(t, `{"version": 0}`, string(r.body))
	_, err := os.Stat(filepath.Join(dir, "team-a"))
	require.ErrorIs(t, err, os.ErrNotExist, "no directory was created")

	r = b.do(t, "POST", N+"/kv", api.ContentTypeJSON, []byte(`{"keys": ["k"], "records": [{"x": 1}]}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, 200, b.do(t, "GET", N+"/stats", "", nil, "").status)
	r = b.do(t, "POST", "/v1/namespaces/team-a/data/other/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.do(t, "GET", "/v1/namespaces/team-a/data", "", nil, "")
	require.JSONEq(t, `{"queues": ["nosuch", "other"]}`, string(r.body))
}

// TestDataOpenQueuesBounded: the server keeps at most MaxOpenDataQueues stores open,
// closing the least recently used idle one to open another and any idle one after
// DataQueueIdle; when requests hold every one, another queue's request is 503
// too_many_long_polls until one is released.
func TestDataOpenQueuesBounded(t *testing.T) {
	t.Parallel()
	stores := &countingStores{root: t.TempDir()}
	b := setup(t, &server.Config{DataStores: stores, MaxOpenDataQueues: 2, DataQueueIdle: 200 * time.Millisecond})
	t.Cleanup(func() { require.NoError(t, b.srv.Close(context.Background())) })
	q := func(i int) string { return fmt.Sprintf("/v1/namespaces/default/data/q%d", i) }
	for i := range 5 {
		r := b.do(t, "POST", q(i)+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), "")
		require.Equal(t, 200, r.status, "%s", r.body)
		require.LessOrEqual(t, stores.open.Load(), int64(2))
	}
	// Reads of every queue still see what was put (an evicted queue reopens).
	for i := range 5 {
		r := b.do(t, "GET", q(i)+"/stats", "", nil, "")
		require.Equal(t, 200, r.status, "%s", r.body)
		require.Contains(t, string(r.body), `"next_index":1`)
		require.LessOrEqual(t, stores.open.Load(), int64(2))
	}
	require.Eventually(t, func() bool { return stores.open.Load() == 0 }, 5*time.Second, 20*time.Millisecond, "idle queues are closed")

	// Two long-polls hold two queues: a third queue is refused, then served once they end.
	// They wait for the next change of their queue (30 s at most) and a put ends each, so
	// the refusal does not race a timer. On a server that closes no idle queue meanwhile:
	// with the 200 ms above, a queue closed between the read of its version and the
	// long-poll (a loaded machine) reopened at a later version, and the long-poll answered
	// at once instead of holding the queue.
	// The two long-polls are one tenant's (namespace default): its share is the whole here
	// (TestDataQueuesShareByTenant checks the share).
	stores = &countingStores{root: t.TempDir()}
	b = setup(t, &server.Config{DataStores: stores, MaxOpenDataQueues: 2, MaxDataQueuesPerTenant: 2, DataQueueIdle: time.Hour})
	t.Cleanup(func() { require.NoError(t, b.srv.Close(context.Background())) })
	for i := range 3 {
		r := b.do(t, "POST", q(i)+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), "")
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	version := func(i int) int64 {
		r := b.do(t, "GET", q(i)+"/changes", "", nil, "")
		require.Equal(t, 200, r.status, "%s", r.body)
		var v api.DataVersionResponse
		require.NoError(t, json.Unmarshal(r.body, &v))
		return v.Version
	}
	held := make(chan *response, 2)
	for i := range 2 {
		after := version(i)
		go func() {
			held <- b.do(t, "GET", fmt.Sprintf("%s/changes?after=%d&wait=30", q(i), after), "", nil, "")
		}()
	}
	require.Eventually(t, func() bool {
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil, "").body), "lakeshore_http_long_polls_open 2")
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, int64(2), stores.open.Load())
	b.do(t, "GET", q(2)+"/stats", "", nil, "").requireError(t, 503, "too_many_long_polls")
	for i := range 2 {
		r := b.do(t, "POST", q(i)+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 2}]}`), "")
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	for range 2 {
		require.Equal(t, 200, (<-held).status)
	}
	require.Equal(t, 200, b.do(t, "GET", q(2)+"/stats", "", nil, "").status)
}

// TestNamespaceRule: a namespace starting with '_' is refused for jobs and data alike
// (docs/http-api.md), and a data queue name starting with '_' too.
func TestNamespaceRule(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, nil)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/namespaces/_x/queues/q/invocations", `{}`},
		{"GET", "/v1/namespaces/_x/queues/q/stats", ""},
		{"POST", "/v1/namespaces/_x/data/q/records", `{"records": [{"x": 1}]}`},
		{"GET", "/v1/namespaces/_x/data", ""},
		{"POST", "/v1/namespaces/default/data/_q/records", `{"records": [{"x": 1}]}`},
	} {
		e := b.do(t, c.method, c.path, api.ContentTypeJSON, []byte(c.body), "").requireError(t, 400, "invalid")
		require.Contains(t, e.Message, "not starting with", "%s %s", c.method, c.path)
	}
}

// TestTypedNits: out-of-range numbers and durations say what is allowed, a null body is
// refused, an unknown shard column, a negative dp_rank and a negative index are typed
// 400s on every route that takes them.
func TestTypedNits(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, nil)
	Q := "/v1/namespaces/default/queues/q"
	e := b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(`{"priority": 1e400}`), "").requireError(t, 400, "invalid")
	require.Contains(t, e.Message, "out of range: use a finite number within ±1.8e308")
	e = b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(`{"delay": 1e300}`), "").requireError(t, 400, "invalid")
	require.Contains(t, e.Message, "invalid delay 1e+300: use seconds from 0 to 31622400 (366 days)")
	e = b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(`null`), "").requireError(t, 400, "invalid")
	require.Contains(t, e.Message, "null is not one; send {}")
	b.do(t, "POST", Q+"/invocations", api.ContentTypeMsgpack, []byte{0xc0}, "").requireError(t, 400, "invalid")

	require.Equal(t, 200, b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}, {"x": 2}]}`), "").status)
	e2 := dataErr(t, b.do(t, "GET", D+"/records?rank=0&world_size=2&shard_column=nosuch", "", nil, ""), 400, "invalid")
	require.Contains(t, e2.Message, "_index or a field of the queue (_index, x)")
	require.Equal(t, 200, b.do(t, "GET", D+"/records?rank=0&world_size=2&shard_column=x", "", nil, "").status)
	e2 = dataErr(t, b.do(t, "POST", D+"/meta", api.ContentTypeJSON, []byte(`{"fields": ["x"], "batch_size": 1, "task": "t", "dp_rank": -1}`), ""), 400, "invalid")
	require.Equal(t, "dp_rank", e2.Details.Field)
	for path, body := range map[string]string{"/clear": `{"indexes": [0, -1]}`, "/consumption/mark": `{"task": "t", "indexes": [0, -1]}`} {
		e2 = dataErr(t, b.do(t, "POST", D+path, api.ContentTypeJSON, []byte(body), ""), 400, "invalid")
		require.Equal(t, "indexes[1]", e2.Details.Field, path)
	}
}

// TestDataAdmissionAndLeaseBounds: a put's back-pressure and a meta request's lease out of
// range are 400 invalid naming the field and what is allowed: max_unconsumed without
// admission_task names admission_task; a negative max_ahead is refused as a negative
// max_unconsumed is; a task with no bound names the bounds to give; every lease out of 0–24 h gets the one message.
func TestDataAdmissionAndLeaseBounds(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, nil)
	put := func(query string) *response {
		return b.do(t, "POST", D+"/records?"+query, api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), "")
	}
	for query, want := range map[string]string{
		"max_unconsumed=1":                     `invalid admission_task "": 1–256 bytes`,
		"max_unconsumed=1&admission_task=":     `invalid admission_task "": 1–256 bytes`,
		"max_unconsumed=-1&admission_task=t":   "invalid max_unconsumed -1: ≥ 0 (0: no bound)",
		"max_ahead=-1":                         "invalid max_ahead -1: ≥ 0 (leave max_ahead out for no bound)",
		"max_ahead=-7&admission_task=t":        "invalid max_ahead -7: ≥ 0 (leave max_ahead out for no bound)",
		"max_unconsumed=0&admission_block=yes": "admission_block",
		// A task with no bound bounds nothing (before, accepted: every put admitted).
		"admission_task=t":                                       "invalid max_unconsumed 0: back-pressure needs a bound: max_unconsumed > 0",
		"admission_task=t&max_unconsumed=0":                      "and/or max_ahead ≥ 0",
		"admission_task=t&admission_block=true&max_unconsumed=0": "back-pressure needs a bound",
	} {
		e := dataErr(t, put(query), 400, "invalid")
		require.Contains(t, e.Message, want, "%s", query)
	}
	require.Equal(t, 200, put("max_unconsumed=5&admission_task=t").status, "within the bounds")
	require.Equal(t, 200, put("admission_task=t&max_ahead=0").status, "max_ahead 0 is a bound")

	meta := func(lease string) *response {
		return b.do(t, "POST", D+"/meta", api.ContentTypeJSON, []byte(`{"fields": ["x"], "batch_size": 1, "task": "t", "lease": `+lease+`}`), "")
	}
	for _, lease := range []string{"86401", "90000", "1e9", "1e20", "-1"} {
		e := dataErr(t, meta(lease), 400, "invalid")
		require.Regexp(t, `^invalid lease \S+: seconds from 0 to 86400 \(24 h; 0: no lease\)$`, e.Message, "lease %s", lease)
	}
	r := meta("86400")
	require.Equal(t, 200, r.status, "%s", r.body)
}

// TestDataQueuesShareByTenant: a data queue held by a request that waits is never closed
// to make room, so one tenant waiting on MaxOpenDataQueues queues at once (streams, waits
// for a change) held every open queue, and every data request of every other tenant
// answered 503 (the old code: team-b's put below). Now a tenant's waits hold at most its
// share of distinct queues (a quarter: 1 of 4 here), more waits on a queue it already
// holds take none, the next queue answers 503 too_many_long_polls at once, and another
// tenant's requests are served.
func TestDataQueuesShareByTenant(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, &server.Config{AdminToken: adminSecret, MaxOpenDataQueues: 4, DataQueueIdle: time.Hour})
	a, _ := b.mint(t, "team-a", "*", 0, plane.PermissionDataPut, plane.PermissionDataRead)
	other, _ := b.mint(t, "team-b", "*", 0, plane.PermissionDataPut, plane.PermissionDataRead)
	q := func(i int) string { return fmt.Sprintf("/v1/namespaces/team-a/data/q%d", i) }
	for i := range 4 {
		r := b.do(t, "POST", q(i)+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}]}`), a)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	var answered atomic.Int64
	refused := make(chan *response, 5)
	wait := func(i int) {
		go func() {
			r := b.do(t, "GET", q(i)+"/changes?after=9223372036854775806&wait=30", "", nil, a)
			answered.Add(1)
			refused <- r
		}()
	}
	openPolls := func(n int) bool {
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil, adminSecret).body), fmt.Sprintf("lakeshore_http_long_polls_open %d", n))
	}
	wait(0)
	wait(0)
	require.Eventually(t, func() bool { return openPolls(2) }, 10*time.Second, 10*time.Millisecond, "two waits on q0")
	for i := 1; i < 4; i++ {
		wait(i)
	}
	require.Eventually(t, func() bool { return answered.Load() == 3 || openPolls(5) }, 10*time.Second, 10*time.Millisecond)
	r := b.do(t, "POST", "/v1/namespaces/team-b/data/mine/records", api.ContentTypeJSON, []byte(`{"records": [{"y": 1}]}`), other)
	require.Equal(t, 200, r.status, "another tenant is served: %s", r.body)
	require.Equal(t, int64(3), answered.Load(), "the two waits on q0 hold one queue; the three others were refused")
	for range 3 {
		eb := (<-refused).requireError(t, 503, "too_many_long_polls")
		require.Contains(t, eb.Message, "share")
	}
	b.srv.Stop()
	for range 2 {
		<-refused
	}
}

// TestSamplerIntegerParamsAreIntegers: a sampler's integer parameter (grpo-group-n's n)
// is read as every other integer field of the API: a JSON number with a fraction or an
// exponent (2.0, 2e0, 0.2e1) or a msgpack float is 400 invalid naming the parameter and
// saying an integer is expected, and nothing is handed out; the integer 2 is taken in both
// encodings. Before, the parameters went through float64 and back, so 2e0 and a msgpack
// 2.0 were taken as the integer 2 (and an integer past 2^53 lost its last digits).
func TestSamplerIntegerParamsAreIntegers(t *testing.T) {
	t.Parallel()
	b := dataSetup(t, nil)
	r := b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1, "uid": "a"}, {"x": 2, "uid": "a"}]}`), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	meta := func(n string) string {
		return `{"fields": ["x"], "batch_size": 2, "task": "t", "sampler": {"name": "grpo-group-n", "params": {"n": ` + n + `, "group_field": "uid"}}}`
	}
	for _, n := range []string{"2.0", "2e0", "0.2e1", "2E0"} {
		e := dataErr(t, b.do(t, "POST", D+"/meta", api.ContentTypeJSON, []byte(meta(n)), ""), 400, "invalid")
		require.Contains(t, e.Message, "n must be an integer (digits, no fraction or exponent)", "json n %s", n)
	}
	msgpackMeta := func(n any) *response {
		body := mustMsgpack(t, map[string]any{"fields": []string{"x"}, "batch_size": 2, "task": "t",
			"sampler": map[string]any{"name": "grpo-group-n", "params": map[string]any{"n": n, "group_field": "uid"}}})
		return b.doHeaders(t, "POST", D+"/meta", body, map[string]string{"Content-Type": api.ContentTypeMsgpack, "Accept": api.ContentTypeJSON})
	}
	for _, n := range []any{2.0, float32(2)} {
		e := dataErr(t, msgpackMeta(n), 400, "invalid")
		require.Contains(t, e.Message, "n must be an integer (digits, no fraction or exponent)", "msgpack n %v", n)
	}
	// Nothing was handed out: the integer 2 takes the group, in either encoding.
	r = msgpackMeta(2)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"indexes":[0,1]`)
	r = b.do(t, "POST", D+"/meta", api.ContentTypeJSON, []byte(strings.Replace(meta("2"), `"task": "t"`, `"task": "t2"`, 1)), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"indexes":[0,1]`)
}
