// Package pgdb holds what the PostgreSQL parts of Lakeshore share beneath their SQL: the
// connection with its classified errors (Connect, Classify), the runner of a schema's
// embedded migrations (Migrate) and the LISTEN loop (Listen), used by the dispatch plane
// (plane/pgplane) and the data store's catalog (persist/lakestore). It is to them what
// internal/sqlitedb is to the SQLite plane and the file store.
package pgdb

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema is a PostgreSQL schema whose tables a set of migrations makes, and how its
// migrator serializes with others.
type Schema struct {
	// Name is the schema's name, unquoted (the caller has checked it).
	Name string
	// Files holds the migrations: the files matching "*.sql" at its root, in name order;
	// the i-th is schema version i+1.
	Files fs.FS
	// Lock is the statement that takes the transaction-level advisory lock one migrator of
	// the schema holds at a time, whatever its process (pg_advisory_xact_lock: safe with
	// PgBouncer); LockArgs are its arguments.
	Lock     string
	LockArgs []any
	// Named: the schema's schema_migrations table has a name column (the file's name).
	Named bool
	// SearchPath: a migration runs with search_path set to the schema (its file names the
	// tables bare); else "{schema}" in a file is replaced with the quoted schema name.
	SearchPath bool
	// TooNew is the error for a schema at version have, above known, the versions this
	// build has.
	TooNew func(have, known int) error
}

// Versions is the number of migrations of s: the version this build migrates to.
func (s *Schema) Versions() int {
	names, _ := fs.Glob(s.Files, "*.sql")
	return len(names)
}

// Migrate brings schema s up to s.Versions(), each migration in its own transaction under
// s.Lock, so concurrent processes migrate once. It refuses a schema of a newer version
// (s.TooNew) before writing anything, and writes nothing to a schema up to date.
func Migrate(ctx context.Context, pool *pgxpool.Pool, s *Schema) error {
	version, err := Version(ctx, pool, s.Name)
	if err != nil {
		return err
	}
	names, err := fs.Glob(s.Files, "*.sql")
	if err != nil {
		return err
	}
	if version > len(names) {
		return s.TooNew(version, len(names))
	}
	sort.Strings(names)
	quoted := pgx.Identifier{s.Name}.Sanitize()
	table := `version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now()`
	record := `INSERT INTO ` + quoted + `.schema_migrations (version) VALUES ($1)`
	if s.Named {
		table = `version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now()`
		record = `INSERT INTO ` + quoted + `.schema_migrations (version, name) VALUES ($1, $2)`
	}
	for i := version; i < len(names); i++ {
		body, err := fs.ReadFile(s.Files, names[i])
		if err != nil {
			return err
		}
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// One migrator at a time per schema, whatever the process.
			if _, err := tx.Exec(ctx, s.Lock, s.LockArgs...); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+quoted); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+quoted+`.schema_migrations (`+table+`)`); err != nil {
				return err
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+quoted+`.schema_migrations WHERE version = $1)`, i+1).Scan(&done); err != nil {
				return err
			}
			if done { // another process migrated between our read and our lock
				return nil
			}
			sql := string(body)
			if s.SearchPath {
				if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+quoted); err != nil {
					return err
				}
			} else {
				sql = strings.ReplaceAll(sql, "{schema}", quoted)
			}
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
			args := []any{i + 1}
			if s.Named {
				args = append(args, names[i])
			}
			_, err := tx.Exec(ctx, record, args...)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate schema %s to version %d (%s): %w", s.Name, i+1, names[i], err)
		}
	}
	return nil
}

// Version returns the highest applied migration of the schema named schema, 0 when it has
// none. It writes nothing.
func Version(ctx context.Context, pool *pgxpool.Pool, schema string) (int, error) {
	var exists bool
	err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.tables
		WHERE table_schema = $1 AND table_name = 'schema_migrations')`, schema).Scan(&exists)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var version int
	err = pool.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations`).Scan(&version)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return version, nil
}
