package sqliteplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// maxBatch bounds the operations one transaction drains.
const maxBatch = 512

// op is one operation handed to the writer. apply runs inside the writer's transaction; it
// records its own outcome (results, per-item errors) in variables it closes over and returns
// only infrastructure errors (SQL failures), which roll the transaction back. apply may run
// twice (after a rollback caused by another op in the batch), so it must set its outcome
// afresh each time.
type op struct {
	apply func(t *wtx) error
	done  chan struct{}
	err   error
}

// do hands apply to the writer and waits for the commit that contains it. Once the writer
// took the op, do waits for its answer even if ctx ends, so a caller never mistakes a
// committed submit for a failed one.
func (d *Driver) do(ctx context.Context, apply func(t *wtx) error) error {
	o := &op{apply: apply, done: make(chan struct{})}
	select {
	case d.ops <- o:
	case <-d.stopped:
		return plane.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-o.done
	return o.err
}

// writer owns the write connection and its prepared statements.
type writer struct {
	d           *Driver
	conn        *sql.Conn
	st          statements
	rand        *rand.Rand
	dataVersion int64
	// admissions caches admission blocks by (namespace, queue); a nil entry caches "none".
	// It is cleared after any rollback and whenever another process committed (the
	// transaction-start check of data_version), so it never outlives what it mirrors.
	admissions map[[2]string]*admission
	// queued caches the committed queued count of queues whose depth was checked; kept up to
	// date by flushCounts and cleared with admissions.
	queued map[[2]string]int64
}

func newWriter(ctx context.Context, d *Driver) (*writer, error) {
	conn, err := d.writeDB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.path, err)
	}
	w := &writer{d: d, conn: conn, admissions: make(map[[2]string]*admission), queued: make(map[[2]string]int64)}
	seed := d.cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	w.rand = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if err := migrate(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	if err := w.st.prepare(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&w.dataVersion)
	return w, nil
}

func (w *writer) close() {
	w.st.close()
	w.conn.Close()
}

// run is the writer loop: it drains waiting operations into one transaction, commits once,
// answers each op and wakes the waiters the commit concerns. It also runs maintenance on a
// timer and, while anyone waits, notices commits by other processes.
func (w *writer) run() {
	d := w.d
	defer close(d.stopped)
	defer w.close()
	maintenance := time.NewTicker(d.cfg.MaintenanceInterval)
	defer maintenance.Stop()
	poll := time.NewTicker(d.cfg.PollInterval)
	defer poll.Stop()
	maintain := &op{apply: func(t *wtx) error { return t.maintain() }}
	batch := make([]*op, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case o := <-d.ops:
			batch = append(batch, o)
		case <-maintenance.C:
			batch = append(batch, maintain)
		case <-poll.C:
			w.checkForeignCommits()
			continue
		case <-d.stop:
			// Answer whoever is handing us an op right now, then stop.
			for {
				select {
				case o := <-d.ops:
					w.commit([]*op{o})
					continue
				default:
				}
				return
			}
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case o := <-d.ops:
				batch = append(batch, o)
			default:
				break gather
			}
		}
		w.commit(batch)
	}
}

// commit runs batch in one transaction. If that fails, each op is retried alone so one bad
// op cannot fail the others.
func (w *writer) commit(batch []*op) {
	t, err := w.run1(batch)
	if err != nil && len(batch) > 1 {
		for _, o := range batch {
			w.commit([]*op{o})
		}
		return
	}
	for _, o := range batch {
		o.err = err
		if o.done != nil {
			close(o.done)
		}
	}
	if err == nil {
		w.d.hub.notify(t.notify)
	} else if len(batch) == 1 && batch[0].done == nil {
		w.d.cfg.Logger.Warn("maintenance failed", "error", err)
	}
}

func (w *writer) run1(batch []*op) (*wtx, error) {
	ctx := context.Background()
	if err := w.begin(ctx); err != nil {
		return nil, err
	}
	w.noticeForeignCommits(ctx)
	now := w.d.cfg.Now()
	t := &wtx{w: w, ctx: ctx, now: now, ms: now.UnixMilli(), counts: make(map[countKey]int64), notify: make(map[string]struct{})}
	var err error
	for _, o := range batch {
		if err = o.apply(t); err != nil {
			break
		}
	}
	if err == nil {
		err = t.handOff()
	}
	if err == nil {
		err = t.flushBuckets()
	}
	if err == nil {
		err = t.flushCounts()
	}
	if err == nil {
		if _, err = w.st.commit.ExecContext(ctx); err == nil {
			t.deliver(true)
			return t, nil
		}
	}
	t.deliver(false)
	w.forget()
	if _, rerr := w.conn.ExecContext(ctx, "ROLLBACK"); rerr != nil && !isNoTransaction(rerr) {
		w.d.cfg.Logger.Warn("rollback failed", "error", rerr)
	}
	return nil, err
}

// begin starts a write transaction, waiting out other processes' write locks: SQLITE_BUSY
// is retried (after busy_timeout already waited) so callers never see "database is locked".
func (w *writer) begin(ctx context.Context) error {
	delay := time.Millisecond
	for attempt := 0; ; attempt++ {
		_, err := w.st.begin.ExecContext(ctx)
		if err == nil {
			return nil
		}
		if !isBusy(err) || attempt >= 100 {
			return fmt.Errorf("begin write transaction: %w", err)
		}
		time.Sleep(delay)
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// noticeForeignCommits drops what the writer caches and wakes every waiter when another
// process committed since the writer's last look. It runs right after BEGIN IMMEDIATE (when
// nobody else can commit) and from the poll while anyone waits.
func (w *writer) noticeForeignCommits(ctx context.Context) {
	var v int64
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil || v != w.dataVersion {
		w.forget()
		if err == nil {
			w.dataVersion = v
			w.d.hub.notifyAll() // waiters may have missed the other process's commit
		}
	}
}

// forget drops what the writer caches of the database.
func (w *writer) forget() {
	clear(w.admissions)
	clear(w.queued)
}

// checkForeignCommits wakes every waiter when another process committed to the file since
// the last check. PRAGMA data_version on the writer's own connection changes only with other
// connections' commits, and only the writer writes in this process.
func (w *writer) checkForeignCommits() {
	if w.d.hub.waiting() {
		w.noticeForeignCommits(context.Background())
	}
}

func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return false
}

func isNoTransaction(err error) bool {
	return errors.Is(err, sql.ErrTxDone) || strings.Contains(err.Error(), "no transaction is active")
}

// wtx is the context an op applies itself to: the writer's open transaction, its clock
// reading, the count changes to apply before commit, and the hub keys to notify after it.
type wtx struct {
	w      *writer
	ctx    context.Context
	now    time.Time
	ms     int64
	counts map[countKey]int64
	notify map[string]struct{}
	// claimable are the queues (key → namespace, queue) with jobs made claimable now, and
	// handoffs the jobs claimed for parked waiters; see handoff.go.
	claimable map[string][2]string
	handoffs  []handoff
	// buckets are the token buckets drawn from, written once before commit.
	buckets map[[2]string]*admission
}

type countKey struct {
	namespace, queue string
	state            int
	priority         float64
}

// count records a change of n invocations in (queue, state, priority level).
func (t *wtx) count(namespace, queue string, state int, priority float64, n int64) {
	t.counts[countKey{namespace, queue, state, priority}] += n
	if state == stateQueued && n < 0 {
		t.wake(roomKey(namespace, queue)) // room for submits blocked on max depth
	}
}

// flushCounts applies the recorded count changes.
func (t *wtx) flushCounts() error {
	for k, n := range t.counts {
		if n == 0 {
			continue
		}
		if k.state == stateQueued {
			if q, ok := t.w.queued[[2]string{k.namespace, k.queue}]; ok {
				t.w.queued[[2]string{k.namespace, k.queue}] = q + n
			}
		}
		var total int64
		if err := t.w.st.countAdd.QueryRowContext(t.ctx, k.namespace, k.queue, k.state, k.priority, n).Scan(&total); err != nil {
			return fmt.Errorf("update counts: %w", err)
		}
		if total == 0 {
			if _, err := t.w.st.countDelete.ExecContext(t.ctx, k.namespace, k.queue, k.state, k.priority); err != nil {
				return fmt.Errorf("update counts: %w", err)
			}
		}
	}
	clear(t.counts)
	return nil
}

func (t *wtx) wake(key string) { t.notify[key] = struct{}{} }
