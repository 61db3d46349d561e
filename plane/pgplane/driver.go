// Package pgplane is the dispatch plane on PostgreSQL: a plane.Driver on pgx (pgxpool) that
// any number of processes on any number of machines share. Every operation runs in one
// transaction, shared with the same operations of concurrent callers in the process (group
// commit: one INSERT for many submits, one claim statement for many claimers, one commit
// for many settles or posts); claims take rows with FOR UPDATE SKIP LOCKED from a partial index per claim
// order; counts come from counters kept per (queue, state, priority level) in the same
// transactions; waiters are woken in process at once and across processes through
// LISTEN/NOTIFY, sent from the application and coalesced per key at a bounded rate, with a
// jittered polling fallback; maintenance runs in one process at a time, elected through a
// lease row.
package pgplane

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// SchemaVersion is the schema version this build writes and reads: the number of embedded
// migrations.
func SchemaVersion() int { return migrations("").Versions() }

// Errors of opening a plane. Each names what went wrong, before anything is written. The
// connection's errors are internal/pgdb's (the same values), which the data store's catalog
// (persist/lakestore) returns too.
var (
	// ErrConnectionRefused: nothing accepts connections at the URL's host and port. It also
	// matches plane.ErrUnavailable.
	ErrConnectionRefused = pgdb.ErrConnectionRefused
	// ErrCredentials: the server refused the URL's user or password. It also matches
	// plane.ErrUnauthorized.
	ErrCredentials = pgdb.ErrCredentials
	// ErrHostNotFound: the URL's host name does not resolve (no such host in DNS or
	// /etc/hosts). It also matches plane.ErrUnavailable.
	ErrHostNotFound = pgdb.ErrHostNotFound
	// ErrDatabaseMissing: the URL names a database that does not exist.
	ErrDatabaseMissing = pgdb.ErrDatabaseMissing
	// ErrSchemaNewer: the schema was migrated by a newer version of Lakeshore; this one
	// refuses to run against it rather than misread it.
	ErrSchemaNewer = errors.New("schema is newer than this version of lakeshore")
)

// Driver is the PostgreSQL plane. Create it with Open or New; it is safe for concurrent use.
type Driver struct {
	// Verbs are the verbs both SQL planes share (providers, leases, schedules, pauses,
	// tokens, workers), over kitDB and kit.
	planekit.Verbs
	kit     *planekit.Statements
	cfg     Config
	pool    *pgxpool.Pool
	ownPool bool // Open made the pool: Close closes it
	// health: the pool's ShouldPing, told of connections found closed (Open's pool; nil
	// on a caller's).
	health  *connHealth
	schema  string
	sql     statements
	ids     *plane.IDGenerator
	hub     *planekit.Hub
	blocked planekit.Lines  // submits waiting for room, per queue, in this process
	floors  planekit.Floors // where fifo claims start, per queue
	// promotions: when this process last made rows of each queue claimable; a short claim
	// of a queue promoted lately asks whether a claimable row is left (claimableLeft).
	promotions planekit.Promotions
	// requirements caches the requirement of each shape key claims read (placement.go).
	requirements planekit.Requirements
	// claimWaiters are the idle claims parked for a direct handoff, per queue.
	claimWaiters planekit.Waiters[claimWaiter]
	// rotation turns the first queue of claims over several queues.
	rotation planekit.Rotation

	maintainMu sync.Mutex // one maintenance pass at a time in this process
	// settledKeys is where maintenance's next look for settled counter rows starts
	// (planekit.DropSettledKeys); guarded by maintainMu.
	settledKeys planekit.KeyCursor
	node        string

	rand *planekit.LockedRand // the boltzmann draw and the backoff jitter

	notifier *notifier
	settles  *planekit.Grouper[*settleRequest]
	claims   *planekit.Grouper[*claimRequest]
	// settleClaims groups the settle-and-claim calls of concurrent workers.
	settleClaims *planekit.Grouper[*settleClaimRequest]
	submits      *planekit.Grouper[*submitRequest]
	posts        *planekit.Grouper[*postRequest]

	// clockOffset is the database's clock minus the machine's, in nanoseconds, when the
	// plane's clock follows the database's (Config.Now unset; syncClock).
	clockOffset atomic.Int64

	stop      chan struct{} // closed by Close
	wg        sync.WaitGroup
	closeOnce sync.Once
}

var (
	_ plane.Driver = (*Driver)(nil)
	_ plane.Clock  = (*Driver)(nil) // Now: the plane's clock (planekit.Verbs)
)

// Open connects to the PostgreSQL database at url (postgres://user:password@host:port/db or
// a key=value connection string; pool_max_conns sets the pool's size, 8 by default;
// pool_min_conns how many connections it keeps open, 8 by default and never more than the
// pool's size; the plane's own parameters schema, poll_only, poll_interval and retention
// set those fields of cfg, see ParseURL), migrates the plane's schema to SchemaVersion and
// starts the plane. Before it returns it opens the pool's pool_min_conns connections and
// prepares on each the statements every job runs, as the pool does on each connection it
// opens later, so that the first jobs do not pay for opening and preparing
// (docs/operations.md, "Sizing the pool"); a failure there is logged, not returned. Close
// closes the pool it makes. Errors: *plane.InvalidError for a bad URL, URL parameter or
// Config; ErrHostNotFound, ErrConnectionRefused, ErrCredentials, ErrDatabaseMissing or
// ErrSchemaNewer, wrapped with what the server said.
func Open(ctx context.Context, url string, cfg *Config) (*Driver, error) {
	pc, fromURL, err := ParseURL(url, cfg)
	if err != nil {
		return nil, err
	}
	c := fromURL.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if !strings.Contains(url, "pool_max_conns") {
		pc.MaxConns = max(pc.MaxConns, 8) // grouped callers need few, but the default 4 is tight
	}
	minSet := strings.Contains(url, "pool_min_conns")
	onDemand := c.OnDemand && !minSet
	w, health := warmPool(pc, !minSet && !onDemand, !onDemand)
	pool, err := connect(ctx, pc)
	if err != nil {
		return nil, err
	}
	d, err := start(ctx, pool, c)
	if err != nil {
		pool.Close()
		return nil, err
	}
	d.ownPool = true
	d.health = health
	hot := d.hot()
	w.hot.Store(&hot)
	// The connections opened before the statements were known (the pool's first, its
	// MinConns opened in the background) are warmed here; later ones as they open.
	if n := int(min(pc.MaxConns, max(pc.MinConns, pool.Stat().TotalConns()))); n > 0 && !onDemand {
		if err := d.warm(ctx, n, w.prepare); err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("pgplane: warming the pool's connections failed; they open and prepare on first use", "err", err)
		}
	}
	return d, nil
}

// New starts a plane on an existing pool, migrating the schema to SchemaVersion first (within
// 30 s). The pool stays the caller's: Close does not close it. Errors as Open's. Wrap it
// for the SDK in two steps (drv, err := pgplane.New(pool, cfg); then
// lakeshore.New(drv, nil)): the SDK's New takes a driver and a Config, not New's two
// results. A pool built from a URL that carries the plane's parameters (schema=…) must be
// parsed with ParseURL, which removes them: PostgreSQL refuses a connection that sends them.
func New(pool *pgxpool.Pool, cfg *Config) (*Driver, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("pgplane: %w", pgdb.Classify(pool.Config().ConnConfig, err))
	}
	return start(ctx, pool, c)
}

func start(ctx context.Context, pool *pgxpool.Pool, c Config) (*Driver, error) {
	d := &Driver{
		cfg:    c,
		pool:   pool,
		schema: pgx.Identifier{c.Schema}.Sanitize(),
		ids:    plane.NewIDGenerator(),
		hub:    planekit.NewHub(),
		node:   plane.NewToken(time.Now()),
		stop:   make(chan struct{}),
		rand:   planekit.NewLockedRand(c.Seed),
	}
	if c.followDatabase {
		d.cfg.Now = d.databaseNow
		if err := d.syncClock(ctx); err != nil {
			return nil, fmt.Errorf("pgplane: read the database's clock: %w", pgdb.Classify(pool.Config().ConnConfig, err))
		}
	}
	if err := Migrate(ctx, pool, c.Schema); err != nil {
		return nil, err
	}
	d.sql = newStatements(d.schema)
	d.kit = kitStatements(d.schema)
	d.Verbs = planekit.NewVerbs(planekit.Plane{DB: kitDB{d}, Hub: d.hub, Now: d.cfg.Now, CheckOpen: d.checkOpen, Sleep: d.sleep,
		MaxSchedules: d.cfg.MaxSchedulesPerNamespace, MaxWorkers: d.cfg.MaxWorkersPerNamespace}, d.kit)
	d.notifier = newNotifier(d)
	d.settles = planekit.NewGrouper(d.checkOpen, maxSettleGroup, d.settleGroup, func(r *settleRequest) int { return len(r.params) })
	d.claims = planekit.NewGrouper(d.checkOpen, maxClaimGroup, d.claimGroup, func(r *claimRequest) int { return r.N })
	d.settleClaims = planekit.NewGrouper(d.checkOpen, maxSettleClaimGroup, d.settleClaimGroup, func(r *settleClaimRequest) int { return len(r.settle) + r.claim.N })
	d.submits = planekit.NewGrouper(d.checkOpen, maxSubmitGroup, d.submitGroup, func(r *submitRequest) int { return max(len(r.p.Invocations), 1) })
	d.posts = planekit.NewGrouper(d.checkOpen, maxPostGroup, d.postGroup, func(*postRequest) int { return 1 })
	d.wg.Add(2)
	go func() { defer d.wg.Done(); d.notifier.run() }()
	go func() { defer d.wg.Done(); d.maintainLoop() }()
	return d, nil
}

// Migrate brings the schema named schema up to SchemaVersion, each migration in its own
// transaction under a transaction-scoped lock (safe with PgBouncer), so concurrent
// processes migrate once (pgdb.Migrate). It refuses a schema of a newer version
// (ErrSchemaNewer) before writing anything. The `lakeshore migrate` verb calls it.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if err := validateSchema("schema", schema); err != nil {
		return err
	}
	if err := pgdb.Migrate(ctx, pool, migrations(schema)); err != nil {
		return fmt.Errorf("pgplane: %w", err)
	}
	return nil
}

// migrations are the plane's schema named schema and its migrations.
func migrations(schema string) *pgdb.Schema {
	files, _ := fs.Sub(migrationFiles, "migrations")
	return &pgdb.Schema{
		Name:     schema,
		Files:    files,
		Lock:     `SELECT pg_advisory_xact_lock(hashtext($1))`,
		LockArgs: []any{"lakeshore-migrate:" + schema},
		TooNew: func(have, known int) error {
			return fmt.Errorf("schema %s is at version %d, this build knows up to %d: upgrade lakeshore: %w",
				schema, have, known, ErrSchemaNewer)
		},
	}
}

// Close stops background work, wakes every waiter with plane.ErrClosed, gives up the
// maintenance lease and, when Open made the pool, closes it. Safe to call twice.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		close(d.stop)
		d.wg.Wait()
		d.hub.NotifyAll()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d.releaseLeadership(ctx)
		cancel()
		if d.ownPool {
			d.pool.Close()
		}
	})
	return nil
}

// databaseNow is the plane's clock when Config.Now is unset: the database's, as the
// machine's clock corrected by the offset syncClock measured.
func (d *Driver) databaseNow() time.Time {
	return d.cfg.machineClock().Add(time.Duration(d.clockOffset.Load()))
}

// syncClock measures the offset of the database's clock from the machine's: one read of
// clock_timestamp(), against the middle of the machine's readings around it, so the
// measure is off by at most half the round trip. A change of less than clockJitter plus
// that half is not applied, so the plane's clock does not wander with each round trip's
// noise (a loaded machine's slow round trips included).
func (d *Driver) syncClock(ctx context.Context) error {
	before := d.cfg.machineClock()
	var database time.Time
	if err := d.pool.QueryRow(ctx, clockSQL).Scan(&database); err != nil {
		return err
	}
	after := d.cfg.machineClock()
	half := after.Sub(before) / 2
	offset := database.Sub(before.Add(half))
	if (offset - time.Duration(d.clockOffset.Load())).Abs() >= clockJitter+half {
		d.clockOffset.Store(int64(offset))
	}
	return nil
}

// clockSQL reads the database's clock (syncClock).
const clockSQL = `SELECT clock_timestamp()`

// clockJitter is the least change of the measured clock offset that syncClock applies: far
// below any lease (a second at least), above a round trip's noise.
const clockJitter = 20 * time.Millisecond

// checkOpen returns plane.ErrClosed once Close has begun.
func (d *Driver) checkOpen() error { return planekit.CheckOpen(d.stop) }

// connect makes the pool of pc and checks that it reaches the server (pgdb.Connect: the
// errors classified).
func connect(ctx context.Context, pc *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgdb.Connect(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgplane: %w", err)
	}
	return pool, nil
}
