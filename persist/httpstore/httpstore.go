package httpstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/tinylib/msgp/msgp"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Package httpstore is the HTTP store: a persist.Store over the data routes of `lakeshore
// serve` (docs/http-api.md, "Data queues"), so that persist.Open with an http(s) URL and
// Driver() gives the same Queue, Reader and KVView in a process on another machine.
// Control bodies are msgpack, a put of scalar records travels as one Arrow IPC stream
// (record.ArrowPutBody) and any other as wire-encoded maps (persist.RecordToWire), reads come
// back as Arrow IPC streams (persist.BatchFromRecord), and errors are rebuilt into the
// same typed errors as in process.

// isHTTP reports whether target is an http(s) URL.
func isHTTP(target string) bool {
	return strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://")
}

var _ persist.Store = (*httpStore)(nil)

// Driver returns the HTTP store's entry for persist.Open: it serves http:// and https://
// targets (Config.URL, Config.Dir or $LAKESHORE_URL naming a `lakeshore serve`):
//
//	q, err := persist.Open(ctx, "rollouts", &persist.Config{URL: "http://127.0.0.1:7077"}, httpstore.Driver())
func Driver() persist.StoreDriver {
	return persist.StoreDriver{Schemes: []string{"http", "https"},
		Open: func(ctx context.Context, name, target string, cfg *persist.Config) (persist.Store, error) {
			return Open(ctx, target, name, cfg)
		}}
}

// Open returns a persist.Store over the data queue name of the server at baseURL (an
// http or https URL, e.g. "http://127.0.0.1:7077"), in cfg.Namespace (default
// "default"), sending cfg.Token (default $LAKESHORE_TOKEN) as the bearer token. It asks
// the server for the queue's schema once, so an unreachable server, a refused token or a
// server without data queues fails here. Errors: *InvalidError for a bad name or URL, or
// a token no HTTP header carries (plane.ValidateToken), the server's errors (ErrForbidden,
// plane.ErrUnauthorized, …), transport errors.
func Open(ctx context.Context, baseURL, name string, cfg *persist.Config) (persist.Store, error) {
	if err := persist.CheckName("queue name", name); err != nil {
		return nil, err
	}
	var c persist.Config
	if cfg != nil {
		c = *cfg
	}
	u, err := url.Parse(baseURL)
	if err != nil || !isHTTP(baseURL) || u.Host == "" {
		return nil, &persist.InvalidError{Field: "Config.URL", Value: baseURL, Rule: "an http:// or https:// URL of a lakeshore server"}
	}
	ns := c.Namespace
	if ns == "" {
		ns = persist.NamespaceDefault
	}
	if err := persist.CheckName("namespace", ns); err != nil {
		return nil, err
	}
	tok := c.Token
	if tok == "" {
		tok = os.Getenv(persist.EnvToken)
	}
	if err := plane.ValidateToken(tok); err != nil {
		return nil, err
	}
	client := c.HTTPClient
	if client == nil {
		client = defaultHTTPClient
	}
	s := &httpStore{name: name, client: client, token: tok,
		base: strings.TrimSuffix(baseURL, "/") + "/v1/namespaces/" + url.PathEscape(ns) + "/data/" + url.PathEscape(name)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.existing = c.Existing
	if _, err := s.Schema(ctx); err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

// queueMissing reports whether err says that the queue itself does not exist: the
// server answers 404 not_found naming it to a read before the first put, and the HTTP
// store reads such a queue as an empty one (its schema, stats, reads, consumption and
// KV entries empty; GetMeta in wait mode waits for the first put by asking again), so
// that a consumer may start before its producers, as with the other stores. Routes
// that name indexes or keys answer the not_found as it is: none exists.
func queueMissing(err error) bool {
	var nf *persist.NotFoundError
	return errors.As(err, &nf) && nf.Queue != "" && nf.Keys == nil && nf.Indexes == nil
}

// defaultHTTPClient keeps many idle connections to one server (many concurrent
// producers and consumers).
var defaultHTTPClient = &http.Client{Transport: &http.Transport{
	Proxy:               http.ProxyFromEnvironment,
	MaxIdleConns:        1024,
	MaxIdleConnsPerHost: 1024,
	IdleConnTimeout:     90 * time.Second,
	ForceAttemptHTTP2:   true,
}}

// httpStore is the Store over HTTP.
type httpStore struct {
	name   string
	base   string // …/v1/namespaces/{ns}/data/{queue}
	client *http.Client
	token  string

	// existing is Config.Existing: Open fails for a queue the server does not have.
	existing bool

	// version is the highest change version the server reported.
	version atomic.Int64

	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	closeOnce sync.Once
	closed    atomic.Bool
}

// httpRequest is one call: a msgpack body (a msgp.Marshaler) or none; query parameters.
type httpRequest struct {
	method string
	path   string
	query  url.Values
	body   msgp.Marshaler
	// arrowBody, when not nil, is the body instead: an Arrow IPC stream.
	arrowBody []byte
	arrow     bool // the answer is an Arrow IPC stream
	// idempotent marks a POST or DELETE that is safe to repeat (GETs always are).
	idempotent bool
}

// do sends req and returns the answer's body and headers; out, when not nil, receives
// the decoded msgpack answer. Errors: ErrClosed after Close, the server's error rebuilt
// (httpError), transport errors.
func (s *httpStore) do(ctx context.Context, req httpRequest, out msgp.Unmarshaler) ([]byte, http.Header, error) {
	if req.method != "GET" && !req.idempotent {
		return s.doOnce(ctx, req, out)
	}
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		data, h, err := s.doOnce(ctx, req, out)
		if err == nil || attempt == httpRetries || !retryable(err) || ctx.Err() != nil {
			return data, h, err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-s.ctx.Done():
			return nil, nil, persist.ErrClosed
		}
		backoff = min(2*backoff, time.Second)
	}
}

// httpRetries bounds the attempts of a call that is safe to repeat (reads, puts — by
// their put id —, marks, clears, flushes) when the server is unreachable or restarting:
// about 3 s in all.
const httpRetries = 6

// transportError is a request that got no answer from the server.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// retryable reports whether err is worth another attempt: no answer, or a server that is
// shutting down or has too many long-polls open.
func retryable(err error) bool {
	var te *transportError
	if errors.As(err, &te) {
		return true
	}
	var pe *plane.Error
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Code == api.ErrShuttingDown.Code || pe.Code == api.ErrTooManyLongPolls.Code || pe.Code == plane.ErrUnavailable.Code
}

// doOnce is one attempt of do.
func (s *httpStore) doOnce(ctx context.Context, req httpRequest, out msgp.Unmarshaler) ([]byte, http.Header, error) {
	if s.closed.Load() {
		return nil, nil, persist.ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	u := s.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var body io.Reader
	if req.body != nil {
		b, err := req.body.MarshalMsg(nil)
		if err != nil {
			return nil, nil, err
		}
		body = bytes.NewReader(b)
	} else if req.arrowBody != nil {
		body = bytes.NewReader(req.arrowBody)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return nil, nil, err
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", api.ContentTypeMsgpack)
	} else if req.arrowBody != nil {
		hr.Header.Set("Content-Type", api.ContentTypeArrow)
	}
	if req.arrow {
		hr.Header.Set("Accept", api.ContentTypeArrow) // errors come back as JSON
	} else {
		hr.Header.Set("Accept", api.ContentTypeMsgpack)
	}
	if s.token != "" {
		hr.Header.Set("Authorization", "Bearer "+s.token)
	}
	// noAnswer is the error of a request that got no (whole) answer: ErrClosed once the
	// store closed, ctx's error when ctx ended it, else a *transportError.
	noAnswer := func(err error, what string) error {
		if s.closed.Load() {
			return persist.ErrClosed
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return ctx.Err()
		}
		return &transportError{fmt.Errorf("persist: %s %s: %s%w", req.method, s.base+req.path, what, err)}
	}
	resp, err := s.client.Do(hr)
	if err != nil {
		return nil, nil, noAnswer(err, "")
	}
	data, err := readBody(resp)
	resp.Body.Close()
	if err != nil {
		// The connection broke before the whole answer arrived: as good as no answer.
		return nil, nil, noAnswer(err, "read answer: ")
	}
	if v, err := strconv.ParseInt(resp.Header.Get(api.HeaderDataVersion), 10, 64); err == nil {
		for {
			cur := s.version.Load()
			if v <= cur || s.version.CompareAndSwap(cur, v) {
				break
			}
		}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.Header, httpError(resp, data)
	}
	if out != nil {
		if _, err := out.UnmarshalMsg(data); err != nil {
			return nil, nil, fmt.Errorf("persist: %s %s: %w", req.method, s.base+req.path, api.AnswerDecodeError(resp.Header.Get("Content-Type"), err))
		}
	}
	return data, resp.Header, nil
}

// maxSizedBody bounds the answers readBody reads into one buffer of their announced
// length; a longer one grows as it arrives.
const maxSizedBody = 256 << 20

// readBody reads an answer's body whole: in one allocation of its Content-Length when
// the server sent one (an Arrow answer of a batch does), instead of growing a buffer
// from 512 bytes by copies.
func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= maxSizedBody {
		buf := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(resp.Body)
}

// httpError rebuilds the error of a non-200 answer: persist's typed errors from their
// details, else the sentinel of the code.
func httpError(resp *http.Response, data []byte) error {
	var b api.DataErrorBody
	ct := resp.Header.Get("Content-Type")
	var err error
	if strings.Contains(ct, "msgpack") {
		_, err = b.UnmarshalMsg(data)
	} else {
		err = json.Unmarshal(data, &b)
	}
	if err != nil || b.Code == "" {
		return fmt.Errorf("persist: server answered %s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	d := b.Details
	if d != nil {
		switch b.Code {
		case persist.ErrSchema.Code:
			return &persist.SchemaError{Field: d.Field, Have: persist.Kind(d.Have), Got: persist.Kind(d.Got), Reason: d.Reason}
		case persist.ErrUnsupportedValue.Code:
			return &persist.UnsupportedValueError{Field: d.Field, GoType: d.GoType, Reason: d.Reason}
		case persist.ErrNotFound.Code:
			if d.Queue != "" || d.Partition != "" || d.Keys != nil || d.Indexes != nil {
				return &persist.NotFoundError{Queue: d.Queue, Partition: d.Partition, Keys: d.Keys, Indexes: d.Indexes}
			}
		case persist.ErrQueueFull.Code:
			if bp := d.Backpressure; bp != nil {
				return &persist.BackpressureError{Partition: d.Partition, Unconsumed: bp.Unconsumed, Records: bp.Records, Limit: bp.Limit,
					Version: bp.Version, Target: bp.Target, MaxAhead: bp.MaxAhead, Waited: api.Duration(bp.Waited)}
			}
		case persist.ErrPutIDReused.Code:
			id, _ := d.Value.(string)
			return &persist.PutIDReusedError{ID: id, Message: b.Message}
		case persist.ErrInvalid.Code:
			if d.Field != "" || d.Rule != "" {
				e := &persist.InvalidError{Field: d.Field, Value: d.Value, Rule: d.Rule}
				if e.Error() != b.Message {
					e.Message = b.Message
				}
				return e
			}
		}
	}
	// Every code keeps its code (the server's own ones too: shutting_down, forbidden, …),
	// so errors.Is matches the sentinels of persist, plane and api.
	return &plane.Error{Code: b.Code, Message: b.Message}
}

// Name implements Store.
func (s *httpStore) Name() string { return s.name }

// wireRecords encodes records for a body.
func wireRecords(recs []persist.Record) ([]api.Value, error) {
	out := make([]api.Value, len(recs))
	for i, r := range recs {
		b, err := persist.RecordToWire(fmt.Sprintf("records[%d]", i), r)
		if err != nil {
			return nil, err
		}
		out[i] = api.Value{Wire: b}
	}
	return out, nil
}

// PutPartition implements Store. A batch whose fields each hold scalars of one kind
// travels as one Arrow IPC stream (record.ArrowPutBody), any other as wire-encoded maps. Every
// batch carries an idempotency id (opts.ID, else a new one: NewPutID) in the put_id
// parameter, so the put is repeated like a read when the server does not answer or is
// restarting: the server answers a repeat with the indexes of the first put.
func (s *httpStore) PutPartition(ctx context.Context, partition string, recs []persist.Record, opts *persist.PutOpts) ([]int64, error) {
	var id string
	if opts != nil && opts.ID != "" {
		if err := persist.CheckPutID(opts.ID); err != nil {
			return nil, err
		}
		id = opts.ID
	}
	if id == "" {
		id = persist.NewPutID()
	}
	q := url.Values{"partition": {partition}, "put_id": {id}}
	var a *persist.Admission
	if opts != nil && opts.Admission != nil {
		a = opts.Admission
		if err := persist.CheckAdmission(a); err != nil {
			return nil, err
		}
		if a.Task != "" {
			q.Set("admission_task", a.Task)
		}
		q.Set("max_unconsumed", strconv.FormatInt(a.MaxUnconsumed, 10))
		if a.MaxAhead >= 0 { // below 0: no bound, which is max_ahead left out
			q.Set("max_ahead", strconv.FormatInt(a.MaxAhead, 10))
		}
		if a.Block {
			q.Set("admission_block", "true")
		}
	}
	req := httpRequest{method: "POST", path: "/records", query: q, idempotent: true}
	if body, ok := record.ArrowPutBody(recs); ok {
		req.arrowBody = body
	} else {
		vals, err := wireRecords(recs)
		if err != nil {
			return nil, err
		}
		req.body = &api.DataPutRequest{Partition: partition, Records: vals}
	}
	if a == nil || !a.Block {
		var out api.DataIndexesResponse
		if _, _, err := s.do(ctx, req, &out); err != nil {
			return nil, err
		}
		return out.Indexes, nil
	}
	return s.putBlocked(ctx, req, a)
}

// putBlocked sends req, a put whose Admission blocks, and repeats it (with its put id:
// a refused put wrote nothing, an admitted one is answered again) while the server's
// capped long-poll (LongPollMax) answered queue_full before the Admission's own
// Timeout, each request asking for what is left of it: the wait is the Timeout, as in
// process (persist.AdmitLoop), however the server caps one request.
func (s *httpStore) putBlocked(ctx context.Context, req httpRequest, a *persist.Admission) ([]int64, error) {
	start := time.Now()
	deadline := start.Add(cmp.Or(a.Timeout, persist.GetMetaTimeoutDefault))
	for {
		wait := max(min(time.Until(deadline), httpLongPollSlice), time.Millisecond)
		req.query.Set("admission_timeout", strconv.FormatFloat(wait.Seconds(), 'f', -1, 64))
		var out api.DataIndexesResponse
		_, _, err := s.do(ctx, req, &out)
		var bp *persist.BackpressureError
		if err == nil || !errors.As(err, &bp) {
			return out.Indexes, err
		}
		if time.Until(deadline) <= 0 || ctx.Err() != nil {
			bp.Waited = time.Since(start)
			return nil, err
		}
	}
}

// PutFields implements Store.
func (s *httpStore) PutFields(ctx context.Context, partition string, indexes []int64, fields []persist.Record) error {
	vals, err := wireRecords(fields)
	if err != nil {
		return err
	}
	if fields == nil {
		vals = nil
	}
	_, _, err = s.do(ctx, httpRequest{method: "POST", path: "/fields", query: url.Values{"partition": {partition}},
		body: &api.DataPutFieldsRequest{Partition: partition, Indexes: indexes, Records: vals}}, &api.EmptyResponse{})
	return err
}

// readBatch decodes an Arrow IPC answer into a Batch.
func readBatch(data []byte) (*persist.Batch, error) {
	rd, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("persist: decode the server's Arrow answer: %w", err)
	}
	defer rd.Release()
	if !rd.Next() {
		if err := rd.Err(); err != nil {
			return nil, fmt.Errorf("persist: decode the server's Arrow answer: %w", err)
		}
		return emptyBatch(nil), nil
	}
	rec := rd.RecordBatch()
	b, err := persist.BatchFromRecord(rec)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// emptyBatch returns a batch of no rows with fields.
func emptyBatch(fields []persist.Field) *persist.Batch {
	return record.EmptyBatch(fields, []int64{}, []string{})
}

// getQuery encodes GetOpts as query parameters.
func getQuery(q url.Values, opts *persist.GetOpts) {
	if opts == nil {
		return
	}
	if opts.Fields != nil {
		q.Set("fields", strings.Join(opts.Fields, ","))
	}
	if opts.Partition != "" {
		q.Set("partition", opts.Partition)
	}
	sh := opts.Shard
	if sh.WorldSize != 0 || sh.Rank != 0 {
		q.Set("rank", strconv.Itoa(sh.Rank))
		q.Set("world_size", strconv.Itoa(sh.WorldSize))
	}
	if sh.Column != "" {
		q.Set("shard_column", sh.Column)
	}
	if sh.Buckets != 0 {
		q.Set("shard_buckets", strconv.Itoa(sh.Buckets))
	}
}

// Scan implements Store. It asks the server for at most persist.ScanLimitMax records (the
// route's bound): a larger limit answers that many, and the returned offset where the
// next page starts, as Scan may answer fewer than limit records.
func (s *httpStore) Scan(ctx context.Context, offset int64, limit int, opts *persist.GetOpts) (*persist.Batch, int64, error) {
	if opts != nil {
		for _, f := range opts.Fields {
			if strings.Contains(f, ",") { // the query separates names by commas
				return nil, 0, &persist.InvalidError{Field: "fields", Value: f, Rule: "over HTTP, field names without a comma"}
			}
		}
		if opts.Fields != nil && len(opts.Fields) == 0 {
			return nil, 0, &persist.InvalidError{Field: "fields", Value: "[]", Rule: "at least one name, or nil for every field"}
		}
	}
	if err := persist.CheckReadArgs(offset, limit, opts); err != nil {
		return nil, 0, err // the store's own error, as in process (the server's names the query)
	}
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}, "limit": {strconv.Itoa(min(limit, persist.ScanLimitMax))}}
	getQuery(q, opts)
	data, h, err := s.do(ctx, httpRequest{method: "GET", path: "/records", query: q, arrow: true}, nil)
	if queueMissing(err) { // no put has created the queue yet: it reads as empty
		return emptyBatch(nil), offset, nil
	}
	if err != nil {
		return nil, 0, err
	}
	next, err := strconv.ParseInt(h.Get(api.HeaderNextOffset), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("persist: the server's answer has no %s header", api.HeaderNextOffset)
	}
	b, err := readBatch(data)
	if err != nil {
		return nil, 0, err
	}
	return b, next, nil
}

// httpLongPollSlice is the longest wait one request asks of the server; longer waits
// repeat the request (the server caps a long-poll, 60 s by default).
const httpLongPollSlice = 50 * time.Second

// metaBody returns the body of POST …/meta and …/batch for req. Errors: *InvalidError
// for a request the server would refuse in the same words (checked here when the
// encoding would lose it: sampler parameters that are not a JSON object).
func metaBody(req *persist.MetaRequest) (*api.DataMetaRequest, error) {
	if req == nil {
		return nil, &persist.InvalidError{Field: "MetaRequest", Value: nil, Rule: "a request"}
	}
	body := &api.DataMetaRequest{Fields: req.Fields, BatchSize: req.BatchSize, Task: req.Task, Partition: req.Partition,
		Wait: req.Wait, DeferConsume: req.DeferConsume, DPRank: req.DPRank, BatchIndex: req.BatchIndex, Lease: req.Lease.Seconds()}
	if req.Staleness != nil {
		body.MaxStaleness, body.StalePolicy, body.StaleVersion = &req.Staleness.Max, string(req.Staleness.Policy), string(req.Staleness.Version)
	}
	if body.Fields == nil {
		body.Fields = []string{}
	}
	if req.Timeout < 0 {
		return nil, &persist.InvalidError{Field: "MetaRequest.Timeout", Value: req.Timeout, Rule: "≥ 0"}
	}
	if req.Sampler.Name != "" || len(req.Sampler.Params) > 0 {
		body.Sampler = &api.DataSampler{Name: req.Sampler.Name}
		if len(req.Sampler.Params) > 0 {
			// Numbers as sent (json.Number: msgp writes an integer as an int, any other as a
			// float), so an integer parameter reaches the server as an integer and 2.0 or 1e2
			// as a float, which the server refuses for an integer parameter as in process.
			dec := json.NewDecoder(bytes.NewReader(req.Sampler.Params))
			dec.UseNumber()
			err := dec.Decode(&body.Sampler.Params)
			if _, rest := dec.Token(); err == nil && rest != io.EOF {
				err = errors.New("data follows the object")
			}
			if err != nil || body.Sampler.Params == nil {
				if _, lerr := persist.DefaultSamplers().New(req.Sampler); lerr != nil {
					return nil, lerr // the same error as in process
				}
				return nil, &persist.InvalidError{Field: "sampler params", Value: string(req.Sampler.Params), Rule: "a JSON object"}
			}
		}
	}
	return body, nil
}

// handOut sends a GetMeta request (path …/meta or …/batch) and, in wait mode, repeats it
// while the server's capped long-poll times out before req's own timeout.
func (s *httpStore) handOut(ctx context.Context, path string, req *persist.MetaRequest, out msgp.Unmarshaler) ([]byte, http.Header, error) {
	body, err := metaBody(req)
	if err != nil {
		return nil, nil, err
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = persist.GetMetaTimeoutDefault
	}
	deadline := time.Now().Add(timeout)
	absentWait := 20 * time.Millisecond
	for {
		if req.Wait {
			body.Timeout = min(time.Until(deadline), httpLongPollSlice).Seconds()
			if body.Timeout <= 0 {
				body.Timeout = 0.001
			}
		}
		data, h, err := s.do(ctx, httpRequest{method: "POST", path: path, body: body, arrow: out == nil}, out)
		if err != nil && req.Wait && errors.Is(err, persist.ErrTimeout) && time.Until(deadline) > 0 && ctx.Err() == nil {
			continue // the server capped the wait: a timed-out wait handed out nothing
		}
		if queueMissing(err) && req.Wait {
			// No put has created the queue yet: wait for one by asking again.
			wait := min(absentWait, time.Until(deadline))
			if wait <= 0 {
				return nil, nil, fmt.Errorf("%w: no batch of %d within %s: data queue %q has no records yet", persist.ErrTimeout, req.BatchSize, timeout, s.name)
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			absentWait = min(2*absentWait, 500*time.Millisecond)
			continue
		}
		return data, h, err
	}
}

// batchMetaFrom converts an answer's metadata.
func batchMetaFrom(out *api.DataBatchMeta) *persist.BatchMeta {
	m := &persist.BatchMeta{Size: out.Size, Indexes: out.Indexes, Partition: out.Partition, Task: out.Task}
	for _, f := range out.Fields {
		m.Fields = append(m.Fields, persist.FieldMeta{Name: f.Name, Kind: persist.Kind(f.Kind), DType: f.DType, Shape: f.Shape})
	}
	return m
}

// GetMeta implements Store.
func (s *httpStore) GetMeta(ctx context.Context, req *persist.MetaRequest) (*persist.BatchMeta, error) {
	var out api.DataBatchMeta
	_, _, err := s.handOut(ctx, "/meta", req, &out)
	if queueMissing(err) {
		return absentMeta(req), nil
	}
	if err != nil {
		return nil, err
	}
	return batchMetaFrom(&out), nil
}

// GetBatch implements BatchGetter: one POST …/batch, answered by the Arrow IPC stream of
// the batch and its metadata in the Lakeshore-Batch-Meta header. A BatchSize above
// persist.ScanLimitMax (the server's bound on the route) is GetMeta then GetData, which
// reads the records in parts, as on a store that is not a BatchGetter.
func (s *httpStore) GetBatch(ctx context.Context, req *persist.MetaRequest) (*persist.Batch, *persist.BatchMeta, error) {
	if req != nil && req.BatchSize > persist.ScanLimitMax {
		m, err := s.GetMeta(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		b, err := s.GetData(ctx, m)
		if err != nil {
			return nil, m, err // handed out, not read: as in process
		}
		return b, m, nil
	}
	data, h, err := s.handOut(ctx, "/batch", req, nil)
	if queueMissing(err) {
		return emptyBatch(nil), absentMeta(req), nil
	}
	var meta *persist.BatchMeta
	if hv := h.Get(api.HeaderBatchMeta); hv != "" {
		var out api.DataBatchMeta
		if jerr := json.Unmarshal([]byte(hv), &out); jerr != nil {
			return nil, nil, fmt.Errorf("persist: decode the server's %s header: %w", api.HeaderBatchMeta, jerr)
		}
		meta = batchMetaFrom(&out)
	}
	if err != nil {
		return nil, meta, err // handed out (meta != nil) but not read: as in process
	}
	if meta == nil {
		return nil, nil, fmt.Errorf("persist: the server's answer has no %s header", api.HeaderBatchMeta)
	}
	rd, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, meta, fmt.Errorf("persist: decode the server's Arrow answer: %w", err)
	}
	defer rd.Release()
	if !rd.Next() {
		if err := rd.Err(); err != nil {
			return nil, meta, fmt.Errorf("persist: decode the server's Arrow answer: %w", err)
		}
		return nil, meta, fmt.Errorf("persist: the server's Arrow answer has no record batch")
	}
	b, err := record.BatchFromStream(rd.RecordBatch(), meta.Partition)
	if err != nil {
		return nil, meta, err
	}
	if len(b.Indexes) > 0 {
		meta.Indexes = b.Indexes
	} else {
		meta.Indexes = []int64{}
	}
	return b, meta, nil
}

// absentMeta is the answer of GetMeta without waiting on a queue no put has created
// yet: nothing handed out, as from an empty queue.
func absentMeta(req *persist.MetaRequest) *persist.BatchMeta {
	m := &persist.BatchMeta{Indexes: []int64{}, Partition: cmp.Or(req.Partition, persist.DefaultPartition), Task: req.Task}
	for _, f := range req.Fields {
		m.Fields = append(m.Fields, persist.FieldMeta{Name: f})
	}
	return m
}

// GetData implements Store.
func (s *httpStore) GetData(ctx context.Context, meta *persist.BatchMeta) (*persist.Batch, error) {
	if meta == nil {
		return nil, &persist.InvalidError{Field: "meta", Value: nil, Rule: "the batch metadata returned by GetMeta"}
	}
	if s.closed.Load() {
		return nil, persist.ErrClosed
	}
	if len(meta.Indexes) == 0 {
		var fields []persist.Field
		for _, f := range meta.Fields {
			if f.Kind.Valid() {
				fields = append(fields, persist.Field{Name: f.Name, Kind: f.Kind})
			}
		}
		return emptyBatch(fields), nil
	}
	fields := meta.FieldNames()
	if fields == nil {
		fields = []string{}
	}
	return s.arrowInParts(ctx, "/data", len(meta.Indexes), false, func(lo, hi int) msgp.Marshaler {
		return &api.DataGetRequest{Indexes: meta.Indexes[lo:hi], Fields: fields, Partition: meta.Partition, Task: meta.Task}
	})
}

// arrowInParts posts to path, for each part [lo, hi) of n items (inParts), the body
// bodyOf(lo, hi), and joins the Arrow answers in order (record.ConcatBatches). With
// stopAtEmpty, a part answered with no rows ends it (a replay of an empty window).
func (s *httpStore) arrowInParts(ctx context.Context, path string, n int, stopAtEmpty bool, bodyOf func(lo, hi int) msgp.Marshaler) (*persist.Batch, error) {
	var parts []*persist.Batch
	defer func() {
		for _, b := range parts {
			b.Release()
		}
	}()
	err := inParts(n, func(lo, hi int) error {
		if stopAtEmpty && len(parts) > 0 && parts[len(parts)-1].Len() == 0 {
			return nil
		}
		data, _, err := s.do(ctx, httpRequest{method: "POST", path: path, arrow: true, idempotent: true, body: bodyOf(lo, hi)}, nil)
		if err != nil {
			return err
		}
		b, err := readBatch(data)
		if err != nil {
			return err
		}
		parts = append(parts, b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return record.ConcatBatches(parts)
}

// inParts calls read for each part [lo, hi) of n items, in order, each at most
// persist.ScanLimitMax long (the server's bound on one answer: persist.CheckAnswerCount);
// once, for [0, 0), when n is 0. It stops at the first error.
func inParts(n int, read func(lo, hi int) error) error {
	for lo := 0; lo == 0 || lo < n; lo += persist.ScanLimitMax {
		if err := read(lo, min(n, lo+persist.ScanLimitMax)); err != nil {
			return err
		}
	}
	return nil
}

var _ persist.GroupDropStore = (*httpStore)(nil)

// DropGroup implements persist.GroupDropStore (POST …/groups/drop).
func (s *httpStore) DropGroup(ctx context.Context, task, partition string, indexes []int64) error {
	if err := persist.CheckDropGroup(task, partition, indexes); err != nil {
		return err
	}
	_, _, err := s.do(ctx, httpRequest{method: "POST", path: "/groups/drop", idempotent: true,
		body: &api.DataConsumptionRequest{Task: task, Partition: partition, Indexes: indexes}}, &api.EmptyResponse{})
	return err
}

var _ persist.Replayer = (*httpStore)(nil)

// Replay implements persist.Replayer: the server draws (POST …/replay), from the
// weights it keeps in memory. req.Rand does not cross: Seed does. A Size above
// persist.ScanLimitMax (the server's bound on one answer) is drawn in parts of at most
// that many, part k seeded with persist.ReplayPartSeed(Seed, k); the parts are
// independent draws, each from the window as it is then. A part that draws nothing (an
// empty window) ends the replay: the answer holds the draws before it (none when the
// window was empty from the start, as in one call).
func (s *httpStore) Replay(ctx context.Context, req *persist.ReplayRequest) (*persist.ReplaySample, error) {
	if err := persist.CheckReplayRequest(req); err != nil {
		return nil, err
	}
	b, err := s.arrowInParts(ctx, "/replay", req.Size, true, func(lo, hi int) msgp.Marshaler {
		body := &api.DataReplayRequest{Partition: req.Partition, Fields: req.Fields, Size: hi - lo, Window: req.Window, Weight: req.Weight,
			Seed: persist.ReplayPartSeed(req.Seed, lo/persist.ScanLimitMax)}
		if req.Fields != nil && len(req.Fields) == 0 {
			body.IndexesOnly = true
		}
		return body
	})
	if err != nil {
		return nil, err
	}
	if b.Indexes == nil {
		b.Indexes, b.Partitions = []int64{}, []string{}
	}
	return &persist.ReplaySample{Draws: append([]int64{}, b.Indexes...), Batch: b}, nil
}

// UpdatePriorities implements persist.Replayer (POST …/priorities), so that the
// server's weights follow at once.
func (s *httpStore) UpdatePriorities(ctx context.Context, partition, field string, indexes []int64, values []float64) error {
	if err := persist.CheckIndexes(indexes); err != nil {
		return err
	}
	_, _, err := s.do(ctx, httpRequest{method: "POST", path: "/priorities", idempotent: true,
		body: &api.DataPrioritiesRequest{Partition: partition, Field: field, Indexes: nonNil(indexes), Values: nonNilFloats(values)}}, &api.EmptyResponse{})
	return err
}

func nonNilFloats(x []float64) []float64 {
	if x == nil {
		return []float64{}
	}
	return x
}

// Produced implements Store.
func (s *httpStore) Produced(ctx context.Context, partition string, indexes []int64, fields []string) ([][]bool, error) {
	var out api.DataProducedResponse
	if _, _, err := s.do(ctx, httpRequest{method: "POST", path: "/produced", idempotent: true,
		body: &api.DataProducedRequest{Partition: partition, Indexes: nonNil(indexes), Fields: nonNilStrings(fields)}}, &out); err != nil {
		return nil, err
	}
	return out.Produced, nil
}

func nonNil(x []int64) []int64 {
	if x == nil {
		return []int64{}
	}
	return x
}

func nonNilStrings(x []string) []string {
	if x == nil {
		return []string{}
	}
	return x
}

// MarkConsumed implements Store.
func (s *httpStore) MarkConsumed(ctx context.Context, task, partition string, indexes []int64) error {
	_, _, err := s.do(ctx, httpRequest{method: "POST", path: "/consumption/mark", idempotent: true,
		body: &api.DataConsumptionRequest{Task: task, Partition: partition, Indexes: nonNil(indexes)}}, &api.EmptyResponse{})
	return err
}

// ResetConsumption implements Store.
func (s *httpStore) ResetConsumption(ctx context.Context, task, partition string) error {
	_, _, err := s.do(ctx, httpRequest{method: "POST", path: "/consumption/reset", idempotent: true,
		body: &api.DataConsumptionRequest{Task: task, Partition: partition}}, &api.EmptyResponse{})
	return err
}

// Consumed implements Store.
func (s *httpStore) Consumed(ctx context.Context, task, partition string) (int64, error) {
	var out api.DataConsumedResponse
	_, _, err := s.do(ctx, httpRequest{method: "GET", path: "/consumption",
		query: url.Values{"task": {task}, "partition": {partition}}}, &out)
	if queueMissing(err) {
		return 0, nil
	}
	return out.Consumed, err
}

// ClearSamples implements Store.
func (s *httpStore) ClearSamples(ctx context.Context, partition string, indexes []int64) error {
	_, _, err := s.do(ctx, httpRequest{method: "POST", path: "/clear", idempotent: true,
		body: &api.DataClearRequest{Partition: partition, Indexes: nonNil(indexes)}}, &api.EmptyResponse{})
	return err
}

// ClearPartition implements Store.
func (s *httpStore) ClearPartition(ctx context.Context, partition string) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	_, _, err := s.do(ctx, httpRequest{method: "DELETE", path: "/partitions/" + url.PathEscape(partition), idempotent: true}, &api.EmptyResponse{})
	return err
}

// KVPut implements Store.
func (s *httpStore) KVPut(ctx context.Context, partition string, keys []string, fields []persist.Record, tags []map[string]string) ([]int64, error) {
	vals, err := wireRecords(fields)
	if err != nil {
		return nil, err
	}
	var out api.DataIndexesResponse
	if _, _, err := s.do(ctx, httpRequest{method: "POST", path: "/kv",
		body: &api.DataKVPutRequest{Partition: partition, Keys: nonNilStrings(keys), Records: vals, Tags: tags}}, &out); err != nil {
		return nil, err
	}
	return out.Indexes, nil
}

// kvEntries converts entries of an answer.
func kvEntriesOf(in []api.DataKVEntry) ([]persist.KVEntry, error) {
	out := make([]persist.KVEntry, len(in))
	for i, e := range in {
		out[i] = persist.KVEntry{Partition: e.Partition, Key: e.Key, Index: e.Index, Tags: e.Tags}
		if e.Fields.Wire != nil {
			rec, err := persist.RecordFromWire("entries", e.Fields.Wire)
			if err != nil {
				return nil, err
			}
			out[i].Fields = rec
		}
	}
	return out, nil
}

// KVGet implements Store: more than persist.ScanLimitMax keys (the server's bound on one
// answer) are read in parts of at most that many, in order; a missing key fails the call
// at the first part that has one, naming that part's missing keys.
func (s *httpStore) KVGet(ctx context.Context, partition string, keys []string, fields []string) ([]persist.KVEntry, error) {
	var entries []persist.KVEntry
	err := inParts(len(keys), func(lo, hi int) error {
		var out api.DataKVResponse
		if _, _, err := s.do(ctx, httpRequest{method: "POST", path: "/kv/get", idempotent: true,
			body: &api.DataKVKeysRequest{Partition: partition, Keys: nonNilStrings(keys[lo:hi]), Fields: fields}}, &out); err != nil {
			return err
		}
		es, err := kvEntriesOf(out.Entries)
		if err != nil {
			return err
		}
		if entries == nil {
			entries = es
		} else {
			entries = append(entries, es...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// KVList implements Store: it reads the server's pages (GET …/kv) until the last. A key
// cleared and put again between two pages moves to a higher index, so it can be on two
// pages: each key (of each partition) is listed once, with its latest entry (the higher
// index).
func (s *httpStore) KVList(ctx context.Context, partition string) ([]persist.KVEntry, error) {
	entries := []persist.KVEntry{}
	offset := int64(0)
	for {
		page, next, err := s.kvPage(ctx, partition, offset, persist.ScanLimitMax)
		if err != nil {
			return nil, err
		}
		entries = append(entries, page...)
		if next < 0 || len(page) < persist.ScanLimitMax {
			return latestKVEntries(entries), nil
		}
		offset = next
	}
}

// latestKVEntries drops, in place, every entry of a key that a later entry of the same key
// and partition follows (entries in index order: the later is the latest; a list of every
// partition holds the same key once per partition).
func latestKVEntries(entries []persist.KVEntry) []persist.KVEntry {
	last := make(map[[2]string]int, len(entries))
	for i, e := range entries {
		last[[2]string{e.Partition, e.Key}] = i
	}
	if len(last) == len(entries) {
		return entries
	}
	out := entries[:0]
	for i, e := range entries {
		if last[[2]string{e.Partition, e.Key}] == i {
			out = append(out, e)
		}
	}
	return out
}

var _ persist.KVPager = (*httpStore)(nil)

// KVListPage implements persist.KVPager: pages of more than persist.ScanLimitMax keys
// read several of the server's pages.
func (s *httpStore) KVListPage(ctx context.Context, partition string, offset int64, limit int) ([]persist.KVEntry, error) {
	if limit <= 0 {
		limit = math.MaxInt
	}
	entries := []persist.KVEntry{}
	for len(entries) < limit {
		want := min(limit-len(entries), persist.ScanLimitMax)
		page, next, err := s.kvPage(ctx, partition, offset, want)
		if err != nil {
			return nil, err
		}
		entries = append(entries, page...)
		if next < 0 || len(page) < want {
			break
		}
		offset = next
	}
	return entries[:min(len(entries), limit)], nil
}

// kvPage reads one page of GET …/kv: at most limit (≤ persist.ScanLimitMax) keys from
// index offset on, and where the next page starts; next is -1 when the server sent no
// next offset (a server that lists every key at once: the page is the whole list).
func (s *httpStore) kvPage(ctx context.Context, partition string, offset int64, limit int) ([]persist.KVEntry, int64, error) {
	var out api.DataKVResponse
	_, h, err := s.do(ctx, httpRequest{method: "GET", path: "/kv", query: url.Values{"partition": {partition},
		"offset": {strconv.FormatInt(offset, 10)}, "limit": {strconv.Itoa(limit)}}}, &out)
	if queueMissing(err) {
		return []persist.KVEntry{}, -1, nil
	}
	if err != nil {
		return nil, 0, err
	}
	es, err := kvEntriesOf(out.Entries)
	if err != nil {
		return nil, 0, err
	}
	next := int64(-1)
	if v := h.Get(api.HeaderNextOffset); v != "" {
		if next, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, 0, fmt.Errorf("persist: the server's %s header %q is not an offset", api.HeaderNextOffset, v)
		}
	}
	return es, next, nil
}

// KVClear implements Store.
func (s *httpStore) KVClear(ctx context.Context, partition string, keys []string) error {
	_, _, err := s.do(ctx, httpRequest{method: "POST", path: "/kv/clear", idempotent: true,
		body: &api.DataKVKeysRequest{Partition: partition, Keys: nonNilStrings(keys)}}, &api.EmptyResponse{})
	return err
}

// Schema implements Store.
func (s *httpStore) Schema(ctx context.Context) (persist.Schema, error) {
	var out api.DataSchemaResponse
	_, _, err := s.do(ctx, httpRequest{method: "GET", path: "/schema"}, &out)
	if queueMissing(err) && !s.existing {
		return persist.Schema{}, nil
	}
	if err != nil {
		return persist.Schema{}, err
	}
	var sc persist.Schema
	for _, f := range out.Fields {
		sc.Fields = append(sc.Fields, persist.Field{Name: f.Name, Kind: persist.Kind(f.Kind)})
	}
	return sc, nil
}

// Counts implements Store.
func (s *httpStore) Counts(ctx context.Context) (int64, int64, error) {
	st, err := s.Stats(ctx)
	return st.NextIndex, st.Len, err
}

// Stats implements Store. The counters are those of the server's handle of the queue.
func (s *httpStore) Stats(ctx context.Context) (persist.Stats, error) {
	var o api.DataStats
	_, _, err := s.do(ctx, httpRequest{method: "GET", path: "/stats"}, &o)
	if queueMissing(err) {
		return persist.Stats{Partitions: map[string]int64{}, ConsumedByTask: map[string]int64{}}, nil
	}
	if err != nil {
		return persist.Stats{}, err
	}
	return persist.Stats{Puts: o.Puts, Gets: o.Gets, Flushes: o.Flushes, FlushFailures: o.FlushFailures, Compactions: o.Compactions, LastFlush: o.LastFlush,
		LastFlushDuration: time.Duration(o.LastFlushDuration * float64(time.Second)), Commits: o.Commits,
		CommittedOps: o.CommittedOps, RecoveredFragments: o.RecoveredFragments, OrphansDeleted: o.OrphansDeleted,
		NextIndex: o.NextIndex, Len: o.Len, Cleared: o.Cleared, TailRows: o.TailRows, FragmentRows: o.FragmentRows,
		Fragments: o.Fragments, FragmentBytes: o.FragmentBytes, ManifestVersion: o.ManifestVersion,
		Partitions: o.Partitions, ConsumedByTask: o.ConsumedByTask, PendingFragments: o.PendingFragments,
		WeightVersion: o.WeightVersion, StaleDropped: o.StaleDropped, GroupsDropped: o.GroupsDropped, SamplesUnused: o.SamplesUnused}, nil
}

var _ persist.Versioner = (*httpStore)(nil)

// SetVersion implements persist.Versioner (POST …/version).
func (s *httpStore) SetVersion(ctx context.Context, version int64) error {
	_, _, err := s.do(ctx, httpRequest{method: "POST", path: "/version", idempotent: true, body: &api.DataWeightVersion{Version: version}}, &api.EmptyResponse{})
	return err
}

// Version implements persist.Versioner (GET …/version).
func (s *httpStore) Version(ctx context.Context) (int64, error) {
	var out api.DataWeightVersion
	_, _, err := s.do(ctx, httpRequest{method: "GET", path: "/version"}, &out)
	if queueMissing(err) {
		return 0, nil
	}
	return out.Version, err
}

// Flush implements Store.
func (s *httpStore) Flush(ctx context.Context) error {
	_, _, err := s.do(ctx, httpRequest{method: "POST", path: "/flush", idempotent: true}, &api.EmptyResponse{})
	return err
}

// Changes implements Store: a long-poll on the server's change version, from the
// highest version this store has seen in an answer (so no commit after that answer is
// missed; a commit already seen may wake the caller once more).
func (s *httpStore) Changes() (<-chan struct{}, func()) {
	ch := make(chan struct{})
	if s.closed.Load() {
		close(ch)
		return ch, func() {}
	}
	after := s.version.Load()
	ctx, cancel := context.WithCancel(s.ctx)
	go func() {
		backoff := 50 * time.Millisecond
		for {
			var out api.DataVersionResponse
			q := url.Values{"after": {strconv.FormatInt(after, 10)}, "wait": {strconv.Itoa(int(httpLongPollSlice.Seconds()))}}
			_, _, err := s.do(ctx, httpRequest{method: "GET", path: "/changes", query: q}, &out)
			switch {
			case s.closed.Load():
				close(ch)
				return
			case ctx.Err() != nil:
				return
			case err == nil && out.Version > after:
				close(ch)
				return
			case err != nil:
				select { // the server is away: try again, without spinning
				case <-time.After(backoff):
				case <-ctx.Done():
					if s.closed.Load() {
						close(ch)
					}
					return
				}
				backoff = min(2*backoff, 2*time.Second)
			}
		}
	}()
	return ch, cancel
}

// Close implements Store: calls in flight end with ErrClosed, waiting streams wake. It
// does not touch the server's queue.
func (s *httpStore) Close(context.Context) error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
	})
	return nil
}
