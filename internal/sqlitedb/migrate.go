package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
)

// ErrSchemaNewer: the file was migrated by a newer build (its PRAGMA user_version is past
// this build's migrations); Migrate refuses it before writing anything. Errors.Is matches
// it on a *SchemaNewerError.
var ErrSchemaNewer = errors.New("database schema is newer than this build of lakeshore")

// SchemaNewerError is Migrate's refusal of a file of a newer schema: Have is the file's
// version, Known the last this build knows.
type SchemaNewerError struct {
	Have, Known int
}

// Error says both versions and what to do.
func (e *SchemaNewerError) Error() string {
	return fmt.Sprintf("database is at schema version %d, this build of lakeshore knows versions up to %d: "+
		"it was written by a newer lakeshore; run that version or a later one (or restore a copy taken before the upgrade)",
		e.Have, e.Known)
}

// Unwrap is ErrSchemaNewer.
func (e *SchemaNewerError) Unwrap() error { return ErrSchemaNewer }

// Versions is the number of migrations of fsys (its "*.sql" files at the root): the schema
// version Migrate brings a file to, and WriterConfig.SchemaVersion.
func Versions(fsys fs.FS) int {
	names, _ := fs.Glob(fsys, "*.sql")
	return len(names)
}

// Migrate applies the migrations of fsys (its files matching "*.sql" at the root, in name
// order; the i-th file is schema version i+1) not yet recorded in PRAGMA user_version, each
// in its own BEGIN IMMEDIATE transaction. Several processes may migrate the same file at
// once: each version is applied once. A file at a version past fsys's migrations (written by
// a newer build) is refused with a *SchemaNewerError before anything is written, as the
// PostgreSQL plane refuses a newer schema: an older build's statements and triggers must not
// run against tables it does not know. conn must be a write connection outside any
// transaction.
func Migrate(ctx context.Context, conn *sql.Conn, fsys fs.FS) error {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	var version int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(names) {
		return &SchemaNewerError{Have: version, Known: len(names)}
	}
	for i, name := range names {
		if i < version {
			continue
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		// Another process may have migrated between our read and our lock.
		var now int
		if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&now); err != nil {
			conn.ExecContext(ctx, "ROLLBACK")
			return err
		}
		if now > i {
			conn.ExecContext(ctx, "ROLLBACK")
			continue
		}
		if _, err := conn.ExecContext(ctx, string(body)); err != nil {
			conn.ExecContext(ctx, "ROLLBACK")
			return fmt.Errorf("migrate %s: %w", name, err)
		}
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			conn.ExecContext(ctx, "ROLLBACK")
			return err
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			return fmt.Errorf("migrate %s: %w", name, err)
		}
	}
	// A newer build may have migrated the file since the first read.
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(names) {
		return &SchemaNewerError{Have: version, Known: len(names)}
	}
	return nil
}
