package api

//go:generate go run github.com/tinylib/msgp -file data.go -o data_gen.go -io=false -tests=false -unexported=false

//msgp:newtime
//msgp:limit arrays:10000000 maps:100000

import "time"

// The bodies of the data-queue routes (package persist over HTTP, docs/http-api.md, "Data
// queues"). Records are wire values (Value): a wire-encoded map of field → value in msgpack,
// a plain JSON object in JSON. Bulk reads answer Arrow IPC streams (ContentTypeArrow) unless
// the client asks for JSON or msgpack rows (DataRowsResponse).

// ContentTypeArrow is the media type of Arrow IPC streams: bulk reads answer it, puts accept
// it.
const ContentTypeArrow = "application/vnd.apache.arrow.stream"

// Headers of the data routes.
const (
	// HeaderDataVersion carries the queue's change version when the request started: a
	// client that saw version v and waits on GET …/changes?after=v misses no commit.
	HeaderDataVersion = "Lakeshore-Data-Version"
	// HeaderNextOffset carries, on GET …/records, the offset where a following read
	// continues (past records that were considered and filtered out), never below the
	// request's offset (a read past the end of the log answers its offset).
	HeaderNextOffset = "Lakeshore-Next-Offset"
	// HeaderBatchMeta carries, on POST …/batch, the batch's metadata as a JSON
	// DataBatchMeta without indexes (the answer's _index column holds them): size,
	// fields with kinds, dtypes and shapes, partition, task. An error answer carries it
	// too when the samples were handed out before reading them failed.
	HeaderBatchMeta = "Lakeshore-Batch-Meta"
)

// DataPath is the path prefix of the routes addressed by data queue.
const DataPath = "/v1/namespaces/{namespace}/data/{queue}"

// DataPutRequest is the body of POST …/records (JSON or msgpack; Arrow IPC bodies carry the
// partition in the query).
type DataPutRequest struct {
	// Partition defaults to the query's partition, else "default".
	Partition string `json:"partition,omitzero" msg:"partition,omitempty"`
	// Records are the records, each a map of field → value.
	Records []Value `json:"records" msg:"records"`
}

// DataIndexesResponse answers puts: the global indexes of the records, in order.
type DataIndexesResponse struct {
	Indexes []int64 `json:"indexes" msg:"indexes"`
}

// DataPutFieldsRequest is the body of POST …/fields: Records[i] is merged into the sample at
// Indexes[i].
type DataPutFieldsRequest struct {
	Partition string  `json:"partition,omitzero" msg:"partition,omitempty"`
	Indexes   []int64 `json:"indexes" msg:"indexes"`
	Records   []Value `json:"records" msg:"records"`
}

// DataGetRequest is the body of POST …/data: read fields of samples by global index, in the
// order of Indexes.
type DataGetRequest struct {
	Indexes   []int64  `json:"indexes" msg:"indexes"`
	Fields    []string `json:"fields,omitzero" msg:"fields,omitempty"`
	Partition string   `json:"partition,omitzero" msg:"partition,omitempty"`
	Task      string   `json:"task,omitzero" msg:"task,omitempty"`
}

// DataRow is one record of a read answered as JSON or msgpack rows.
type DataRow struct {
	Index     int64  `json:"index" msg:"index"`
	Partition string `json:"partition" msg:"partition"`
	// Fields is the map of the fields with a value.
	Fields Value `json:"fields" msg:"fields"`
}

// DataRowsResponse answers a bulk read when the client asks for JSON or msgpack rows
// instead of Arrow.
type DataRowsResponse struct {
	Rows []DataRow `json:"rows" msg:"rows"`
	// Next is where a following read continues (GET …/records).
	Next int64 `json:"next" msg:"next"`
}

// DataSampler names a sampler and its parameters (a JSON object; in msgpack a str holding
// the JSON text).
type DataSampler struct {
	Name   string         `json:"name" msg:"name"`
	Params map[string]any `json:"params,omitzero" msg:"params,omitempty"`
}

// DataMetaRequest is the body of POST …/meta (persist.MetaRequest). Timeout is seconds.
type DataMetaRequest struct {
	Fields       []string     `json:"fields" msg:"fields"`
	BatchSize    int          `json:"batch_size" msg:"batch_size"`
	Task         string       `json:"task" msg:"task"`
	Partition    string       `json:"partition,omitzero" msg:"partition,omitempty"`
	Sampler      *DataSampler `json:"sampler,omitzero" msg:"sampler,omitempty"`
	Wait         bool         `json:"wait,omitzero" msg:"wait,omitempty"`
	Timeout      float64      `json:"timeout,omitzero" msg:"timeout,omitempty"`
	DeferConsume bool         `json:"defer_consume,omitzero" msg:"defer_consume,omitempty"`
	DPRank       int          `json:"dp_rank,omitzero" msg:"dp_rank,omitempty"`
	BatchIndex   int          `json:"batch_index,omitzero" msg:"batch_index,omitempty"`
	// MaxStaleness, when present, bounds the weight versions handed out
	// (persist.Staleness.Max, ≥ 0); StalePolicy is "drop" (the default) or "keep".
	MaxStaleness *int64 `json:"max_staleness,omitempty" msg:"max_staleness,omitempty"`
	StalePolicy  string `json:"stale_policy,omitzero" msg:"stale_policy,omitempty"`
	// StaleVersion is which segment of a partial rollout the bound judges
	// (persist.Staleness.Version): "oldest" (the default) or "newest".
	StaleVersion string `json:"stale_version,omitzero" msg:"stale_version,omitempty"`
	// Lease, in seconds, hands the batch out leased (persist.MetaRequest.Lease): POST
	// …/consumption/mark commits it. 0: no lease.
	Lease float64 `json:"lease,omitzero" msg:"lease,omitempty"`
}

// DataWeightVersion is the body of POST …/version and the answer of GET …/version: the
// queue's current weight version (persist.Queue.SetVersion).
type DataWeightVersion struct {
	Version int64 `json:"version" msg:"version"`
}

// DataReplayRequest is the body of POST …/replay (persist.ReplayRequest): Size draws
// with replacement from the records of Partition among the last Window global indexes,
// weighted by the numeric field Weight ("" uniform); nothing is consumed. Fields
// absent: every field; IndexesOnly: no field (the answer carries only _index). Seed ≠
// 0 repeats a draw. The answer is one row per draw, in draw order. Size is 1–10,000
// (persist.ScanLimitMax) per request: a larger replay is several requests.
type DataReplayRequest struct {
	Partition   string   `json:"partition,omitzero" msg:"partition,omitempty"`
	Fields      []string `json:"fields,omitzero" msg:"fields,omitempty"`
	IndexesOnly bool     `json:"indexes_only,omitzero" msg:"indexes_only,omitempty"`
	Size        int      `json:"size" msg:"size"`
	Window      int64    `json:"window,omitzero" msg:"window,omitempty"`
	Weight      string   `json:"weight,omitzero" msg:"weight,omitempty"`
	Seed        uint64   `json:"seed,omitzero" msg:"seed,omitempty"`
}

// DataPatchRequest is the body of POST …/partial/patch (persist.Queue.PatchPartial): a
// segment produced at WeightVersion added to the partial rollouts at Indexes of
// Partition (Records[i] merged into Indexes[i]; absent: no field), Complete marking
// them complete.
type DataPatchRequest struct {
	Partition     string  `json:"partition,omitzero" msg:"partition,omitempty"`
	Indexes       []int64 `json:"indexes" msg:"indexes"`
	Records       []Value `json:"records,omitzero" msg:"records,omitempty"`
	WeightVersion int64   `json:"weight_version" msg:"weight_version"`
	Complete      bool    `json:"complete,omitzero" msg:"complete,omitempty"`
}

// DataPrioritiesRequest is the body of POST …/priorities
// (persist.Queue.UpdatePriorities): values[i] becomes the numeric field Field of the
// sample at indexes[i] of Partition.
type DataPrioritiesRequest struct {
	Partition string    `json:"partition,omitzero" msg:"partition,omitempty"`
	Field     string    `json:"field" msg:"field"`
	Indexes   []int64   `json:"indexes" msg:"indexes"`
	Values    []float64 `json:"values" msg:"values"`
}

// DataFieldMeta describes one field of a batch (persist.FieldMeta).
type DataFieldMeta struct {
	Name  string `json:"name" msg:"name"`
	Kind  string `json:"kind" msg:"kind"`
	DType string `json:"dtype,omitzero" msg:"dtype,omitempty"`
	Shape []int  `json:"shape,omitzero" msg:"shape,omitempty"`
}

// DataBatchMeta answers POST …/meta (persist.BatchMeta).
type DataBatchMeta struct {
	Size int `json:"size" msg:"size"`
	// Indexes is absent from the Lakeshore-Batch-Meta header of POST …/batch.
	Indexes   []int64         `json:"indexes,omitzero" msg:"indexes"`
	Fields    []DataFieldMeta `json:"fields" msg:"fields"`
	Partition string          `json:"partition" msg:"partition"`
	Task      string          `json:"task" msg:"task"`
}

// DataProducedRequest is the body of POST …/produced.
type DataProducedRequest struct {
	Partition string   `json:"partition,omitzero" msg:"partition,omitempty"`
	Indexes   []int64  `json:"indexes" msg:"indexes"`
	Fields    []string `json:"fields" msg:"fields"`
}

// DataProducedResponse answers POST …/produced: Produced[i][j] says whether Indexes[i] has
// Fields[j].
type DataProducedResponse struct {
	Produced [][]bool `json:"produced" msg:"produced"`
}

// DataConsumptionRequest is the body of POST …/consumption/mark (with Indexes) and
// …/consumption/reset (without).
type DataConsumptionRequest struct {
	Task      string  `json:"task" msg:"task"`
	Partition string  `json:"partition,omitzero" msg:"partition,omitempty"`
	Indexes   []int64 `json:"indexes,omitzero" msg:"indexes,omitempty"`
}

// DataConsumedResponse answers GET …/consumption.
type DataConsumedResponse struct {
	Consumed int64 `json:"consumed" msg:"consumed"`
}

// DataClearRequest is the body of POST …/clear.
type DataClearRequest struct {
	Partition string  `json:"partition,omitzero" msg:"partition,omitempty"`
	Indexes   []int64 `json:"indexes" msg:"indexes"`
}

// DataKVPutRequest is the body of POST …/kv: Records[i] is stored under Keys[i] with
// Tags[i] (Tags may be absent).
type DataKVPutRequest struct {
	Partition string              `json:"partition,omitzero" msg:"partition,omitempty"`
	Keys      []string            `json:"keys" msg:"keys"`
	Records   []Value             `json:"records" msg:"records"`
	Tags      []map[string]string `json:"tags,omitzero" msg:"tags,omitempty"`
}

// DataKVKeysRequest is the body of POST …/kv/get (with Fields: nil for all) and
// …/kv/clear.
type DataKVKeysRequest struct {
	Partition string   `json:"partition,omitzero" msg:"partition,omitempty"`
	Keys      []string `json:"keys" msg:"keys"`
	Fields    []string `json:"fields,omitzero" msg:"fields,omitempty"`
}

// DataKVEntry is one key (persist.KVEntry). Fields is a record (KV get only).
type DataKVEntry struct {
	Partition string            `json:"partition" msg:"partition"`
	Key       string            `json:"key" msg:"key"`
	Index     int64             `json:"index" msg:"index"`
	Tags      map[string]string `json:"tags,omitzero" msg:"tags,omitempty"`
	Fields    Value             `json:"fields,omitzero" msg:"fields,omitzero"`
}

// DataKVResponse answers KV gets and lists.
type DataKVResponse struct {
	Entries []DataKVEntry `json:"entries" msg:"entries"`
}

// DataField is one field of a schema.
type DataField struct {
	Name string `json:"name" msg:"name"`
	Kind string `json:"kind" msg:"kind"`
}

// DataSchemaResponse answers GET …/schema: the fields, oldest first.
type DataSchemaResponse struct {
	Fields []DataField `json:"fields" msg:"fields"`
}

// DataStats answers GET …/stats (persist.Stats; the counters are the server's handle).
// Durations are seconds.
type DataStats struct {
	NextIndex          int64            `json:"next_index" msg:"next_index"`
	Len                int64            `json:"len" msg:"len"`
	Cleared            int64            `json:"cleared" msg:"cleared"`
	TailRows           int64            `json:"tail_rows" msg:"tail_rows"`
	FragmentRows       int64            `json:"fragment_rows" msg:"fragment_rows"`
	Fragments          int              `json:"fragments" msg:"fragments"`
	FragmentBytes      int64            `json:"fragment_bytes" msg:"fragment_bytes"`
	ManifestVersion    int64            `json:"manifest_version" msg:"manifest_version"`
	PendingFragments   int              `json:"pending_fragments" msg:"pending_fragments"`
	Partitions         map[string]int64 `json:"partitions" msg:"partitions"`
	ConsumedByTask     map[string]int64 `json:"consumed_by_task" msg:"consumed_by_task"`
	Puts               int64            `json:"puts" msg:"puts"`
	Gets               int64            `json:"gets" msg:"gets"`
	Flushes            int64            `json:"flushes" msg:"flushes"`
	FlushFailures      int64            `json:"flush_failures" msg:"flush_failures"`
	Compactions        int64            `json:"compactions" msg:"compactions"`
	Commits            int64            `json:"commits" msg:"commits"`
	CommittedOps       int64            `json:"committed_ops" msg:"committed_ops"`
	RecoveredFragments int64            `json:"recovered_fragments" msg:"recovered_fragments"`
	OrphansDeleted     int64            `json:"orphans_deleted" msg:"orphans_deleted"`
	LastFlush          time.Time        `json:"last_flush,omitzero" msg:"last_flush,omitzero"`
	LastFlushDuration  float64          `json:"last_flush_duration" msg:"last_flush_duration"`
	WeightVersion      int64            `json:"weight_version" msg:"weight_version"`
	StaleDropped       int64            `json:"stale_dropped" msg:"stale_dropped"`
	GroupsDropped      int64            `json:"groups_dropped" msg:"groups_dropped"`
	SamplesUnused      int64            `json:"samples_unused" msg:"samples_unused"`
}

// DataVersionResponse answers GET …/changes.
type DataVersionResponse struct {
	Version int64 `json:"version" msg:"version"`
}

// DataQueuesResponse answers GET /v1/namespaces/{namespace}/data.
type DataQueuesResponse struct {
	Queues []string `json:"queues" msg:"queues"`
}

// DataErrorBody is the error body of the data routes: ErrorBody's {code, message, details}
// with the details of package persist's typed errors, so a client rebuilds them.
type DataErrorBody struct {
	Code    string            `json:"code" msg:"code"`
	Message string            `json:"message" msg:"message"`
	Details *DataErrorDetails `json:"details,omitzero" msg:"details,omitempty"`
}

// DataErrorDetails are the typed fields of a data error, by its code.
type DataErrorDetails struct {
	// invalid (*persist.InvalidError); field also for incompatible_type and
	// unsupported_value.
	Field string `json:"field,omitzero" msg:"field,omitempty"`
	Value any    `json:"value,omitzero" msg:"value,omitempty"`
	Rule  string `json:"rule,omitzero" msg:"rule,omitempty"`
	// incompatible_type (*persist.SchemaError): the column's kind, the value's kind, and
	// why they do not widen when they usually would.
	Have   string `json:"have,omitzero" msg:"have,omitempty"`
	Got    string `json:"got,omitzero" msg:"got,omitempty"`
	Reason string `json:"reason,omitzero" msg:"reason,omitempty"`
	// unsupported_value (*persist.UnsupportedValueError): the type of the value.
	GoType string `json:"go_type,omitzero" msg:"go_type,omitempty"`
	// not_found (*persist.NotFoundError): the data queue that does not exist, or the
	// partition searched and the keys or indexes missing there.
	Queue     string   `json:"queue,omitzero" msg:"queue,omitempty"`
	Partition string   `json:"partition,omitzero" msg:"partition,omitempty"`
	Keys      []string `json:"keys,omitzero" msg:"keys,omitempty"`
	Indexes   []int64  `json:"indexes,omitzero" msg:"indexes,omitempty"`
	// queue_full from a data put (*persist.BackpressureError), with partition: the
	// task's unconsumed records, the put's records and the bound; or the current
	// version, the put's target version and the bound on versions ahead; and how long
	// a blocked put waited (seconds).
	Backpressure *DataBackpressure `json:"backpressure,omitzero" msg:"backpressure,omitempty"`
}

// DataBackpressure details a data put refused by its back-pressure (persist.BackpressureError).
type DataBackpressure struct {
	Unconsumed int64   `json:"unconsumed" msg:"unconsumed"`
	Records    int64   `json:"records" msg:"records"`
	Limit      int64   `json:"limit" msg:"limit"`
	Version    int64   `json:"version" msg:"version"`
	Target     int64   `json:"target" msg:"target"`
	MaxAhead   int64   `json:"max_ahead" msg:"max_ahead"`
	Waited     float64 `json:"waited,omitzero" msg:"waited,omitempty"`
}
