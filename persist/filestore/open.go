package filestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/gate"
)

// fileQueue is the file store: a queue stored in a directory as Parquet fragments, a
// durable tail and a SQLite catalog (meta.db). It implements Store; Queue, Reader and
// KVView are thin layers over it. All methods are safe for concurrent use; several
// processes may open the same queue at once.
type fileQueue struct {
	name    string
	dir     string
	dataDir string
	cfg     persist.Config
	log     *slog.Logger

	db        *sqlitedb.DB
	wdb, rdb  *sql.DB // db.Write and db.Read
	w         *writer
	owner     *ownerLock
	hub       hub
	cache     *fragCache
	tails     *tailCache
	readCache readCache
	readStmts readStmts // the read pool's prepared statements
	ahead     readAhead // GetBatch's next batch chosen ahead (readahead.go)
	metrics   metrics

	schemaMu      sync.Mutex
	schema        *persist.Schema
	schemaVer     int64
	fieldsetCache map[int64]map[string]bool
	// versions caches records' weight versions for staleness-bounded reads (rl.go).
	versions    versionCache
	fieldsetIDs map[string]int64

	calls *gate.Gate // calls in flight, shut by Close

	flushMu     sync.Mutex // one flush at a time in this process
	flushKick   chan struct{}
	compactMu   sync.Mutex
	compactKick chan struct{}
	retired     retiredSet
	// testHook, when set by a test, is called at named points of flush, compaction
	// ("flush-claimed", "flush-renamed", "compact-claimed", "compact-renamed") and of
	// GetMeta ("getmeta-chosen": a batch chosen on a read snapshot, not yet recorded).
	testHook func(point string)
	fileSeq  atomic.Int64
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

// openFile opens (creating if needed) the queue name in cfg.Dir/name/, recovers from any
// crash of a previous writer (pending fragments of dead processes are rolled back and
// orphan files deleted), and starts the writer, the background flusher, the compactor
// and the change watcher; Close stops them. name must be 1–128 bytes of
// [A-Za-z0-9._-], not starting with . _ or -. Errors: *InvalidError for a bad name or Config, and I/O or SQLite
// errors.
func openFile(ctx context.Context, name string, cfg *persist.Config) (*fileQueue, error) {
	if cfg == nil {
		cfg = &persist.Config{}
	}
	if err := persist.CheckName("queue name", name); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults()
	dir := filepath.Join(c.Dir, name)
	if c.Existing {
		if _, err := os.Stat(filepath.Join(dir, "meta.db")); errors.Is(err, os.ErrNotExist) {
			return nil, &persist.NotFoundError{Queue: name}
		}
	}
	q := &fileQueue{name: name, dir: dir, dataDir: filepath.Join(dir, "data"), cfg: c, log: c.Logger,
		calls: gate.New(), flushKick: make(chan struct{}, 1), compactKick: make(chan struct{}, 1)}
	q.hub.init()
	for _, d := range []string{q.dataDir, filepath.Join(dir, "owners")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create queue directory: %w", err)
		}
	}
	var err error
	if q.db, err = openDB(ctx, filepath.Join(dir, "meta.db"), c.Durability, c.BusyTimeout); err != nil {
		return nil, err
	}
	q.wdb, q.rdb = q.db.Write, q.db.Read
	if q.owner, err = acquireOwner(dir); err != nil {
		q.db.Close()
		return nil, err
	}
	if q.w, err = startWriter(q, q.wdb); err != nil {
		q.owner.release(dir)
		q.db.Close()
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
	if c.CompactFragments > 0 {
		q.bg.Go(func() { q.compactLoop(bgCtx) })
	}
	return q, nil
}

// Name returns the queue's name.
func (q *fileQueue) Name() string { return q.name }

// Dir returns the queue's directory, {Config.Dir}/{name}.
func (q *fileQueue) Dir() string { return q.dir }

// Close flushes every row put so far into a fragment, stops the background goroutines
// and releases the files. Calls in flight finish first; waits (Stream, GetMeta in wait
// mode) end with ErrClosed. Rows are durable before Close (every put that returned is in
// meta.db), so even a Close that fails or is cut short by ctx loses nothing; the next
// Open sees them. Close is idempotent: later calls return nil.
func (q *fileQueue) Close(ctx context.Context) error {
	if !q.calls.Shut() {
		return nil
	}
	q.hub.broadcast() // waiters on Changes see the close
	q.calls.Wait()
	q.dropReadAhead()
	q.bgCancel()
	q.bg.Wait()
	err := q.flush(ctx)
	q.shutdown()
	return err
}

func (q *fileQueue) hook(point string) {
	if q.testHook != nil {
		q.testHook(point)
	}
}

func (q *fileQueue) shutdown() {
	q.w.close()
	q.cache.close()
	q.readStmts.close()
	q.owner.release(q.dir)
	q.db.Close()
}

func (q *fileQueue) setSchema(s *persist.Schema, ver int64) {
	q.schemaMu.Lock()
	defer q.schemaMu.Unlock()
	if q.schema == nil || ver >= q.schemaVer {
		q.schema, q.schemaVer = s, ver
	}
}

// Schema returns the queue's current schema (as last seen by this process).
func (q *fileQueue) Schema(ctx context.Context) (persist.Schema, error) {
	if err := q.calls.Enter(); err != nil {
		return persist.Schema{}, err
	}
	defer q.calls.Leave()
	s, err := loadSchema(ctx, q.rdb)
	if err != nil {
		return persist.Schema{}, err
	}
	return s, nil
}

// Len returns the number of readable records: every record put (in every partition)
// minus those cleared through KV.Clear. Global indexes run from 0 to NextIndex()-1.
func (q *fileQueue) Len(ctx context.Context) (int64, error) {
	if err := q.calls.Enter(); err != nil {
		return 0, err
	}
	defer q.calls.Leave()
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
func (q *fileQueue) NextIndex(ctx context.Context) (int64, error) {
	if err := q.calls.Enter(); err != nil {
		return 0, err
	}
	defer q.calls.Leave()
	return metaGet(ctx, q.rdb, "next_index")
}
