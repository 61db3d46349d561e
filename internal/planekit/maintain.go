package planekit

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TrimBatch is how many rows one trim transaction deletes at most, so a large trim never
// holds a plane's writes for long.
const TrimBatch = 1000

// Trim is Driver.InvocationTrim over a plane's trim of one transaction (batch deletes up to
// limit terminal invocations of p finished before p.FinishedBefore): it checks p, then
// trims batches until one comes back short.
func Trim(p *plane.TrimParams, batch func(limit int) (int64, error)) (int64, error) {
	if p.Namespace != "" {
		if err := plane.ValidateNamespace(p.Namespace); err != nil {
			return 0, err
		}
	}
	if p.Queue != "" {
		if err := plane.ValidateName("queue name", p.Queue); err != nil {
			return 0, err
		}
	}
	var total int64
	for {
		n, err := batch(TrimBatch)
		total += n
		if err != nil || n < TrimBatch {
			return total, err
		}
	}
}

// KeyNotHeld is the condition every trim of invocations adds: an invocation still holding
// its key for a dedup window is kept until the window ends (plane.KeyHeldUntil; the column
// is NULL without one, once the key was taken over, and once the window has ended:
// HoldsEnded). The trims read the rows through the index invocations_trimmable, (finished_ms)
// of the finished rows without a hold, so a row kept is never read (before, by
// invocations_finished, every trim read again every holder past the cutoff whose window
// lasted: migrations SQLite 020, PostgreSQL 0022).
const KeyNotHeld = `key_held_until IS NULL`

// HoldsEnded is the statement each trim of invocations runs first, in its transaction
// ($1: the plane's clock, ms): the holds of finished invocations whose window has ended are
// cleared (through the index invocations_held), so that their rows are trimmed as any
// finished row. Each hold is cleared once, when its window has ended; a holder still in its
// window is not touched. It lives here, as the statements of both SQL planes (dialect as
// Statements.Common); skipLocked (PostgreSQL) leaves a row another transaction holds (a
// submit taking its key over) for a later trim rather than wait for it: a hold left is
// only a row kept longer, never one trimmed early.
func HoldsEnded(dialect func(string) string, skipLocked bool) string {
	if skipLocked {
		return dialect(`UPDATE {s}.invocations SET key_held_until = NULL WHERE id = ANY (ARRAY(SELECT id FROM {s}.invocations
			WHERE state >= 2 AND key_held_until <= $1 FOR UPDATE SKIP LOCKED))`)
	}
	return dialect(`UPDATE {s}.invocations SET key_held_until = NULL WHERE state >= 2 AND key_held_until <= $1`)
}

// Ending is what an operator's cancel or kill does: the stored states it ends an
// invocation from, the terminal state it ends in and the error it records.
type Ending struct {
	From func(state int) bool
	To   int
	Info plane.ErrorInfo
}

// Cancel ends a queued (or delayed) invocation as cancelled; Kill a running one as killed.
var (
	Cancel = Ending{From: Queued, To: StateCancelled,
		Info: plane.ErrorInfo{Type: plane.ErrorTypeCancelled, Message: "cancelled before it ran"}}
	Kill = Ending{From: func(s int) bool { return s == StateRunning }, To: StateKilled,
		Info: plane.ErrorInfo{Type: plane.ErrorTypeKilled, Message: "killed while running"}}
)

// ValidateAll checks every item of a batch (settles, heartbeats), before any is applied.
func ValidateAll[P any, PP interface {
	*P
	Validate() error
}](items []P) error {
	for i := range items {
		if err := PP(&items[i]).Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Maintenance is a plane's maintenance steps, which MaintenancePass runs in order. Each
// step runs in a transaction of the plane's choosing (sqliteplane: the pass's one writer
// transaction; pgplane: one a batch) and handles at most limit rows. The steps both planes
// write alike (FireSchedules, DropSettledKeys, TrimWorkers) MaintenancePass runs itself,
// each batch through Write.
type Maintenance interface {
	// Write runs fn in a transaction of the pass (sqliteplane: the pass's own; pgplane: one
	// of its own, run again after a deadlock): its error is fn's, which a plane may prefix
	// with "maintenance: " and what.
	Write(what string, fn func(Tx) error) error
	// Promote makes due delayed (or backed-off) invocations claimable and reports how many.
	Promote(limit int) (int, error)
	// Expire ends the invocations that step (0: expired leases, 1: overdue attempts, 2:
	// passed deadlines) finds due, up to limit, each whose rule still ends it: found is how
	// many it read, ended how many it ended (a row changed since it was found is left
	// alone).
	Expire(step int, rule Expiry, limit int) (found, ended int, err error)
	// TrimPlacement removes idle placement rows (PlacementTrimSQL).
	TrimPlacement() error
	// Trim deletes up to limit terminal invocations finished before cutoff, with their
	// journals, and reports how many.
	Trim(cutoff time.Time, limit int) (int, error)
	// TrimTopics deletes topics last posted to before cutoff, with their frames, and
	// reports how many (0 from a plane that does not count them).
	TrimTopics(cutoff time.Time) (int, error)
}

// TrimWorkers deletes, in tx, the registrations of workers last seen before cutoff: a
// worker that stopped without removing itself (killed, its machine gone) drops out of
// WorkerList after a minute (plane.WorkerSeenWithinDefault) and out of the store after
// the plane's retention, or that minute when the retention is shorter (MaintenancePass
// gives the cutoff), so registrations of crashed workers, each under a new id, do
// not pile up for ever.
func TrimWorkers(tx Tx, st *Statements, cutoff time.Time) (int, error) {
	n, err := tx.Exec(st.WorkerTrim, cutoff.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("trim workers: %w", err)
	}
	return int(n), nil
}

// TrimTokens deletes, in tx, the tokens revoked or expired before cutoff: a token that
// stopped working more than the plane's retention ago is refused as an unknown one from
// then on (401 either way), and leaves `lakeshore token list`. Without it every launch of a
// provider supervisor (one token each, revoked when the launch ends: docs/providers.md)
// added a row for ever.
func TrimTokens(tx Tx, st *Statements, cutoff time.Time) (int, error) {
	n, err := tx.Exec(st.TokenTrim, cutoff.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("trim tokens: %w", err)
	}
	return int(n), nil
}

// expiries are the rules of Maintenance.Expire's steps, in the order a pass runs them:
// expired leases, overdue attempts, passed deadlines.
var expiries = [...]Expiry{LeaseExpired, AttemptOverdue, DeadlinePassed}

// MaintenancePass is one maintenance pass of m: due schedules fire first (so their fires
// are promoted in the same pass), due delayed invocations become claimable (once a pass),
// expired leases, overdue attempts and passed deadlines end (expiries), settled key
// counters are dropped, idle placement rows trimmed and, with a positive retention, the
// terminal invocations, topics, worker registrations and stopped tokens (revoked or expired)
// older than retention (at now) trimmed. A step that
// handles a full batch of batch rows runs again while again allows (sqliteplane's pass,
// in one transaction, never repeats; pgplane's repeats within its budget). It reports what
// the pass did. st is the plane's SQL, log where a schedule left unfired is reported, and
// settledKeys where the next look for settled counter rows starts (DropSettledKeys; the
// caller keeps it from pass to pass).
func MaintenancePass(m Maintenance, st *Statements, log *slog.Logger, settledKeys *KeyCursor, batch int, retention time.Duration,
	now func() time.Time, again func() bool) (plane.MaintenanceReport, error) {
	var r plane.MaintenanceReport
	for {
		var due, fired int
		err := m.Write("schedules: ", func(t Tx) (err error) {
			due, fired, err = FireSchedules(t, st, batch, log)
			return err
		})
		r.SchedulesFired += fired
		if err != nil {
			return r, err
		}
		if due < batch || !again() {
			break
		}
	}
	var err error
	if r.Promoted, err = m.Promote(batch); err != nil {
		return r, err
	}
	counts := [len(expiries)]*int{&r.LeasesExpired, &r.AttemptsOverdue, &r.DeadlinesPassed}
	for step, rule := range expiries {
		for {
			found, ended, err := m.Expire(step, rule, batch)
			*counts[step] += ended
			if err != nil {
				return r, err
			}
			if found < batch || !again() {
				break
			}
		}
	}
	for {
		next := *settledKeys
		err := m.Write("", func(t Tx) error {
			next = *settledKeys // a transaction run again starts where the failed one did
			_, err := DropSettledKeys(t, st, &next, batch)
			return err
		})
		if err != nil {
			return r, err
		}
		*settledKeys = next
		if next == (KeyCursor{}) || !again() { // the last kept rows read
			break
		}
	}
	if err := m.TrimPlacement(); err != nil {
		return r, err
	}
	if retention <= 0 {
		return r, nil
	}
	cutoff := now().Add(-retention)
	for {
		n, err := m.Trim(cutoff, batch)
		r.Trimmed += n
		if err != nil {
			return r, err
		}
		if n < batch || !again() {
			break
		}
	}
	if r.TopicsTrimmed, err = m.TrimTopics(cutoff); err != nil {
		return r, err
	}
	// A worker's registration is kept while WorkerList may show it (seen within
	// plane.WorkerSeenWithinDefault), however short the retention: a retention shorter
	// than a worker's refresh interval (serve --retention 2s) trimmed live workers between
	// their refreshes, so `lakeshore workers` showed none and a provider supervisor took
	// its running launches for unregistered ones.
	workerCutoff := cutoff
	if seen := now().Add(-plane.WorkerSeenWithinDefault); seen.Before(workerCutoff) {
		workerCutoff = seen
	}
	err = m.Write("", func(t Tx) (err error) {
		if r.WorkersTrimmed, err = TrimWorkers(t, st, workerCutoff); err != nil {
			return err
		}
		r.TokensTrimmed, err = TrimTokens(t, st, cutoff)
		return err
	})
	return r, err
}

// PlacementTrimArgs are the arguments of PlacementTrimSQL's three statements of a table at
// nowMS: none, the time now, and the idle cutoff (now − PlacementIdleTrim).
func PlacementTrimArgs(nowMS int64) [3][]any {
	return [3][]any{nil, {nowMS}, {nowMS - PlacementIdleTrim.Milliseconds()}}
}
