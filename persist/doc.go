// Package persist provides durable, append-only, Parquet-backed record queues for
// training data: producers put records and get stable global indexes once the records
// are durable; consumers read them back by index, as streams, or in two phases
// (which samples, then which fields) with per-task consumption tracking, samplers and
// a key-value view.
//
// # Stores
//
// Queue, Reader, KVView and Stream are thin layers over a Store, a batch-first
// interface whose arguments are plain data so that it can cross a network; New wraps
// any Store, and the package persisttest is the conformance suite every Store passes.
// Open gives the Queue of the store a target names, of the stores the program passes
// (StoreDriver): persist/filestore for a directory (Parquet fragments and a SQLite
// catalog), persist/httpstore for a server's URL, persist/lakestore for the distributed
// store. persist links none of them, so a program links only the stores it names.
//
// # Records and schema
//
// A Record maps field names to values: bool, integers, floats, string, []byte, lists
// of numbers, Tensor (the wire codec's NDArray), the codec's Tensor, and any other value the
// wire codec encodes. The schema is inferred and evolves: a new field becomes a new
// nullable column, int64 widens to float64 (never rounding an integer beyond ±2^53),
// and a put of an incompatible type fails with *SchemaError naming the field and both
// types, writing nothing. Errors carry plane's stable codes (Code, ErrorFromCode).
//
// # Reading
//
// Queue.Get, Queue.Read and Queue.Stream read in global-index order (optionally one
// partition, some fields, one rank's shard). Queue.Reader gives two-phase reads:
// GetMeta hands out ready, unconsumed samples of a partition for a task (chosen by a
// sampler named in the request with its parameters, a SamplerSpec: sequential,
// rank-aware, grpo-group-n, seqlen-balanced, or one added with Samplers.With and given
// to the store in Config.Samplers) and GetData reads their fields as an Arrow record. Queue.PutFields adds fields to
// existing samples later; Queue.ClearSamples and ClearPartition drop samples for good.
// KV gives a key-value view with tags and tombstones.
//
// See docs/persist.md for the on-disk layout, guarantees and design decisions.
package persist
