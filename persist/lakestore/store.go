package lakestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"gocloud.dev/blob"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/internal/gate"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// notifyChannel is the PostgreSQL channel on which commits announce the queue they
// changed, so that waiting readers on every server wake.
const notifyChannel = "lakeshore_lakestore"

// changesKey is the one key of the store's hub: every commit may change what a read
// returns, so Changes waits for any.
const changesKey = "changes"

// Store is the distributed persist.Store: the catalog in PostgreSQL, the data as
// immutable Parquet fragments in a gocloud.dev/blob bucket, and puts durable in the
// catalog's tail table until a background flush moves them into fragments. Any
// number of Stores, in any processes on any machines, may open one queue of one
// catalog at once. Safe for concurrent use. A call whose catalog connection is lost
// (PostgreSQL restarted, the session terminated, the network reset) answers an error
// matching plane.ErrUnavailable, code unavailable (see failure).
type Store struct {
	name   string // the queue's key in the catalog and the bucket (catalogKey)
	queue  string // the queue's name, as given to Open
	cfg    Config
	pool   *pgxpool.Pool
	bucket *blob.Bucket
	cache  *lru.Cache[string, *fragment]
	hub    *planekit.Hub // waiters of Changes, under changesKey

	calls *gate.Gate // calls in flight, shut by Close
	stop  context.CancelFunc
	bg    sync.WaitGroup
	kick  chan struct{}

	unflushed atomic.Int64 // rows put by this store since its last flush
	flushMu   sync.Mutex   // one flush of this store at a time

	puts, gets, flushes, orphans atomic.Int64
	flushFailures                atomic.Int64 // flushes that failed, the rows left in the tail
	lastFlush, lastFlushDur      atomic.Int64 // unix nanoseconds, nanoseconds
}

var _ persist.Store = (*Store)(nil)

// Open opens (creating it if needed, unless Config.Existing) queue name in the catalog and bucket of cfg:
// it migrates the catalog, starts listening for other servers' commits, the
// background flusher and the sweeper. name must be 1–128 bytes of [A-Za-z0-9._-], not
// starting with . _ or -. Errors: *persist.InvalidError for a bad name or Config,
// ErrSchemaTooNew, bucket errors, and the catalog's connection errors, which name what
// failed as pgplane's do (nothing listens or the host does not resolve: plane.ErrUnavailable;
// the user or password refused: plane.ErrUnauthorized; the database missing), never
// showing the password.
func Open(ctx context.Context, name string, cfg *Config) (*Store, error) {
	if err := persist.CheckName("queue name", name); err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	pc, err := pgdb.ParseConfig("Config.Catalog", c.Catalog)
	if err != nil {
		return nil, err
	}
	pc.ConnConfig.RuntimeParams["search_path"] = catalogSchema
	pool, err := pgdb.Connect(ctx, pc)
	if err != nil {
		return nil, &connectError{err: err}
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, catalogFailure(ctx, pc.ConnConfig, err)
	}
	bucket, err := blob.OpenBucket(ctx, c.Blob)
	if err != nil {
		pool.Close()
		return nil, &redactedError{msg: "lakestore: " + openBucketMessage(err, c.Blob), err: err}
	}
	key := catalogKey(c.Namespace, name)
	if c.Existing {
		var ok bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM queues WHERE queue = $1)`, key).Scan(&ok); err != nil || !ok {
			pool.Close()
			bucket.Close()
			if err != nil {
				return nil, catalogFailure(ctx, pc.ConnConfig, fmt.Errorf("lakestore: look the queue up: %w", err))
			}
			return nil, &persist.NotFoundError{Queue: name}
		}
	} else if _, err := pool.Exec(ctx, `INSERT INTO queues(queue) VALUES ($1) ON CONFLICT DO NOTHING`, key); err != nil {
		pool.Close()
		bucket.Close()
		return nil, catalogFailure(ctx, pc.ConnConfig, fmt.Errorf("lakestore: create queue: %w", err))
	}
	cache, _ := lru.New[string, *fragment](c.CacheFragments)
	s := &Store{name: key, queue: name, cfg: c, pool: pool, bucket: bucket, cache: cache, calls: gate.New(), kick: make(chan struct{}, 1)}
	s.hub = planekit.NewHub()
	bgctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.bg.Add(3)
	go func() { defer s.bg.Done(); s.listen(bgctx) }()
	go func() { defer s.bg.Done(); s.flushLoop(bgctx) }()
	go func() { defer s.bg.Done(); s.sweepLoop(bgctx) }()
	return s, nil
}

// Name implements persist.Store.
func (s *Store) Name() string { return s.queue }

// Close stops the background work, waits for calls in flight, flushes the tail into
// fragments (rows left in the tail stay durable there and are flushed by the next
// store that opens the queue), and releases the catalog pool and the bucket. Calls
// after it fail with ErrClosed. Idempotent; a second call returns nil.
func (s *Store) Close(ctx context.Context) error {
	if !s.calls.Shut() {
		return nil
	}
	s.hub.NotifyAll() // waiters see closing at once
	s.calls.Wait()
	s.stop()
	s.bg.Wait()
	err := s.flushAll(ctx)
	if err != nil {
		err = fmt.Errorf("lakestore: final flush (the rows stay durable in the tail): %w", err)
	}
	s.pool.Close()
	if cerr := s.bucket.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("lakestore: close bucket: %w", cerr)
	}
	return err
}

// Changes implements persist.Store.
func (s *Store) Changes() (<-chan struct{}, func()) {
	ch, release := s.hub.Watch(changesKey)
	select {
	case <-s.calls.Closing(): // checked after Watch: Close's NotifyAll follows calls.Shut
		release()
		return s.calls.Closing(), func() {}
	default:
		return ch, release
	}
}

// listen wakes waiters at every commit of this queue by any server (LISTEN, pgdb.Listen),
// and every PollInterval in case a notification was missed (a reconnect).
func (s *Store) listen(ctx context.Context) {
	pgdb.Listen(ctx, s.pool.Config().ConnConfig, notifyChannel, pgdb.Listener{
		Up: func(up bool) {
			if up {
				s.hub.NotifyAll() // anything committed while not listening
			}
		},
		Notified: func(payload string) {
			if payload == s.name {
				s.hub.NotifyAll()
			}
		},
		Quiet: s.hub.NotifyAll,
		Every: s.cfg.PollInterval,
		Dropped: func(err error) {
			s.cfg.Logger.Warn("lakestore: listening for changes", "queue", s.name, "err", err)
		},
		Delay: func() time.Duration { return s.cfg.PollInterval },
	})
}

// committed wakes this process's waiters at once after a commit (other servers wake
// through the notification the transaction sent).
func (s *Store) committed() { s.hub.NotifyAll() }

// notify bumps the queue's change version and sends the change notification inside tx
// (delivered at commit), in one statement. Transactions that already bumped the version
// (saveQueue, flushes) call announce instead. The queue's row is locked from here to the
// commit, so callers that did not lock it call notify last.
func (s *Store) notify(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `WITH v AS (UPDATE queues SET change_version = change_version + 1 WHERE queue = $2 RETURNING queue)
		SELECT pg_notify($1, queue) FROM v`, notifyChannel, s.name); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// announceSQL sends the change notification of queue $2 on channel $1 (delivered at commit).
const announceSQL = `SELECT pg_notify($1, $2)`

// announce sends the change notification inside tx (delivered at commit).
func (s *Store) announce(ctx context.Context, tx querier) error {
	if _, err := tx.Exec(ctx, announceSQL, notifyChannel, s.name); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// ChangeVersion implements persist.ChangeVersioner: the queue's change_version in the
// catalog, bumped in every transaction that notifies, so every server reads the same
// version for the same commits.
func (s *Store) ChangeVersion(ctx context.Context) (int64, error) {
	if err := s.calls.Enter(); err != nil {
		return 0, err
	}
	defer s.calls.Leave()
	var v int64
	if err := s.pool.QueryRow(ctx, `SELECT change_version FROM queues WHERE queue = $1`, s.name).Scan(&v); err != nil {
		return 0, s.failure(ctx, fmt.Errorf("lakestore: read the change version: %w", err))
	}
	return v, nil
}

// queueState is the queue's row: its counters and schema.
type queueState struct {
	next, nextSeq        int64
	schemaVersion        int64
	schema               persist.Schema
	bigInts              []string
	manifestVersion      int64
	dirty, schemaChanged bool
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

type schemaField struct {
	Name string       `json:"name"`
	Kind persist.Kind `json:"kind"`
}

// loadQueue reads the queue's row, locking it (FOR UPDATE) when lock is set: puts and
// everything else that allocates indexes or sequences serialize on it, per queue.
func (s *Store) loadQueue(ctx context.Context, q querier, lock bool) (*queueState, error) {
	sql := queueRowSQL
	if lock {
		sql += ` FOR UPDATE`
	}
	return s.scanQueue(q.QueryRow(ctx, sql, s.name))
}

// queueRowSQL reads the row of queue $1 for scanQueue.
const queueRowSQL = `SELECT next_index, next_seq, schema_version, schema, big_int_fields, manifest_version FROM queues WHERE queue = $1`

// scanQueue scans the result of queueRowSQL.
func (s *Store) scanQueue(row pgx.Row) (*queueState, error) {
	st := &queueState{}
	var sj []byte
	if err := row.Scan(&st.next, &st.nextSeq, &st.schemaVersion, &sj, &st.bigInts, &st.manifestVersion); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%w: queue %q is missing from the catalog", persist.ErrCorrupt, s.name)
		}
		return nil, fmt.Errorf("read queue: %w", err)
	}
	var err error
	st.schema, err = decodeSchema(sj)
	return st, err
}

// decodeSchema decodes the schema column of a queue row.
func decodeSchema(sj []byte) (persist.Schema, error) {
	var fs []schemaField
	if err := json.Unmarshal(sj, &fs); err != nil {
		return persist.Schema{}, fmt.Errorf("%w: queue schema: %v", persist.ErrCorrupt, err)
	}
	var sc persist.Schema
	for _, f := range fs {
		sc.Fields = append(sc.Fields, persist.Field{Name: f.Name, Kind: f.Kind})
	}
	return sc, nil
}

// saveQueue writes back a locked queue row and notifies.
func (s *Store) saveQueue(ctx context.Context, tx pgx.Tx, st *queueState) error {
	fs := make([]schemaField, len(st.schema.Fields))
	for i, f := range st.schema.Fields {
		fs[i] = schemaField{Name: f.Name, Kind: f.Kind}
	}
	sj, _ := json.Marshal(fs)
	if st.schemaChanged {
		st.schemaVersion++
	}
	if _, err := tx.Exec(ctx, `UPDATE queues SET next_index = $2, next_seq = $3, schema_version = $4, schema = $5, big_int_fields = $6,
		change_version = change_version + 1 WHERE queue = $1`, s.name, st.next, st.nextSeq, st.schemaVersion, sj, st.bigInts); err != nil {
		return fmt.Errorf("update queue: %w", err)
	}
	return s.announce(ctx, tx)
}

// evolve checks p against the queue's schema and records the result in st.
func (st *queueState) evolve(p *filestore.PreparedRecords) error {
	ns, changed, bigs, err := p.EvolveSchema(st.schema, func(f string) (bool, error) { return slices.Contains(st.bigInts, f), nil })
	if err != nil {
		return err
	}
	if changed {
		st.schema = ns
		st.schemaChanged = true
	}
	for _, b := range bigs {
		if !slices.Contains(st.bigInts, b) {
			st.bigInts = append(st.bigInts, b)
		}
	}
	st.dirty = true
	return nil
}

// viewQueue runs fn, between calls.Enter and calls.Leave, in one read-only catalog snapshot, with the
// queue's row as of that snapshot (loadQueue).
func (s *Store) viewQueue(ctx context.Context, fn func(tx pgx.Tx, st *queueState) error) error {
	if err := s.calls.Enter(); err != nil {
		return err
	}
	defer s.calls.Leave()
	return s.view(ctx, func(tx pgx.Tx) error {
		st, err := s.loadQueue(ctx, tx, false)
		if err != nil {
			return err
		}
		return fn(tx, st)
	})
}

// writeLocked runs fn, between calls.Enter and calls.Leave, in a catalog write transaction that holds
// the queue row's lock (loadQueue) first, as every change of the queue's samples does.
func (s *Store) writeLocked(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if err := s.calls.Enter(); err != nil {
		return err
	}
	defer s.calls.Leave()
	return s.write(ctx, func(tx pgx.Tx) error {
		if _, err := s.loadQueue(ctx, tx, true); err != nil {
			return err
		}
		return fn(tx)
	})
}

// write runs fn in a read-committed transaction and commits it; fn's error rolls
// everything back. After a commit it wakes this process's waiters.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.failure(ctx, fmt.Errorf("lakestore: begin: %w", err))
	}
	defer tx.Rollback(context.Background())
	if err := fn(tx); err != nil {
		return s.failureOn(ctx, tx.Conn(), err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.failure(ctx, fmt.Errorf("lakestore: commit: %w", err))
	}
	s.committed()
	return nil
}

// view runs fn in a read-only repeatable-read transaction: one consistent snapshot of
// the catalog (counters, schema, tail, fragments, tombstones).
func (s *Store) view(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return s.failure(ctx, fmt.Errorf("lakestore: begin: %w", err))
	}
	defer tx.Rollback(context.Background())
	if err := fn(tx); err != nil {
		return s.failureOn(ctx, tx.Conn(), err)
	}
	return s.failure(ctx, tx.Commit(ctx))
}

// viewBatch runs the queries queue queues in batch in one read-only repeatable-read
// transaction (one consistent snapshot of the catalog, as view), sent with its BEGIN and
// COMMIT in one round trip; the queries' callbacks run as the results arrive. A failed
// query fails the rest and the error is returned (the transaction rolled back).
func (s *Store) viewBatch(ctx context.Context, queue func(batch *pgx.Batch)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.failure(ctx, fmt.Errorf("lakestore: begin: %w", err))
	}
	defer conn.Release() // a connection left in a transaction is closed, not pooled
	batch := &pgx.Batch{}
	batch.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	queue(batch)
	batch.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		if conn.Conn().IsClosed() {
			return s.failure(ctx, err)
		}
		if conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(context.Background(), `ROLLBACK`)
		}
		return err
	}
	return nil
}

// failure is the error a catalog call made with ctx returns for err (pgdb.Failure, as
// the PostgreSQL plane's): a lost connection to the catalog (PostgreSQL restarted or shut
// down, the session terminated, the network reset) matches plane.ErrUnavailable (code
// unavailable: retry), naming the catalog's host and port, never pgx's message; the
// caller's own deadline or cancel is ctx's error; anything else is err itself. The
// statement or transaction did not commit, or, for a commit whose answer was lost, may
// have: a put with an id (persist.PutOpts.ID) is safe to repeat.
func (s *Store) failure(ctx context.Context, err error) error {
	return catalogFailure(ctx, s.pool.Config().ConnConfig, err)
}

// catalogFailure is failure on a connection to the catalog of cc.
// connectError is the failure to connect to the catalog (of Open and ListQueues), as
// pgdb.Classify names it. The server's Stores report it as unavailable (Stores.Open).
type connectError struct{ err error }

func (e *connectError) Error() string { return "lakestore: connect to the catalog: " + e.err.Error() }

func (e *connectError) Unwrap() error { return e.err }

func catalogFailure(ctx context.Context, cc *pgx.ConnConfig, err error) error {
	f := pgdb.Failure(ctx, cc, err)
	switch {
	case ctx.Err() != nil && f == ctx.Err(): // the caller's own deadline or cancel
		return fmt.Errorf("lakestore: %w", f)
	case errors.Is(f, plane.ErrUnavailable) && !errors.Is(err, plane.ErrUnavailable): // marked here
		return fmt.Errorf("lakestore: catalog: %w", f)
	}
	return f
}

// failureOn is failure for err, the error of a function that ran statements on conn and
// may also have failed otherwise (the object store, the caller's errors): only a closed
// conn makes it a lost connection.
func (s *Store) failureOn(ctx context.Context, conn *pgx.Conn, err error) error {
	if conn.IsClosed() {
		return s.failure(ctx, err)
	}
	return err
}

// loadSpans reads (lo, hi) rows.
func loadSpans(ctx context.Context, q querier, sql string, args ...any) (record.IndexSet, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read spans: %w", err)
	}
	return scanSpans(rows)
}

// scanSpans reads (lo, hi) rows and closes them.
func scanSpans(rows pgx.Rows) (record.IndexSet, error) {
	var out []record.Span
	for rows.Next() {
		var sp record.Span
		if err := rows.Scan(&sp.Lo, &sp.Hi); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read spans: %w", err)
		}
		out = append(out, sp)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read spans: %w", err)
	}
	return record.SpansOf(out), nil
}

// insertSpans inserts s into table with the leading key columns.
func insertSpans(ctx context.Context, tx querier, table string, cols string, s record.IndexSet, keys ...any) error {
	if len(s) == 0 {
		return nil
	}
	sql, args := spansInsert(table, cols, s, keys...)
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("insert %s: %w", table, err)
	}
	return nil
}

// spansInsert is the statement of insertSpans (s not empty).
func spansInsert(table string, cols string, s record.IndexSet, keys ...any) (string, []any) {
	los := make([]int64, len(s))
	his := make([]int64, len(s))
	for i, sp := range s {
		los[i], his[i] = sp.Lo, sp.Hi
	}
	ph := ""
	for i := range keys {
		ph += fmt.Sprintf("$%d::text, ", i+3)
	}
	args := append([]any{los, his}, keys...)
	return `INSERT INTO ` + table + `(` + cols + `, lo, hi) SELECT ` + ph + `l, h FROM unnest($1::bigint[], $2::bigint[]) AS t(l, h)`, args
}

// tombstonesSQL reads the cleared spans of queue $1.
const tombstonesSQL = `SELECT lo, hi FROM tombstones WHERE queue = $1`

// tombstones reads the queue's cleared spans.
func (s *Store) tombstones(ctx context.Context, q querier) (record.IndexSet, error) {
	return loadSpans(ctx, q, tombstonesSQL, s.name)
}

// addTombstones adds s minus what is already cleared (the queue row must be locked).
func (s *Store) addTombstones(ctx context.Context, tx pgx.Tx, set record.IndexSet) error {
	tomb, err := s.tombstones(ctx, tx)
	if err != nil {
		return err
	}
	if err := s.bumpFieldRevision(ctx, tx, ""); err != nil { // Replay's weights forget cleared records
		return err
	}
	return insertSpans(ctx, tx, "tombstones", "queue", set.Minus(tomb), s.name)
}

// segment is a run of indexes of one partition whose own records had the same fields.
type segment struct {
	sp        record.Span
	partition string
	fields    []string
}

// partitionLive returns the segments of partition and its live samples: those of the
// segments less the tombstones (not read for a partition without segments).
func (s *Store) partitionLive(ctx context.Context, q querier, partition string) ([]segment, record.IndexSet, error) {
	segs, err := s.segments(ctx, q, partition, 0, 1<<62)
	if err != nil {
		return nil, nil, err
	}
	part := spansOfSegments(segs)
	if len(part) == 0 {
		return segs, nil, nil
	}
	tomb, err := s.tombstones(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	return segs, part.Minus(tomb), nil
}

func (s *Store) segments(ctx context.Context, q querier, partition string, lo, hi int64) ([]segment, error) {
	sql, args := s.segmentsQuery(partition, lo, hi)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read segments: %w", err)
	}
	return scanSegments(rows)
}

// segmentsQuery is the statement of segments.
func (s *Store) segmentsQuery(partition string, lo, hi int64) (string, []any) {
	sql := `SELECT lo, hi, partition, fields FROM segments WHERE queue = $1 AND hi > $2 AND lo < $3`
	args := []any{s.name, lo, hi}
	if partition != "" {
		sql += ` AND partition = $4`
		args = append(args, partition)
	}
	return sql + ` ORDER BY lo`, args
}

// scanSegments reads the rows of segmentsQuery and closes them.
func scanSegments(rows pgx.Rows) ([]segment, error) {
	defer rows.Close()
	var out []segment
	for rows.Next() {
		var sg segment
		if err := rows.Scan(&sg.sp.Lo, &sg.sp.Hi, &sg.partition, &sg.fields); err != nil {
			return nil, fmt.Errorf("read segments: %w", err)
		}
		out = append(out, sg)
	}
	return out, rows.Err()
}

func spansOfSegments(segs []segment) record.IndexSet {
	sp := make([]record.Span, len(segs))
	for i, sg := range segs {
		sp[i] = sg.sp
	}
	return record.SpansOf(sp)
}

// partitionSet returns the part of set that exists in partition and is not cleared.
func (s *Store) partitionSet(ctx context.Context, q querier, partition string, set record.IndexSet) (record.IndexSet, error) {
	if len(set) == 0 {
		return nil, nil
	}
	segs, err := s.segments(ctx, q, partition, set[0].Lo, set[len(set)-1].Hi)
	if err != nil {
		return nil, err
	}
	tomb, err := s.tombstones(ctx, q)
	if err != nil {
		return nil, err
	}
	return set.Intersect(spansOfSegments(segs)).Minus(tomb), nil
}

// requireInPartition checks that every index of set exists in partition and is not
// cleared. Errors: *NotFoundError naming the others.
func (s *Store) requireInPartition(ctx context.Context, q querier, partition string, set record.IndexSet) error {
	in, err := s.partitionSet(ctx, q, partition, set)
	if err != nil {
		return err
	}
	return record.IndexesNotFound(partition, set.Minus(in))
}
