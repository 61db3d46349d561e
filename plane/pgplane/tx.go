package pgplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// tx is one plane transaction: its time (the plane's clock, read once), the writes queued to
// go out together, the counter changes applied just before commit, and the keys to wake
// after it.
type tx struct {
	d    *Driver
	ctx  context.Context
	conn *pgxpool.Conn // the transaction's connection, held from start to end
	// begun: BEGIN has been sent (with the transaction's first statements, never alone).
	begun bool
	now   time.Time
	ms    int64
	batch *pgx.Batch // writes whose results nobody reads, sent in one round trip
	// ahead are writes taken from batch (takeWrites) that go out in front of the next statement
	// sent, in its round trip.
	ahead []*pgx.QueuedQuery
	// counts are the counter changes of the transaction, applied in key order just before
	// commit, so two transactions never lock counter rows in opposite orders.
	counts planekit.Counts
	// counted are the concurrency keys whose counter rows the queued writes change (of
	// invocations claimable or running under a key, or a key held back): takeWrites locks them
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
	// generic: the transaction is in the by-id plan mode (byIDPlans, SET LOCAL; the
	// server's defaults when false), as planModes last set it.
	generic bool
	wakes   map[string]struct{}
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
//
// The transaction costs no round trip of its own: BEGIN goes out in the same pipeline as its
// first statements, and COMMIT in the same pipeline as its last writes (the counters), so
// that a transaction of one read and its writes is two round trips (sendBatch, commit).
func (d *Driver) do(ctx context.Context, fn func(*tx) error) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		t := &tx{d: d, ctx: ctx, now: d.cfg.Now()}
		t.ms = t.now.UnixMilli()
		err := t.run(fn)
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

// run runs fn in t on a connection of the pool and commits, or, on any error, rolls back.
func (t *tx) run(fn func(*tx) error) error {
	conn, err := t.d.pool.Acquire(t.ctx)
	if err != nil {
		return err
	}
	t.conn = conn
	// Release returns the connection to the pool only if it is idle outside a transaction;
	// otherwise (a rollback that failed, an answer never read) it closes it.
	defer conn.Release()
	err = fn(t)
	if err == nil {
		err = t.handOff()
	}
	if err == nil {
		err = t.commit()
	}
	if err != nil {
		t.rollback()
		if t.d.health != nil && conn.Conn().IsClosed() {
			t.d.health.noteLost() // the pool's other idle connections are pinged before use
		}
	}
	return err
}

// commit sends the counter changes and the queued writes with COMMIT (and BEGIN, if nothing
// was sent before), in one round trip. COMMIT runs only if every statement before it in the pipeline did: the first statement
// that failed is the error (PostgreSQL skips the rest of the pipeline, COMMIT too, and the
// transaction stays open, aborted, for rollback). A COMMIT that ended the transaction with a
// rollback instead (it was aborted already) is pgx.ErrTxCommitRollback, never a success.
func (t *tx) commit() error {
	t.queueCounts()
	t.takeWrites()
	if !t.begun && len(t.ahead) == 0 {
		return nil // nothing was sent: the transaction never began
	}
	b := &pgx.Batch{}
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	return t.sendBatch(b).Close()
}

// rollback ends the transaction after an error: ROLLBACK if the connection is in one (the
// error may have left it open, aborted or not); a connection where that fails is closed, so
// that the pool never hands out one in an unknown state.
func (t *tx) rollback() {
	c := t.conn.Conn()
	if c.IsClosed() || c.PgConn().TxStatus() == 'I' && !c.PgConn().IsBusy() {
		return
	}
	if _, err := c.Exec(t.ctx, "rollback"); err != nil {
		closed, cancel := context.WithCancel(context.Background())
		cancel() // an ended context: close at once, without a goodbye to the server
		_ = c.Close(closed)
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

// takeWrites takes the queued writes to go out ahead of the next statement sent (sendBatch), in
// its round trip. Reads call it before they choose their statements, which see the
// writes and the rows the writes hold (holdsRows).
func (t *tx) takeWrites() {
	t.queueEnds()
	if t.batch == nil || t.batch.Len() == 0 {
		return
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
		t.ahead = append(t.ahead, locked.QueuedQueries...)
	}
	t.ahead = append(t.ahead, b.QueuedQueries...)
	t.holdsRows = t.holdsRows || len(t.counted) > 0
	clear(t.counted)
	t.unorderedCounts, t.keyedEnds = false, 0
}

// sendBatch sends b in the transaction, in one round trip with what must go before it:
// BEGIN, if the transaction has not begun, and the staged and queued writes (takeWrites). The
// results are b's; an error of the statements before b is the error of every one of them.
func (t *tx) sendBatch(b *pgx.Batch) pgx.BatchResults {
	t.takeWrites()
	var ahead []*pgx.QueuedQuery
	begins := !t.begun
	if begins {
		begin := &pgx.Batch{}
		begin.Queue("begin")
		ahead = begin.QueuedQueries
		t.begun = true
	}
	writes := t.ahead
	generic := t.generic
	ahead = append(ahead, t.planModes(writes, b.QueuedQueries)...)
	t.ahead = nil
	if len(ahead) == 0 {
		return t.conn.SendBatch(t.ctx, b)
	}
	all := &pgx.Batch{QueuedQueries: append(ahead, b.QueuedQueries...)}
	br := t.conn.SendBatch(t.ctx, all)
	for range ahead {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			// A pipeline that failed before BEGIN ran (a statement that did not prepare, an
			// argument that did not encode: nothing ran) leaves the transaction to begin
			// with the next statement, never one sent outside it, and the writes it took to
			// go out with that statement (or COMMIT): none of them ran either.
			if begins && t.conn.Conn().PgConn().TxStatus() == 'I' {
				t.begun = false
				t.ahead = append(writes, t.ahead...)
				t.generic = generic
			}
			return pgx.FailedBatchResults(b, err)
		}
	}
	return br
}

// Plan modes (tx.planModes): the SET LOCAL statements that switch a transaction to the
// by-id mode and back to the server's defaults. By id: plan_cache_mode =
// force_generic_plan, so that the connection plans each statement once, and
// enable_seqscan = off, so that the plan it keeps probes the primary key however few rows
// the table held when it was made: a generic plan made while the table is empty (a new
// database; PostgreSQL then guesses 10 pages) reads it whole, and is kept until the
// table's next analyze, which may be minutes away while it grows (TestByIDPlansProbeKeys).
var (
	byIDPlans    = []string{`set local plan_cache_mode = force_generic_plan`, `set local enable_seqscan = off`}
	defaultPlans = []string{`set local plan_cache_mode = default`, `set local enable_seqscan = default`}
)

// planNeutral are the statements that plan nothing, whatever the plan mode: they never
// switch it.
var planNeutral = map[string]bool{"begin": true, "commit": true, setSyncOff: true}

func init() {
	for _, sql := range append(append([]string(nil), byIDPlans...), defaultPlans...) {
		planNeutral[sql] = true
	}
}

// planModes returns writes, the statements going out ahead of next in one pipeline, with
// the SET LOCALs of the plan mode in front of each that needs another mode than the one
// before it (statements.generic: byIDPlans; any other: defaultPlans), and those at
// the end for next's first statement that plans. The statements of next go out in the
// mode of its first (their answers are its caller's to read, in order, with nothing
// between them); none of them switches it. The mode lasts until the transaction ends
// (SET LOCAL): a claim whose promote goes out alone (queuePromote: BEGIN … COMMIT, BEGIN
// inside next) is its transaction's first statement, sent in the default mode, which the
// new transaction keeps. A switch is two statements more in a pipeline already going
// out: no round trip.
func (t *tx) planModes(writes, next []*pgx.QueuedQuery) []*pgx.QueuedQuery {
	var out []*pgx.QueuedQuery
	plans := func(q *pgx.QueuedQuery) bool { // switching the mode for q first if it needs
		if planNeutral[q.SQL] {
			return false
		}
		if want := t.d.sql.generic[q.SQL]; want != t.generic {
			set := defaultPlans
			if want {
				set = byIDPlans
			}
			for _, sql := range set {
				out = append(out, &pgx.QueuedQuery{SQL: sql})
			}
			t.generic = want
		}
		return true
	}
	for _, q := range writes {
		plans(q)
		out = append(out, q)
	}
	for _, q := range next {
		if plans(q) {
			break
		}
	}
	return out
}

// switchesPlans reports whether sql, sent next, needs the transaction's plan mode switched
// first (planModes).
func (t *tx) switchesPlans(sql string) bool {
	return !planNeutral[sql] && t.d.sql.generic[sql] != t.generic
}

// pending reports statements that must go out before the next one sent (sendBatch).
func (t *tx) pending() bool {
	return !t.begun || len(t.ahead) > 0 || t.batch != nil && t.batch.Len() > 0 || len(t.ends.ids) > 0
}

// changesCounter notes that a write queued for h changes its key's counter row (h is
// claimable or running under a concurrency key), which takeWrites locks in key order first;
// byTrigger: the counting trigger writes it (else h's terminal write counts it).
func (t *tx) changesCounter(h *head, byTrigger bool) {
	if !h.CountedInKey() {
		return
	}
	t.unorderedCounts = t.unorderedCounts || byTrigger
	t.counted.Add(planekit.KeyRef{Namespace: h.Namespace, Queue: h.Queue, Key: h.ConcurrencyKey.String})
}

// query sends sql in the transaction (with what must go before it: sendBatch) and
// returns its rows.
func (t *tx) query(sql string, args ...any) (pgx.Rows, error) {
	if !t.pending() && !t.switchesPlans(sql) {
		return t.conn.Query(t.ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.sendBatch(b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// queryRow is query for one row, as pgx's QueryRow: no row is pgx.ErrNoRows.
func (t *tx) queryRow(sql string, args ...any) pgx.Row {
	if !t.pending() && !t.switchesPlans(sql) {
		return t.conn.QueryRow(t.ctx, sql, args...)
	}
	rows, err := t.query(sql, args...)
	return firstRow{rows, err}
}

// execNow sends sql in the transaction now (with what must go before it: sendBatch) and
// returns its command tag.
func (t *tx) execNow(sql string, args ...any) (pgconn.CommandTag, error) {
	if !t.pending() && !t.switchesPlans(sql) {
		return t.conn.Exec(t.ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.sendBatch(b)
	tag, err := br.Exec()
	return tag, cmp.Or(err, br.Close())
}

// batchRows are the rows of a batch's last statement: once they are read or closed the
// batch is closed, and its error (an error of the pipeline after the rows) is theirs.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error { return cmp.Or(r.Rows.Err(), r.err) }

// firstRow is the first row of rows, as pgx.Row.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		return cmp.Or(r.rows.Err(), pgx.ErrNoRows)
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// count records a change of the invocations of a queue in one state and priority level.
func (t *tx) count(namespace, queue string, state int, priority float64, n int64) {
	if t.counts == nil {
		t.counts = planekit.Counts{}
	}
	if planekit.MakesRoom(t.counts.Add(namespace, queue, state, priority, n), n) {
		t.wake(planekit.RoomKey(namespace, queue)) // room for submits blocked on max depth
	}
}

// queueCounts queues the counter changes, in key order, on one shard: they go out with
// COMMIT (commit).
func (t *tx) queueCounts() {
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
