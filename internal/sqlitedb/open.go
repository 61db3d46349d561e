package sqlitedb

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Memory is the path that opens a private in-memory database instead of a file.
const Memory = ":memory:"

// Synchronous modes accepted by Options.Synchronous.
const (
	// SynchronousFull makes every commit durable on disk before it returns (the default).
	SynchronousFull = "FULL"
	// SynchronousNormal makes WAL commits durable at checkpoints: a power loss may drop the
	// last commits, a process crash does not.
	SynchronousNormal = "NORMAL"
)

// Defaults of Options.
const (
	// BusyTimeoutDefault is how long a connection waits for another process's lock.
	BusyTimeoutDefault = 10 * time.Second
	// ReadConnsDefault is the size of the read pool.
	ReadConnsDefault = 4
)

// Options configure Open. The zero value (or nil) means all defaults.
type Options struct {
	// Synchronous is SynchronousFull (the default) or SynchronousNormal. Ignored for Memory.
	Synchronous string
	// BusyTimeout is how long a statement waits for another connection's lock before
	// SQLITE_BUSY. Defaults to BusyTimeoutDefault.
	BusyTimeout time.Duration
	// ForeignKeys turns foreign key enforcement on (off by default).
	ForeignKeys bool
	// ReadConns is the number of connections of the read pool. Defaults to ReadConnsDefault.
	ReadConns int
}

// PathError is returned by Open for a path it cannot use: empty, or in a directory that does
// not exist. Reason says what is allowed.
type PathError struct {
	Path   string
	Reason string
}

func (e *PathError) Error() string {
	return fmt.Sprintf("database path %q: %s", e.Path, e.Reason)
}

// ErrSynchronous is returned by Open for a synchronous mode other than FULL or NORMAL.
var ErrSynchronous = errors.New("synchronous mode must be FULL or NORMAL")

// DB is an open database: Write has exactly one connection (kept open for the life of the
// DB, so a Memory database lives as long as it), Read is a pool of query-only connections.
// Both see the same database. Close closes both.
type DB struct {
	// Path is the path given to Open.
	Path string
	// Write is the write handle: one connection, never closed while the DB is open. Take it
	// with Write.Conn and hand it to a Writer.
	Write *sql.DB
	// Read is the read pool; its connections refuse writes (PRAGMA query_only).
	Read *sql.DB
}

// Open opens (creating when missing) the SQLite database file at path in WAL mode, or a
// private in-memory database shared by this DB's connections when path is Memory. The
// file's directory must exist. Opening does not connect yet: the first use does. Errors:
// *PathError, ErrSynchronous.
func Open(path string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Synchronous == "" {
		o.Synchronous = SynchronousFull
	}
	if o.Synchronous != SynchronousFull && o.Synchronous != SynchronousNormal {
		return nil, ErrSynchronous
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = BusyTimeoutDefault
	}
	if o.ReadConns <= 0 {
		o.ReadConns = ReadConnsDefault
	}
	writeDSN, readDSN, err := dsns(path, &o)
	if err != nil {
		return nil, err
	}
	db := &DB{Path: path}
	if db.Write, err = sql.Open("sqlite", writeDSN); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.Write.SetMaxOpenConns(1)
	db.Write.SetMaxIdleConns(1)
	db.Write.SetConnMaxLifetime(0)
	db.Write.SetConnMaxIdleTime(0)
	if db.Read, err = sql.Open("sqlite", readDSN); err != nil {
		db.Write.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.Read.SetMaxOpenConns(o.ReadConns)
	db.Read.SetMaxIdleConns(o.ReadConns)
	return db, nil
}

// Close closes the read pool and the write handle.
func (db *DB) Close() error {
	return errors.Join(db.Read.Close(), db.Write.Close())
}

// dsns returns the data source names of the writer and of the readers.
func dsns(path string, o *Options) (string, string, error) {
	foreignKeys := "off"
	if o.ForeignKeys {
		foreignKeys = "on"
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(%s)", o.BusyTimeout.Milliseconds(), foreignKeys)
	if path == Memory {
		// SQLite's memdb VFS shares one memory database between this DB's connections
		// (readers and the writer) and no other; it lives while the writer's connection does.
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := "file:/lakeshore-" + hex.EncodeToString(b[:]) + "?vfs=memdb&" + common
		return name, name + "&_pragma=query_only(1)", nil
	}
	if path == "" {
		return "", "", &PathError{Path: path, Reason: `use a file path or ":memory:"`}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %w", path, err)
	}
	if st, err := os.Stat(filepath.Dir(abs)); err != nil || !st.IsDir() {
		return "", "", &PathError{Path: path, Reason: "its directory must exist"}
	}
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(abs)
	name := "file:" + escaped + "?" + common + "&_pragma=journal_mode(wal)&_pragma=synchronous(" + url.QueryEscape(o.Synchronous) + ")"
	return name, name + "&_pragma=query_only(1)", nil
}
