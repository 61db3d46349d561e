package filestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// The writer goroutine owns the only write connection of this process to meta.db. Every
// write (puts, flush manifest changes, consumption, KV, compaction) is an op queued to it;
// it drains what is waiting into one BEGIN IMMEDIATE transaction, runs each op inside
// its own savepoint (so a failing op — a schema conflict — undoes only itself), commits
// once, then answers every caller. This turns one fsync into the durability of many
// operations (group commit).

// maxGroupOps bounds how many ops share one transaction.
const maxGroupOps = 256

type writeOp struct {
	fn   func(tx *wtx) error
	done chan error
	put  bool // a plain put: may use the transaction's cached counters (putState)
}

// wtx is the state an op sees: the write connection inside an open transaction.
type wtx struct {
	ctx    context.Context
	conn   *sql.Conn
	q      *fileQueue
	stmts  map[string]*sql.Stmt
	schema *persist.Schema     // loaded lazily once per transaction
	rows   bool                // some op added rows: wake waiters after commit
	parts  map[string]struct{} // partitions whose samples changed: wake their GetMeta waiters
	ps     putState
	fsIDs  map[string]int64 // field sets created or read in this transaction
	kick   bool             // the tail passed FlushRows: start a background flush after commit
	after  []func()
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
		return t.conn.QueryRowContext(t.ctx, query, args...)
	}
	return st.QueryRowContext(t.ctx, args...)
}

func (t *wtx) stmt(query string) (*sql.Stmt, error) {
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	st, err := t.conn.PrepareContext(t.ctx, query)
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

type writer struct {
	q   *fileQueue
	ops chan writeOp
	// probes asks the writer whether another process committed since the last probe:
	// PRAGMA data_version on the write connection, which this process's own commits
	// (all made on that connection) never change.
	probes chan chan bool
	conn   *sql.Conn
	wg     sync.WaitGroup
	stop   context.CancelFunc
}

func startWriter(q *fileQueue, db *sql.DB) (*writer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := db.Conn(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("writer connection: %w", err)
	}
	w := &writer{q: q, ops: make(chan writeOp, maxGroupOps), probes: make(chan chan bool), conn: conn, stop: cancel}
	w.wg.Go(func() { w.loop(ctx) })
	return w, nil
}

// do queues fn and waits for its transaction to commit. If ctx ends first, do returns
// ctx's error; the op may still commit later.
func (w *writer) do(ctx context.Context, fn func(tx *wtx) error) error {
	return w.submit(ctx, writeOp{fn: fn, done: make(chan error, 1)})
}

// doPut is do for plain puts, which keep the index counter, tail row count and last
// segment in memory across consecutive puts of one transaction (written back once).
func (w *writer) doPut(ctx context.Context, fn func(tx *wtx) error) error {
	return w.submit(ctx, writeOp{fn: fn, done: make(chan error, 1), put: true})
}

func (w *writer) submit(ctx context.Context, op writeOp) error {
	select {
	case w.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// othersCommitted reports whether another process committed to meta.db since the
// last call (true also when that cannot be read). It waits for the transaction in
// progress, if any.
func (w *writer) othersCommitted(ctx context.Context) bool {
	answer := make(chan bool, 1)
	select {
	case w.probes <- answer:
	case <-ctx.Done():
		return false
	}
	select {
	case changed := <-answer:
		return changed
	case <-ctx.Done():
		return false
	}
}

// close stops the loop after the ops already queued have run.
func (w *writer) close() {
	w.stop()
	w.wg.Wait()
}

func (w *writer) loop(ctx context.Context) {
	stmts := map[string]*sql.Stmt{}
	defer func() {
		for _, st := range stmts {
			st.Close()
		}
		w.conn.Close()
	}()
	batch := make([]writeOp, 0, maxGroupOps)
	watch := sqlitedb.NewCommitWatch(ctx, w.conn)
	for {
		var op writeOp
		select {
		case answer := <-w.probes:
			changed, err := watch.Changed(ctx)
			answer <- changed || err != nil
			continue
		case op = <-w.ops:
		case <-ctx.Done():
			// Drain ops that were queued before the stop.
			for {
				select {
				case op = <-w.ops:
					w.run(context.Background(), stmts, []writeOp{op})
				default:
					return
				}
			}
		}
		batch = append(batch[:0], op)
	drain:
		for len(batch) < maxGroupOps {
			select {
			case op = <-w.ops:
				batch = append(batch, op)
			default:
				break drain
			}
		}
		w.run(context.WithoutCancel(ctx), stmts, batch)
	}
}

// run executes ops in one transaction and answers them.
func (w *writer) run(ctx context.Context, stmts map[string]*sql.Stmt, ops []writeOp) {
	t := &wtx{ctx: ctx, conn: w.conn, q: w.q, stmts: stmts}
	errs := make([]error, len(ops))
	fail := func(err error) {
		for _, op := range ops {
			op.done <- err
		}
	}
	if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		fail(fmt.Errorf("begin write transaction: %w", err))
		return
	}
	for i, op := range ops {
		if !op.put {
			if err := t.syncPuts(); err != nil {
				w.conn.ExecContext(ctx, "ROLLBACK")
				fail(err)
				return
			}
		}
		if len(ops) == 1 {
			errs[i] = op.fn(t)
			if errs[i] != nil {
				w.conn.ExecContext(ctx, "ROLLBACK")
				op.done <- errs[i]
				return
			}
			continue
		}
		if op.put {
			// A plain put writes nothing before its only expected failures (a schema
			// conflict, a repeated put id naming another batch, a refusal by its
			// admission: all found before any write), so it needs no savepoint; any
			// other failure fails the whole group.
			if err := op.fn(t); err != nil {
				var se *persist.SchemaError
				var ie *persist.InvalidError
				var bp *persist.BackpressureError
				if !errors.As(err, &se) && !errors.As(err, &ie) && !errors.As(err, &bp) {
					w.conn.ExecContext(ctx, "ROLLBACK")
					fail(err)
					return
				}
				errs[i] = err
			}
			continue
		}
		if _, err := t.exec("SAVEPOINT op"); err != nil {
			errs[i] = fmt.Errorf("savepoint: %w", err)
			continue
		}
		saved := *t
		nafter := len(t.after)
		if err := op.fn(t); err != nil {
			errs[i] = err
			t.after = t.after[:nafter]
			t.schema = saved.schema
			t.rows = saved.rows
			// t.parts keeps the failed op's partitions: a spurious wake-up is harmless.
			t.kick = saved.kick
			t.ps = saved.ps
			t.fsIDs = nil // ids created by the failed op are gone
			if _, rerr := t.exec("ROLLBACK TO op"); rerr != nil {
				w.conn.ExecContext(ctx, "ROLLBACK")
				fail(errors.Join(err, fmt.Errorf("rollback op: %w", rerr)))
				return
			}
		}
		if _, err := t.exec("RELEASE op"); err != nil {
			w.conn.ExecContext(ctx, "ROLLBACK")
			fail(fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if err := t.syncPuts(); err != nil {
		w.conn.ExecContext(ctx, "ROLLBACK")
		fail(err)
		return
	}
	if _, err := w.conn.ExecContext(ctx, "COMMIT"); err != nil {
		w.conn.ExecContext(ctx, "ROLLBACK")
		fail(fmt.Errorf("commit: %w", err))
		return
	}
	w.q.metrics.commits.Add(1)
	w.q.metrics.committedOps.Add(int64(len(ops)))
	for _, f := range t.after {
		f()
	}
	if t.rows {
		w.q.hub.notifyCommit(t.parts)
	}
	if t.kick {
		select {
		case w.q.flushKick <- struct{}{}:
		default:
		}
	}
	for i, op := range ops {
		op.done <- errs[i]
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
	// One statement for both counters.
	if _, err := t.exec(`UPDATE meta SET value = CASE key WHEN 'next_index' THEN ? ELSE value + ? END
		WHERE key IN ('next_index', 'tail_rows')`, t.ps.next, t.ps.tailAdd); err != nil {
		return fmt.Errorf("write counters: %w", err)
	}
	t.ps = putState{}
	return nil
}
