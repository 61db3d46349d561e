package filestore

import (
	"context"
	"database/sql"
	"sync"
)

// Statements of the read pool are prepared once per connection, not once per read:
// SQLite's parser was a sixth of a Reader.GetBatch's CPU when every read transaction
// prepared each of its statements again (docs/benchmarks-persist.md, 2026-12-05). A
// readStmts keeps one *sql.Stmt per query text on the read pool; database/sql prepares
// it on each connection the first time that connection runs it and keeps it there, and
// Tx.StmtContext finds it. The writer's connection has its own cache (startWriter).
//
// A statement is made on the pool (DB.PrepareContext, which takes a connection of its
// own) only after the read transaction that first ran its text ended: a transaction
// that waited for a second connection while holding one could wait forever once every
// connection is held by such a transaction. Until then the text runs unprepared.

// maxReadStmts bounds the cached query texts: a query built from its arguments (an IN
// list of n names) has one text per n, and a text past the bound is prepared per use.
const maxReadStmts = 128

// readStmts is the read pool's statement cache.
type readStmts struct {
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool // texts run unprepared, to prepare (prepare)
	closed  bool
}

// get returns the cached statement of query, or nil; a text not cached yet is noted
// for prepare.
func (c *readStmts) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st
	}
	if !c.closed && len(c.m)+len(c.pending) < maxReadStmts {
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[query] = true
	}
	return nil
}

// prepare makes the statements of the noted texts on db. The caller holds no
// connection of db.
func (c *readStmts) prepare(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	texts := make([]string, 0, len(c.pending))
	for t := range c.pending {
		texts = append(texts, t)
	}
	c.pending = nil
	c.mu.Unlock()
	for _, t := range texts {
		st, err := db.PrepareContext(ctx, t)
		if err != nil {
			continue // runs unprepared, which reports the error
		}
		c.mu.Lock()
		if _, dup := c.m[t]; dup || c.closed {
			st.Close()
		} else {
			if c.m == nil {
				c.m = map[string]*sql.Stmt{}
			}
			c.m[t] = st
		}
		c.mu.Unlock()
	}
}

// close closes every cached statement; later gets return nil.
func (c *readStmts) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, st := range c.m {
		st.Close()
	}
	c.m, c.pending = nil, nil
}

// readTx is a read transaction of the read pool that runs its queries through the
// queue's statement cache. It is a queryer.
type readTx struct {
	tx *sql.Tx
	q  *fileQueue
}

// stmt returns query's cached statement bound to the transaction, or nil.
func (r *readTx) stmt(ctx context.Context, query string) *sql.Stmt {
	st := r.q.readStmts.get(query)
	if st == nil {
		return nil
	}
	return r.tx.StmtContext(ctx, st) // closed with the transaction
}

func (r *readTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return r.tx.ExecContext(ctx, query, args...) // the read pool does not write
}

func (r *readTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.tx.QueryContext(ctx, query, args...)
}

func (r *readTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.tx.QueryRowContext(ctx, query, args...)
}
