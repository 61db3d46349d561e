package lakestore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// catalogSchema is the PostgreSQL schema holding the catalog's tables.
const catalogSchema = "lakestore"

// ErrSchemaTooNew is returned by Open when the catalog was migrated by a newer version
// of Lakeshore than this one: this version refuses to touch it.
var ErrSchemaTooNew = errors.New("lakestore: the catalog schema is newer than this version of Lakeshore knows; upgrade Lakeshore")

// migrate creates the catalog schema and applies the embedded migrations not applied
// yet (pgdb.Migrate), each in its own transaction, under a transaction-level advisory lock
// so that servers opening at once migrate once. It fails with ErrSchemaTooNew when the
// catalog has a migration this binary does not know, before writing anything.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	err = pgdb.Migrate(ctx, pool, &pgdb.Schema{
		Name:       catalogSchema,
		Files:      files,
		Lock:       `SELECT pg_advisory_xact_lock(hashtextextended('lakeshore.lakestore.migrate', 0))`,
		Named:      true,
		SearchPath: true,
		TooNew: func(have, known int) error {
			return fmt.Errorf("%w (catalog at version %d, this version knows up to %d)", ErrSchemaTooNew, have, known)
		},
	})
	if err != nil && !errors.Is(err, ErrSchemaTooNew) {
		return fmt.Errorf("lakestore: %w", err)
	}
	return err
}
