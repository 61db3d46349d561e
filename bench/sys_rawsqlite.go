package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, the library every SQLite system uses
)

// rawSQLiteSystem is the ceiling: plain INSERTs into a one-table SQLite file with the same
// library and file settings as every SQLite system, either one durable commit per job or
// one per batch. It has no workers.
type rawSQLiteSystem struct{}

func (rawSQLiteSystem) name() string { return "sqlite-raw" }
func (rawSQLiteSystem) skip() string { return "" }

func (rawSQLiteSystem) settings(e *env) string {
	return fmt.Sprintf("modernc.org/sqlite, WAL, synchronous=%s, one connection; one-at-a-time workloads: "+
		"one autocommit INSERT (one durable commit) per job; batch workloads: BEGIN, one prepared INSERT per job, COMMIT", e.sync)
}

func (rawSQLiteSystem) open(ctx context.Context, e *env) (store, error) {
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(e.dir, "raw.db"), e.sync))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS job (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)`); err != nil {
		db.Close()
		return nil, err
	}
	return &rawSQLiteStore{db: db}, nil
}

type rawSQLiteStore struct{ db *sql.DB }

func (s *rawSQLiteStore) enqueue(ctx context.Context, ref jobRef) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO job (payload) VALUES (?)`, ref.bytes())
	return err
}

func (s *rawSQLiteStore) enqueueBatch(ctx context.Context, refs []jobRef) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO job (payload) VALUES (?)`)
	if err != nil {
		return err
	}
	for _, r := range refs {
		if _, err := stmt.ExecContext(ctx, r.bytes()); err != nil {
			return err
		}
	}
	return tx.Commit()
}

var errNoWorkers = errors.New("no workers (an insert-only ceiling)")

func (s *rawSQLiteStore) work(context.Context, workParams) (func(context.Context) error, error) {
	return nil, errNoWorkers
}

func (s *rawSQLiteStore) pending(context.Context) (int64, error) { return 0, errNoWorkers }
func (s *rawSQLiteStore) close() error                           { return s.db.Close() }
