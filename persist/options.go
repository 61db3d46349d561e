package persist

import (
	"fmt"
	"time"
)

// GetOpts selects what Get, Read and Stream return. The zero value (or nil) means all
// fields of all partitions, unsharded.
type GetOpts struct {
	// Fields lists the fields to read; nil means every field of the schema. Unknown
	// names fail with *InvalidError.
	Fields []string
	// Partition restricts the read to one partition; "" means all partitions.
	Partition string
	// Shard restricts the read to one rank's share of the log.
	Shard Shard
}

// Shard makes readers of one log deterministic and disjoint: each record's bucket is a
// hash (FNV-1a) of its value in Column, modulo Buckets; bucket b belongs to rank
// b mod WorldSize. The ranks 0..WorldSize-1 together read every record exactly once.
type Shard struct {
	// Rank is this reader's rank, 0 ≤ Rank < WorldSize.
	Rank int
	// WorldSize is the number of readers; 0 or 1 means no sharding.
	WorldSize int
	// Column is the field whose value is hashed. Defaults to "_index" (the global
	// index). Records without a value in Column hash as empty.
	Column string
	// Buckets is the number of hash buckets. Defaults to ShardBucketsDefault (64);
	// must be at least WorldSize.
	Buckets int
}

// ShardBucketsDefault is the default Shard.Buckets.
const ShardBucketsDefault = 64

// Active reports whether s splits a read (WorldSize > 1).
func (s Shard) Active() bool { return s.WorldSize > 1 }

// Validate checks s: WorldSize ≥ 0 and, when s is Active, Rank in [0, WorldSize) and
// at least WorldSize buckets. Errors: *InvalidError naming the shard setting.
func (s Shard) Validate() error {
	if s.WorldSize < 0 {
		return &InvalidError{Field: "shard world_size", Value: s.WorldSize, Rule: "≥ 0"}
	}
	if !s.Active() {
		return nil
	}
	if s.Rank < 0 || s.Rank >= s.WorldSize {
		return &InvalidError{Field: "shard rank", Value: s.Rank, Rule: "in [0, world_size)"}
	}
	if b := s.buckets(); b < s.WorldSize {
		return &InvalidError{Field: "shard buckets", Value: b, Rule: "≥ world_size"}
	}
	return nil
}

func (s Shard) buckets() int {
	if s.Buckets == 0 {
		return ShardBucketsDefault
	}
	return s.Buckets
}

// Owns reports whether a record whose shard column hashes to h (FNV-1a, as
// ShardOwns hashes) belongs to s's rank.
func (s Shard) Owns(h uint64) bool {
	return int(h%uint64(s.buckets()))%s.WorldSize == s.Rank
}

// StreamOpts configures Queue.Stream.
type StreamOpts struct {
	GetOpts
	// Offset is the first global index to read. Defaults to 0.
	Offset int64
	// BatchSize is the most rows one Next returns. Defaults to StreamBatchSizeDefault.
	BatchSize int
	// Wait makes Next block for new rows when it has caught up, instead of returning
	// io.EOF.
	Wait bool
	// IdleTimeout, with Wait, ends the stream (Next returns io.EOF) once no new row
	// arrived for this long. 0 waits until ctx ends or the queue closes.
	IdleTimeout time.Duration
}

// StreamBatchSizeDefault is the default StreamOpts.BatchSize.
const StreamBatchSizeDefault = 1000

// ScanLimitMax bounds the records one read over HTTP answers: the limit of
// GET …/records and the batch_size of GET …/stream (a larger one is refused as invalid,
// naming the field). The server reads a whole answer into memory before it sends it, so
// without a bound one request could read a whole queue. A larger scan reads pages of at
// most ScanLimitMax records, each continuing at the previous page's next offset:
// package httpstore asks for at most ScanLimitMax per Scan (Scan answers up to limit
// records and where the next page starts) and the Python SDK does the same. In process,
// Scan takes any limit (the caller's memory is its own).
//
// The same bound holds for every other data route whose answer's size the request
// chooses (CheckAnswerCount): the indexes of POST …/data, the keys of POST …/kv/get, a
// page of GET …/kv, the batch_size of POST …/batch and the size of POST …/replay; the
// HTTP store splits or pages a larger call by itself (docs/persist.md, "Over HTTP").
const ScanLimitMax = 10_000

// CheckAnswerCount checks n, how many rows (records, keys, draws) one request over HTTP
// asks one answer to hold: least–ScanLimitMax. more, appended to the rule, says how to
// read more than one answer holds. The server checks every such route with it, and the
// HTTP store splits its callers' larger calls into requests it accepts. Errors:
// *InvalidError naming field and the range.
func CheckAnswerCount(field string, n, least int64, more string) error {
	if n >= least && n <= ScanLimitMax {
		return nil
	}
	return &InvalidError{Field: field, Value: n, Rule: fmt.Sprintf("use %d–%d over HTTP%s", least, ScanLimitMax, more)}
}

// KVEntry is one key as listed or read.
type KVEntry struct {
	Partition string
	Key       string
	Index     int64
	Tags      map[string]string
	Fields    Record // BatchGet only
}

// CheckKey checks a key of the key-value view (1–1024 bytes of valid UTF-8 without the
// byte \x00, which PostgreSQL's text holds neither of: storableText), for a put, a get and
// a clear. Errors: *InvalidError naming key.
func CheckKey(key string) error {
	if key == "" || len(key) > 1024 || !storableText(key) {
		return &InvalidError{Field: "key", Value: key, Rule: `1–1024 bytes of valid UTF-8 without the byte \x00`}
	}
	return nil
}

// Stats is a snapshot of a queue's counters and storage.
type Stats struct {
	// Counters of this Queue handle (this process) since Open.
	Puts    int64 // records put (Put, PutBatch, PutPartition, PutFields, KV puts)
	Gets    int64 // rows returned by Get, Stream, GetData and GetBatch
	Flushes int64 // flushes that wrote at least one fragment
	// FlushFailures counts flushes (background or Flush) that failed, the rows staying
	// durable in the tail: an unreachable object store, a full disk. A climbing count
	// with a climbing TailRows is the alert.
	FlushFailures int64
	Compactions   int64 // compactions that replaced fragments
	// LastFlush is when this handle last completed a flush (zero if never), and
	// LastFlushDuration how long writing its fragments and publishing them took.
	LastFlush         time.Time
	LastFlushDuration time.Duration
	// Commits is how many write transactions this handle committed, and CommittedOps
	// how many operations (puts, reads handing out samples, ...) they carried: their
	// ratio is the group-commit batching.
	Commits      int64
	CommittedOps int64
	// RecoveredFragments is how many unfinished flushes or compactions of crashed
	// processes this handle's Open rolled back, and OrphansDeleted how many files it
	// deleted that the manifest did not name.
	RecoveredFragments int64
	OrphansDeleted     int64

	// Shared state, as stored in meta.db (all processes).
	NextIndex        int64            // the index the next put gets
	Len              int64            // readable records: NextIndex minus cleared ones
	Cleared          int64            // records cleared (tombstoned)
	TailRows         int64            // rows (and field updates) in the durable tail, not yet in fragments
	FragmentRows     int64            // rows in live fragments (row and field fragments)
	Fragments        int              // live fragments
	FragmentBytes    int64            // bytes of live fragment files
	ManifestVersion  int64            // grows with every flush and compaction
	Partitions       map[string]int64 // partition → records put into it (cleared ones included)
	ConsumedByTask   map[string]int64 // "partition/task" → samples the task is done with: handed out, marked consumed, or dropped by its reads (StaleDropped, GroupsDropped, SamplesUnused)
	PendingFragments int              // flushes or compactions in progress (or of crashed processes)
	WeightVersion    int64            // the queue's current weight version (Queue.SetVersion)
	StaleDropped     int64            // records dropped as stale by staleness-bounded reads (StaleDrop), all tasks
	GroupsDropped    int64            // groups dropped (GRPOGroupN's filter and straggler bound, DropGroup), all tasks
	SamplesUnused    int64            // samples of over-sampled groups left unused (GRPOGroupN.Use), all tasks
}
