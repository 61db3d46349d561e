package persist

import "context"

// Store is the storage boundary of a data queue: what Queue, Reader and KVView need,
// and what every backend implements — the file store of this package (Open: Parquet
// fragments and a SQLite catalog in a directory), and next a store over HTTP and a
// distributed one. It is batch-first (every call carries many records or indexes) and
// every argument is plain data (a sampler is a SamplerSpec, a name and JSON
// parameters), so that each call can cross a network as one request.
//
// Every method is safe for concurrent use. Errors follow the package's sentinels
// (ErrInvalid, ErrSchema, ErrUnsupportedValue, ErrNotFound, ErrTimeout, ErrClosed,
// ErrCorrupt) and their detailed types, so that a caller cannot tell stores apart by
// their errors; persisttest.Run checks this contract.
type Store interface {
	// Name returns the queue's name.
	Name() string

	// PutPartition appends recs to partition atomically and returns their consecutive
	// global indexes once they are durable. Global indexes are unique across
	// partitions, monotonic and never reused. With opts.ID (an idempotency id), a
	// repeat of the id within PutIDRetention writes nothing and returns the indexes
	// the first put got (see PutOpts).
	PutPartition(ctx context.Context, partition string, recs []Record, opts *PutOpts) ([]int64, error)
	// PutFields merges fields[i] into the sample at indexes[i] of partition,
	// atomically; every (sample, field) put becomes produced.
	PutFields(ctx context.Context, partition string, indexes []int64, fields []Record) error

	// Scan reads up to limit records with global index ≥ offset in index order, per
	// opts, as an Arrow batch (the caller releases it), and returns the index where a
	// following scan continues (past records that were considered and filtered out).
	// That index is never below offset: a scan from an offset at or past the end of
	// the log answers offset itself, so a caller following it never reads below where
	// it asked to start (records put later below offset are not its to read).
	Scan(ctx context.Context, offset int64, limit int, opts *GetOpts) (*Batch, int64, error)
	// GetMeta hands out samples for a task as MetaRequest says (sampler by name,
	// consumption marked in the same transaction unless deferred, waiting if asked).
	GetMeta(ctx context.Context, req *MetaRequest) (*BatchMeta, error)
	// GetData reads the fields of meta for its indexes, in meta.Indexes order; a
	// meta.Partition reads only that partition's records (*NotFoundError naming it for an
	// index of another), "" any partition's.
	GetData(ctx context.Context, meta *BatchMeta) (*Batch, error)
	// Produced reports, for each index, which of fields it has.
	Produced(ctx context.Context, partition string, indexes []int64, fields []string) ([][]bool, error)

	// MarkConsumed records that task consumed indexes of partition.
	MarkConsumed(ctx context.Context, task, partition string, indexes []int64) error
	// ResetConsumption forgets what task consumed in partition, and its assignments.
	ResetConsumption(ctx context.Context, task, partition string) error
	// Consumed returns how many samples of partition task has consumed.
	Consumed(ctx context.Context, task, partition string) (int64, error)
	// ClearSamples drops samples of partition for good.
	ClearSamples(ctx context.Context, partition string, indexes []int64) error
	// ClearPartition drops every sample of partition, its consumption and assignments.
	ClearPartition(ctx context.Context, partition string) error

	// KVPut stores records under keys of partition (new keys get new indexes, known
	// keys are updated) and returns their indexes.
	KVPut(ctx context.Context, partition string, keys []string, fields []Record, tags []map[string]string) ([]int64, error)
	// KVGet reads keys of partition with the given fields (nil: all).
	KVGet(ctx context.Context, partition string, keys []string, fields []string) ([]KVEntry, error)
	// KVList lists the keys of partition ("" for all partitions).
	KVList(ctx context.Context, partition string) ([]KVEntry, error)
	// KVClear removes keys of partition and clears their samples.
	KVClear(ctx context.Context, partition string, keys []string) error

	// Schema returns the queue's schema.
	Schema(ctx context.Context) (Schema, error)
	// Counts returns the index the next put gets and the number of readable records.
	Counts(ctx context.Context) (next, live int64, err error)
	// Stats returns counters and storage figures.
	Stats(ctx context.Context) (Stats, error)
	// Flush makes every record put so far part of the store's long-term layout (the
	// file store: Parquet fragments). Puts are durable before it.
	Flush(ctx context.Context) error
	// Changes returns a channel closed at the next commit that may change what a read
	// returns (by this or any other process or client), or once the store closes, and
	// the release to call when the caller stops waiting on it. Take it before a read,
	// so that no commit is missed between the two.
	Changes() (<-chan struct{}, func())
	// Close releases the store; calls after it fail with ErrClosed. Idempotent.
	Close(ctx context.Context) error
}

// BatchGetter is implemented by stores that hand out a batch and read it in one call
// (the HTTP store: one request instead of two; the file store and the distributed store:
// the data read overlapping the hand-out's commit); Reader.GetBatch uses it. GetBatch
// behaves as GetMeta followed by GetData: when reading fails after the samples were
// handed out, it returns the metadata beside the error.
type BatchGetter interface {
	GetBatch(ctx context.Context, req *MetaRequest) (*Batch, *BatchMeta, error)
}

// Compacter is implemented by stores that merge their storage on demand (the file
// store); Queue.Compact uses it.
type Compacter interface {
	Compact(ctx context.Context) error
}

// ChangeVersioner is implemented by stores whose commits are counted in one version
// shared by every handle of the queue, in every process (the distributed store: a
// counter in the queue's catalog row). ChangeVersion returns it: it grows with every
// commit that Changes reports and that may change what a read returns, never goes back,
// and is the same number whichever handle reads it. Servers answer it as the queue's
// change version (docs/http-api.md), so versions stay comparable across the replicas
// behind a load balancer. Errors: ErrClosed, the store's connection errors.
type ChangeVersioner interface {
	ChangeVersion(ctx context.Context) (int64, error)
}
