package filestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// migrations holds the numbered schema migrations of meta.db, applied once each by
// sqlitedb.Migrate (PRAGMA user_version).
//
//go:embed migrations/*.sql
var migrations embed.FS

// openDB opens meta.db on internal/sqlitedb (WAL, the synchronous mode of durability,
// a busy timeout; one write connection beside a query-only read pool) and applies the
// migrations. The writer runs every write transaction as BEGIN IMMEDIATE. A meta.db that is
// damaged or not an SQLite database is persist.ErrCorrupt (corruptDB).
func openDB(ctx context.Context, path string, durability persist.Durability, busy time.Duration) (*sqlitedb.DB, error) {
	sync := sqlitedb.SynchronousFull
	if durability == persist.Buffered {
		sync = sqlitedb.SynchronousNormal
	}
	db, err := sqlitedb.Open(path, &sqlitedb.Options{Synchronous: sync, BusyTimeout: busy})
	if err != nil {
		return nil, corruptDB(path, "open meta.db", err)
	}
	conn, err := db.Write.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, corruptDB(path, "open meta.db", err)
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err == nil {
		err = sqlitedb.Migrate(ctx, conn, sub)
	}
	conn.Close()
	if err != nil {
		db.Close()
		return nil, corruptDB(path, "create meta.db schema", err)
	}
	return db, nil
}

// corruptDB is plane.DiskFull (naming path) for a disk with no room left (making meta.db on a full disk
// answered 500 "internal error"), else err of step wrapped in persist.ErrCorrupt when SQLite says meta.db is damaged
// or is not a database (no retry helps: its answer is the typed corrupt error, not an
// internal one), else wrapped as it is.
func corruptDB(path, step string, err error) error {
	if full := sqlitedb.FullError(err, "the data queue's meta.db", path); full != nil {
		return fmt.Errorf("%s: %w", step, full)
	}
	if sqlitedb.IsCorrupt(err) {
		return fmt.Errorf("%w: %s: %w", persist.ErrCorrupt, step, err)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// queryer is what *sql.Tx, *sql.Conn and *sql.DB share.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func metaGet(ctx context.Context, q queryer, key string) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read meta %s: %w", key, err)
	}
	return v, nil
}

func metaSet(ctx context.Context, q queryer, key string, v int64) error {
	if _, err := q.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = ?`, v, key); err != nil {
		return fmt.Errorf("write meta %s: %w", key, err)
	}
	return nil
}

func metaAdd(ctx context.Context, q queryer, key string, d int64) error {
	if _, err := q.ExecContext(ctx, `UPDATE meta SET value = value + ? WHERE key = ?`, d, key); err != nil {
		return fmt.Errorf("write meta %s: %w", key, err)
	}
	return nil
}

// loadSchema reads the fields table.
func loadSchema(ctx context.Context, q queryer) (persist.Schema, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, kind FROM fields ORDER BY pos`)
	if err != nil {
		return persist.Schema{}, fmt.Errorf("read schema: %w", err)
	}
	defer rows.Close()
	var s persist.Schema
	for rows.Next() {
		var f persist.Field
		if err := rows.Scan(&f.Name, &f.Kind); err != nil {
			return persist.Schema{}, fmt.Errorf("read schema: %w", err)
		}
		s.Fields = append(s.Fields, f)
	}
	return s, rows.Err()
}

// SQLite's own error for a damaged meta.db (SQLITE_CORRUPT, SQLITE_NOTADB) has the code
// "corrupt" wherever a query meets it (persist.Code, persist.IsCorrupt): at open, where
// corruptDB also wraps it, and in any later call, which answered "internal" before.
func init() { record.RegisterCorrupt(sqlitedb.IsCorrupt) }
