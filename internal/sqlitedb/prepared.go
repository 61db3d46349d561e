package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
)

// Prepared is a set of statements prepared once (on a connection, or on a pool, where
// database/sql prepares each again on every connection that runs it) and closed together:
// the statements of a hot path, which then never parse SQL. The zero Prepared is empty.
// It is not safe for concurrent use while statements are added.
type Prepared struct {
	all    []*sql.Stmt
	byText map[string]*sql.Stmt
}

// Preparer prepares statements: a *sql.Conn, *sql.DB or *sql.Tx.
type Preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// Prepare prepares query on on and keeps it. On an error it closes every statement of p
// and returns the error, which names query.
func (p *Prepared) Prepare(ctx context.Context, on Preparer, query string) (*sql.Stmt, error) {
	stmt, err := p.add(ctx, on, query)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("prepare %q: %w", query, err)
	}
	return stmt, nil
}

// ByText returns the statement prepared from the SQL text query, or nil.
func (p *Prepared) ByText(query string) *sql.Stmt { return p.byText[query] }

// Sized returns the statement of a k-row form of a statement (build(k) its SQL, for k from
// 1 to len(cache)), preparing it on on the first time it is asked for and keeping it in
// cache[k-1].
func (p *Prepared) Sized(ctx context.Context, on Preparer, cache []*sql.Stmt, k int, build func(int) string) (*sql.Stmt, error) {
	if stmt := cache[k-1]; stmt != nil {
		return stmt, nil
	}
	stmt, err := p.add(ctx, on, build(k))
	if err != nil {
		return nil, fmt.Errorf("prepare a batch of %d: %w", k, err)
	}
	cache[k-1] = stmt
	return stmt, nil
}

// add prepares query on on and keeps it.
func (p *Prepared) add(ctx context.Context, on Preparer, query string) (*sql.Stmt, error) {
	stmt, err := on.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if p.byText == nil {
		p.byText = make(map[string]*sql.Stmt)
	}
	p.all, p.byText[query] = append(p.all, stmt), stmt
	return stmt, nil
}

// Close closes every statement of p, which is empty after.
func (p *Prepared) Close() {
	for _, stmt := range p.all {
		stmt.Close()
	}
	p.all, p.byText = nil, nil
}
