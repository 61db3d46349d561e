package pgplane

import (
	"context"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// maintainLoop runs maintenance every MaintenanceInterval while this process holds the
// maintenance lease (planekit.Lead: at once again after a pass that ran out of budget with
// work left), the others trying to take it on the same beat.
func (d *Driver) maintainLoop() {
	ticker := time.NewTicker(d.cfg.MaintenanceInterval)
	defer ticker.Stop()
	planekit.Lead(d.stop, ticker.C, d.cfg.LeaderTTL, d.takeLeadership, d.maintain, func(what string, err error) {
		d.cfg.Logger.Warn("pgplane: maintenance "+what, "err", err)
	})
}

// takeLeadership measures the database's clock again (syncClock, when the plane follows it)
// and takes or renews the maintenance lease, and reports whether this process holds it.
func (d *Driver) takeLeadership(ctx context.Context) (bool, error) {
	if d.cfg.followDatabase {
		if err := d.syncClock(ctx); err != nil {
			return false, err
		}
	}
	rows, err := d.pool.Query(ctx, d.sql.leaderTake, d.node, d.cfg.LeaderTTL.Seconds())
	if err != nil {
		return false, err
	}
	defer rows.Close()
	got := rows.Next()
	return got, rows.Err()
}

// releaseLeadership gives the lease up (on Close), so another process takes over at its
// next beat instead of after the TTL.
func (d *Driver) releaseLeadership(ctx context.Context) {
	_, _ = d.pool.Exec(ctx, d.sql.leaderRelease, d.node)
}

// Maintain implements plane.Driver: one maintenance pass now, whoever holds the lease (the
// passes of two processes never end one job twice: each step locks its rows with SKIP
// LOCKED and re-checks their state).
func (d *Driver) Maintain(ctx context.Context) error {
	if err := d.checkOpen(); err != nil {
		return err
	}
	_, err := d.maintain(ctx)
	return err
}

// maintainBatch is the most rows one maintenance transaction ends or trims: a bounded
// batch keeps its locks short and its WAL small.
const maintainBatch = 1000

// maintainBudget is how long one maintenance pass goes on while its steps find full
// batches: three quarters of MaintenanceInterval, and at most a third of LeaderTTL (the
// lease is renewed between passes), so a pass ends before the next is due and the leader
// renews its lease in time. A pass always runs each step once, whatever the budget.
func (d *Driver) maintainBudget() time.Duration {
	return min(d.cfg.MaintenanceInterval*3/4, d.cfg.LeaderTTL/3)
}

// maintain is one maintenance pass (planekit.MaintenancePass), each step in transactions
// of maintainBatch rows, repeating a step while its batches come back full and the pass is
// within maintainBudget. It reports whether it left work for the next pass (a step's last
// batch was full when the budget ran out).
func (d *Driver) maintain(ctx context.Context) (behind bool, err error) {
	// One pass at a time in this process: an explicit Maintain waits for the timer's pass
	// instead of skipping the rows it holds, so what Maintain returns has been done.
	d.maintainMu.Lock()
	defer d.maintainMu.Unlock()
	until := time.Now().Add(d.maintainBudget())
	again := func() bool {
		if ctx.Err() != nil {
			return false
		}
		behind = time.Now().After(until)
		return !behind
	}
	if _, err := planekit.MaintenancePass(maintenance{d, ctx}, d.kit, d.cfg.Logger, &d.settledKeys, maintainBatch, d.cfg.Retention, d.cfg.Now, again); err != nil {
		return false, err
	}
	if _, err := d.pool.Exec(ctx, d.sql.countsVacuum); err != nil {
		return false, fmt.Errorf("maintenance: %w", d.failure(ctx, err))
	}
	return behind, nil
}

// maintenance is the steps of a pass (planekit.Maintenance), each batch in a transaction
// of its own.
type maintenance struct {
	d   *Driver
	ctx context.Context
}

// Write runs fn in a transaction of its own (planekit.Maintenance); a failure says
// "maintenance: " and what.
func (s maintenance) Write(what string, fn func(planekit.Tx) error) error {
	return s.step(what, func(t *tx) error { return fn(kitTx{t}) })
}

// step runs fn in a transaction; a failure says "maintenance: " and what.
func (s maintenance) step(what string, fn func(t *tx) error) error {
	if err := s.d.do(s.ctx, fn); err != nil {
		return fmt.Errorf("maintenance: %s%w", what, err)
	}
	return nil
}

// Promote makes due delayed and backed-off rows claimable (1,000 a pass), and wakes their
// queues' idle claimers after its commit, never by a direct handoff (a claimer's own timer
// runs on real time; the plane's clock may jump). Once a pass: the first claim of a queue promotes its own due rows as well.
func (s maintenance) Promote(int) (n int, err error) {
	return n, s.step("promote: ", func(t *tx) error {
		rs, err := t.query(s.d.sql.promoteDue, t.ms)
		if err != nil {
			return err
		}
		defer rs.Close()
		for n = 0; rs.Next(); n++ {
			var ns, q, oldest string
			if err := rs.Scan(&ns, &q, &oldest); err != nil {
				return err
			}
			// Woken after the commit, not served before it (wakeQueue): a direct handoff
			// here would read key turns (FOR UPDATE SKIP LOCKED) while the transaction
			// holds the counter rows of the keys it promoted, the order queuePromote keeps
			// a claim out of (it can wait, through an update chain, for a writer waiting in
			// key order for one of them). The parked claimers claim by themselves.
			t.wake(planekit.QueueKey(ns, q))
			s.d.floors.Lower(planekit.QueueKey(ns, q), oldest)
			s.d.promotions.Note(planekit.QueueKey(ns, q))
		}
		return rs.Err()
	})
}

func (s maintenance) Expire(step int, rule planekit.Expiry, _ int) (found, ended int, err error) {
	query := [...]string{s.d.sql.expiredLeases, s.d.sql.attemptsOverdue, s.d.sql.deadlinesPassed}[step]
	return found, ended, s.step("", func(t *tx) error {
		heads, err := t.heads(query, t.ms)
		found = len(heads)
		ended, _ = planekit.ExpireFound(heads, func(h *head) (*head, error) { return h, nil },
			func(h *head) (bool, error) { return t.expire(h, rule) }) // queued writes: never fails
		return err
	})
}

func (s maintenance) Trim(cutoff time.Time, limit int) (int, error) {
	n, err := s.d.trimBatch(s.ctx, "", "", cutoff, limit)
	return int(n), err
}

func (s maintenance) TrimTopics(cutoff time.Time) (int, error) {
	if err := s.d.do(s.ctx, func(t *tx) error { t.exec(s.d.sql.trimTopics, cutoff.UnixMilli()); return nil }); err != nil {
		return 0, fmt.Errorf("trim topics: %w", err)
	}
	return 0, nil
}

// trimBatch deletes up to limit terminal invocations (of one namespace and queue, "" for
// all) that finished before cutoff, with their journals, in one transaction.
func (d *Driver) trimBatch(ctx context.Context, namespace, queue string, cutoff time.Time, limit int) (int64, error) {
	var total int64
	err := d.do(ctx, func(t *tx) error {
		total = 0
		t.exec(d.sql.holdsEnded, t.ms) // planekit.HoldsEnded, before the trim reads
		rs, err := t.query(d.sql.trim, cutoff.UnixMilli(), namespace, queue, limit)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var ns, q string
			var state int16
			var priority float64
			var n int64
			if err := rs.Scan(&ns, &q, &state, &priority, &n); err != nil {
				return err
			}
			t.count(ns, q, int(state), priority, -n)
			total += n
		}
		return rs.Err()
	})
	if err != nil {
		return 0, fmt.Errorf("trim: %w", err)
	}
	return total, nil
}

// InvocationTrim implements plane.Driver, in transactions of 1,000 rows.
func (d *Driver) InvocationTrim(ctx context.Context, p *plane.TrimParams) (int64, error) {
	return planekit.Trim(p, func(limit int) (int64, error) {
		return d.trimBatch(ctx, p.Namespace, p.Queue, p.FinishedBefore, limit)
	})
}
