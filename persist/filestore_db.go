package persist

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// schemaSQL creates the tables of meta.db. Every statement is idempotent so that
// processes opening the same queue at once can all run it.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES ('format', 1), ('next_index', 0), ('manifest_version', 0),
  ('schema_version', 0), ('tail_rows', 0), ('tomb_version', 0), ('held_backfilled', 0);
CREATE TABLE IF NOT EXISTS fields(pos INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, kind TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tail(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  kind INTEGER NOT NULL,            -- 0 new rows lo..lo+n-1, 1 fields for the indexes in idx
  partition TEXT NOT NULL,
  lo INTEGER NOT NULL, n INTEGER NOT NULL,
  min_idx INTEGER NOT NULL, max_idx INTEGER NOT NULL,
  idx BLOB, data BLOB NOT NULL,
  flush_id INTEGER                  -- the pending fragment that is flushing this entry
);
CREATE INDEX IF NOT EXISTS tail_flush ON tail(flush_id);
CREATE TABLE IF NOT EXISTS fragments(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  file TEXT NOT NULL UNIQUE,
  kind INTEGER NOT NULL,            -- 0 rows, 1 fields
  state INTEGER NOT NULL,           -- 0 pending, 1 live, 2 removed
  owner TEXT NOT NULL,              -- process token that wrote it (pending only matters)
  min_idx INTEGER NOT NULL DEFAULT 0, max_idx INTEGER NOT NULL DEFAULT -1,
  rows INTEGER NOT NULL DEFAULT 0, bytes INTEGER NOT NULL DEFAULT 0,
  fields TEXT NOT NULL DEFAULT '',  -- field names, \x1f-separated
  level INTEGER NOT NULL DEFAULT 0, -- 0 written by flush, n+1 by compacting level n
  added_version INTEGER, removed_version INTEGER,
  claim_id INTEGER                  -- the pending compaction output replacing this fragment
);
CREATE INDEX IF NOT EXISTS fragments_state ON fragments(state, min_idx);
CREATE TABLE IF NOT EXISTS fieldsets(id INTEGER PRIMARY KEY, fields TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS segments(lo INTEGER PRIMARY KEY, hi INTEGER NOT NULL, partition TEXT NOT NULL, fieldset INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS segments_partition ON segments(partition, lo);
CREATE TABLE IF NOT EXISTS produced(field TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL, PRIMARY KEY(field, lo));
CREATE TABLE IF NOT EXISTS tombstones(lo INTEGER PRIMARY KEY, hi INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS consumed(partition TEXT NOT NULL, task TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
  PRIMARY KEY(partition, task, lo));
CREATE TABLE IF NOT EXISTS assignments(partition TEXT NOT NULL, task TEXT NOT NULL, dp_rank INTEGER NOT NULL,
  batch_index INTEGER NOT NULL, indexes BLOB NOT NULL, PRIMARY KEY(partition, task, dp_rank, batch_index));
-- held: the union of the stored sampler assignments of (partition, task), as spans, so
-- that a new assignment skips indexes another data-parallel group holds.
CREATE TABLE IF NOT EXISTS held(partition TEXT NOT NULL, task TEXT NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
  PRIMARY KEY(partition, task, lo));
-- big_int_fields: int64 fields holding integers beyond ±2^53, never widened to float64.
CREATE TABLE IF NOT EXISTS big_int_fields(field TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS kv(partition TEXT NOT NULL, key TEXT NOT NULL, idx INTEGER NOT NULL, tags TEXT NOT NULL,
  PRIMARY KEY(partition, key));
CREATE INDEX IF NOT EXISTS kv_idx ON kv(idx);
`

// openDB opens meta.db twice: a single-connection handle for the writer (every write
// transaction is BEGIN IMMEDIATE) and a pool for reads.
func openDB(ctx context.Context, path string, sync string, busy time.Duration) (w, r *sql.DB, err error) {
	dsn := func(txlock string) string {
		v := url.Values{}
		v.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
		v.Add("_pragma", "journal_mode(WAL)")
		v.Add("_pragma", "synchronous("+sync+")")
		v.Add("_pragma", "foreign_keys(OFF)")
		v.Set("_txlock", txlock)
		return "file:" + path + "?" + v.Encode()
	}
	w, err = sql.Open("sqlite", dsn("immediate"))
	if err != nil {
		return nil, nil, fmt.Errorf("open meta.db: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	// The schema is created inside an immediate transaction so concurrent openers serialize.
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("open meta.db: %w", err)
	}
	if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
		tx.Rollback()
		w.Close()
		return nil, nil, fmt.Errorf("create meta.db schema: %w", err)
	}
	if err := tx.Commit(); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("create meta.db schema: %w", err)
	}
	r, err = sql.Open("sqlite", dsn("deferred"))
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("open meta.db: %w", err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	return w, r, nil
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
func loadSchema(ctx context.Context, q queryer) (Schema, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, kind FROM fields ORDER BY pos`)
	if err != nil {
		return Schema{}, fmt.Errorf("read schema: %w", err)
	}
	defer rows.Close()
	var s Schema
	for rows.Next() {
		var f Field
		if err := rows.Scan(&f.Name, &f.Kind); err != nil {
			return Schema{}, fmt.Errorf("read schema: %w", err)
		}
		s.Fields = append(s.Fields, f)
	}
	return s, rows.Err()
}
