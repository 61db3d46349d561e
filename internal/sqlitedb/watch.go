package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// CommitWatch notices commits made through other connections to the same database (other
// processes, in practice): PRAGMA data_version on a connection changes only when another
// connection commits. Not safe for concurrent use: it belongs to the goroutine that owns
// its connection.
type CommitWatch struct {
	conn    *sql.Conn
	version int64
}

// NewCommitWatch starts watching from the database's current version, read on conn.
func NewCommitWatch(ctx context.Context, conn *sql.Conn) *CommitWatch {
	w := &CommitWatch{conn: conn}
	_ = conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&w.version)
	return w
}

// Changed reports whether another connection committed since the last call. A failed read
// reports true with its error (the caller should assume a change) and keeps the old version.
func (w *CommitWatch) Changed(ctx context.Context) (bool, error) {
	var v int64
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return true, err
	}
	if v == w.version {
		return false, nil
	}
	w.version = v
	return true, nil
}

// IsBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED: another connection holds the
// lock, and a retry later may succeed.
func IsBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return false
}

// IsCorrupt reports whether err is SQLITE_CORRUPT or SQLITE_NOTADB: the database file is
// damaged, or is not an SQLite database at all; no retry helps.
func IsCorrupt(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqlite3.SQLITE_CORRUPT || code == sqlite3.SQLITE_NOTADB
	}
	return false
}

// IsFull reports whether err is SQLite's SQLITE_FULL: the disk holding the database (or its
// WAL) has no room left, or the file reached its max_page_count. Nothing of the failed
// transaction was written.
func IsFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_FULL
	}
	return false
}

// IsNoTransaction reports whether err says there was no transaction to end (a ROLLBACK after
// SQLite already rolled back on its own).
func IsNoTransaction(err error) bool {
	return errors.Is(err, sql.ErrTxDone) || strings.Contains(err.Error(), "no transaction is active")
}
