package pgplane

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// warmConns is how many connections Open keeps open in the pool it makes (pgxpool's
// MinConns, unless the URL sets pool_min_conns) and warms before it returns: what the
// plane uses at once under load, one transaction in flight per group of concurrent callers
// (submits, claims, settle-and-claims, settles, posts) plus maintenance, the notifier's
// sends and a verb's reads. Never more than the pool's size.
const warmConns = 8

// warmTimeout bounds Open's warm-up: past it Open returns with the connections it warmed.
const warmTimeout = 10 * time.Second

// hot are the statements of the paths every job takes (submit, claim, settle,
// settle-and-claim, a worker's registration, the notifications), the transaction
// statements and the plan modes around them: warm prepares them on each connection of the pool, so a connection's
// first transactions prepare nothing. A pgx connection prepares a statement the first time
// it runs it (its statement cache), one round trip and a parse more on the transaction
// that does (docs/benchmarks-pg.md, "The first second").
func (d *Driver) hot() []string {
	s := d.sql
	out := []string{"begin", "commit", setSyncOff,
		s.insert, s.insertFresh, s.insertInKeyOrder, s.countsAdd, s.admission, s.admissionExists, s.lockAdmission,
		s.lockKeys, s.promote, s.promoteHolding, s.claimFIFO, s.claimFIFOFrom, s.claimFILO, s.claimPriority,
		s.keyTurnFIFO, s.keyTurnFILO, s.keyTurnPriority, s.setRunning, s.setRunningKeyed,
		s.headMany, s.setTerminalMany, s.setTerminalManyKeyed,
		d.kit.WorkerRefresh, d.kit.WorkerRegister, d.kit.WorkerCount, d.kit.CapLock, notifySQL}
	out = append(out, byIDPlans...)
	return append(out, defaultPlans...)
}

// warmPool sets the hooks of a pool Open makes (pc, parsed from its URL: no hooks of its
// own): the connections it keeps open (MinConns: warmConns, unless the URL set
// pool_min_conns: setMin false), the warmer that prepares the hot statements on each it
// opens (unless prepare is false: Config.OnDemand), and the ping of idle connections after
// a lost one (connHealth).
func warmPool(pc *pgxpool.Config, setMin, prepare bool) (*warmer, *connHealth) {
	if setMin {
		pc.MinConns = min(pc.MaxConns, warmConns)
	}
	// Only where pgx would prepare them itself (its statement cache, the default): with
	// default_query_exec_mode=exec or simple_protocol (PgBouncer without prepared
	// statements) nothing is prepared ahead either.
	w := &warmer{prepare: prepare && pc.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement &&
		pc.ConnConfig.StatementCacheCapacity > 0}
	health := &connHealth{}
	pc.AfterConnect = w.afterConnect
	pc.ShouldPing = health.shouldPing
	return w, health
}

// warmer prepares the hot statements on the connections a pool opens (pgxpool's
// AfterConnect): on those Open opens and on those the pool opens later, to replace one
// past its lifetime or to keep MinConns. It does nothing until the plane's statements are
// known (ready), after the schema is migrated: Open warms the connections opened before.
type warmer struct {
	hot atomic.Pointer[[]string]
	// prepare: pgx prepares statements on this pool (its statement cache); when false
	// (default_query_exec_mode=exec, …) neither does the warmer.
	prepare bool
}

// afterConnect is pgxpool's AfterConnect: it prepares the hot statements on conn once
// ready. Best effort: a statement the server refuses leaves it to be prepared on first use,
// as without the warmer (the connection is handed out); only a connection that failed
// under it is refused (pgxpool then fails that acquire, as a connect that failed).
func (w *warmer) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	if hot := w.hot.Load(); hot != nil && w.prepare {
		if err := prepare(ctx, conn, *hot); err != nil && conn.IsClosed() {
			return err
		}
	}
	return nil
}

// prepare prepares each of sqls on conn under its own text as name, as pgx then runs it
// (Conn.Prepare: a statement prepared under its text is used by Exec, Query and
// SendBatch in place of the statement cache's). Already prepared: nothing sent.
func prepare(ctx context.Context, conn *pgx.Conn, sqls []string) error {
	for _, sql := range sqls {
		if sql == "" {
			continue
		}
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			return err
		}
	}
	return nil
}

// warm opens n connections of the pool at once (or takes those open: n at least as many as
// are open, so each is warmed) and, with prep, prepares the hot statements on each (else
// pings it), holding all n until every one is done, so each is a different connection.
// Within warmTimeout; an error leaves the plane working on what it warmed.
func (d *Driver) warm(ctx context.Context, n int, prep bool) error {
	ctx, cancel := context.WithTimeout(ctx, warmTimeout)
	defer cancel()
	hot := d.hot()
	errs := make([]error, n)
	conns := make([]*pgxpool.Conn, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := d.pool.Acquire(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			conns[i] = c
			if prep {
				errs[i] = prepare(ctx, c.Conn(), hot)
			} else {
				errs[i] = c.Ping(ctx)
			}
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	return errors.Join(errs...)
}

// connHealth tells the pool Open makes which idle connections to ping before handing one
// out (pgxpool's ShouldPing): as pgx does by default, one idle for over a second; and, once
// a transaction found its connection closed (lost, at noteLost), one idle since before
// that. With the pool's connections kept open (warmConns), a server restart or a
// pg_terminate_backend of them all leaves up to that many dead connections idle; without
// the ping each would fail one transaction in turn (plane.ErrUnavailable) before the pool
// opened a new one; with it the first failure is the only one.
type connHealth struct {
	lost atomic.Int64 // when a transaction last found its connection closed, Unix ns; 0: never
}

// noteLost records that a connection was found closed now.
func (h *connHealth) noteLost() { h.lost.Store(time.Now().UnixNano()) }

// shouldPing is pgxpool's ShouldPing.
func (h *connHealth) shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	if p.IdleDuration > time.Second {
		return true
	}
	lost := h.lost.Load()
	return lost != 0 && time.Now().Add(-p.IdleDuration).UnixNano() <= lost
}
