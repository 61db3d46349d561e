package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/internal/arrowbody"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// The handlers of the data routes (api.DataRoutes): each validates the names, checks the
// token, takes the queue's store (data.go) and calls one persist.Store method.

func (s *Server) handleDataQueues(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns := r.PathValue("namespace")
	if err := plane.ValidateNamespace(ns); err != nil {
		return err
	}
	if !p.allowsNamespace(ns, plane.PermissionDataRead) {
		return forbidden(p, "listing the data queues of namespace "+ns, plane.PermissionDataRead)
	}
	names, err := s.data.list(r.Context(), ns)
	if err != nil {
		return err
	}
	out := names[:0]
	for _, n := range names {
		if p.allows(ns, n, plane.PermissionDataRead) {
			out = append(out, n)
		}
	}
	s.write(w, r, http.StatusOK, &api.DataQueuesResponse{Queues: out})
	return nil
}

// isArrow reports whether the request body is an Arrow IPC stream.
func isArrow(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == api.ContentTypeArrow
}

// readArrow reads an Arrow IPC stream body into records (and their _index column when
// withIndex), every length the stream declares checked against the body before it is
// trusted (arrowbody.RecordsFromArrowStream). Errors: *plane.InvalidError for a stream that
// does not decode or does not match the rules of persist.RecordsFromArrow; 413 beyond
// the body limit.
func (s *Server) readArrow(w http.ResponseWriter, r *http.Request, withIndex bool) ([]persist.Record, []int64, error) {
	data, err := s.readRaw(w, r)
	if err != nil {
		return nil, nil, err
	}
	return arrowbody.RecordsFromArrowStream("request body", data, withIndex)
}

// records decodes the records of a JSON or msgpack body.
func records(field string, vals []api.Value) ([]persist.Record, error) {
	out := make([]persist.Record, len(vals))
	for i, v := range vals {
		if v.Wire == nil {
			return nil, &plane.InvalidError{Field: fmt.Sprintf("%s[%d]", field, i), Rule: "a map of field name → value (null is not a record)"}
		}
		rec, err := persist.RecordFromWire(field, v.Wire)
		if err != nil {
			// The record's name ("records[3]") is made only for its error, not for
			// each of the thousands of records a put holds.
			var invalid *plane.InvalidError
			if errors.As(err, &invalid) && invalid.Field == field {
				invalid.Field = fmt.Sprintf("%s[%d]", field, i)
			}
			return nil, err
		}
		out[i] = rec
	}
	return out, nil
}

// readPartitioned decodes the request body into v, as readBody, then checks the partition
// it named (*body, a field of v) against the query's, as checkPartition, and returns the
// request's partition, as partitionOf: the data routes whose body names a partition.
// Errors: readBody's, checkPartition's.
func (s *Server) readPartitioned(w http.ResponseWriter, r *http.Request, v any, body *string) (string, error) {
	if err := s.readBody(w, r, v); err != nil {
		return "", err
	}
	if err := checkPartition(r, *body); err != nil {
		return "", err
	}
	return partitionOf(r, *body), nil
}

// checkPartition refuses a request whose body and query name different partitions (the
// body's would win silently, writing or reading another partition than the URL says).
// Errors: *plane.InvalidError naming partition.
func checkPartition(r *http.Request, body string) error {
	if q := r.URL.Query().Get("partition"); body != "" && q != "" && q != body {
		return plane.Invalid("partition", body, fmt.Sprintf("the body's partition %q and the query's %q differ: give one, or the same", body, q))
	}
	return nil
}

// partitionOf returns the partition of a request: the body's, else the query's, else the
// default (checkPartition refuses the two when they differ).
func partitionOf(r *http.Request, body string) string {
	if body != "" {
		return body
	}
	if q := r.URL.Query().Get("partition"); q != "" {
		return q
	}
	return persist.DefaultPartition
}

// readDataPut reads and checks a put of records (POST D/records, a dataWriter).
func (s *Server) readDataPut(w http.ResponseWriter, r *http.Request, p *principal) (*dataWrite, error) {
	var recs []persist.Record
	var err error
	partition := partitionOf(r, "")
	if isArrow(r) {
		if recs, _, err = s.readArrow(w, r, false); err != nil {
			return nil, err
		}
	} else {
		var req api.DataPutRequest
		if partition, err = s.readPartitioned(w, r, &req, &req.Partition); err != nil {
			return nil, err
		}
		if recs, err = records("records", req.Records); err != nil {
			return nil, err
		}
	}
	opts, err := putOptsOf(r)
	if err != nil {
		return nil, err
	}
	check := func() error { return filestore.CheckPut(partition, recs, opts) }
	return &dataWrite{check: check, run: func(dq *dataQueue) error { return s.putRecords(w, r, p, dq, partition, recs, opts) }}, nil
}

// putRecords puts recs, read by readDataPut, into partition of dq.
func (s *Server) putRecords(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue, partition string, recs []persist.Record, opts *persist.PutOpts) error {
	ctx := r.Context()
	if opts != nil && opts.Admission != nil && opts.Admission.Block {
		// A put blocked by back-pressure is a long-poll, as a blocked submit: it takes a
		// slot and waits at most LongPollMax (the answer is then queue_full with waited;
		// a client repeats it with its put id).
		a := *opts.Admission
		c, capped, release, err := s.dataLongPoll(r, p, dq, cmpOrDuration(a.Timeout, persist.GetMetaTimeoutDefault))
		if err != nil {
			return err
		}
		defer release()
		a.Timeout = capped
		// A token revoked or expired while its put was blocked gets 401, nothing written.
		a.Recheck = func() error { return s.recheckToken(r, p) }
		opts.Admission, ctx = &a, c
	}
	idx, err := dq.store.PutPartition(ctx, partition, recs, opts)
	if err != nil {
		return err
	}
	s.writePut(w, r, idx)
	return nil
}

// writePut answers a put of records or keys that got the indexes idx, counted as records
// put.
func (s *Server) writePut(w http.ResponseWriter, r *http.Request, idx []int64) {
	count(s.data.metrics.put, r, len(idx))
	if idx == nil {
		idx = []int64{}
	}
	s.write(w, r, http.StatusOK, &api.DataIndexesResponse{Indexes: idx})
}

func (s *Server) handleDataPutFields(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var recs []persist.Record
	var idx []int64
	var err error
	partition := partitionOf(r, "")
	if isArrow(r) {
		if recs, idx, err = s.readArrow(w, r, true); err != nil {
			return err
		}
	} else {
		var req api.DataPutFieldsRequest
		if partition, err = s.readPartitioned(w, r, &req, &req.Partition); err != nil {
			return err
		}
		if recs, err = records("records", req.Records); err != nil {
			return err
		}
		idx = req.Indexes
	}
	if err := dq.queue.PutFields(r.Context(), partition, idx, recs); err != nil {
		return err
	}
	count(s.data.metrics.put, r, len(recs))
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

func (s *Server) handleDataFlush(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	if err := dq.store.Flush(r.Context()); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

// getOpts reads the fields, partition and shard of a read from the query.
func getOpts(r *http.Request) (*persist.GetOpts, error) {
	q := r.URL.Query()
	opts := &persist.GetOpts{Partition: q.Get("partition")}
	if f := q.Get("fields"); f != "" {
		opts.Fields = strings.Split(f, ",")
	}
	for _, x := range []struct {
		name string
		dst  *int
	}{{"rank", &opts.Shard.Rank}, {"world_size", &opts.Shard.WorldSize}, {"shard_buckets", &opts.Shard.Buckets}} {
		n, err := queryInt(r, x.name, 0)
		if err != nil {
			return nil, err
		}
		if n < -1<<31 || n > 1<<31-1 {
			return nil, plane.Invalid(x.name, n, "a 32-bit integer")
		}
		*x.dst = int(n)
	}
	opts.Shard.Column = q.Get("shard_column")
	return opts, nil
}

// wantsRows reports whether the client asked for JSON or msgpack rows instead of Arrow.
func wantsRows(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, api.ContentTypeJSON) || strings.Contains(a, "msgpack")
}

// writeBatch answers a bulk read: an Arrow IPC stream of b (persist.BatchRecord), or rows
// in JSON or msgpack when the client asked for them. b is released.
func (s *Server) writeBatch(w http.ResponseWriter, r *http.Request, b *persist.Batch, next int64) error {
	defer b.Release()
	count(s.data.metrics.read, r, b.Len())
	if wantsRows(r) {
		return s.writeRows(w, r, b, next)
	}
	rec := persist.BatchRecord(b)
	defer rec.Release()
	return writeArrow(w, rec)
}

// writeRows answers b as JSON or msgpack rows.
func (s *Server) writeRows(w http.ResponseWriter, r *http.Request, b *persist.Batch, next int64) error {
	rows, err := b.Rows()
	if err != nil {
		return err
	}
	out := api.DataRowsResponse{Rows: make([]api.DataRow, len(rows)), Next: next}
	for i, row := range rows {
		wb, err := persist.RecordToWire("rows", row.Fields)
		if err != nil {
			return err
		}
		out.Rows[i] = api.DataRow{Index: row.Index, Partition: row.Partition, Fields: api.Value{Wire: wb}}
	}
	s.write(w, r, http.StatusOK, &out)
	return nil
}

// writeArrow answers rec as a 200 Arrow IPC stream of one record batch.
func writeArrow(w http.ResponseWriter, rec arrow.RecordBatch) error {
	buf := arrowBufs.Get().(*bytes.Buffer)
	defer putArrowBuf(buf)
	iw := ipc.NewWriter(buf, ipc.WithSchema(rec.Schema()))
	if err := iw.Write(rec); err != nil {
		return err
	}
	if err := iw.Close(); err != nil {
		return err
	}
	w.Header().Set("Content-Type", api.ContentTypeArrow)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
	return nil
}

// arrowBufs keeps the buffers of Arrow answers between requests: a batch's answer is
// encoded whole before it is sent (its length goes first), and growing a new buffer for
// each was a copy of every answer or more.
var arrowBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledArrowBuf bounds the buffers arrowBufs keeps (a 1 GiB tensor answer is
// not kept alive for the next small one).
const maxPooledArrowBuf = 16 << 20

// putArrowBuf returns buf to arrowBufs, emptied, unless it grew past maxPooledArrowBuf.
func putArrowBuf(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledArrowBuf {
		return
	}
	buf.Reset()
	arrowBufs.Put(buf)
}

// checkShardColumn refuses a shard column that is neither _index nor a field of the
// queue's schema (every row would hash alike: one rank would get everything).
func checkShardColumn(ctx context.Context, dq *dataQueue, opts *persist.GetOpts) error {
	col := opts.Shard.Column
	if col == "" || col == persist.IndexColumn {
		return nil
	}
	sc, err := dq.store.Schema(ctx)
	if err != nil {
		return err
	}
	names := []string{persist.IndexColumn}
	for _, f := range sc.Fields {
		if f.Name == col {
			return nil
		}
		names = append(names, f.Name)
	}
	if len(names) > 9 {
		names = append(names[:9], "…")
	}
	return plane.Invalid("shard_column", col, "_index or a field of the queue ("+strings.Join(names, ", ")+")")
}

// readLimit reads the number of records a read answers at once (the limit of
// GET …/records, the batch_size of GET …/stream): 1–persist.ScanLimitMax, def when
// absent. The answer is read into memory whole, so the bound is what keeps one request
// from reading a whole queue; a larger scan reads pages. Errors: *plane.InvalidError
// naming field.
func readLimit(r *http.Request, field string, def int64) (int64, error) {
	n, err := queryInt(r, field, def)
	if err != nil {
		return 0, err
	}
	if err := persist.CheckAnswerCount(field, n, 1, fmt.Sprintf(" (default %d); read more in pages, each from the %s of the previous one",
		def, api.HeaderNextOffset)); err != nil {
		return 0, err
	}
	return n, nil
}

func (s *Server) handleDataRead(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	opts, err := getOpts(r)
	if err != nil {
		return err
	}
	if err := checkShardColumn(r.Context(), dq, opts); err != nil {
		return err
	}
	offset, err := queryInt(r, "offset", 0)
	if err != nil {
		return err
	}
	limit, err := readLimit(r, "limit", 1000)
	if err != nil {
		return err
	}
	wait, err := queryWait(r, "wait")
	if err != nil {
		return err
	}
	ctx := r.Context()
	var deadline <-chan time.Time
	if wait > 0 {
		c, capped, release, err := s.dataLongPoll(r, p, dq, wait)
		if err != nil {
			return err
		}
		defer release()
		ctx = c
		t := time.NewTimer(capped)
		defer t.Stop()
		deadline = t.C
	}
	for {
		v := dq.version.Load()
		b, next, err := dq.store.Scan(ctx, offset, int(limit), opts)
		if err != nil {
			return stopErr(ctx, err)
		}
		if b.Len() > 0 || deadline == nil {
			w.Header().Set(api.HeaderNextOffset, strconv.FormatInt(next, 10))
			return s.writeBatch(w, r, b, next)
		}
		b.Release()
		offset = max(offset, next)
		select {
		case <-dq.waitChange(v):
		case <-deadline:
			deadline = nil // one more read answers what is there (nothing): an empty batch
		case <-ctx.Done():
			return stopErr(ctx, ctx.Err())
		}
		if err := s.recheckToken(r, p); err != nil {
			return err // revoked or expired while it waited: not the records put meanwhile
		}
	}
}

func (s *Server) handleDataStream(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	opts, err := getOpts(r)
	if err != nil {
		return err
	}
	if err := checkShardColumn(r.Context(), dq, opts); err != nil {
		return err
	}
	offset, err := queryInt(r, "offset", 0)
	if err != nil {
		return err
	}
	size, err := readLimit(r, "batch_size", persist.StreamBatchSizeDefault)
	if err != nil {
		return err
	}
	idle, err := querySeconds(r, "idle_timeout")
	if err != nil {
		return err
	}
	if idle == 0 {
		idle = 30 * time.Second
	}
	if opts.Fields == nil { // the columns of one IPC stream are fixed: the schema's now
		sc, err := dq.store.Schema(r.Context())
		if err != nil {
			return err
		}
		opts.Fields = []string{}
		for _, f := range sc.Fields {
			opts.Fields = append(opts.Fields, f.Name)
		}
	}
	ctx, _, release, err := s.dataLongPoll(r, p, dq, idle)
	if err != nil {
		return err
	}
	defer release()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	var iw *ipc.Writer
	var schema interface{ Equal(*arrow.Schema) bool }
	flusher, _ := w.(http.Flusher)
	idleTimer := time.NewTimer(idle)
	defer idleTimer.Stop()
	for {
		if err := s.recheckToken(r, p); err != nil {
			if iw == nil {
				return err // nothing sent yet: the answer is the 401
			}
			break // a token revoked or expired since: the stream ends; reconnecting answers 401
		}
		v := dq.version.Load()
		b, next, err := dq.store.Scan(ctx, offset, int(size), opts)
		if err != nil {
			if iw == nil {
				return stopErr(ctx, err)
			}
			break // the stream has begun: end it; the client resumes from its last index
		}
		offset = max(offset, next)
		if b.Len() > 0 {
			rec := persist.BatchRecord(b)
			b.Release()
			if iw == nil {
				w.Header().Set("Content-Type", api.ContentTypeArrow)
				w.WriteHeader(http.StatusOK)
				iw = ipc.NewWriter(w, ipc.WithSchema(rec.Schema()))
				schema = rec.Schema()
			} else if !schema.Equal(rec.Schema()) {
				rec.Release()
				break // a column widened: end the stream; the client reconnects from offset
			}
			err := iw.Write(rec)
			count(s.data.metrics.read, r, int(rec.NumRows()))
			rec.Release()
			if err != nil {
				return nil // the client went away
			}
			if flusher != nil {
				flusher.Flush()
			}
			idleTimer.Reset(idle)
			continue
		}
		b.Release()
		select {
		case <-dq.waitChange(v):
			continue
		case <-idleTimer.C:
		case <-ctx.Done():
		}
		break
	}
	if iw == nil { // nothing arrived: an empty stream with the requested columns
		next, _, err := dq.store.Counts(r.Context())
		if err != nil {
			return err
		}
		b, _, err := dq.store.Scan(r.Context(), next, 1, &persist.GetOpts{Fields: opts.Fields})
		if err != nil {
			return err
		}
		rec := persist.BatchRecord(b)
		b.Release()
		defer rec.Release()
		w.Header().Set("Content-Type", api.ContentTypeArrow)
		w.WriteHeader(http.StatusOK)
		iw = ipc.NewWriter(w, ipc.WithSchema(rec.Schema()))
		if err := iw.Write(rec); err != nil { // an empty batch: the schema reaches the client
			return nil
		}
	}
	iw.Close() //nolint:errcheck // writes the end-of-stream marker; the client may be gone
	return nil
}

func (s *Server) handleDataGet(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataGetRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	meta := &persist.BatchMeta{Indexes: req.Indexes, Size: len(req.Indexes), Partition: req.Partition, Task: req.Task}
	if err := persist.CheckGetData(meta); err != nil {
		return err
	}
	if err := persist.CheckAnswerCount("indexes", int64(len(req.Indexes)), 0, "; read more indexes in several requests"); err != nil {
		return err
	}
	fields := req.Fields
	if fields == nil {
		sc, err := dq.store.Schema(r.Context())
		if err != nil {
			return err
		}
		for _, f := range sc.Fields {
			fields = append(fields, f.Name)
		}
	}
	for _, f := range fields {
		meta.Fields = append(meta.Fields, persist.FieldMeta{Name: f})
	}
	b, err := dq.store.GetData(r.Context(), meta)
	if err != nil {
		return err
	}
	return s.writeBatch(w, r, b, 0)
}

// metaRequestOf reads the body of POST …/meta and …/batch into a persist.MetaRequest.
func (s *Server) metaRequestOf(w http.ResponseWriter, r *http.Request) (*persist.MetaRequest, error) {
	var req api.DataMetaRequest
	c, err := api.CodecFor(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	data, err := s.readRaw(w, r)
	if err != nil {
		return nil, err
	}
	if err := c.UnmarshalRequest(data, &req); err != nil {
		return nil, err
	}
	timeout, err := seconds("timeout", req.Timeout)
	if err != nil {
		return nil, err
	}
	// One message for every lease out of range (a negative, NaN, 25 h or 10^20 s one).
	if !(req.Lease >= 0 && req.Lease <= persist.LeaseMax.Seconds()) {
		return nil, plane.Invalid("lease", req.Lease, fmt.Sprintf("seconds from 0 to %d (%g h; 0: no lease)", int64(persist.LeaseMax.Seconds()), persist.LeaseMax.Hours()))
	}
	lease, err := duration("lease", req.Lease)
	if err != nil {
		return nil, err
	}
	mr := &persist.MetaRequest{Fields: req.Fields, BatchSize: req.BatchSize, Task: req.Task, Partition: req.Partition,
		Wait: req.Wait, Timeout: timeout, DeferConsume: req.DeferConsume, DPRank: req.DPRank, BatchIndex: req.BatchIndex, Lease: lease}
	if req.MaxStaleness != nil {
		mr.Staleness = &persist.Staleness{Max: *req.MaxStaleness, Policy: persist.StalenessPolicy(req.StalePolicy), Version: persist.StalenessVersion(req.StaleVersion)}
	} else if req.StalePolicy != "" {
		return nil, plane.Invalid("stale_policy", req.StalePolicy, "only with max_staleness")
	} else if req.StaleVersion != "" {
		return nil, plane.Invalid("stale_version", req.StaleVersion, "only with max_staleness")
	}
	if mr.Partition == "" {
		mr.Partition = persist.DefaultPartition
	}
	if req.Sampler != nil {
		mr.Sampler.Name = req.Sampler.Name
		if req.Sampler.Params != nil {
			raw, err := samplerParamsJSON(c, data, req.Sampler.Params)
			if err != nil {
				return nil, plane.Invalid("sampler.params", nil, "a JSON object of the sampler's parameters")
			}
			mr.Sampler.Params = raw
		}
	}
	return mr, nil
}

// samplerParamsJSON is the JSON text of a meta request's sampler parameters (params, as
// decoded from the body data in codec c) for persist, each number in the form it was sent:
// the sampler decodes its integer parameters strictly, so 1e2, 2.0 or a msgpack float is
// refused there as for every other integer field (docs/http-api.md, "JSON ↔ wire value
// mapping"), and an integer beyond 2^53 keeps every digit. Before, params went through
// float64 and back (encoding/json writes 100.0 and 1e2 as 100), so {"n": 1e2} was taken as
// the integer 100, and {"seed": 9007199254740993} became 9007199254740992, silently.
func samplerParamsJSON(c api.Codec, data []byte, params map[string]any) (json.RawMessage, error) {
	if c == api.JSON {
		// The body's own text (already checked by the strict decode: one object, its keys
		// each once and case-sensitively).
		var raw struct {
			Sampler *struct {
				Params json.RawMessage `json:"params"`
			} `json:"sampler"`
		}
		if err := json.Unmarshal(data, &raw); err != nil || raw.Sampler == nil || raw.Sampler.Params == nil {
			return nil, fmt.Errorf("sampler params: %w", err)
		}
		var out bytes.Buffer
		if err := json.Compact(&out, raw.Sampler.Params); err != nil {
			return nil, err
		}
		return out.Bytes(), nil
	}
	return json.Marshal(floatsAsFloats(params))
}

// floatsAsFloats is v (a msgpack-decoded parameter value) with each float written as a
// JSON number with a fraction or an exponent (2.0, not 2), as the JSON ↔ wire mapping writes
// a float, so a float is not read as an integer.
func floatsAsFloats(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = floatsAsFloats(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = floatsAsFloats(e)
		}
		return out
	case float32:
		return floatsAsFloats(float64(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return x // json.Marshal refuses it: the params are refused
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return json.RawMessage(s)
	}
	return v
}

// getMeta runs GetMeta for mr, as a long-poll when it waits.
func (s *Server) getMeta(r *http.Request, p *principal, dq *dataQueue, mr *persist.MetaRequest) (*persist.BatchMeta, error) {
	ctx := r.Context()
	if mr.Wait {
		if mr.Timeout == 0 {
			mr.Timeout = persist.GetMetaTimeoutDefault
		}
		c, capped, release, err := s.dataLongPoll(r, p, dq, mr.Timeout)
		if err != nil {
			return nil, err
		}
		defer release()
		ctx, mr.Timeout = c, capped
		// A token revoked or expired while it waited gets 401, the samples neither
		// consumed nor leased: the store rechecks before each hand-out after a wait.
		mr.Recheck = func() error { return s.recheckToken(r, p) }
	}
	m, err := dq.store.GetMeta(ctx, mr)
	if err != nil {
		return nil, stopErr(ctx, err)
	}
	count(s.data.metrics.meta, r, len(m.Indexes))
	return m, nil
}

// batchMetaOf converts m for an answer; without indexes when withIndexes is false (the
// answer of POST …/batch carries them in its _index column).
func batchMetaOf(m *persist.BatchMeta, withIndexes bool) *api.DataBatchMeta {
	out := &api.DataBatchMeta{Size: m.Size, Fields: make([]api.DataFieldMeta, len(m.Fields)),
		Partition: m.Partition, Task: m.Task}
	if withIndexes {
		out.Indexes = m.Indexes
		if out.Indexes == nil {
			out.Indexes = []int64{}
		}
	}
	for i, f := range m.Fields {
		out.Fields[i] = api.DataFieldMeta{Name: f.Name, Kind: string(f.Kind), DType: f.DType, Shape: f.Shape}
	}
	return out
}

// checkMetaRequest reads a GetMeta's request (POST …/meta or …/batch) and checks it by
// the rules every store applies (persist.CheckMetaRequest), for a queue that does not
// exist yet. Errors: *plane.InvalidError or *persist.InvalidError naming the field.
func (s *Server) checkMetaRequest(w http.ResponseWriter, r *http.Request) error {
	mr, err := s.metaRequestOf(w, r)
	if err != nil {
		return err
	}
	return persist.CheckMetaRequest(mr)
}

func (s *Server) handleDataMeta(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	mr, err := s.metaRequestOf(w, r)
	if err != nil {
		return err
	}
	m, err := s.getMeta(r, p, dq, mr)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, batchMetaOf(m, true))
	return nil
}

// handleDataBatch is GetMeta then GetData in one request (Reader.GetBatch): the answer is
// the Arrow IPC stream of the batch as the store made it (the _index column, then the
// fields; no _partition column, the batch is of one partition), with the rest of the
// metadata as JSON in the Lakeshore-Batch-Meta header. When GetData fails after GetMeta
// handed the samples out, the error answer carries that header too, so the client can
// return the metadata beside the error as Reader.GetBatch does in process.
func (s *Server) handleDataBatch(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	mr, err := s.metaRequestOf(w, r)
	if err != nil {
		return err
	}
	// The batch is read whole into memory: bounded before anything is handed out.
	if err := persist.CheckAnswerCount("batch_size", int64(mr.BatchSize), 1, "; a larger batch: POST …/meta, then POST …/data in parts"); err != nil {
		return err
	}
	var b *persist.Batch
	var m *persist.BatchMeta
	if bg, ok := dq.store.(persist.BatchGetter); ok && !mr.Wait {
		// One call: the store may read the data while it commits the hand-out (the file
		// store does). A waiting request keeps the two steps, so that only the wait is
		// ended by the server's shutdown, never the read of a batch handed out.
		b, m, err = bg.GetBatch(r.Context(), mr)
		if m != nil {
			count(s.data.metrics.meta, r, len(m.Indexes))
		}
		if err != nil && m == nil {
			return stopErr(r.Context(), err)
		}
	} else {
		if m, err = s.getMeta(r, p, dq, mr); err != nil {
			return err
		}
	}
	hdr, herr := json.Marshal(batchMetaOf(m, false))
	if herr != nil {
		if b != nil {
			b.Release()
		}
		return herr
	}
	w.Header().Set(api.HeaderBatchMeta, string(hdr))
	if err != nil { // handed out, not read: the header carries the metadata
		return err
	}
	if b == nil {
		if b, err = dq.store.GetData(r.Context(), m); err != nil {
			return err
		}
	}
	defer b.Release()
	count(s.data.metrics.read, r, b.Len())
	if wantsRows(r) {
		return s.writeRows(w, r, b, 0)
	}
	return writeArrow(w, b.Record)
}

func (s *Server) handleDataProduced(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataProducedRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return err
	}
	out, err := dq.queue.Produced(r.Context(), partition, req.Indexes, req.Fields)
	if err != nil {
		return err
	}
	if out == nil {
		out = [][]bool{}
	}
	s.write(w, r, http.StatusOK, &api.DataProducedResponse{Produced: out})
	return nil
}

func (s *Server) handleDataMark(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataConsumptionRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return err
	}
	if err := persist.CheckIndexes(req.Indexes); err != nil {
		return err
	}
	if err := dq.store.MarkConsumed(r.Context(), req.Task, partition, req.Indexes); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

func (s *Server) handleDataReset(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataConsumptionRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return err
	}
	if req.Indexes != nil {
		return plane.Invalid("indexes", nil, "none: a reset forgets every index the task consumed in the partition")
	}
	if err := dq.store.ResetConsumption(r.Context(), req.Task, partition); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

func (s *Server) handleDataConsumed(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	n, err := dq.store.Consumed(r.Context(), r.URL.Query().Get("task"), partitionOf(r, ""))
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.DataConsumedResponse{Consumed: n})
	return nil
}

func (s *Server) handleDataClear(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataClearRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return err
	}
	if err := persist.CheckIndexes(req.Indexes); err != nil {
		return err
	}
	if err := dq.store.ClearSamples(r.Context(), partition, req.Indexes); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

func (s *Server) handleDataClearPartition(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	if err := dq.store.ClearPartition(r.Context(), r.PathValue("partition")); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

// readDataKVPut reads and checks a put of keys (POST D/kv, a dataWriter).
func (s *Server) readDataKVPut(w http.ResponseWriter, r *http.Request, p *principal) (*dataWrite, error) {
	var req api.DataKVPutRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return nil, err
	}
	recs, err := records("records", req.Records)
	if err != nil {
		return nil, err
	}
	check := func() error {
		items, err := persist.MergeKVPut(partition, req.Keys, recs, req.Tags)
		if err != nil {
			return err
		}
		fields := make([]persist.Record, len(items))
		for i, it := range items {
			fields[i] = it.Fields
		}
		_, err = filestore.PrepareRecords(fields) // as every store prepares the keys' records
		return err
	}
	run := func(dq *dataQueue) error {
		idx, err := dq.store.KVPut(r.Context(), partition, req.Keys, recs, req.Tags)
		if err != nil {
			return err
		}
		s.writePut(w, r, idx)
		return nil
	}
	return &dataWrite{check: check, run: run}, nil
}

// kvEntries converts KV entries for an answer.
func kvEntries(es []persist.KVEntry) (*api.DataKVResponse, error) {
	out := &api.DataKVResponse{Entries: make([]api.DataKVEntry, len(es))}
	for i, e := range es {
		out.Entries[i] = api.DataKVEntry{Partition: e.Partition, Key: e.Key, Index: e.Index, Tags: e.Tags}
		if e.Fields != nil {
			b, err := persist.RecordToWire("entries", e.Fields)
			if err != nil {
				return nil, err
			}
			out.Entries[i].Fields = api.Value{Wire: b}
		}
	}
	return out, nil
}

func (s *Server) handleDataKVGet(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataKVKeysRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return err
	}
	if err := persist.CheckAnswerCount("keys", int64(len(req.Keys)), 0, "; read more keys in several requests"); err != nil {
		return err
	}
	es, err := dq.store.KVGet(r.Context(), partition, req.Keys, req.Fields)
	if err != nil {
		return err
	}
	out, err := kvEntries(es)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

// handleDataKVList answers a page of keys: at most limit (1–persist.ScanLimitMax, default
// ScanLimitMax) of those whose index is ≥ offset, in index order, with the offset of the
// next page in the Lakeshore-Next-Offset header (the last key's index + 1; offset itself
// for an empty page). A page of fewer than limit keys is the last.
func (s *Server) handleDataKVList(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	offset, err := queryInt(r, "offset", 0)
	if err != nil {
		return err
	}
	if offset < 0 {
		return plane.Invalid("offset", offset, "≥ 0: the first index to list (0: from the start)")
	}
	limit, err := readLimit(r, "limit", persist.ScanLimitMax)
	if err != nil {
		return err
	}
	partition := r.URL.Query().Get("partition")
	var es []persist.KVEntry
	if pager, ok := dq.store.(persist.KVPager); ok {
		es, err = pager.KVListPage(r.Context(), partition, offset, int(limit))
	} else {
		es, err = kvListPage(r.Context(), dq.store, partition, offset, int(limit))
	}
	if err != nil {
		return err
	}
	next := offset
	if len(es) > 0 {
		next = es[len(es)-1].Index + 1
	}
	out, err := kvEntries(es)
	if err != nil {
		return err
	}
	w.Header().Set(api.HeaderNextOffset, strconv.FormatInt(next, 10))
	s.write(w, r, http.StatusOK, out)
	return nil
}

// kvListPage is KVListPage on a store that lists only whole: the answer is bounded, the
// store's read is not.
func kvListPage(ctx context.Context, st persist.Store, partition string, offset int64, limit int) ([]persist.KVEntry, error) {
	all, err := st.KVList(ctx, partition)
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(all, offset, func(e persist.KVEntry, o int64) int { return cmp.Compare(e.Index, o) })
	return all[i:min(len(all), i+limit)], nil
}

func (s *Server) handleDataKVClear(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataKVKeysRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return err
	}
	if req.Fields != nil {
		return plane.Invalid("fields", nil, "none: a clear removes whole keys")
	}
	if err := dq.store.KVClear(r.Context(), partition, req.Keys); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

func (s *Server) handleDataSchema(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	sc, err := dq.store.Schema(r.Context())
	if err != nil {
		return err
	}
	out := api.DataSchemaResponse{Fields: make([]api.DataField, len(sc.Fields))}
	for i, f := range sc.Fields {
		out.Fields[i] = api.DataField{Name: f.Name, Kind: string(f.Kind)}
	}
	s.write(w, r, http.StatusOK, &out)
	return nil
}

func (s *Server) handleDataStats(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	st, err := dq.store.Stats(r.Context())
	if err != nil {
		return err
	}
	out := api.DataStats{NextIndex: st.NextIndex, Len: st.Len, Cleared: st.Cleared, TailRows: st.TailRows,
		FragmentRows: st.FragmentRows, Fragments: st.Fragments, FragmentBytes: st.FragmentBytes,
		ManifestVersion: st.ManifestVersion, PendingFragments: st.PendingFragments, Partitions: st.Partitions,
		ConsumedByTask: st.ConsumedByTask, Puts: st.Puts, Gets: st.Gets, Flushes: st.Flushes, FlushFailures: st.FlushFailures, Compactions: st.Compactions,
		Commits: st.Commits, CommittedOps: st.CommittedOps, RecoveredFragments: st.RecoveredFragments,
		OrphansDeleted: st.OrphansDeleted, LastFlush: st.LastFlush, LastFlushDuration: st.LastFlushDuration.Seconds(),
		WeightVersion: st.WeightVersion, StaleDropped: st.StaleDropped, GroupsDropped: st.GroupsDropped, SamplesUnused: st.SamplesUnused}
	if out.Partitions == nil {
		out.Partitions = map[string]int64{}
	}
	if out.ConsumedByTask == nil {
		out.ConsumedByTask = map[string]int64{}
	}
	s.write(w, r, http.StatusOK, &out)
	return nil
}

func (s *Server) handleDataChanges(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	after, err := queryInt(r, "after", -1)
	if err != nil {
		return err
	}
	wait, err := queryWait(r, "wait")
	if err != nil {
		return err
	}
	ch := dq.waitChange(after)
	select {
	case <-ch:
	default:
		if wait > 0 {
			ctx, capped, release, err := s.dataLongPoll(r, p, dq, wait)
			if err != nil {
				return err
			}
			defer release()
			t := time.NewTimer(capped)
			defer t.Stop()
			select {
			case <-ch:
			case <-t.C:
			case <-ctx.Done():
				if err := stopErr(ctx, ctx.Err()); !errors.Is(err, context.Canceled) {
					return err
				}
				return ctx.Err()
			}
			if err := s.recheckToken(r, p); err != nil {
				return err // revoked or expired while it waited: not the version moved meanwhile
			}
		}
	}
	s.write(w, r, http.StatusOK, &api.DataVersionResponse{Version: dq.version.Load()})
	return nil
}

// putOptsOf reads a put's idempotency id and back-pressure (persist.Admission) from the
// query.
func putOptsOf(r *http.Request) (*persist.PutOpts, error) {
	q := r.URL.Query()
	opts := &persist.PutOpts{ID: q.Get("put_id")}
	if q.Get("admission_task") == "" && q.Get("max_unconsumed") == "" && q.Get("max_ahead") == "" {
		if q.Get("admission_block") != "" || q.Get("admission_timeout") != "" {
			given := "admission_block" // named as given: admission_timeout alone was refused as admission_block ""
			if q.Get(given) == "" {
				given = "admission_timeout"
			}
			return nil, plane.Invalid(given, q.Get(given), "only with max_unconsumed or max_ahead, the bounds a put waits on")
		}
		if opts.ID == "" {
			return nil, nil
		}
		return opts, nil
	}
	a := &persist.Admission{Task: q.Get("admission_task"), MaxAhead: -1}
	var err error
	if a.MaxUnconsumed, err = queryInt(r, "max_unconsumed", 0); err != nil {
		return nil, err
	}
	if a.MaxAhead, err = queryInt(r, "max_ahead", -1); err != nil {
		return nil, err
	}
	if q.Get("max_ahead") != "" && a.MaxAhead < 0 {
		// As a negative max_unconsumed is refused: no bound is max_ahead left out.
		return nil, plane.Invalid("max_ahead", a.MaxAhead, "≥ 0 (leave max_ahead out for no bound)")
	}
	switch b := q.Get("admission_block"); b {
	case "", "false", "0":
	case "true", "1":
		a.Block = true
	default:
		return nil, plane.Invalid("admission_block", b, "true or false")
	}
	if t := q.Get("admission_timeout"); t != "" {
		// One rule for every value refused. persist.Admission reads a zero Timeout as its
		// default (30 s): a put told to wait 0 s would wait 30, which `data put --block 0`
		// and Python refuse too.
		rule := fmt.Sprintf("seconds > 0 a blocked put waits, at most %d (leave admission_timeout out for the default 30 s)", int64(maxSeconds))
		f, perr := strconv.ParseFloat(t, 64)
		if perr != nil {
			return nil, plane.Invalid("admission_timeout", t, rule)
		}
		if a.Timeout, err = seconds("admission_timeout", f); err != nil || a.Timeout <= 0 {
			return nil, plane.Invalid("admission_timeout", t, rule)
		}
	}
	if err := persist.CheckAdmission(a); err != nil {
		return nil, err
	}
	opts.Admission = a
	return opts, nil
}

// versioner returns the store's persist.Versioner.
func versioner(dq *dataQueue) (persist.Versioner, error) {
	v, ok := dq.store.(persist.Versioner)
	if !ok {
		return nil, plane.Invalid("queue", dq.store.Name(), "a store that keeps weight versions")
	}
	return v, nil
}

func (s *Server) handleDataVersion(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	v, err := versioner(dq)
	if err != nil {
		return err
	}
	n, err := v.Version(r.Context())
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.DataWeightVersion{Version: n})
	return nil
}

// readDataSetVersion reads and checks a new weight version (POST D/version, a
// dataWriter).
func (s *Server) readDataSetVersion(w http.ResponseWriter, r *http.Request, p *principal) (*dataWrite, error) {
	var req api.DataWeightVersion
	if err := s.readBody(w, r, &req); err != nil {
		return nil, err
	}
	if err := persist.CheckSetVersion(req.Version); err != nil {
		return nil, err
	}
	return &dataWrite{run: func(dq *dataQueue) error {
		v, err := versioner(dq)
		if err != nil {
			return err
		}
		if err := v.SetVersion(r.Context(), req.Version); err != nil {
			return err
		}
		s.write(w, r, http.StatusOK, &api.EmptyResponse{})
		return nil
	}}, nil
}

func cmpOrDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (s *Server) handleDataReplay(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataReplayRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	// One row per draw, read whole into memory: a larger replay is several requests.
	if err := persist.CheckAnswerCount("size", int64(req.Size), 1, "; draw more in several requests"); err != nil {
		return err
	}
	rq := &persist.ReplayRequest{Partition: req.Partition, Fields: req.Fields, Size: req.Size, Window: req.Window, Weight: req.Weight, Seed: req.Seed}
	if req.IndexesOnly {
		rq.Fields = []string{}
	}
	rs, err := dq.queue.Replay(r.Context(), rq)
	if err != nil {
		return err
	}
	return s.writeBatch(w, r, rs.Batch, 0)
}

func (s *Server) handleDataPriorities(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataPrioritiesRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return err
	}
	if err := persist.CheckIndexes(req.Indexes); err != nil {
		return err
	}
	if err := dq.queue.UpdatePriorities(r.Context(), partition, req.Field, req.Indexes, req.Values); err != nil {
		return err
	}
	count(s.data.metrics.put, r, len(req.Indexes))
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

func (s *Server) handleDataDropGroup(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataConsumptionRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return err
	}
	if err := dq.queue.DropGroup(r.Context(), req.Task, partition, req.Indexes); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

func (s *Server) handleDataPatchPartial(w http.ResponseWriter, r *http.Request, p *principal, dq *dataQueue) error {
	var req api.DataPatchRequest
	partition, err := s.readPartitioned(w, r, &req, &req.Partition)
	if err != nil {
		return err
	}
	var recs []persist.Record
	if req.Records != nil {
		var err error
		if recs, err = records("records", req.Records); err != nil {
			return err
		}
	}
	if err := dq.queue.PatchPartial(r.Context(), partition, req.Indexes, recs, req.WeightVersion, req.Complete); err != nil {
		return err
	}
	count(s.data.metrics.put, r, len(req.Indexes))
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}
