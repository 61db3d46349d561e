package pgplane

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// tx is one plane transaction: its time (the plane's clock, read once), the writes queued to
// go out together, the counter changes applied just before commit, and the keys to wake
// after it.
type tx struct {
	d     *Driver
	ctx   context.Context
	tx    pgx.Tx
	now   time.Time
	ms    int64
	batch *pgx.Batch // writes whose results nobody reads, sent in one round trip
	// counts are the counter changes of the transaction, applied in key order just before
	// commit, so two transactions never lock counter rows in opposite orders.
	counts planekit.Counts
	// counted are the concurrency keys whose counter rows the queued writes change (of
	// invocations claimable or running under a key, or a key held back): flush locks them
	// in key order first, unless their only writer is one terminal write (keyedEnds 1,
	// unorderedCounts false), which locks them in key order itself (setTerminalManyKeyed).
	counted planekit.KeySet
	// unorderedCounts: a queued write changes a key's counter row without locking its keys
	// in key order itself (the counting trigger, in the order it writes the invocation
	// rows; a hold, keyHold); keyedEnds: how many queued terminal writes count keyed ends
	// (setTerminalManyKeyed).
	unorderedCounts bool
	keyedEnds       int
	// holdsRows: the transaction holds rows a promotion could wait on in a cycle: counter
	// rows (it sent writes that change them, promoted rows, or a claim locked them), the
	// invocation rows of its settles, or whatever an earlier promote of it locked
	// (promoted); its claims promote with promoteHolding.
	holdsRows bool
	wakes     map[string]struct{}
	// ends are the terminal writes not yet queued: they go out as one statement (one
	// UPDATE from arrays for every invocation the transaction ends), queued before the next
	// write or read so that writes keep their order.
	ends ends
	// handoffs are the queues the transaction made jobs claimable in (handOff serves
	// their parked claimers) and the parked claimers it took, and quiet the queues whose
	// waiters in this process are not woken after the commit (nothing is left).
	handoffs planekit.Handoffs
	quiet    map[string]struct{}
}

// ends are terminal writes gathered into one statement.
type ends struct {
	ids             []string
	states          []int16
	results, errors [][]byte
	// keyed counts, per concurrency key, the ended rows that were claimable or running
	// under it, for setTerminalManyKeyed.
	keyed planekit.KeyCounts
}

// shards is how many counter rows share one (queue, state, priority level).
const shards = 8

// do runs fn in a transaction and commits it, then wakes the waiters of what it changed.
// An error from fn rolls everything back and is returned as is. A deadlock or
// serialization failure reruns fn (up to 5 times); a dropped connection returns an error
// matching plane.ErrUnavailable, the transaction rolled back; a ctx that ended under the
// transaction returns ctx's error (see failure).
func (d *Driver) do(ctx context.Context, fn func(*tx) error) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		t := &tx{d: d, ctx: ctx, now: d.cfg.Now()}
		t.ms = t.now.UnixMilli()
		err := pgx.BeginFunc(ctx, d.pool, func(ptx pgx.Tx) error {
			t.tx = ptx
			if err := fn(t); err != nil {
				return err
			}
			if err := t.handOff(); err != nil {
				return err
			}
			return t.flushCounts()
		})
		t.deliver(err == nil)
		if err == nil {
			d.wake(t.wakes, t.handoffs.Quiet(&d.claimWaiters, t.quiet))
			return nil
		}
		if retryable(err) && attempt < 5 {
			time.Sleep(time.Duration(rand.IntN(5)+1) * time.Millisecond)
			continue
		}
		return d.failure(ctx, err)
	}
}

// failure is the error a call made with ctx returns for err: the caller's own errors as
// they are; anything else is plane.ErrClosed once Close has begun (the pool is going away
// under the call); else pgdb.Failure's (the caller's own deadline or cancel as ctx's error,
// never plane.ErrUnavailable; a lost connection matching plane.ErrUnavailable: the
// transaction did not commit, or, for a commit whose answer was lost, may have, so submits
// with a key or client id can be retried safely), prefixed with the plane's name.
func (d *Driver) failure(ctx context.Context, err error) error {
	if err == nil || isPlaneError(err) {
		return err
	}
	if d.checkOpen() != nil {
		return plane.ErrClosed
	}
	f := pgdb.Failure(ctx, d.pool.Config().ConnConfig, err)
	if ctx.Err() != nil && f == ctx.Err() {
		return f
	}
	var pgErr *pgconn.PgError
	if errors.Is(f, plane.ErrUnavailable) || errors.As(f, &pgErr) {
		return fmt.Errorf("pgplane: %w", f)
	}
	return f
}

func isPlaneError(err error) bool {
	var e *plane.Error
	var invalid *plane.InvalidError
	var admission *plane.AdmissionError
	return errors.As(err, &e) || errors.As(err, &invalid) || errors.As(err, &admission) || errors.Is(err, planekit.ErrBlocked)
}

// retryable reports a transaction the database aborted to break a deadlock or a
// serialization conflict: running it again is safe.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	var again *pgconnRetry
	return errors.As(err, &again) || errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// exec queues a write whose result nobody reads; it goes out with the next read or at
// commit.
func (t *tx) exec(sql string, args ...any) {
	t.queueEnds()
	if t.batch == nil {
		t.batch = &pgx.Batch{}
	}
	t.batch.Queue(sql, args...)
}

// end queues the terminal write of h (in state h.State until now): state, result and
// error, finished now.
func (t *tx) end(h *head, state int16, result, errBlob []byte) {
	if h.CountedInKey() {
		t.ends.keyed.Add(h.Namespace, h.Queue, h.ConcurrencyKey.String, h.State == planekit.StateKeyed)
	}
	t.ends.ids = append(t.ends.ids, h.ID)
	t.ends.states = append(t.ends.states, state)
	t.ends.results = append(t.ends.results, result)
	t.ends.errors = append(t.ends.errors, errBlob)
}

// queueEnds queues the gathered terminal writes as one statement (setTerminalMany; with
// keyed rows setTerminalManyKeyed, which counts them in their keys' rows).
func (t *tx) queueEnds() {
	if len(t.ends.ids) == 0 {
		return
	}
	if t.batch == nil {
		t.batch = &pgx.Batch{}
	}
	e := t.ends
	t.ends = ends{}
	k := &e.keyed
	if len(k.Keys) == 0 {
		t.batch.Queue(t.d.sql.setTerminalMany, t.ms, e.ids, e.states, e.results, e.errors)
		return
	}
	t.keyedEnds++
	t.batch.Queue(t.d.sql.setTerminalManyKeyed, t.ms, e.ids, e.states, e.results, e.errors,
		k.Namespaces, k.Queues, k.Keys, k.Queued, k.Running)
}

// flush sends the queued writes. Reads call it first, so they see the writes.
func (t *tx) flush() error {
	t.queueEnds()
	if t.batch == nil || t.batch.Len() == 0 {
		return nil
	}
	b := t.batch
	t.batch = nil
	if len(t.counted) >= 2 && (t.unorderedCounts || t.keyedEnds > 1) {
		// The counter rows of several keys: locked in key order before the writes change
		// them in theirs (lockKeys). One terminal write alone locks its keys in key order
		// itself (setTerminalManyKeyed).
		locked := &pgx.Batch{}
		namespaces, queues, keys := t.counted.Columns()
		locked.Queue(t.d.sql.lockKeys, namespaces, queues, keys)
		locked.QueuedQueries = append(locked.QueuedQueries, b.QueuedQueries...)
		b = locked
	}
	t.holdsRows = t.holdsRows || len(t.counted) > 0
	clear(t.counted)
	t.unorderedCounts, t.keyedEnds = false, 0
	return t.tx.SendBatch(t.ctx, b).Close()
}

// changesCounter notes that a write queued for h changes its key's counter row (h is
// claimable or running under a concurrency key), which flush locks in key order first;
// byTrigger: the counting trigger writes it (else h's terminal write counts it).
func (t *tx) changesCounter(h *head, byTrigger bool) {
	if !h.CountedInKey() {
		return
	}
	t.unorderedCounts = t.unorderedCounts || byTrigger
	t.counted.Add(planekit.KeyRef{Namespace: h.Namespace, Queue: h.Queue, Key: h.ConcurrencyKey.String})
}

func (t *tx) query(sql string, args ...any) (pgx.Rows, error) {
	if err := t.flush(); err != nil {
		return nil, err
	}
	return t.tx.Query(t.ctx, sql, args...)
}

func (t *tx) queryRow(sql string, args ...any) pgx.Row {
	if err := t.flush(); err != nil {
		return errRow{err}
	}
	return t.tx.QueryRow(t.ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// count records a change of the invocations of a queue in one state and priority level.
func (t *tx) count(namespace, queue string, state int, priority float64, n int64) {
	if t.counts == nil {
		t.counts = planekit.Counts{}
	}
	if planekit.MakesRoom(t.counts.Add(namespace, queue, state, priority, n), n) {
		t.wake(planekit.RoomKey(namespace, queue)) // room for submits blocked on max depth
	}
}

// flushCounts applies the counter changes, in key order, on one shard, with the queued
// writes, in one round trip.
func (t *tx) flushCounts() error {
	if keys := t.counts.Sorted(); len(keys) > 0 {
		ns := make([]string, len(keys))
		qs := make([]string, len(keys))
		states := make([]int16, len(keys))
		prios := make([]float64, len(keys))
		deltas := make([]int64, len(keys))
		for i, k := range keys {
			ns[i], qs[i], states[i], prios[i], deltas[i] = k.Namespace, k.Queue, int16(k.State), k.Priority, t.counts[k]
		}
		t.exec(t.d.sql.countsAdd, ns, qs, states, prios, int16(rand.IntN(shards)), deltas)
	}
	t.counts = nil
	return t.flush()
}

// wake marks a key whose waiters the commit wakes.
func (t *tx) wake(key string) {
	if t.wakes == nil {
		t.wakes = make(map[string]struct{})
	}
	t.wakes[key] = struct{}{}
}

// wake wakes the waiters of keys in this process at once (except those of quiet, whose
// claimable jobs were handed to this process's parked claimers), and in the others
// through the notifier.
func (d *Driver) wake(keys, quiet map[string]struct{}) {
	if len(keys) == 0 {
		return
	}
	d.hub.NotifyExcept(keys, quiet)
	d.notifier.add(keys)
}

// sleep waits for changed, for wait to pass (→ plane.ErrTimeout), for ctx (→ its error) or
// for the plane to close (→ plane.ErrClosed). Without a listener it returns nil after the
// jittered poll interval, so the caller re-checks; with one, after recheckPolls intervals,
// so that a notification lost anywhere on its way (a listener that reconnected between the
// commit and the NOTIFY, a notifier that failed to send) delays a waiter by seconds, never
// until its timeout.
func (d *Driver) sleep(ctx context.Context, changed <-chan struct{}, wait time.Duration) error {
	_, err := d.sleepParked(ctx, changed, wait, nil)
	return err
}

// sleepParked is sleep for a parked claim, which a writer's delivery also ends: it returns
// the jobs delivered (nil, nil when the delivery was empty: the claim runs again).
func (d *Driver) sleepParked(ctx context.Context, changed <-chan struct{}, wait time.Duration, deliver <-chan []*plane.Job) ([]*plane.Job, error) {
	poll := d.pollDelay()
	if d.notifier.listening() {
		poll *= recheckPolls
	}
	return planekit.Sleep(ctx, d.stop, changed, deliver, wait, poll)
}

// recheckPolls is how many poll intervals a waiter sleeps, while the listener is up, before
// it re-checks by itself.
const recheckPolls = 5

// pollDelay is the poll interval with ±20% jitter, so that many waiters do not poll in step.
func (d *Driver) pollDelay() time.Duration {
	p := d.cfg.PollInterval
	return p + time.Duration((rand.Float64()*0.4-0.2)*float64(p))
}
