// Package sqliteplane is the embedded dispatch plane: a plane.Driver on one SQLite file (or
// an in-process memory database for ":memory:"). One writer goroutine drains every pending
// submit, claim, settle, post and maintenance pass into one transaction and commits once
// (group commit), so throughput is many operations per fsync; reads go to a separate pool;
// waiters are woken by notification right after the commit that concerns them.
package sqliteplane

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
	"github.com/lakeshore-dev/lakeshore/plane"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Driver is the SQLite plane. Create it with Open; it is safe for concurrent use.
type Driver struct {
	// Verbs are the verbs both SQL planes share (providers, leases, schedules, pauses,
	// tokens, workers), over kitDB and kit.
	planekit.Verbs
	kit     *planekit.Statements
	cfg     Config
	path    string
	db      *sqlitedb.DB
	readDB  *sql.DB // db.Read
	writer  *sqlitedb.Writer[*wtx]
	ids     *plane.IDGenerator
	hub     *planekit.Hub
	reads   sqlitedb.Prepared // the reads prepared on the read pool (prepareReads)
	blocked planekit.Lines    // submits waiting for room, per queue

	claimWaiters planekit.Waiters[claimWaiter] // claims parked for a direct handoff, per queue
	rotation     planekit.Rotation             // the first queue of claims over several queues
	maintainer   maintainer

	stop    chan struct{}   // closed by Close
	stopped <-chan struct{} // closed when the writer has exited

	closeOnce sync.Once
	closeErr  error
}

// ErrSchemaNewer: the file was migrated by a newer version of Lakeshore (its schema version
// is past this build's migrations); Open refuses it, naming both versions, before writing
// anything, rather than run this build's statements against tables it does not know. Run the
// newer build, or restore a copy of the file taken before the upgrade. The PostgreSQL plane's
// refusal is pgplane.ErrSchemaNewer.
var ErrSchemaNewer = sqlitedb.ErrSchemaNewer

var (
	_ plane.Driver = (*Driver)(nil)
	_ plane.Clock  = (*Driver)(nil) // Now: the plane's clock (planekit.Verbs)
)

// Open opens (creating when missing) the plane stored in the SQLite file at path, or a
// private in-memory plane when path is ":memory:". The file's directory must exist. Two
// processes may open the same file at once. Errors: *plane.InvalidError for a bad Config,
// and errors opening or migrating the database.
func Open(ctx context.Context, path string, cfg *Config) (*Driver, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	db, err := sqlitedb.Open(path, &sqlitedb.Options{Synchronous: c.Synchronous})
	if err != nil {
		var pe *sqlitedb.PathError
		if errors.As(err, &pe) {
			return nil, plane.Invalid("database path", plane.RedactURL(path), pe.Reason) // a mistyped URL holds a password
		}
		return nil, err
	}
	d := &Driver{
		cfg:    c,
		path:   path,
		db:     db,
		readDB: db.Read,
		ids:    plane.NewIDGenerator(),
		hub:    planekit.NewHub(),
		stop:   make(chan struct{}),
	}
	d.kit = kitStatements()
	d.Verbs = planekit.NewVerbs(planekit.Plane{DB: kitDB{d}, Hub: d.hub, Now: d.cfg.Now, CheckOpen: d.checkOpen, Sleep: d.sleep,
		MaxSchedules: d.cfg.MaxSchedulesPerNamespace, MaxWorkers: d.cfg.MaxWorkersPerNamespace}, d.kit)
	d.maintainer = maintainer{retention: c.Retention, batch: 1000}
	if err := d.start(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return d, nil
}

// start migrates the schema, prepares the statements and starts the writer.
func (d *Driver) start(ctx context.Context) error {
	conn, err := d.db.Write.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open %s: %w", d.path, err)
	}
	w := newWriter(d)
	schema, _ := fs.Sub(migrations, "migrations")
	if err := sqlitedb.Migrate(ctx, conn, schema); err != nil {
		conn.Close()
		if errors.Is(err, sqlitedb.ErrSchemaNewer) {
			return fmt.Errorf("open %s: %w", d.path, err)
		}
		return err
	}
	w.conn = conn
	if err := w.st.prepare(ctx, conn, d.kit); err != nil {
		conn.Close()
		return err
	}
	d.writer, err = sqlitedb.NewWriter(ctx, sqlitedb.WriterConfig[*wtx]{
		Conn:          conn,
		MaxBatch:      maxBatch,
		Begin:         w.begin,
		Flush:         (*wtx).flush,
		End:           (*wtx).end,
		Foreign:       w.foreign,
		SchemaVersion: sqlitedb.Versions(schema),
		Waiting:       d.hub.Waiting,
		PollInterval:  d.cfg.PollInterval,
		Tasks: []sqlitedb.Task[*wtx]{
			{Name: "maintenance", Interval: d.cfg.MaintenanceInterval, Apply: func(t *wtx) error {
				_, err := d.maintainer.runOnce(t)
				return err
			}},
		},
		Alarm:   w.alarm,
		AlarmIn: w.alarmIn,
		Logger:  d.cfg.Logger,
		Stopped: w.st.prepared.Close,
	})
	if err != nil {
		w.st.prepared.Close()
		conn.Close()
		return err
	}
	if err := d.prepareReads(ctx); err != nil {
		d.writer.Stop()
		go d.writer.Run()
		<-d.writer.Stopped()
		return err
	}
	d.stopped = d.writer.Stopped()
	go d.writer.Run()
	return nil
}

// Close stops the writer after it has answered every operation already handed to it, wakes
// every waiter with plane.ErrClosed, and closes the database. Safe to call twice.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		close(d.stop)
		d.writer.Stop()
		<-d.stopped
		d.hub.NotifyAll()
		if err := d.db.Close(); err != nil {
			d.closeErr = fmt.Errorf("close %s: %w", d.path, err)
		}
	})
	return d.closeErr
}

// checkOpen returns plane.ErrClosed once Close has begun; reads call it first.
func (d *Driver) checkOpen() error { return planekit.CheckOpen(d.stop) }
