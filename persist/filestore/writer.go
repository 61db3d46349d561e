package filestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// Every write of this process to meta.db (puts, flush manifest changes, consumption, KV,
// compaction) is an op handed to one sqlitedb.Writer, which owns the only write
// connection: it drains the ops waiting into one BEGIN IMMEDIATE transaction, runs each
// op (but a plain put) inside its own savepoint (so a failing op — a schema conflict —
// undoes only itself, and no op runs twice), commits once, then answers every caller.
// This turns one fsync into the durability of many operations (group commit). wtx is the
// writer's per-transaction state.

// maxGroupOps bounds how many ops share one transaction.
const maxGroupOps = 256

// wtx is the state an op sees: the write connection inside an open transaction.
type wtx struct {
	ctx    context.Context
	conn   *sql.Conn // the writer's connection; nil in a read snapshot
	rtx    *readTx   // a read snapshot's transaction (readSnapshot); nil in the writer
	q      *fileQueue
	stmts  map[string]*sql.Stmt
	schema *persist.Schema     // loaded lazily once per transaction
	rows   bool                // some op added rows: wake waiters after commit
	parts  map[string]struct{} // partitions whose samples changed: wake their GetMeta waiters
	ps     putState
	fsIDs  map[string]int64 // field sets created or read in this transaction
	kick   bool             // the tail passed FlushRows: start a background flush after commit
	after  []func()         // run after commit
	ops    int64            // ops run in this transaction (Stats.CommittedOps)
}

// changed records that this transaction changed the samples of partition (their
// production, consumption or clearing): its waiters wake after commit.
func (t *wtx) changed(partition string) {
	t.rows = true
	if t.parts == nil {
		t.parts = map[string]struct{}{}
	}
	t.parts[partition] = struct{}{}
}

// exec runs a (cached, prepared) statement.
func (t *wtx) exec(query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

func (t *wtx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

func (t *wtx) queryRow(query string, args ...any) *sql.Row {
	st, err := t.stmt(query)
	if err != nil {
		if t.rtx != nil {
			return t.rtx.tx.QueryRowContext(t.ctx, query, args...)
		}
		return t.conn.QueryRowContext(t.ctx, query, args...)
	}
	return st.QueryRowContext(t.ctx, args...)
}

func (t *wtx) stmt(query string) (*sql.Stmt, error) {
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	var st *sql.Stmt
	var err error
	if t.rtx != nil {
		if st = t.rtx.stmt(t.ctx, query); st == nil {
			st, err = t.rtx.tx.PrepareContext(t.ctx, query)
		}
	} else {
		st, err = t.conn.PrepareContext(t.ctx, query)
	}
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	t.stmts[query] = st
	return st, nil
}

// ExecContext, QueryContext and QueryRowContext make *wtx a queryer.
func (t *wtx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	return t.exec(query, args...)
}
func (t *wtx) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.query(query, args...)
}
func (t *wtx) QueryRowContext(_ context.Context, query string, args ...any) *sql.Row {
	return t.queryRow(query, args...)
}

// loadSchema returns the queue schema as of this transaction, using the Queue's cache
// when schema_version has not moved.
func (t *wtx) loadSchema() (*persist.Schema, error) {
	if t.schema != nil {
		return t.schema, nil
	}
	ver, err := metaGet(t.ctx, t, "schema_version")
	if err != nil {
		return nil, err
	}
	t.q.schemaMu.Lock()
	cached, cachedVer := t.q.schema, t.q.schemaVer
	t.q.schemaMu.Unlock()
	if cached != nil && cachedVer == ver {
		t.schema = cached
		return cached, nil
	}
	s, err := loadSchema(t.ctx, t)
	if err != nil {
		return nil, err
	}
	t.q.setSchema(&s, ver)
	t.schema = &s
	return &s, nil
}

// saveSchema stores an evolved schema in this transaction.
func (t *wtx) saveSchema(old, s persist.Schema) error {
	for i, f := range s.Fields {
		if i < len(old.Fields) {
			if old.Fields[i].Kind == f.Kind {
				continue
			}
			if _, err := t.exec(`UPDATE fields SET kind = ? WHERE name = ?`, string(f.Kind), f.Name); err != nil {
				return fmt.Errorf("save schema: %w", err)
			}
			continue
		}
		if _, err := t.exec(`INSERT INTO fields(pos, name, kind) VALUES (?, ?, ?)`, i, f.Name, string(f.Kind)); err != nil {
			return fmt.Errorf("save schema: %w", err)
		}
	}
	if err := metaAdd(t.ctx, t, "schema_version", 1); err != nil {
		return err
	}
	ver, err := metaGet(t.ctx, t, "schema_version")
	if err != nil {
		return err
	}
	t.schema = &s
	// The cache is updated after commit; a rollback must not leave it ahead.
	t.after = append(t.after, func() { t.q.setSchema(&s, ver) })
	return nil
}

// writer is the file store's handle on its sqlitedb.Writer.
type writer struct {
	w    *sqlitedb.Writer[*wtx]
	meta string // the path of the queue's meta.db, for the disk-full error
}

// startWriter takes a connection of db for the writer and starts it.
func startWriter(q *fileQueue, db *sql.DB) (*writer, error) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("writer connection: %w", err)
	}
	stmts := map[string]*sql.Stmt{} // the writer's goroutine only
	schema, _ := fs.Sub(migrations, "migrations")
	w, err := sqlitedb.NewWriter(ctx, sqlitedb.WriterConfig[*wtx]{
		Conn:          conn,
		MaxBatch:      maxGroupOps,
		SchemaVersion: sqlitedb.Versions(schema),
		Begin: func(ctx context.Context) *wtx {
			return &wtx{ctx: ctx, conn: conn, q: q, stmts: stmts}
		},
		Savepoint: (*wtx).savepoint,
		Flush:     (*wtx).syncPuts,
		End:       (*wtx).end,
		// Another process committed (or data_version could not be read): which partitions
		// it changed is not known here, so every waiter wakes. This process's own commits,
		// all made on the writer's connection, never move data_version; they wake only the
		// waiters they concern (wtx.end).
		Foreign:      func(error) { q.hub.broadcast() },
		Waiting:      q.hub.h.Waiting,
		PollInterval: q.cfg.PollInterval,
		Logger:       q.log,
		Stopped: func() {
			for _, st := range stmts {
				st.Close()
			}
		},
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	go w.Run()
	return &writer{w: w, meta: filepath.Join(q.dir, "meta.db")}, nil
}

// do hands fn to the writer and waits for the commit (or rollback) of its transaction.
// In a group, fn runs in its own savepoint (wtx.savepoint), so its error undoes only its
// own writes and is its answer alone. Once the writer took fn, do waits for its answer
// even if ctx ends, so a committed write is never reported as failed.
func (w *writer) do(ctx context.Context, fn func(tx *wtx) error) error {
	return w.errorOf(w.w.Do(ctx, func(t *wtx) error {
		t.ops++
		return fn(t)
	}))
}

// write runs fn on the writer (do) between calls.Enter and calls.Leave: the file
// store's change of a queue made by a caller's request. Errors: ErrClosed once Close
// has begun, else do's.
func (q *fileQueue) write(ctx context.Context, fn func(t *wtx) error) error {
	if err := q.calls.Enter(); err != nil {
		return err
	}
	defer q.calls.Leave()
	return q.w.do(ctx, fn)
}

// doPut is do for plain puts, which keep the index counter, tail row count and last
// segment in memory across consecutive puts of one transaction (putState, written back
// once) and run without a savepoint: a plain put writes nothing before its only expected
// failures (a schema conflict, a repeated put id naming another batch, a refusal by its
// admission: all found before any write), which are its answer alone; any other failure
// fails the whole group.
func (w *writer) doPut(ctx context.Context, fn func(tx *wtx) error) error {
	var refused error
	err := w.w.DoWithoutSavepoint(ctx, func(t *wtx) error {
		t.ops++
		refused = nil
		err := fn(t)
		var se *persist.SchemaError
		var ie *persist.InvalidError
		var bp *persist.BackpressureError
		if errors.As(err, &se) || errors.As(err, &ie) || errors.As(err, &bp) {
			refused = err
			return nil
		}
		return err
	})
	if err != nil {
		return w.errorOf(err)
	}
	return refused
}

// closedAs maps the writer's ErrClosed to persist.ErrClosed.
func closedAs(err error) error {
	if errors.Is(err, sqlitedb.ErrClosed) {
		return persist.ErrClosed
	}
	return err
}

// errorOf is closedAs of sqlitedb.WriteError for meta.db: plane.DiskFull naming meta.db
// for a write SQLite refused for want of room (a put on a full disk answered 500 "internal
// error"), and plane.ErrUnavailable with the SchemaNewerError for a meta.db a newer build
// migrated while this one had it open.
func (w *writer) errorOf(err error) error {
	return closedAs(sqlitedb.WriteError(err, "the data queue's meta.db", w.meta))
}

// close stops the writer and waits for it.
func (w *writer) close() {
	w.w.Stop()
	<-w.w.Stopped()
}

// savepoint runs before each op of a group that gets its own savepoint: it writes the
// puts' cached counters back (so the op sees meta.db as if each put had written
// directly, and a failing op's ROLLBACK TO cannot undo them) and returns the undo that
// restores the transaction's state if the op fails.
func (t *wtx) savepoint() (func(), error) {
	if err := t.syncPuts(); err != nil {
		return nil, err
	}
	saved := *t
	nafter := len(t.after)
	return func() {
		t.after = t.after[:nafter]
		t.schema = saved.schema
		t.rows = saved.rows
		// t.parts keeps the failed op's partitions: a spurious wake-up is harmless.
		t.kick = saved.kick
		t.ps = saved.ps
		t.fsIDs = nil // ids created by the failed op are gone
	}, nil
}

// end runs after COMMIT (committed) or ROLLBACK, before the ops' callers are answered:
// after a commit it counts it, runs the after hooks, wakes the waiters of what changed
// and kicks the flusher when the tail passed FlushRows. A rollback leaves nothing to do.
func (t *wtx) end(committed bool) {
	if !committed {
		return
	}
	q := t.q
	q.metrics.commits.Add(1)
	q.metrics.committedOps.Add(t.ops)
	for _, f := range t.after {
		f()
	}
	if t.rows {
		q.hub.notifyCommit(t.parts)
	}
	if t.kick {
		select {
		case q.flushKick <- struct{}{}:
		default:
		}
	}
}

// putState caches, across consecutive plain puts of one transaction, what every put
// reads and writes: the next index, the tail row count and the last segment. syncPuts
// writes it back; it runs before any other kind of op and before COMMIT, so every
// other op sees meta.db as if each put had written directly.
type putState struct {
	loaded   bool
	next     int64 // next global index
	tailRows int64 // tail rows including this transaction's puts
	tailAdd  int64 // rows added by this transaction's puts
	// A tail entry not yet inserted: consecutive puts of one partition share one.
	pendPart string
	pendLo   int64
	pendN    int64
	pendData []byte
	seg      segment // the last segment (by lo)
	segOK    bool    // seg exists
	segDirty bool    // seg changed since loaded
	segNew   bool    // seg is not in the table yet
}

func (t *wtx) loadPuts() error {
	if t.ps.loaded {
		return nil
	}
	ps := putState{loaded: true}
	err := t.queryRow(`SELECT (SELECT value FROM meta WHERE key = 'next_index'), (SELECT value FROM meta WHERE key = 'tail_rows')`).
		Scan(&ps.next, &ps.tailRows)
	if err != nil {
		return fmt.Errorf("read counters: %w", err)
	}
	err = t.queryRow(`SELECT lo, hi, partition, fieldset FROM segments ORDER BY lo DESC LIMIT 1`).
		Scan(&ps.seg.lo, &ps.seg.hi, &ps.seg.partition, &ps.seg.fieldset)
	switch {
	case err == nil:
		ps.segOK = true
	case isNoRows(err):
	default:
		return fmt.Errorf("read last segment: %w", err)
	}
	t.ps = ps
	return nil
}

// writeSegment stores t.ps.seg if it changed.
func (t *wtx) writeSegment() error {
	if !t.ps.segOK || !t.ps.segDirty {
		return nil
	}
	var err error
	if t.ps.segNew {
		_, err = t.exec(`INSERT INTO segments(lo, hi, partition, fieldset) VALUES (?, ?, ?, ?)`, t.ps.seg.lo, t.ps.seg.hi, t.ps.seg.partition, t.ps.seg.fieldset)
	} else {
		_, err = t.exec(`UPDATE segments SET hi = ? WHERE lo = ?`, t.ps.seg.hi, t.ps.seg.lo)
	}
	if err != nil {
		return fmt.Errorf("record segment: %w", err)
	}
	t.ps.segDirty, t.ps.segNew = false, false
	return nil
}

// writeTail inserts the pending tail entry.
func (t *wtx) writeTail() error {
	ps := &t.ps
	if ps.pendN == 0 {
		return nil
	}
	if _, err := t.exec(`INSERT INTO tail(kind, partition, lo, n, min_idx, max_idx, data) VALUES (0, ?, ?, ?, ?, ?, ?)`,
		ps.pendPart, ps.pendLo, ps.pendN, ps.pendLo, ps.pendLo+ps.pendN-1, ps.pendData); err != nil {
		return fmt.Errorf("insert tail: %w", err)
	}
	ps.pendN, ps.pendData = 0, nil
	return nil
}

func (t *wtx) syncPuts() error {
	if !t.ps.loaded {
		return nil
	}
	if err := t.writeTail(); err != nil {
		return err
	}
	if err := t.writeSegment(); err != nil {
		return err
	}
	// One statement for both counters; none when no put added rows (a refused put).
	if t.ps.tailAdd == 0 {
		t.ps = putState{}
		return nil
	}
	if _, err := t.exec(`UPDATE meta SET value = CASE key WHEN 'next_index' THEN ? ELSE value + ? END
		WHERE key IN ('next_index', 'tail_rows')`, t.ps.next, t.ps.tailAdd); err != nil {
		return fmt.Errorf("write counters: %w", err)
	}
	t.ps = putState{}
	return nil
}
