package lakestore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// catalogSchema is the PostgreSQL schema holding the catalog's tables.
const catalogSchema = "lakestore"

// ErrSchemaTooNew is returned by Open when the catalog was migrated by a newer version
// of Lakeshore than this one: this version refuses to touch it.
var ErrSchemaTooNew = errors.New("lakestore: the catalog schema is newer than this version of Lakeshore knows; upgrade Lakeshore")

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	ents, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range ents {
		v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: no version prefix", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrate creates the catalog schema and applies the embedded migrations not applied
// yet, each in its own transaction, under a transaction-level advisory lock so that
// servers opening at once migrate once. It fails with ErrSchemaTooNew when the
// catalog has a migration this binary does not know.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].version
	for {
		done, err := migrateOne(ctx, pool, ms, latest)
		if err != nil || done {
			return err
		}
	}
}

func migrateOne(ctx context.Context, pool *pgxpool.Pool, ms []migration, latest int) (bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate catalog: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('lakeshore.lakestore.migrate', 0))`); err != nil {
		return false, fmt.Errorf("migrate catalog: %w", err)
	}
	for _, q := range []string{
		`CREATE SCHEMA IF NOT EXISTS ` + catalogSchema,
		`CREATE TABLE IF NOT EXISTS ` + catalogSchema + `.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return false, fmt.Errorf("migrate catalog: %w", err)
		}
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+catalogSchema+`.schema_migrations`).Scan(&have); err != nil {
		return false, fmt.Errorf("migrate catalog: %w", err)
	}
	if have > latest {
		return false, fmt.Errorf("%w (catalog at version %d, this version knows up to %d)", ErrSchemaTooNew, have, latest)
	}
	if have == latest {
		return true, tx.Commit(ctx)
	}
	var next migration
	for _, m := range ms {
		if m.version > have {
			next = m
			break
		}
	}
	if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+catalogSchema); err != nil {
		return false, fmt.Errorf("migrate catalog: %w", err)
	}
	if _, err := tx.Exec(ctx, next.sql); err != nil {
		return false, fmt.Errorf("migrate catalog: apply %s: %w", next.name, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+catalogSchema+`.schema_migrations(version, name) VALUES ($1, $2)`, next.version, next.name); err != nil {
		return false, fmt.Errorf("migrate catalog: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("migrate catalog: %w", err)
	}
	return false, nil
}
