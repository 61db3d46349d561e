package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Memory is the path that opens a private database that lives until Close instead of a
// named file: a WAL database with synchronous=OFF in a new directory of /dev/shm (a tmpfs,
// so it stays in memory; os.TempDir where there is none or it has less than 1 GiB free),
// removed by Close. SQLite's memdb
// VFS is not used: it refuses every new reader while the writer holds a write transaction,
// so under a writer that is never idle (group commit on a busy plane) a read could wait out
// its whole busy timeout. In WAL mode readers never wait for the writer. The directory is
// lakeshore-memory-PIDNS.PID-RANDOM; one left by a process killed before Close is removed by
// the next Open of a Memory database in the same PID namespace once that process no longer
// runs.
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
	// Synchronous is SynchronousFull (the default) or SynchronousNormal. Ignored for Memory
	// (always OFF: nothing of it outlives the process).
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
// DB), Read is a pool of query-only connections. Both see the same database. Close closes
// both (and removes a Memory database's directory).
type DB struct {
	// Path is the path given to Open.
	Path string
	// Write is the write handle: one connection, never closed while the DB is open. Take it
	// with Write.Conn and hand it to a Writer.
	Write *sql.DB
	// Read is the read pool; its connections refuse writes (PRAGMA query_only).
	Read *sql.DB

	// temporary is the directory of a Memory database ("" for a file), removed by Close.
	temporary string
}

// Open opens (creating when missing) the SQLite database file at path in WAL mode, or a
// private database that lives until Close when path is Memory (see Memory). The file's
// directory must exist. Opening connects the write handle and switches the file to WAL
// (useWAL), waiting out another process doing the same; the read pool connects at its
// first use. Errors: *PathError, ErrSynchronous, the temporary directory of a Memory
// database could not be created, or the file could not be opened or switched to WAL.
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
	db := &DB{Path: path}
	file, synchronous := path, o.Synchronous
	if path == Memory {
		dir, err := memoryDirectory()
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		db.temporary, file, synchronous = dir, filepath.Join(dir, "memory.db"), "OFF"
	}
	writeDSN, readDSN, err := dsns(file, synchronous, &o)
	if err != nil {
		return nil, err
	}
	if db.Write, err = sql.Open("sqlite", writeDSN); err != nil {
		db.removeTemporary()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.Write.SetMaxOpenConns(1)
	db.Write.SetMaxIdleConns(1)
	db.Write.SetConnMaxLifetime(0)
	db.Write.SetConnMaxIdleTime(0)
	if db.Read, err = sql.Open("sqlite", readDSN); err != nil {
		db.Write.Close()
		db.removeTemporary()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.Read.SetMaxOpenConns(o.ReadConns)
	db.Read.SetMaxIdleConns(o.ReadConns)
	if err := db.useWAL(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// useWAL puts the database in WAL mode, once for the life of the file (the mode is stored
// in it: every later connection finds it), on the write connection, which stays open for
// the writer. It is not a pragma of the connections' data source names, run as each
// connects, because SQLite does not call the busy handler for the switch: of two processes
// that open a new file at once (a worker and a submit started together), one got
// SQLITE_BUSY at once, whatever the busy timeout, and failed to open. Here a busy switch is
// tried again (retryBusy); on a file already in WAL mode the pragma changes nothing.
func (db *DB) useWAL() error {
	ctx := context.Background()
	conn, err := db.Write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close() // back to the write handle's pool of one
	var mode string
	if err := retryBusy(func() error {
		return conn.QueryRowContext(ctx, "PRAGMA journal_mode = wal").Scan(&mode)
	}); err != nil {
		return fmt.Errorf("switch to WAL: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("switch to WAL: the journal mode stayed %q", mode)
	}
	return nil
}

// Close closes the read pool and the write handle, then removes a Memory database.
func (db *DB) Close() error {
	err := errors.Join(db.Read.Close(), db.Write.Close())
	return errors.Join(err, db.removeTemporary())
}

// memoryPrefix starts the name of every Memory database's directory; the process that made
// it follows (memoryOwner: on Linux its PID namespace and pid), then a random suffix.
const memoryPrefix = "lakeshore-memory-"

// memoryDirectory makes a new directory for a Memory database (in /dev/shm when it has room,
// else os.TempDir: memoryParents), first removing the directories left there by processes
// that no longer run (killed before Close).
func memoryDirectory() (string, error) {
	var err error
	for _, parent := range memoryParents() {
		removeOrphans(parent)
		var dir string
		if dir, err = os.MkdirTemp(parent, memoryPrefix+memoryOwner()+"-"); err == nil {
			return dir, nil
		}
	}
	return "", err
}

// removeTemporary removes a Memory database's directory (nothing for a file).
func (db *DB) removeTemporary() error {
	if db.temporary == "" {
		return nil
	}
	return os.RemoveAll(db.temporary)
}

// dsns returns the data source names of the writer and of the readers of the database file
// at path.
func dsns(path, synchronous string, o *Options) (string, string, error) {
	foreignKeys := "off"
	if o.ForeignKeys {
		foreignKeys = "on"
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(%s)", o.BusyTimeout.Milliseconds(), foreignKeys)
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
	// No journal_mode pragma here: Open switches the file to WAL once (useWAL).
	name := "file:" + escaped + "?" + common + "&_pragma=synchronous(" + url.QueryEscape(o.Synchronous) + ")"
	// The writer keeps its statement and savepoint journals in memory (temp_store): each
	// operation of a group commit runs in a savepoint (writer.go), whose journal holds the
	// first copy of every page the operation changes, and SQLite spills a journal over
	// 64 KiB to a temporary file — a pwrite per page for an operation that touches many,
	// such as a keyed submit's scattered index pages. The journal lives until the
	// operation's RELEASE, so its memory is bounded by the pages one operation changes.
	return name + "&_pragma=temp_store(memory)", name + "&_pragma=query_only(1)", nil
}
