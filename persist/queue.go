package persist

import (
	"context"
	"sync"
)

// Queue is a durable, append-only record queue: the data-queue SDK over a Store. Open
// gives one over the store a target names; New wraps any Store. All methods are
// safe for concurrent use; several processes (or, with a network store, machines) may
// use one queue at once.
type Queue struct {
	s      Store
	replay replayCache // Replay's weights (replay.go)
	// patchMu serializes PatchPartial's read and write of segment versions (partial.go).
	patchMu sync.Mutex
	// fields are the names batch hand-outs asked for, known or warned about, and the
	// logger of those warnings (fields.go).
	fields fieldNotices
}

// New returns a Queue over s. Closing the Queue closes s.
func New(s Store) *Queue { return &Queue{s: s} }

// Open opens (creating if needed) the queue name in the store its target names, one
// of stores, and returns the Queue over it. The target is Config.URL, else Config.Dir,
// else $LAKESHORE_URL when Dir is empty: a path is served by the store whose driver
// serves paths — persist/filestore's Driver(), the file store under cfg.Dir/name/
// (Parquet fragments and a SQLite catalog, meta.db) — and a URL by the store whose
// driver serves its scheme: with persist/httpstore's Driver(), an http(s) URL opens the
// queue on that server, the same Queue, Reader and KVView over HTTP; with
// persist/lakestore's Driver(), "postgres://…?blob=<bucket URL>" opens the distributed
// store (docs/persist.md):
//
//	q, err := persist.Open(ctx, "rollouts", cfg, filestore.Driver(), httpstore.Driver(), lakestore.Driver())
//
// Stores are given explicitly, as database/sql drivers are not: persist registers none
// behind the caller's back and links none, so a program links only the stores it
// names (docs/architecture.md says why). name must be 1–128 bytes of [A-Za-z0-9._-],
// not starting with . _ or -. Errors: *InvalidError for a bad name or Config, and for
// a target no given store serves (a path without filestore.Driver(), an http(s):// or
// postgres:// URL without its driver: the error names the driver to give; a URL of
// any other scheme is never taken for a directory), and the store's own errors.
func Open(ctx context.Context, name string, cfg *Config, stores ...StoreDriver) (*Queue, error) {
	target, open, err := cfg.resolveTarget(stores)
	if err != nil {
		return nil, err
	}
	s, err := open.Open(ctx, name, target, cfg)
	if err != nil {
		return nil, err
	}
	q := New(s)
	if cfg != nil {
		q.SetLogger(cfg.Logger)
	}
	return q, nil
}

// Store returns the store under q.
func (q *Queue) Store() Store { return q.s }

// Name returns the queue's name.
func (q *Queue) Name() string { return q.s.Name() }

// Dir returns the queue's directory, {Config.Dir}/{name}, for a file store, and ""
// for other stores.
func (q *Queue) Dir() string {
	if d, ok := q.s.(interface{ Dir() string }); ok {
		return d.Dir()
	}
	return ""
}

// Put appends rec to the default partition and returns its global index once it is
// durable. Errors: *SchemaError (nothing written), *UnsupportedValueError,
// *InvalidError, ErrClosed, ctx's error (the put may then still have been written).
func (q *Queue) Put(ctx context.Context, rec Record) (int64, error) {
	idx, err := q.s.PutPartition(ctx, DefaultPartition, []Record{rec}, nil)
	if err != nil {
		return -1, err
	}
	return idx[0], nil
}

// PutBatch appends recs to the default partition in order and returns their global
// indexes (consecutive) once they are durable. The batch is atomic: on any error
// nothing is written. Errors as for Put.
func (q *Queue) PutBatch(ctx context.Context, recs []Record) ([]int64, error) {
	return q.s.PutPartition(ctx, DefaultPartition, recs, nil)
}

// PutPartition appends recs to partition (1–128 bytes of [A-Za-z0-9._-], not starting
// with . _ or -) and returns their consecutive global indexes once durable. Global
// indexes are unique across partitions, monotonic and never reused. Atomic; errors as
// for Put.
func (q *Queue) PutPartition(ctx context.Context, partition string, recs []Record) ([]int64, error) {
	return q.s.PutPartition(ctx, partition, recs, nil)
}

// PutPartitionOnce is PutPartition with an idempotency id (PutOpts.ID; NewPutID makes
// one): calling it again with the same id — a retry after a timeout, a lost answer, a
// restart of the caller or of a server — within PutIDRetention writes nothing and
// returns the indexes the first call got, so a batch is never appended twice. Every
// store honours it (the file store in meta.db, the distributed store in its catalog,
// the HTTP store by sending the id to the server, which also makes its own retries of
// the batch safe). Errors as for PutPartition, and *InvalidError for a bad id or a
// repeat naming another partition or number of records.
func (q *Queue) PutPartitionOnce(ctx context.Context, id, partition string, recs []Record) ([]int64, error) {
	if id == "" {
		return nil, &InvalidError{Field: "put_id", Value: id, Rule: "1–128 bytes of [A-Za-z0-9._:-] (NewPutID makes one)"}
	}
	return q.s.PutPartition(ctx, partition, recs, &PutOpts{ID: id})
}

// PutFields adds fields to existing samples of partition: fields[i] is merged into
// the sample at indexes[i] (new fields are added, fields it already has are
// overwritten; the latest put of a (sample, field) wins; an index given twice is
// merged in order, so its later record wins). Each (sample, field) put becomes
// produced, so readers waiting for those fields see the sample. Durable when it
// returns; atomic. Errors: *NotFoundError for an index that does not exist in
// partition (or was cleared), *SchemaError, *InvalidError, ErrClosed.
func (q *Queue) PutFields(ctx context.Context, partition string, indexes []int64, fields []Record) error {
	if err := CheckIndexes(indexes); err != nil {
		return err
	}
	if err := CheckVersionFields(fields); err != nil {
		return err
	}
	return q.s.PutFields(ctx, partition, indexes, fields)
}

// Get returns up to limit records with global index ≥ offset, in index order, skipping
// cleared ones (and, per opts, other partitions and other ranks' shards). Records
// still in the tail are included: every put that returned is readable. Over HTTP one
// call answers at most ScanLimitMax records: read on from the last row's index + 1 (an
// empty answer is the end). Errors: *InvalidError (bad limit, offset, field or shard),
// ErrClosed.
func (q *Queue) Get(ctx context.Context, offset int64, limit int, opts *GetOpts) ([]Row, error) {
	b, err := q.Read(ctx, offset, limit, opts)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return b.Rows()
}

// Read is Get returning the columnar *Batch (Arrow) instead of rows. The caller
// should Release the batch.
func (q *Queue) Read(ctx context.Context, offset int64, limit int, opts *GetOpts) (*Batch, error) {
	b, _, err := q.s.Scan(ctx, offset, limit, opts)
	return b, err
}

// Produced reports, for each of indexes (in partition), which of fields it has: a
// field put with the record or added later by PutFields. Errors: *InvalidError,
// *NotFoundError for indexes not in partition, ErrClosed.
func (q *Queue) Produced(ctx context.Context, partition string, indexes []int64, fields []string) ([][]bool, error) {
	if err := CheckIndexes(indexes); err != nil {
		return nil, err
	}
	if err := CheckFieldNames(fields); err != nil {
		return nil, err
	}
	return q.s.Produced(ctx, partition, indexes, fields)
}

// MarkConsumed records that task has consumed indexes of partition, for readers that
// set MetaRequest.DeferConsume and mark only after processing. Marking twice is
// harmless. Errors: *InvalidError, *NotFoundError for indexes not in partition,
// ErrClosed.
func (q *Queue) MarkConsumed(ctx context.Context, task, partition string, indexes []int64) error {
	if err := CheckIndexes(indexes); err != nil {
		return err
	}
	return q.s.MarkConsumed(ctx, task, partition, indexes)
}

// ResetConsumption forgets what task consumed in partition, and the task's sampler
// assignments there, so a new run reads every sample again. Errors: *InvalidError,
// ErrClosed.
func (q *Queue) ResetConsumption(ctx context.Context, task, partition string) error {
	return q.s.ResetConsumption(ctx, task, partition)
}

// Consumed returns how many samples of partition task has consumed.
func (q *Queue) Consumed(ctx context.Context, task, partition string) (int64, error) {
	return q.s.Consumed(ctx, task, partition)
}

// ClearSamples drops samples of partition for good, as TransferQueue's clear_samples
// does: they vanish from Get, Stream, GetMeta, GetData and Len (every other index
// stays as it was), KV keys naming them are forgotten, and the store reclaims their
// storage (the file store: at the next compaction of their fragments). Use it for
// abandoned samples, such as the incomplete groups of failed generations. Indexes not
// in partition (or already cleared) are ignored, so a repeated clear is harmless; an index
// below 0 is *InvalidError, as for MarkConsumed. Errors: *InvalidError, ErrClosed.
func (q *Queue) ClearSamples(ctx context.Context, partition string, indexes []int64) error {
	if err := CheckIndexes(indexes); err != nil {
		return err
	}
	return q.s.ClearSamples(ctx, partition, indexes)
}

// ClearPartition drops every sample of partition, as ClearSamples would, and forgets
// the partition's consumption and sampler assignments of every task. Errors:
// *InvalidError, ErrClosed.
func (q *Queue) ClearPartition(ctx context.Context, partition string) error {
	return q.s.ClearPartition(ctx, partition)
}

// Schema returns the queue's current schema.
func (q *Queue) Schema(ctx context.Context) (Schema, error) { return q.s.Schema(ctx) }

// Len returns the number of readable records: every record put (in every partition)
// minus those cleared. Global indexes run from 0 to NextIndex()-1.
func (q *Queue) Len(ctx context.Context) (int64, error) {
	_, live, err := q.s.Counts(ctx)
	return live, err
}

// NextIndex returns the global index the next put will get (the number of indexes
// ever allocated).
func (q *Queue) NextIndex(ctx context.Context) (int64, error) {
	next, _, err := q.s.Counts(ctx)
	return next, err
}

// Stats returns the queue's counters and storage figures. Errors: ErrClosed, storage
// errors.
func (q *Queue) Stats(ctx context.Context) (Stats, error) { return q.s.Stats(ctx) }

// Flush moves every record put so far into the store's long-term layout (the file
// store: writes the tail into Parquet fragments). Puts are durable without it; it
// makes reads cheaper and bounds the tail. Errors: ErrClosed, I/O errors.
func (q *Queue) Flush(ctx context.Context) error { return q.s.Flush(ctx) }

// Compact merges small fragments now, if the store supports it (the file store).
// Errors: *InvalidError for a store that does not compact, ErrClosed, I/O errors.
func (q *Queue) Compact(ctx context.Context) error {
	c, ok := q.s.(Compacter)
	if !ok {
		return &InvalidError{Field: "store", Value: q.s.Name(), Rule: "a store that compacts (the file store)"}
	}
	return c.Compact(ctx)
}

// Close closes the store. For the file store it flushes every row put so far into a
// fragment, stops the background goroutines and releases the files; calls in flight
// finish first; waits (Stream, GetMeta in wait mode) end with ErrClosed. Rows are
// durable before Close, so even a Close that fails or is cut short by ctx loses
// nothing. Idempotent: later calls return nil.
func (q *Queue) Close(ctx context.Context) error { return q.s.Close(ctx) }
