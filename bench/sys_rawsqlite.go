package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, the library every SQLite system uses
)

// rawSQLiteSystem is the ceiling: the minimal durable work of each workload on a SQLite
// file with the same library and file settings as every SQLite system. A job is a row of a
// table with one index, (state, id), the least a claim needs. Enqueues insert (one durable
// commit per job, or one per batch). Burn-downs claim and ack with the least statements a
// queue can: one loop whose every transaction acks the jobs of the previous batch with one
// batched UPDATE and claims the next batch (up to the concurrency) with one UPDATE …
// RETURNING, so one durable commit per batch and, at concurrency 1, one per job. It has no
// leases, retries or results, so the crash and latency workloads do not apply to it.
type rawSQLiteSystem struct{}

func (rawSQLiteSystem) name() string { return "sqlite-raw" }
func (rawSQLiteSystem) skip() string { return "" }

func (rawSQLiteSystem) settings(e *env) string {
	return fmt.Sprintf("modernc.org/sqlite, WAL, synchronous=%s, one connection, table job(id, state, payload) "+
		"with one index (state, id); one-at-a-time enqueue: one autocommit INSERT (one durable commit) per job; batch "+
		"enqueue: BEGIN, one prepared INSERT per job, COMMIT; burn-down: one loop, each transaction acks the previous "+
		"batch (one UPDATE … WHERE id IN (…)) and claims up to the concurrency (one UPDATE … RETURNING), then runs "+
		"the handlers", e.sync)
}

func (rawSQLiteSystem) open(ctx context.Context, e *env) (store, error) {
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(e.dir, "raw.db"), e.sync))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS job (id INTEGER PRIMARY KEY, state INTEGER NOT NULL DEFAULT 0, payload BLOB NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS job_state ON job (state, id)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, err
		}
	}
	return &rawSQLiteStore{db: db}, nil
}

type rawSQLiteStore struct{ db *sql.DB }

// ceiling marks a store that does the minimal work only: no leases, no results.
func (s *rawSQLiteStore) ceiling() {}

// ceilingStore is a store without leases or results (the crash and latency workloads do
// not apply).
type ceilingStore interface{ ceiling() }

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

// work runs the burn-down loop until stop: stop acks the last batch before it returns.
func (s *rawSQLiteStore) work(ctx context.Context, p workParams) (func(context.Context) error, error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.burn(ctx, p) }()
	return func(context.Context) error {
		cancel()
		return <-done
	}, nil
}

func (s *rawSQLiteStore) burn(ctx context.Context, p workParams) error {
	conn, err := s.db.Conn(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	defer conn.Close()
	bg := context.WithoutCancel(ctx)
	var held []any // ids run, to ack
	for {
		stopping := ctx.Err() != nil
		tx, err := conn.BeginTx(bg, nil)
		if err != nil {
			return err
		}
		if len(held) > 0 {
			q := `UPDATE job SET state = 2 WHERE id IN (?` + strings.Repeat(", ?", len(held)-1) + `)`
			if _, err := tx.ExecContext(bg, q, held...); err != nil {
				tx.Rollback()
				return err
			}
		}
		held = held[:0]
		var refs []jobRef
		if !stopping {
			rows, err := tx.QueryContext(bg, `UPDATE job SET state = 1 WHERE id IN
				(SELECT id FROM job WHERE state = 0 ORDER BY id LIMIT ?) RETURNING id, payload`, max(p.concurrency, 1))
			if err != nil {
				tx.Rollback()
				return err
			}
			for rows.Next() {
				var id int64
				var payload []byte
				if err := rows.Scan(&id, &payload); err != nil {
					rows.Close()
					tx.Rollback()
					return err
				}
				ref, err := parseRef(payload)
				if err != nil {
					rows.Close()
					tx.Rollback()
					return err
				}
				held, refs = append(held, id), append(refs, ref)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if stopping {
			return nil
		}
		if len(refs) == 0 {
			select { // an empty queue: look again shortly
			case <-ctx.Done():
			case <-time.After(time.Millisecond):
			}
			continue
		}
		for _, r := range refs {
			p.handle(r)
		}
	}
}

func (s *rawSQLiteStore) pending(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM job WHERE state < 2`).Scan(&n)
	return n, err
}

func (s *rawSQLiteStore) close() error { return s.db.Close() }
