package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// MaxBatchDefault bounds the operations one transaction drains when WriterConfig.MaxBatch
// is 0.
const MaxBatchDefault = 512

// ErrClosed is returned by Writer.Do once the writer has stopped.
var ErrClosed = errors.New("writer closed")

// Writer is a group-commit writer: one goroutine (Run) owns the write connection, drains
// every operation waiting at that moment (up to MaxBatch) into one BEGIN IMMEDIATE
// transaction, and commits once, so throughput is many operations per fsync. T is the
// per-transaction state the operations of a batch share (made by WriterConfig.Begin).
//
// An operation that fails with an error rolls the whole transaction back; the writer then
// runs each operation of the batch alone in its own transaction, so one bad operation
// cannot fail the others. Operations therefore may run twice and must set their outcome
// afresh each time; they report caller mistakes through variables they close over and
// return only infrastructure errors. With WriterConfig.Savepoint set, each operation of a
// batch runs in its own savepoint instead: a failing operation undoes only itself, its
// error is its answer, and no operation runs twice.
type Writer[T any] struct {
	cfg           WriterConfig[T]
	begin, commit *sql.Stmt
	watch         *CommitWatch
	ops           chan *op[T]  // unbuffered: a send succeeds only while the writer runs
	handing       atomic.Int64 // callers blocked handing an op to ops (Handing)
	stop          chan struct{}
	stopped       chan struct{}
	// savepoint, rollbackTo and release are the per-operation savepoint statements, prepared
	// when cfg.Savepoint is set.
	savepoint, rollbackTo, release *sql.Stmt
	// schemaCheck is set when another process committed: the next transaction reads the
	// schema version (cfg.SchemaVersion). newer is the refusal once a newer one was read.
	schemaCheck bool
	newer       error
}

// WriterConfig configures a Writer. Conn and Begin are required.
type WriterConfig[T any] struct {
	// Conn is the write connection (from DB.Write.Conn), owned by the writer from now on:
	// Run closes it when it returns.
	Conn *sql.Conn
	// MaxBatch bounds the operations of one transaction. Defaults to MaxBatchDefault.
	MaxBatch int
	// Begin makes the state of a new transaction, right after BEGIN IMMEDIATE and the check
	// for other processes' commits.
	Begin func(ctx context.Context) T
	// Flush runs after the batch's operations, before COMMIT (write what they accumulated).
	// An error rolls the transaction back. Optional.
	Flush func(tx T) error
	// End runs right after COMMIT (committed true) or ROLLBACK (false), before the
	// operations' callers are answered: wake waiters, or drop caches. Optional.
	End func(tx T, committed bool)
	// Foreign runs in the writer's goroutine when another process committed since the
	// writer's last look (err nil), or when that could not be read (err set): drop caches,
	// wake waiters. It is checked at the start of every transaction and, every
	// PollInterval, while Waiting reports true. Optional.
	Foreign func(err error)
	// SchemaVersion, when > 0, is the last schema version this build knows (its number of
	// migrations). After another process committed, the writer reads PRAGMA user_version at
	// the start of its next transaction, under the write lock; if a newer build migrated the
	// file meanwhile (an old daemon or server still running beside a new one), that
	// transaction and every later one are refused with a *SchemaNewerError, writing
	// nothing: this build's statements must not run against tables and triggers it does
	// not know (Migrate refuses such a file at open). 0: no check.
	SchemaVersion int
	// Waiting reports whether anyone waits for a change, which turns on the poll for other
	// processes' commits. Nil never polls.
	Waiting func() bool
	// PollInterval is the period of that poll. Defaults to 20 ms.
	PollInterval time.Duration
	// Tasks run periodically in the writer, each in a transaction of its own batch.
	Tasks []Task[T]
	// Alarm is work the caller schedules itself (for instance, the moment a delayed row
	// becomes due): after every transaction, and once at start, the writer calls AlarmIn,
	// which returns when to run Alarm next (in < 0: not at all; in ≤ 0 with set: at once)
	// or set false to leave the alarm as it is. Alarm runs in a transaction of its own batch.
	// AlarmIn runs in the writer's goroutine and must be cheap. Both optional.
	Alarm   func(tx T) error
	AlarmIn func() (in time.Duration, set bool)
	// Logger receives task failures. Required: the caller passes its own, so no writer
	// logs to the process-wide default behind its caller's back.
	Logger *slog.Logger
	// Stopped runs when Run returns, after the last transaction and before the connection
	// closes (close prepared statements here). Optional.
	Stopped func()
	// Savepoint, when set, makes the operations of a batch independent without running any
	// twice: each operation of a batch of several runs inside its own SAVEPOINT, and an
	// error it returns rolls back only its own writes (ROLLBACK TO) and is its answer alone;
	// the others go on and commit. Savepoint runs before each such operation, before the
	// SAVEPOINT statement: it writes what earlier operations left pending (the savepoint
	// must not cover it) and returns the undo that puts tx back as it is now, called when the
	// operation fails. Its error fails the batch. A batch of one operation runs without a
	// savepoint (its error rolls the transaction back and is its answer), and so does an
	// operation handed over with DoWithoutSavepoint. A failure of the transaction itself
	// (BEGIN, a savepoint statement, Flush, COMMIT, the error of an operation without a
	// savepoint) answers every operation of the batch with that error. Optional: without it,
	// a failing operation rolls the batch back and each operation is retried alone.
	Savepoint func(tx T) (undo func(), err error)
}

// Task is periodic work of a Writer: Apply runs every Interval inside a transaction.
type Task[T any] struct {
	// Name names the task in log lines.
	Name string
	// Interval is the period; it must be positive.
	Interval time.Duration
	// Apply is the work, as an operation of Do.
	Apply func(tx T) error
}

type op[T any] struct {
	apply func(tx T) error
	done  chan struct{} // nil for a task
	task  *Task[T]
	err   error
	// whole: the operation runs without a savepoint of its own (DoWithoutSavepoint).
	whole bool
}

// NewWriter prepares the writer's statements on cfg.Conn and reads the data version. Start
// it with go w.Run().
func NewWriter[T any](ctx context.Context, cfg WriterConfig[T]) (*Writer[T], error) {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = MaxBatchDefault
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	if cfg.Logger == nil {
		return nil, errors.New("sqlitedb: WriterConfig.Logger is required")
	}
	w := &Writer[T]{cfg: cfg, ops: make(chan *op[T]), stop: make(chan struct{}), stopped: make(chan struct{})}
	var err error
	if w.begin, err = cfg.Conn.PrepareContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, fmt.Errorf("prepare BEGIN: %w", err)
	}
	if w.commit, err = cfg.Conn.PrepareContext(ctx, "COMMIT"); err != nil {
		w.begin.Close()
		return nil, fmt.Errorf("prepare COMMIT: %w", err)
	}
	if cfg.Savepoint != nil {
		for _, s := range []struct {
			st  **sql.Stmt
			sql string
		}{{&w.savepoint, "SAVEPOINT op"}, {&w.rollbackTo, "ROLLBACK TO op"}, {&w.release, "RELEASE op"}} {
			if *s.st, err = cfg.Conn.PrepareContext(ctx, s.sql); err != nil {
				w.closeStatements()
				return nil, fmt.Errorf("prepare %s: %w", s.sql, err)
			}
		}
	}
	w.watch = NewCommitWatch(ctx, cfg.Conn)
	return w, nil
}

// closeStatements closes the writer's prepared statements.
func (w *Writer[T]) closeStatements() {
	for _, st := range []*sql.Stmt{w.begin, w.commit, w.savepoint, w.rollbackTo, w.release} {
		if st != nil {
			st.Close()
		}
	}
}

// Do hands apply to the writer and waits for the commit (or rollback) of the transaction
// that ran it; its error is apply's, the transaction's, or ErrClosed when the writer has
// stopped. Once the writer took the operation, Do waits for its answer even if ctx ends,
// so a caller never mistakes a committed write for a failed one.
func (w *Writer[T]) Do(ctx context.Context, apply func(tx T) error) error {
	return w.do(ctx, &op[T]{apply: apply, done: make(chan struct{})})
}

// DoWithoutSavepoint is Do for an operation that needs no savepoint of its own
// (WriterConfig.Savepoint), sparing the two statements: it runs in the batch's transaction
// directly, and an error it returns rolls the whole transaction back and is the answer of
// every operation of the batch. Such an operation reports its refusals through variables it
// closes over (having written nothing) and returns only infrastructure errors. Without
// WriterConfig.Savepoint it is Do.
func (w *Writer[T]) DoWithoutSavepoint(ctx context.Context, apply func(tx T) error) error {
	return w.do(ctx, &op[T]{apply: apply, done: make(chan struct{}), whole: true})
}

func (w *Writer[T]) do(ctx context.Context, o *op[T]) error {
	w.handing.Add(1)
	select {
	case w.ops <- o:
		w.handing.Add(-1)
	case <-w.stopped:
		w.handing.Add(-1)
		return ErrClosed
	case <-ctx.Done():
		w.handing.Add(-1)
		return ctx.Err()
	}
	<-o.done
	return o.err
}

// Handing is the number of callers of Do waiting for the writer to take their operation
// (the writer is busy with a transaction); the next transaction takes them, in the order
// they came, up to MaxBatch. A gauge for tests and metrics.
func (w *Writer[T]) Handing() int { return int(w.handing.Load()) }

// Stop asks Run to answer the operation being handed to it, if any, and return. It does
// not wait; wait on Stopped.
func (w *Writer[T]) Stop() { close(w.stop) }

// Stopped is closed when Run has returned.
func (w *Writer[T]) Stopped() <-chan struct{} { return w.stopped }

// Run is the writer loop. It returns after Stop.
func (w *Writer[T]) Run() {
	defer close(w.stopped)
	defer w.cfg.Conn.Close()
	defer func() {
		if w.cfg.Stopped != nil {
			w.cfg.Stopped()
		}
		w.closeStatements()
	}()
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	tasks := make(chan *op[T])
	quit := make(chan struct{})
	defer close(quit)
	for i := range w.cfg.Tasks {
		task := &w.cfg.Tasks[i]
		o := &op[T]{apply: task.Apply, task: task}
		go func() {
			tick := time.NewTicker(task.Interval)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					select {
					case tasks <- o:
					case <-quit:
						return
					}
				case <-quit:
					return
				}
			}
		}()
	}
	alarm := time.NewTimer(time.Hour)
	alarm.Stop()
	defer alarm.Stop()
	alarmTask := &Task[T]{Name: "alarm", Apply: w.cfg.Alarm}
	alarmOp := &op[T]{apply: w.cfg.Alarm, task: alarmTask}
	rearm := func() {
		if w.cfg.AlarmIn == nil || w.cfg.Alarm == nil {
			return
		}
		if in, set := w.cfg.AlarmIn(); set {
			if in < 0 {
				alarm.Stop()
			} else {
				alarm.Reset(max(in, 0))
			}
		}
	}
	rearm()
	batch := make([]*op[T], 0, w.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case o := <-w.ops:
			batch = append(batch, o)
		case o := <-tasks:
			batch = append(batch, o)
		case <-alarm.C:
			batch = append(batch, alarmOp)
		case <-poll.C:
			if w.cfg.Waiting != nil && w.cfg.Waiting() {
				w.checkForeign(context.Background())
			}
			continue
		case <-w.stop:
			// Answer whoever is handing us an op right now, then stop.
			for {
				select {
				case o := <-w.ops:
					w.run([]*op[T]{o})
					continue
				default:
				}
				return
			}
		}
	gather:
		for len(batch) < w.cfg.MaxBatch {
			select {
			case o := <-w.ops:
				batch = append(batch, o)
			default:
				break gather
			}
		}
		w.run(batch)
		rearm()
	}
}

// run commits batch in one transaction. If that fails, each op is retried alone (without
// WriterConfig.Savepoint) or answered with the transaction's error (with it).
func (w *Writer[T]) run(batch []*op[T]) {
	err := w.transact(batch)
	if err != nil && len(batch) > 1 && w.cfg.Savepoint == nil {
		for _, o := range batch {
			w.run([]*op[T]{o})
		}
		return
	}
	for _, o := range batch {
		if err != nil {
			o.err = err
		}
		if o.done != nil {
			close(o.done)
		}
		if o.err != nil && o.task != nil {
			w.cfg.Logger.Warn(o.task.Name+" failed", "error", o.err)
		}
	}
}

// transact runs batch in one transaction and returns the transaction's error. With
// WriterConfig.Savepoint, an operation that failed alone has its error in its op.err.
func (w *Writer[T]) transact(batch []*op[T]) error {
	ctx := context.Background()
	for _, o := range batch {
		o.err = nil
	}
	if err := w.beginTx(ctx); err != nil {
		return err
	}
	w.checkForeign(ctx)
	if err := w.checkSchema(ctx); err != nil {
		if _, rerr := w.cfg.Conn.ExecContext(ctx, "ROLLBACK"); rerr != nil && !IsNoTransaction(rerr) {
			w.cfg.Logger.Warn("rollback failed", "error", rerr)
		}
		return err
	}
	tx := w.cfg.Begin(ctx)
	isolate := w.cfg.Savepoint != nil && len(batch) > 1
	var err error
	for _, o := range batch {
		if isolate && !o.whole {
			err = w.isolated(ctx, tx, o)
		} else {
			err = o.apply(tx)
		}
		if err != nil {
			break
		}
	}
	if err == nil && w.cfg.Flush != nil {
		err = w.cfg.Flush(tx)
	}
	if err == nil {
		if _, err = w.commit.ExecContext(ctx); err == nil {
			if w.cfg.End != nil {
				w.cfg.End(tx, true)
			}
			return nil
		}
	}
	if w.cfg.End != nil {
		w.cfg.End(tx, false)
	}
	if _, rerr := w.cfg.Conn.ExecContext(ctx, "ROLLBACK"); rerr != nil && !IsNoTransaction(rerr) {
		w.cfg.Logger.Warn("rollback failed", "error", rerr)
	}
	return err
}

// isolated runs o inside its own savepoint: o's error is o's answer (o.err) and undoes
// only o's writes. The error returned is the transaction's.
func (w *Writer[T]) isolated(ctx context.Context, tx T, o *op[T]) error {
	undo, err := w.cfg.Savepoint(tx)
	if err != nil {
		return err
	}
	if _, err := w.savepoint.ExecContext(ctx); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if o.err = o.apply(tx); o.err != nil {
		undo()
		if _, err := w.rollbackTo.ExecContext(ctx); err != nil {
			return errors.Join(o.err, fmt.Errorf("roll back operation: %w", err))
		}
	}
	if _, err := w.release.ExecContext(ctx); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// beginTx starts a write transaction, waiting out other processes' write locks: SQLITE_BUSY
// is retried (after busy_timeout already waited) so callers never see "database is locked".
func (w *Writer[T]) beginTx(ctx context.Context) error {
	if err := retryBusy(func() error {
		_, err := w.begin.ExecContext(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("begin write transaction: %w", err)
	}
	return nil
}

// retryBusy runs try until it returns anything but SQLITE_BUSY or SQLITE_LOCKED (IsBusy),
// trying again at most busyTries times, sleeping between tries from 1 ms doubling up to
// 100 ms (about 9 s of sleep in all, beside the busy timeout each try may wait out); it
// returns try's last error.
func retryBusy(try func() error) error {
	delay := time.Millisecond
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil || !IsBusy(err) || attempt > busyTries {
			return err
		}
		time.Sleep(delay)
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// busyTries bounds the tries of retryBusy after the first.
const busyTries = 100

// checkForeign calls Foreign when another process committed since the last look. Right
// after BEGIN IMMEDIATE nobody else can commit, so what the transaction reads is current.
func (w *Writer[T]) checkForeign(ctx context.Context) {
	changed, err := w.watch.Changed(ctx)
	if changed {
		w.schemaCheck = true
	}
	if changed && w.cfg.Foreign != nil {
		w.cfg.Foreign(err)
	}
}

// checkSchema is the refusal of a file a newer build migrated since the writer started
// (WriterConfig.SchemaVersion), read in the open transaction after another process
// committed; nil when the version is known or was not to be read.
func (w *Writer[T]) checkSchema(ctx context.Context) error {
	if w.newer != nil {
		return w.newer
	}
	if !w.schemaCheck || w.cfg.SchemaVersion <= 0 {
		return nil
	}
	var version int
	if err := w.cfg.Conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	w.schemaCheck = false
	if version > w.cfg.SchemaVersion {
		w.newer = &SchemaNewerError{Have: version, Known: w.cfg.SchemaVersion}
		return w.newer
	}
	return nil
}
