package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
)

// Migrate applies the migrations of fsys (its files matching "*.sql" at the root, in name
// order; the i-th file is schema version i+1) not yet recorded in PRAGMA user_version, each
// in its own BEGIN IMMEDIATE transaction. Several processes may migrate the same file at
// once: each version is applied once. conn must be a write connection outside any
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
	return nil
}
