package sqliteplane

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// maxBatch bounds the operations one transaction drains.
const maxBatch = 512

// do hands apply to the writer and waits for the commit that contains it. apply runs inside
// the writer's transaction; it records its own outcome (results, per-item errors) in
// variables it closes over and returns only infrastructure errors (SQL failures), which roll
// the transaction back. apply may run twice (after a rollback caused by another op in the
// batch), so it must set its outcome afresh each time. Once the writer took the op, do waits
// for its answer even if ctx ends, so a caller never mistakes a committed submit for a
// failed one.
func (d *Driver) do(ctx context.Context, apply func(t *wtx) error) error {
	err := d.writer.Do(ctx, apply)
	if err == sqlitedb.ErrClosed {
		return plane.ErrClosed
	}
	return sqlitedb.WriteError(err, "the plane's database", d.path)
}

// writer is the state the writer's transactions share: its connection, prepared statements,
// random source and caches. Only the writer's goroutine touches it.
type writer struct {
	d    *Driver
	conn *sql.Conn
	st   statements
	rand *rand.Rand
	// admissions caches admission blocks by (namespace, queue); a nil entry caches "none".
	// It is cleared after any rollback and whenever another process committed (the
	// transaction-start check of data_version), so it never outlives what it mirrors.
	admissions map[[2]string]*admission
	// paused caches whether a queue is paused (pause.go; a pause or resume drops its entry:
	// kit.go's PauseChanged), cleared with admissions.
	paused map[[2]string]bool
	// queued caches the committed queued count of queues whose depth was checked; kept up to
	// date by flushCounts and cleared with admissions.
	queued map[[2]string]int64
	// keyed holds the queues this writer submitted or claimed jobs with a concurrency key
	// in: a lease ending there may free a key's slot, so it wakes the queue's claimers.
	keyed map[[2]string]bool
	// requirements caches the requirement of each shape key the claims read.
	requirements planekit.Requirements
	// nextDue is the earliest available_ms of a delayed invocation: dueUnknown until read
	// (and after anything that may have changed it behind the writer's back), dueNone when
	// there is none. armed is the nextDue the alarm was last set for.
	nextDue, armed int64
}

const (
	dueUnknown int64 = 0
	dueNone    int64 = math.MaxInt64
)

func newWriter(d *Driver) *writer {
	return &writer{d: d, admissions: make(map[[2]string]*admission), paused: make(map[[2]string]bool), queued: make(map[[2]string]int64),
		keyed: make(map[[2]string]bool), armed: -1, rand: planekit.NewRand(d.cfg.Seed)}
}

// begin starts the state of a transaction, at the plane clock's current reading.
func (w *writer) begin(ctx context.Context) *wtx {
	now := w.d.cfg.Now()
	return &wtx{w: w, ctx: ctx, now: now, ms: now.UnixMilli(), counts: planekit.Counts{}, notify: make(map[string]struct{})}
}

// flush writes what the transaction's ops accumulated: handoffs to parked claimers, token
// buckets and counts.
func (t *wtx) flush() error {
	if err := t.handOff(); err != nil {
		return err
	}
	if err := t.flushBuckets(); err != nil {
		return err
	}
	return t.flushCounts()
}

// end delivers handoffs and wakes waiters after a commit, or drops the caches after a
// rollback.
func (t *wtx) end(committed bool) {
	t.deliver(committed)
	if committed {
		t.w.d.hub.Notify(t.notify)
	} else {
		t.w.forget()
	}
}

// foreign drops what the writer caches when another process may have committed, and wakes
// every waiter when it did: they may have missed that commit.
func (w *writer) foreign(err error) {
	w.forget()
	if err == nil {
		w.d.hub.NotifyAll()
	}
}

// forget drops what the writer caches of the database.
func (w *writer) forget() {
	clear(w.admissions)
	clear(w.paused)
	clear(w.queued)
	w.nextDue = dueUnknown
}

// wtx is the context an op applies itself to: the writer's open transaction, its clock
// reading, the count changes to apply before commit, and the hub keys to notify after it.
type wtx struct {
	w      *writer
	ctx    context.Context
	now    time.Time
	ms     int64
	counts planekit.Counts
	notify map[string]struct{}
	// handoffs are the queues with jobs made claimable now, and the jobs claimed for their
	// parked waiters; see handoff.go.
	handoffs planekit.Handoffs
	// buckets are the token buckets drawn from, written once before commit.
	buckets map[[2]string]*admission
	// runs are the jobs claimed whose rows runPending has not written yet.
	runs []run
	// written counts the rows changed by planekit's statements (kitTx.Exec), so a refused
	// submit tells whether the walk before its refusal changed any (submitOnce).
	written int64
}

// count records a change of n invocations in (queue, state, priority level).
func (t *wtx) count(namespace, queue string, state int, priority float64, n int64) {
	state = t.counts.Add(namespace, queue, state, priority, n)
	if state == planekit.StateRunning && n < 0 && t.w.keyed[[2]string{namespace, queue}] {
		t.markClaimable(namespace, queue) // a lease ended: its key's slot may be free
	}
	if planekit.MakesRoom(state, n) {
		t.wake(planekit.RoomKey(namespace, queue)) // room for submits blocked on max depth
	}
}

// flushCounts applies the recorded count changes.
func (t *wtx) flushCounts() error {
	for k, n := range t.counts {
		if n == 0 {
			continue
		}
		if planekit.Queued(k.State) {
			if q, ok := t.w.queued[[2]string{k.Namespace, k.Queue}]; ok {
				t.w.queued[[2]string{k.Namespace, k.Queue}] = q + n
			}
		}
		var total int64
		if err := t.w.st.countAdd.QueryRowContext(t.ctx, k.Namespace, k.Queue, k.State, k.Priority, n).Scan(&total); err != nil {
			return fmt.Errorf("update counts: %w", err)
		}
		if total == 0 {
			if _, err := t.w.st.countDelete.ExecContext(t.ctx, k.Namespace, k.Queue, k.State, k.Priority); err != nil {
				return fmt.Errorf("update counts: %w", err)
			}
		}
	}
	clear(t.counts)
	return nil
}

func (t *wtx) wake(key string) { t.notify[key] = struct{}{} }

// alarm promotes the delayed invocations that are due (the writer runs it when the earliest
// of them comes due), and hands them to parked claimers in the same transaction.
func (w *writer) alarm(t *wtx) error {
	w.armed = -1 // re-arm after this pass even if the earliest due time did not move
	_, err := t.promoteDue(promoteBatch)
	return err
}

// alarmIn tells the writer when to run alarm next: when the earliest due time comes, by the
// plane's clock. An unknown due time is read soon; a fake clock that jumps ahead is caught
// up by maintenance, which promotes too.
func (w *writer) alarmIn() (time.Duration, bool) {
	if w.nextDue == w.armed {
		return 0, false
	}
	w.armed = w.nextDue
	switch w.nextDue {
	case dueUnknown:
		return 10 * time.Millisecond, true
	case dueNone:
		return -1, true
	}
	return time.Duration(w.nextDue-w.d.cfg.Now().UnixMilli()) * time.Millisecond, true
}
