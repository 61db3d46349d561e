package sqlitedb

import (
	"context"
	"database/sql"
)

// Runner runs SQL: a *sql.Conn, *sql.DB or *sql.Tx.
type Runner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// On runs SQL on a Runner, a statement of a Prepared that holds its text prepared (bound to
// the transaction when the Runner is a *sql.Tx), any other parsed.
type On struct {
	Prepared *Prepared
	Runner   Runner
}

// On is p's statements run on r (On).
func (p *Prepared) On(r Runner) On { return On{p, r} }

// stmt is the statement prepared from query, bound to the transaction on runs on, or nil.
func (o On) stmt(ctx context.Context, query string) *sql.Stmt {
	st := o.Prepared.ByText(query)
	if tx, ok := o.Runner.(*sql.Tx); ok && st != nil {
		return tx.StmtContext(ctx, st)
	}
	return st
}

// ExecContext runs query, prepared when it is one of o's statements.
func (o On) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := o.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return o.Runner.ExecContext(ctx, query, args...)
}

// QueryContext runs query, prepared when it is one of o's statements.
func (o On) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := o.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return o.Runner.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query, prepared when it is one of o's statements.
func (o On) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := o.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return o.Runner.QueryRowContext(ctx, query, args...)
}
