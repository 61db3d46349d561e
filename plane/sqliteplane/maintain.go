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

// runOnce ends expired leases, overdue attempts and passed deadlines, and trims what the
// retention period no longer keeps, at the transaction's clock reading. It reports what it
// did.
func (m *maintainer) runOnce(t *wtx) (plane.MaintenanceReport, error) {
	var r plane.MaintenanceReport
	var err error
	if _, r.SchedulesFired, err = planekit.FireSchedules(kitTx{t}, t.w.d.kit, m.batch, t.w.d.cfg.Logger); err != nil {
		return r, err
	}
	if r.Promoted, err = t.promoteDue(m.batch); err != nil {
		return r, err
	}
	for _, step := range []struct {
		stmt  *sql.Stmt
		count *int
		end   planekit.Expiry
	}{
		{t.w.st.expiredLeases, &r.LeasesExpired, planekit.LeaseExpired},
		{t.w.st.attemptsOverdue, &r.AttemptsOverdue, planekit.AttemptOverdue},
		{t.w.st.deadlinesPassed, &r.DeadlinesPassed, planekit.DeadlinePassed},
		{t.w.st.delayedDeadlinesPassed, &r.DeadlinesPassed, planekit.DeadlinePassed},
	} {
		ids, err := t.ids(step.stmt, m.batch)
		if err != nil {
			return r, fmt.Errorf("maintenance: %w", err)
		}
		for _, id := range ids {
			h, ok, err := t.head(id)
			if err != nil {
				return r, err
			}
			if !ok { // trimmed since it was found
				continue
			}
			ended, err := t.expire(h, step.end) // not when it changed since it was found
			if err != nil {
				return r, err
			}
			if ended {
				*step.count++
			}
		}
	}
	if _, err := planekit.DropSettledKeys(kitTx{t}, t.w.d.kit, &m.settledKeys, m.batch); err != nil {
		return r, err
	}
	if err := t.trimPlacement(); err != nil {
		return r, err
	}
	if m.retention > 0 {
		cutoff := t.now.Add(-m.retention)
		n, err := t.trim("", "", cutoff, m.batch)
		if err != nil {
			return r, err
		}
		r.Trimmed = int(n)
		if r.TopicsTrimmed, err = t.trimTopics(cutoff); err != nil {
			return r, err
		}
	}
	return r, nil
}

// ids runs a maintenance query that takes the time now and a limit, and returns invocation
// ids.
func (t *wtx) ids(stmt *sql.Stmt, limit int) ([]string, error) {
	rs, err := stmt.QueryContext(t.ctx, t.ms, limit)
	if err != nil {
		return nil, err
	}
	return planekit.Collect(sqlRows{rs}, "ids", planekit.ScanString)
}

// trim deletes up to limit terminal invocations (of one namespace and queue, "" for all)
// that finished before cutoff, with their journals.
func (t *wtx) trim(namespace, queue string, cutoff time.Time, limit int) (int64, error) {
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

// trimTopics deletes topics (and their frames) last posted to before cutoff.
func (t *wtx) trimTopics(cutoff time.Time) (int, error) {
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
