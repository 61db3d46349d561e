package sqliteplane

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Maintain implements plane.Driver: one maintenance pass, now, inside a write transaction.
func (d *Driver) Maintain(ctx context.Context) error {
	return d.do(ctx, func(t *wtx) error {
		_, err := d.maintainer.runOnce(t)
		return err
	})
}

// maintainer is the plane's maintenance service. The writer runs it every
// Config.MaintenanceInterval (and Maintain on demand) inside its transaction, so a pass
// never races a settle; plane's policy decides what happens to each row it finds.
type maintainer struct {
	// retention is how long terminal invocations are kept; ≤ 0 keeps them forever.
	retention time.Duration
	// batch bounds the rows each step handles in one pass.
	batch int
	// settledKeys is where the next look for settled counter rows starts
	// (planekit.DropSettledKeys).
	settledKeys planekit.KeyCursor
}

// runOnce is one maintenance pass (planekit.MaintenancePass) in t, at the transaction's
// clock reading: each step once, a batch of m.batch rows at most. It reports what it did.
func (m *maintainer) runOnce(t *wtx) (plane.MaintenanceReport, error) {
	return planekit.MaintenancePass(maintenance{t}, t.w.d.kit, t.w.d.cfg.Logger, &m.settledKeys, m.batch, m.retention,
		func() time.Time { return t.now }, func() bool { return false })
}

// maintenance is the steps of a pass in the writer's transaction t (planekit.Maintenance).
type maintenance struct{ t *wtx }

// Write runs fn in the pass's transaction.
func (s maintenance) Write(_ string, fn func(planekit.Tx) error) error { return fn(kitTx{s.t}) }

func (s maintenance) Promote(limit int) (int, error) { return s.t.promoteDue(limit) }

// Expire reads the ids of step's statements (a passed deadline: of queued and of delayed
// invocations) and ends each that rule still ends.
func (s maintenance) Expire(step int, rule planekit.Expiry, limit int) (found, ended int, err error) {
	t := s.t
	for _, stmt := range [][]*sql.Stmt{{t.w.st.expiredLeases}, {t.w.st.attemptsOverdue},
		{t.w.st.deadlinesPassed, t.w.st.delayedDeadlinesPassed}}[step] {
		rs, err := stmt.QueryContext(t.ctx, t.ms, limit)
		if err != nil {
			return found, ended, fmt.Errorf("maintenance: %w", err)
		}
		ids, err := planekit.Collect(sqlRows{rs}, "ids", planekit.ScanString)
		if err != nil {
			return found, ended, fmt.Errorf("maintenance: %w", err)
		}
		found = max(found, len(ids))
		n, err := planekit.ExpireFound(ids, t.head,
			func(h *head) (bool, error) { return t.expire(h, rule) })
		ended += n
		if err != nil {
			return found, ended, err
		}
	}
	return found, ended, nil
}

func (s maintenance) Trim(cutoff time.Time, limit int) (int, error) {
	n, err := s.t.trim("", "", cutoff, limit)
	return int(n), err
}

// trim deletes up to limit terminal invocations (of one namespace and queue, "" for all)
// that finished before cutoff, with their journals, but not one still holding its key for
// a dedup window: it clears the holds that have ended first (planekit.HoldsEnded), then
// reads the finished rows without a hold (planekit.KeyNotHeld, index
// invocations_trimmable).
func (t *wtx) trim(namespace, queue string, cutoff time.Time, limit int) (int64, error) {
	if _, err := t.w.st.holdsEnded.ExecContext(t.ctx, t.ms); err != nil {
		return 0, fmt.Errorf("trim: holds ended: %w", err)
	}
	rs, err := t.w.st.finishedBefore.QueryContext(t.ctx, cutoff.UnixMilli(), namespace, queue, limit)
	if err != nil {
		return 0, fmt.Errorf("trim: %w", err)
	}
	type victim struct {
		seq           int64
		id, ns, queue string
		state         int
		priority      float64
	}
	victims, err := planekit.Collect(sqlRows{rs}, "trim", func(s planekit.Scanner) (v victim, err error) {
		return v, s.Scan(&v.seq, &v.id, &v.ns, &v.queue, &v.state, &v.priority)
	})
	if err != nil {
		return 0, err
	}
	for _, v := range victims {
		if _, err := t.w.st.deleteInvocation.ExecContext(t.ctx, v.seq); err != nil {
			return 0, fmt.Errorf("trim %s: %w", v.id, err)
		}
		if _, err := t.w.st.deleteFrames.ExecContext(t.ctx, v.id); err != nil {
			return 0, fmt.Errorf("trim %s: %w", v.id, err)
		}
		t.count(v.ns, v.queue, v.state, v.priority, -1)
	}
	return int64(len(victims)), nil
}

// TrimTopics deletes topics (and their frames) last posted to before cutoff.
func (s maintenance) TrimTopics(cutoff time.Time) (int, error) {
	t := s.t
	rs, err := t.w.st.staleTopics.QueryContext(t.ctx, cutoff.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("trim topics: %w", err)
	}
	names, err := planekit.Collect(sqlRows{rs}, "trim topics", planekit.ScanString)
	if err != nil {
		return 0, err
	}
	for _, name := range names {
		if _, err := t.w.st.deleteFrames.ExecContext(t.ctx, name); err != nil {
			return 0, fmt.Errorf("trim topic: %w", err)
		}
		if _, err := t.w.st.deleteTopic.ExecContext(t.ctx, name); err != nil {
			return 0, fmt.Errorf("trim topic: %w", err)
		}
	}
	return len(names), nil
}

// InvocationTrim implements plane.Driver. Large trims run in transactions of 1,000 rows so
// they never hold the writer for long.
func (d *Driver) InvocationTrim(ctx context.Context, p *plane.TrimParams) (int64, error) {
	return planekit.Trim(p, func(limit int) (n int64, err error) {
		err = d.do(ctx, func(t *wtx) error {
			n, err = t.trim(p.Namespace, p.Queue, p.FinishedBefore, limit)
			return err
		})
		return n, err
	})
}
