package persist

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Record is one sample: field name → value. Values may be bool, any Go integer that
// fits in int64, float32/float64, string, []byte, lists of numbers ([]int, []int64,
// []float32, []float64, ...), Tensor, the wire codec's tensor types, or any other value
// the wire codec encodes. A nil value means "no value": the field is not produced for
// that sample.
type Record map[string]any

// DefaultPartition is the partition of records put without naming one.
const DefaultPartition = "default"

// Durability says when a put is acknowledged.
type Durability int

const (
	// Durable (the default) acknowledges a put after its transaction is fsynced
	// (SQLite synchronous=FULL): a returned index survives a crash of the process, of
	// the operating system and a power loss.
	Durable Durability = iota
	// Buffered acknowledges a put after its transaction is committed without fsync
	// (synchronous=OFF): a returned index survives a crash of the process (SIGKILL) but
	// may be lost with the last seconds of writes on an operating-system crash or power
	// loss. Fragments are still fsynced before they enter the manifest.
	Buffered
)

// Defaults of Config.
const (
	BusyTimeoutDefault      = 30 * time.Second
	CacheBytesDefault       = 256 << 20
	CompactFragmentsDefault = 8
	CompactIntervalDefault  = 10 * time.Second
	FlushIntervalDefault    = 5 * time.Second
	FlushRowsDefault        = 50_000
	PollIntervalDefault     = 50 * time.Millisecond
	RowGroupRowsDefault     = 65_536
)

// Config configures Open. The zero value of every field but Dir means its default.
type Config struct {
	// BusyTimeout is how long a transaction waits for another process's write lock on
	// meta.db before failing. Defaults to BusyTimeoutDefault (30 s).
	BusyTimeout time.Duration
	// CacheBytes bounds the memory of decoded fragment column chunks kept for reads.
	// Defaults to CacheBytesDefault (256 MiB).
	CacheBytes int64
	// CompactFragments is how many small fragments of one level trigger a background
	// compaction that merges them into one. Defaults to CompactFragmentsDefault (8);
	// -1 disables background compaction (Compact still works).
	CompactFragments int
	// CompactInterval is how often the background compactor looks for work besides
	// after each flush. Defaults to CompactIntervalDefault (10 s).
	CompactInterval time.Duration
	// Dir is the root directory; the queue lives in Dir/{name}/. Required.
	Dir string
	// Durability chooses Durable (the default) or Buffered acknowledgement of puts.
	Durability Durability
	// FlushInterval is the longest time a row waits in the tail before a background
	// flush writes it into a fragment. Defaults to FlushIntervalDefault (5 s); -1
	// disables interval flushes.
	FlushInterval time.Duration
	// FlushRows starts a background flush when the tail holds this many rows. Defaults
	// to FlushRowsDefault (50,000); -1 disables row-count flushes.
	FlushRows int
	// Logger receives warnings from background work. Defaults to a text logger on
	// stderr at level Warn.
	Logger *slog.Logger
	// PollInterval is how often the queue checks meta.db for changes made by other
	// processes, to wake waiting streams and readers. Defaults to PollIntervalDefault
	// (50 ms).
	PollInterval time.Duration
	// RowGroupRows is the largest number of rows in one Parquet row group (row groups
	// are also cut at 64 MiB of data). Defaults to RowGroupRowsDefault (65,536).
	RowGroupRows int
}

func (c Config) withDefaults() Config {
	c.BusyTimeout = cmp.Or(c.BusyTimeout, BusyTimeoutDefault)
	c.CacheBytes = cmp.Or(c.CacheBytes, CacheBytesDefault)
	c.CompactFragments = cmp.Or(c.CompactFragments, CompactFragmentsDefault)
	c.CompactInterval = cmp.Or(c.CompactInterval, CompactIntervalDefault)
	c.FlushInterval = cmp.Or(c.FlushInterval, FlushIntervalDefault)
	c.FlushRows = cmp.Or(c.FlushRows, FlushRowsDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.RowGroupRows = cmp.Or(c.RowGroupRows, RowGroupRowsDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Dir == "":
		return &InvalidError{Field: "Config.Dir", Value: `""`, Rule: "a directory path"}
	case c.BusyTimeout < 0:
		return &InvalidError{Field: "Config.BusyTimeout", Value: c.BusyTimeout, Rule: "positive, or 0 for the default"}
	case c.CacheBytes < 0:
		return &InvalidError{Field: "Config.CacheBytes", Value: c.CacheBytes, Rule: "positive, or 0 for the default"}
	case c.CompactFragments < -1 || c.CompactFragments == 1:
		return &InvalidError{Field: "Config.CompactFragments", Value: c.CompactFragments, Rule: "at least 2, 0 for the default, or -1 to disable"}
	case c.CompactInterval < 0:
		return &InvalidError{Field: "Config.CompactInterval", Value: c.CompactInterval, Rule: "positive, or 0 for the default"}
	case c.Durability != Durable && c.Durability != Buffered:
		return &InvalidError{Field: "Config.Durability", Value: c.Durability, Rule: "Durable or Buffered"}
	case c.FlushInterval < 0 && c.FlushInterval != -1:
		return &InvalidError{Field: "Config.FlushInterval", Value: c.FlushInterval, Rule: "positive, 0 for the default, or -1 to disable"}
	case c.FlushRows < -1:
		return &InvalidError{Field: "Config.FlushRows", Value: c.FlushRows, Rule: "positive, 0 for the default, or -1 to disable"}
	case c.PollInterval < 0:
		return &InvalidError{Field: "Config.PollInterval", Value: c.PollInterval, Rule: "positive, or 0 for the default"}
	case c.RowGroupRows < 0:
		return &InvalidError{Field: "Config.RowGroupRows", Value: c.RowGroupRows, Rule: "positive, or 0 for the default"}
	}
	return nil
}

var nameRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

const nameRuleText = "1–128 bytes of [A-Za-z0-9._-], not starting with . _ or -"

func checkName(field, name string) error {
	if !nameRule.MatchString(name) {
		return &InvalidError{Field: field, Value: fmt.Sprintf("%q", name), Rule: nameRuleText}
	}
	return nil
}

// Queue is a durable, append-only record queue stored in a directory. All methods are
// safe for concurrent use; several processes may open the same queue at once.
type Queue struct {
	name    string
	dir     string
	dataDir string
	cfg     Config
	log     *slog.Logger

	wdb, rdb  *sql.DB
	w         *writer
	owner     *ownerLock
	hub       hub
	cache     *fragCache
	tails     *tailCache
	readCache readCache
	metrics   metrics

	schemaMu      sync.Mutex
	schema        *Schema
	schemaVer     int64
	fieldsetCache map[int64]map[string]bool
	fieldsetIDs   map[string]int64

	mu       sync.RWMutex // guards closed and inflight.Add
	closed   bool
	closing  chan struct{}
	inflight sync.WaitGroup

	flushMu     sync.Mutex // one flush at a time in this process
	flushKick   chan struct{}
	compactMu   sync.Mutex
	compactKick chan struct{}
	retired     retiredSet
	// testHook, when set by a test, is called at named points of flush and compaction
	// ("flush-claimed", "flush-renamed", "compact-claimed", "compact-renamed").
	testHook func(point string)
	fileSeq  atomic.Int64
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

// Open opens (creating if needed) the queue name in cfg.Dir/name/, recovers from any
// crash of a previous writer (pending fragments of dead processes are rolled back and
// orphan files deleted), and starts the writer, the background flusher, the compactor
// and the change watcher; Close stops them. name must be 1–128 bytes of
// [A-Za-z0-9._-], not starting with . _ or -. Errors: *InvalidError for a bad name or Config, and I/O or SQLite
// errors.
func Open(ctx context.Context, name string, cfg *Config) (*Queue, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := checkName("queue name", name); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	dir := filepath.Join(c.Dir, name)
	q := &Queue{name: name, dir: dir, dataDir: filepath.Join(dir, "data"), cfg: c, log: c.Logger,
		closing: make(chan struct{}), flushKick: make(chan struct{}, 1), compactKick: make(chan struct{}, 1)}
	q.hub.init()
	for _, d := range []string{q.dataDir, filepath.Join(dir, "owners")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create queue directory: %w", err)
		}
	}
	sync := "FULL"
	if c.Durability == Buffered {
		sync = "OFF"
	}
	var err error
	q.wdb, q.rdb, err = openDB(ctx, filepath.Join(dir, "meta.db"), sync, c.BusyTimeout)
	if err != nil {
		return nil, err
	}
	if q.owner, err = acquireOwner(dir); err != nil {
		q.wdb.Close()
		q.rdb.Close()
		return nil, err
	}
	if q.w, err = startWriter(q, q.wdb); err != nil {
		q.owner.release(dir)
		q.wdb.Close()
		q.rdb.Close()
		return nil, err
	}
	q.cache = newFragCache(q.dataDir, c.CacheBytes)
	q.tails = newTailCache()
	rolledBack, deleted, err := q.recoverQueue(ctx)
	if err != nil {
		q.shutdown()
		return nil, fmt.Errorf("recover queue %s: %w", name, err)
	}
	if err := q.backfillHeld(ctx); err != nil {
		q.shutdown()
		return nil, fmt.Errorf("open queue %s: %w", name, err)
	}
	q.metrics.recoveredFragments.Store(int64(rolledBack))
	q.metrics.orphansDeleted.Store(int64(deleted))
	bgCtx, cancel := context.WithCancel(context.Background())
	q.bgCancel = cancel
	q.bg.Go(func() { q.flushLoop(bgCtx) })
	q.bg.Go(func() { q.watchLoop(bgCtx) })
	if c.CompactFragments > 0 {
		q.bg.Go(func() { q.compactLoop(bgCtx) })
	}
	return q, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Dir returns the queue's directory, {Config.Dir}/{name}.
func (q *Queue) Dir() string { return q.dir }

// enter registers a call in flight; it fails with ErrClosed once Close has started.
func (q *Queue) enter() error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ErrClosed
	}
	q.inflight.Add(1)
	return nil
}

func (q *Queue) leave() { q.inflight.Done() }

// Close flushes every row put so far into a fragment, stops the background goroutines
// and releases the files. Calls in flight finish first; waits (Stream, GetMeta in wait
// mode) end with ErrClosed. Rows are durable before Close (every put that returned is in
// meta.db), so even a Close that fails or is cut short by ctx loses nothing; the next
// Open sees them. Close is idempotent: later calls return nil.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.closing)
	q.mu.Unlock()
	q.inflight.Wait()
	q.bgCancel()
	q.bg.Wait()
	err := q.flush(ctx)
	q.shutdown()
	return err
}

func (q *Queue) hook(point string) {
	if q.testHook != nil {
		q.testHook(point)
	}
}

func (q *Queue) shutdown() {
	q.w.close()
	q.cache.close()
	q.owner.release(q.dir)
	q.rdb.Close()
	q.wdb.Close()
}

// putResult is filled by a put op.
type putPrepared struct {
	partition string
	recs      []normRecord
	data      []byte
	kinds     []fieldValue     // unique (name, kind) pairs, val unused
	bigInts   map[string]int64 // field → an integer beyond ±2^53 it holds (see exactInt)
	runs      []fieldRun       // consecutive records with the same field set
}

type fieldRun struct {
	n      int
	fields string // sorted names joined by \x1f
}

// prepare normalizes and encodes records outside the writer, so that encoding runs on
// the callers' goroutines in parallel.
func prepare(partition string, recs []Record) (*putPrepared, error) {
	norm := make([]normRecord, len(recs))
	for i, r := range recs {
		nr, err := normalizeRecord(r)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		norm[i] = nr
	}
	return prepareNorm(partition, norm)
}

// prepareNorm builds the put of normalized records: their (field, kind) pairs, runs of
// equal field sets and encoding. It fails with *SchemaError if the records themselves
// disagree on a field's type.
func prepareNorm(partition string, recs []normRecord) (*putPrepared, error) {
	p := &putPrepared{partition: partition, recs: recs}
	seen := map[string]Kind{}
	for _, nr := range recs {
		names := make([]string, len(nr))
		for j, fv := range nr {
			names[j] = fv.name
			if k, ok := seen[fv.name]; !ok || (k != fv.kind) {
				if ok {
					if _, ok := widen(k, fv.kind); !ok {
						return nil, &SchemaError{Field: fv.name, Have: k, Got: fv.kind}
					}
				}
				seen[fv.name] = fv.kind
				p.kinds = append(p.kinds, fieldValue{name: fv.name, kind: fv.kind})
			}
		}
		for _, fv := range nr {
			if v, big := inexactInt(fv); big {
				if p.bigInts == nil {
					p.bigInts = map[string]int64{}
				}
				if _, ok := p.bigInts[fv.name]; !ok {
					p.bigInts[fv.name] = v
				}
			}
		}
		fs := strings.Join(names, "\x1f")
		if n := len(p.runs); n > 0 && p.runs[n-1].fields == fs {
			p.runs[n-1].n++
		} else {
			p.runs = append(p.runs, fieldRun{n: 1, fields: fs})
		}
	}
	p.data = encodeRecords(nil, p.recs)
	return p, nil
}

// Put appends rec to the default partition and returns its global index once it is
// durable. Errors: *SchemaError (nothing written), *UnsupportedValueError,
// *InvalidError, ErrClosed, ctx's error (the put may then still have been written).
func (q *Queue) Put(ctx context.Context, rec Record) (int64, error) {
	idx, err := q.PutPartition(ctx, DefaultPartition, []Record{rec})
	if err != nil {
		return -1, err
	}
	return idx[0], nil
}

// PutBatch appends recs to the default partition in order and returns their global
// indexes (consecutive) once they are durable. The batch is atomic: on any error
// nothing is written. Errors as for Put.
func (q *Queue) PutBatch(ctx context.Context, recs []Record) ([]int64, error) {
	return q.PutPartition(ctx, DefaultPartition, recs)
}

// PutPartition appends recs to partition (1–128 bytes of [A-Za-z0-9._-], not starting
// with . _ or -) and returns
// their consecutive global indexes once durable. Global indexes are unique across
// partitions, monotonic and never reused. Atomic; errors as for Put.
func (q *Queue) PutPartition(ctx context.Context, partition string, recs []Record) ([]int64, error) {
	if err := checkName("partition", partition); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	p, err := prepare(partition, recs)
	if err != nil {
		return nil, err
	}
	if err := q.enter(); err != nil {
		return nil, err
	}
	defer q.leave()
	var lo int64
	err = q.w.doPut(ctx, func(t *wtx) error {
		var err error
		lo, err = t.putRows(p)
		return err
	})
	if err != nil {
		return nil, err
	}
	q.metrics.puts.Add(int64(len(recs)))
	out := make([]int64, len(recs))
	for i := range out {
		out[i] = lo + int64(i)
	}
	return out, nil
}

// checkSchema evolves the schema for the prepared kinds and saves it when it changed.
// It refuses, with *SchemaError, to let a float64 column hold an integer beyond ±2^53
// (bigInts, field → such a value), which it would round: neither a put of such an
// integer into a float64 column nor the widening of an int64 column that holds one.
func (t *wtx) checkSchema(kinds []fieldValue, bigInts map[string]int64) error {
	s, err := t.loadSchema()
	if err != nil {
		return err
	}
	ns, changed, err := evolve(*s, []normRecord{kinds})
	if err != nil {
		return err
	}
	final := *s
	if changed {
		final = ns
	}
	for field, v := range bigInts {
		if k, _ := final.Kind(field); k == KindFloat64 || k == KindFloat64List {
			have, ok := s.Kind(field)
			if !ok {
				have = intKindOf(k)
			}
			return &SchemaError{Field: field, Have: have, Got: otherKind(have),
				Reason: fmt.Sprintf("the integer %d is beyond ±2^53 and a float64 column would round it (allowed: integers within ±2^53, or int64 only in this field)", v)}
		}
	}
	if changed {
		for _, f := range s.Fields {
			if k, _ := ns.Kind(f.Name); k != f.Kind && (k == KindFloat64 || k == KindFloat64List) {
				var one int
				err := t.queryRow(`SELECT 1 FROM big_int_fields WHERE field = ?`, f.Name).Scan(&one)
				if err == nil {
					return &SchemaError{Field: f.Name, Have: f.Kind, Got: k,
						Reason: "the field holds integers beyond ±2^53, which a float64 column would round (allowed: integers only in this field)"}
				}
				if !isNoRows(err) {
					return fmt.Errorf("read big-integer fields: %w", err)
				}
			}
		}
	}
	for field := range bigInts {
		if _, err := t.exec(`INSERT OR IGNORE INTO big_int_fields(field) VALUES (?)`, field); err != nil {
			return fmt.Errorf("record big-integer field: %w", err)
		}
	}
	if changed {
		return t.saveSchema(*s, ns)
	}
	return nil
}

// putRows is the write op of a put: it checks the schema, allocates indexes, stores the
// tail entry and extends the partition's segments. It returns the first index.
func (t *wtx) putRows(p *putPrepared) (int64, error) {
	if err := t.checkSchema(p.kinds, p.bigInts); err != nil {
		return 0, err
	}
	if err := t.loadPuts(); err != nil {
		return 0, err
	}
	lo := t.ps.next
	n := int64(len(p.recs))
	ps := &t.ps
	if ps.pendN > 0 && (ps.pendPart != p.partition || ps.pendLo+ps.pendN != lo || len(ps.pendData)+len(p.data) > 4<<20) {
		if err := t.writeTail(); err != nil {
			return 0, err
		}
	}
	if ps.pendN == 0 {
		ps.pendPart, ps.pendLo = p.partition, lo
		ps.pendData = append(make([]byte, 0, len(p.data)), p.data...)
	} else {
		// Appending writes only past the saved length, so a savepoint's copy of ps
		// keeps seeing its own bytes.
		ps.pendData = append(ps.pendData, p.data...)
	}
	ps.pendN += n
	at := lo
	for _, run := range p.runs {
		if err := t.addSegment(p.partition, run.fields, at, at+int64(run.n)); err != nil {
			return 0, err
		}
		at += int64(run.n)
	}
	t.ps.next = lo + n
	t.ps.tailRows += n
	t.ps.tailAdd += n
	t.rows = true
	if fr := t.q.cfg.FlushRows; fr > 0 && t.ps.tailRows >= int64(fr) {
		t.kick = true
	}
	return lo, nil
}

// fieldsetID returns the id of a field set, creating it.
func (t *wtx) fieldsetID(fields string) (int64, error) {
	if id, ok := t.fsIDs[fields]; ok {
		return id, nil
	}
	t.q.schemaMu.Lock()
	id, ok := t.q.fieldsetIDs[fields]
	t.q.schemaMu.Unlock()
	if ok {
		return id, nil
	}
	err := t.queryRow(`SELECT id FROM fieldsets WHERE fields = ?`, fields).Scan(&id)
	if isNoRows(err) {
		res, err := t.exec(`INSERT INTO fieldsets(fields) VALUES (?)`, fields)
		if err != nil {
			return 0, fmt.Errorf("insert field set: %w", err)
		}
		if id, err = res.LastInsertId(); err != nil {
			return 0, err
		}
	} else if err != nil {
		return 0, fmt.Errorf("read field set: %w", err)
	}
	if t.fsIDs == nil {
		t.fsIDs = map[string]int64{}
	}
	t.fsIDs[fields] = id
	q := t.q
	t.after = append(t.after, func() {
		q.schemaMu.Lock()
		defer q.schemaMu.Unlock()
		if q.fieldsetIDs == nil {
			q.fieldsetIDs = map[string]int64{}
		}
		q.fieldsetIDs[fields] = id
	})
	return id, nil
}

// addSegment records that indexes [lo, hi) belong to partition with the given field
// set, extending the last segment when it is adjacent and alike. It works on the
// transaction's putState (loadPuts must have run).
func (t *wtx) addSegment(partition, fields string, lo, hi int64) error {
	fs, err := t.fieldsetID(fields)
	if err != nil {
		return err
	}
	ps := &t.ps
	if ps.segOK && ps.seg.hi == lo && ps.seg.partition == partition && ps.seg.fieldset == fs {
		ps.seg.hi = hi
		ps.segDirty = true
		return nil
	}
	if err := t.writeSegment(); err != nil {
		return err
	}
	ps.seg = segment{lo: lo, hi: hi, partition: partition, fieldset: fs}
	ps.segOK, ps.segDirty, ps.segNew = true, true, true
	return nil
}

// PutFields adds fields to existing samples of partition: fields[i] is merged into
// the sample at indexes[i] (new fields are added, fields it already has are
// overwritten; the latest put of a (sample, field) wins; an index given twice is merged
// in order, so its later record wins). Each (sample, field) put becomes produced, so readers waiting for those fields see the sample. Durable when it
// returns; atomic. Errors: *NotFoundError for an index that does not exist in partition
// (or was cleared), *SchemaError, *InvalidError, ErrClosed.
func (q *Queue) PutFields(ctx context.Context, partition string, indexes []int64, fields []Record) error {
	if err := checkName("partition", partition); err != nil {
		return err
	}
	if len(indexes) != len(fields) {
		return &InvalidError{Field: "fields", Value: len(fields), Rule: fmt.Sprintf("one record per index (%d)", len(indexes))}
	}
	if len(indexes) == 0 {
		return nil
	}
	indexes, fields = mergeDuplicateIndexes(indexes, fields)
	p, err := prepare(partition, fields)
	if err != nil {
		return err
	}
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave()
	err = q.w.do(ctx, func(t *wtx) error { return t.putFields(p, indexes) })
	if err != nil {
		return err
	}
	q.metrics.puts.Add(int64(len(fields)))
	return nil
}

// mergeDuplicateIndexes merges the records of an index given more than once, in order
// (a later non-nil value of a field replaces an earlier one), so that every index
// appears once: reads resolve updates of one (sample, field) by tail sequence, which
// records of one call share. Without duplicates it returns its arguments.
func mergeDuplicateIndexes(indexes []int64, fields []Record) ([]int64, []Record) {
	pos := make(map[int64]int, len(indexes))
	for _, x := range indexes {
		pos[x] = 0
	}
	if len(pos) == len(indexes) {
		return indexes, fields
	}
	clear(pos)
	outIdx := make([]int64, 0, len(pos))
	outRec := make([]Record, 0, len(pos))
	for i, x := range indexes {
		j, ok := pos[x]
		if !ok {
			j = len(outIdx)
			pos[x] = j
			outIdx = append(outIdx, x)
			outRec = append(outRec, Record{})
		}
		for k, v := range fields[i] {
			if v != nil {
				outRec[j][k] = v
			}
		}
	}
	return outIdx, outRec
}

func (t *wtx) putFields(p *putPrepared, indexes []int64) error {
	if err := t.syncPuts(); err != nil { // segments must be in the table for partitionSet
		return err
	}
	set := setOf(indexes)
	ok, err := t.partitionSet(p.partition, set)
	if err != nil {
		return err
	}
	if missing := set.minus(ok); len(missing) > 0 {
		return &NotFoundError{Partition: p.partition, Indexes: missing.first(16)}
	}
	if err := t.checkSchema(p.kinds, p.bigInts); err != nil {
		return err
	}
	minI, maxI := set[0].lo, set[len(set)-1].hi-1
	if _, err := t.exec(`INSERT INTO tail(kind, partition, lo, n, min_idx, max_idx, idx, data) VALUES (1, ?, 0, ?, ?, ?, ?, ?)`,
		p.partition, len(indexes), minI, maxI, encodeIndexes(indexes), p.data); err != nil {
		return fmt.Errorf("insert tail: %w", err)
	}
	// Production status: per field, the set of samples that received it.
	byField := map[string][]int64{}
	for i, rec := range p.recs {
		for _, fv := range rec {
			byField[fv.name] = append(byField[fv.name], indexes[i])
		}
	}
	for f, idx := range byField {
		if err := t.addProduced(f, setOf(idx)); err != nil {
			return err
		}
	}
	if err := metaAdd(t.ctx, t, "tail_rows", int64(len(indexes))); err != nil {
		return err
	}
	t.rows = true
	return nil
}

// partitionSet returns the part of s that exists in partition and is not cleared.
func (t *wtx) partitionSet(partition string, s idxset) (idxset, error) {
	segs, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM segments WHERE partition = ? AND hi > ? AND lo <= ? ORDER BY lo`,
		partition, s[0].lo, s[len(s)-1].hi-1)
	if err != nil {
		return nil, err
	}
	tomb, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM tombstones WHERE hi > ? AND lo <= ? ORDER BY lo`, s[0].lo, s[len(s)-1].hi-1)
	if err != nil {
		return nil, err
	}
	return s.intersect(segs).minus(tomb), nil
}

// addProduced merges s into the produced spans of field.
func (t *wtx) addProduced(field string, s idxset) error {
	return mergeSpans(t, s, `SELECT lo, hi FROM produced WHERE field = ? AND hi >= ? AND lo <= ?`,
		`DELETE FROM produced WHERE field = ? AND lo = ?`, `INSERT INTO produced(field, lo, hi) VALUES (?, ?, ?)`, field)
}

// mergeSpans unions s into a table of spans keyed by key args: overlapping or adjacent
// stored spans are deleted and re-inserted merged.
func mergeSpans(t *wtx, s idxset, sel, del, ins string, keys ...any) error {
	for _, sp := range s {
		args := append(append([]any{}, keys...), sp.lo, sp.hi)
		old, err := loadSpans(t.ctx, t, sel, args...)
		if err != nil {
			return err
		}
		merged := idxset{sp}.union(old)
		for _, o := range old {
			if _, err := t.exec(del, append(append([]any{}, keys...), o.lo)...); err != nil {
				return fmt.Errorf("merge spans: %w", err)
			}
		}
		for _, m := range merged {
			if _, err := t.exec(ins, append(append([]any{}, keys...), m.lo, m.hi)...); err != nil {
				return fmt.Errorf("merge spans: %w", err)
			}
		}
	}
	return nil
}

func loadSpans(ctx context.Context, q queryer, query string, args ...any) (idxset, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read spans: %w", err)
	}
	defer rows.Close()
	var out []span
	for rows.Next() {
		var sp span
		if err := rows.Scan(&sp.lo, &sp.hi); err != nil {
			return nil, fmt.Errorf("read spans: %w", err)
		}
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read spans: %w", err)
	}
	return spansOf(out), nil
}

func (q *Queue) setSchema(s *Schema, ver int64) {
	q.schemaMu.Lock()
	defer q.schemaMu.Unlock()
	if q.schema == nil || ver >= q.schemaVer {
		q.schema, q.schemaVer = s, ver
	}
}

// Schema returns the queue's current schema (as last seen by this process).
func (q *Queue) Schema(ctx context.Context) (Schema, error) {
	if err := q.enter(); err != nil {
		return Schema{}, err
	}
	defer q.leave()
	s, err := loadSchema(ctx, q.rdb)
	if err != nil {
		return Schema{}, err
	}
	return s, nil
}

// Len returns the number of readable records: every record put (in every partition)
// minus those cleared through KV.Clear. Global indexes run from 0 to NextIndex()-1.
func (q *Queue) Len(ctx context.Context) (int64, error) {
	if err := q.enter(); err != nil {
		return 0, err
	}
	defer q.leave()
	next, err := metaGet(ctx, q.rdb, "next_index")
	if err != nil {
		return 0, err
	}
	var cleared sql.NullInt64
	if err := q.rdb.QueryRowContext(ctx, `SELECT SUM(hi - lo) FROM tombstones`).Scan(&cleared); err != nil {
		return 0, fmt.Errorf("count tombstones: %w", err)
	}
	return next - cleared.Int64, nil
}

// NextIndex returns the global index the next put will get (the number of indexes
// ever allocated).
func (q *Queue) NextIndex(ctx context.Context) (int64, error) {
	if err := q.enter(); err != nil {
		return 0, err
	}
	defer q.leave()
	return metaGet(ctx, q.rdb, "next_index")
}

// hub wakes waiters after commits: wait returns a channel closed by the next broadcast.
type hub struct {
	mu sync.Mutex
	ch chan struct{}
}

func (h *hub) init() { h.ch = make(chan struct{}) }

func (h *hub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ch
}

func (h *hub) broadcast() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.ch)
	h.ch = make(chan struct{})
}

// watchLoop notices commits of other processes (PRAGMA data_version changes) and wakes
// waiters.
func (q *Queue) watchLoop(ctx context.Context) {
	conn, err := q.rdb.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	var last int64 = -1
	t := time.NewTicker(q.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var v int64
		if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			continue
		}
		if last >= 0 && v != last {
			q.hub.broadcast()
		}
		last = v
	}
}

// sortedUnique sorts idx and drops duplicates, in place.
func sortedUnique(idx []int64) []int64 {
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	out := idx[:0]
	for i, v := range idx {
		if i == 0 || v != idx[i-1] {
			out = append(out, v)
		}
	}
	return out
}
