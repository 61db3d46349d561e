// Package sqliteplane is the embedded dispatch plane: a plane.Driver on one SQLite file (or
// an in-process memory database for ":memory:"). One writer goroutine drains every pending
// submit, claim, settle, post and maintenance pass into one transaction and commits once
// (group commit), so throughput is many operations per fsync; reads go to a separate pool;
// waiters are woken by notification right after the commit that concerns them.
package sqliteplane

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/lakeshore-dev/lakeshore/plane"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

//go:embed migrations/*.sql
var migrations embed.FS

// Driver is the SQLite plane. Create it with Open; it is safe for concurrent use.
type Driver struct {
	cfg     Config
	path    string
	writeDB *sql.DB
	readDB  *sql.DB
	ids     *plane.IDGenerator
	hub     *hub
	reads   readStatements
	blocked lines // submits waiting for room, per queue

	claimWaiters claimWaiters // claims parked for a direct handoff, per queue

	ops     chan *op      // unbuffered: a send succeeds only while the writer runs
	stop    chan struct{} // closed by Close: the writer drains and exits
	stopped chan struct{} // closed by the writer when it has exited
	wg      sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var _ plane.Driver = (*Driver)(nil)

// Open opens (creating when missing) the plane stored in the SQLite file at path, or a
// private in-memory plane when path is ":memory:". The file's directory must exist. Two
// processes may open the same file at once. Errors: *plane.InvalidError for a bad Config,
// and errors opening or migrating the database.
func Open(ctx context.Context, path string, cfg *Config) (*Driver, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	writeDSN, readDSN, err := dsns(path, c.Synchronous)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		cfg:     c,
		path:    path,
		ids:     plane.NewIDGenerator(),
		hub:     newHub(),
		ops:     make(chan *op),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	if d.writeDB, err = sql.Open("sqlite", writeDSN); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d.writeDB.SetMaxOpenConns(1)
	d.writeDB.SetMaxIdleConns(1)
	d.writeDB.SetConnMaxLifetime(0)
	d.writeDB.SetConnMaxIdleTime(0)
	w, err := newWriter(ctx, d)
	if err != nil {
		d.writeDB.Close()
		return nil, err
	}
	if d.readDB, err = sql.Open("sqlite", readDSN); err != nil {
		w.close()
		d.writeDB.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d.readDB.SetMaxOpenConns(4)
	d.readDB.SetMaxIdleConns(4)
	if err := d.reads.prepare(ctx, d.readDB); err != nil {
		w.close()
		d.readDB.Close()
		d.writeDB.Close()
		return nil, err
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		w.run()
	}()
	return d, nil
}

// dsns returns the data source names of the writer and of the readers.
func dsns(path, synchronous string) (string, string, error) {
	common := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(off)"
	if path == ":memory:" {
		// SQLite's memdb VFS shares one memory database between this plane's connections
		// (readers and the writer) and no other; it lives while the writer's connection does.
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := "file:/lakeshore-" + hex.EncodeToString(b[:]) + "?vfs=memdb&" + common
		return name, name + "&_pragma=query_only(1)", nil
	}
	if path == "" {
		return "", "", plane.Invalid("database path", path, `use a file path or ":memory:"`)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %w", path, err)
	}
	if st, err := os.Stat(filepath.Dir(abs)); err != nil || !st.IsDir() {
		return "", "", plane.Invalid("database path", path, "its directory must exist")
	}
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(abs)
	name := "file:" + escaped + "?" + common + "&_pragma=journal_mode(wal)&_pragma=synchronous(" + synchronous + ")"
	return name, name + "&_pragma=query_only(1)", nil
}

// migrate applies the embedded migrations not yet recorded in user_version, in order, each
// in its own transaction.
func migrate(ctx context.Context, conn *sql.Conn) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
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
		body, err := migrations.ReadFile(name)
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

// Close stops the writer after it has answered every operation already handed to it, wakes
// every waiter with plane.ErrClosed, and closes the database. Safe to call twice.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		close(d.stop)
		d.wg.Wait()
		d.hub.notifyAll()
		var errs []error
		if err := d.readDB.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := d.writeDB.Close(); err != nil {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			d.closeErr = fmt.Errorf("close %s: %v", d.path, errs)
		}
	})
	return d.closeErr
}

type stderr struct{}

func (stderr) Write(p []byte) (int, error) { return os.Stderr.Write(p) }

// checkOpen returns plane.ErrClosed once Close has begun; reads call it first.
func (d *Driver) checkOpen() error {
	select {
	case <-d.stop:
		return plane.ErrClosed
	default:
		return nil
	}
}
