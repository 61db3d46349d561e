package sqliteplane

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Maintain implements plane.Driver: one maintenance pass, now, inside a write transaction.
func (d *Driver) Maintain(ctx context.Context) error {
	return d.do(ctx, func(t *wtx) error { return t.maintain() })
}

// maintain ends expired leases, overdue attempts and passed deadlines, and trims what the
// retention period no longer keeps. It runs in the writer's transaction, so it never races
// a settle; each step handles at most 1,000 rows a pass.
func (t *wtx) maintain() error {
	for _, step := range []struct {
		stmt func() ([]string, error)
		end  func(h *head) error
	}{
		{func() ([]string, error) { return t.ids(t.w.st.expiredLeases) }, func(h *head) error {
			if h.state != stateRunning {
				return nil
			}
			return t.expireLease(h)
		}},
		{func() ([]string, error) { return t.ids(t.w.st.attemptsOverdue) }, func(h *head) error {
			if h.state != stateRunning {
				return nil
			}
			return t.attemptOverdue(h)
		}},
		{func() ([]string, error) { return t.ids(t.w.st.deadlinesPassed) }, func(h *head) error {
			if h.state != stateQueued {
				return nil
			}
			return t.finish(h, stateTimeout, nil, &plane.ErrorInfo{Type: "deadline", Message: "deadline passed before the invocation ran"})
		}},
	} {
		ids, err := step.stmt()
		if err != nil {
			return fmt.Errorf("maintenance: %w", err)
		}
		for _, id := range ids {
			h, ok, err := t.head(id)
			if err != nil {
				return err
			}
			if ok {
				if err := step.end(h); err != nil {
					return err
				}
			}
		}
	}
	if t.w.d.cfg.Retention > 0 {
		cutoff := t.now.Add(-t.w.d.cfg.Retention)
		if _, err := t.trim("", "", cutoff, 1000); err != nil {
			return err
		}
		if err := t.trimTopics(cutoff); err != nil {
			return err
		}
	}
	return nil
}

// ids runs a maintenance query that takes the time now and returns invocation ids.
func (t *wtx) ids(stmt *sql.Stmt) ([]string, error) {
	rs, err := stmt.QueryContext(t.ctx, t.ms)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var id string
		if err := rs.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rs.Err()
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
	var victims []victim
	for rs.Next() {
		var v victim
		if err := rs.Scan(&v.seq, &v.id, &v.ns, &v.queue, &v.state, &v.priority); err != nil {
			rs.Close()
			return 0, fmt.Errorf("trim: %w", err)
		}
		victims = append(victims, v)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, fmt.Errorf("trim: %w", err)
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
func (t *wtx) trimTopics(cutoff time.Time) error {
	rs, err := t.w.st.staleTopics.QueryContext(t.ctx, cutoff.UnixMilli())
	if err != nil {
		return fmt.Errorf("trim topics: %w", err)
	}
	var names []string
	for rs.Next() {
		var name string
		if err := rs.Scan(&name); err != nil {
			rs.Close()
			return fmt.Errorf("trim topics: %w", err)
		}
		names = append(names, name)
	}
	rs.Close()
	for _, name := range names {
		if _, err := t.w.st.deleteFrames.ExecContext(t.ctx, name); err != nil {
			return fmt.Errorf("trim topic: %w", err)
		}
		if _, err := t.w.st.deleteTopic.ExecContext(t.ctx, name); err != nil {
			return fmt.Errorf("trim topic: %w", err)
		}
	}
	return rs.Err()
}

// InvocationTrim implements plane.Driver. Large trims run in transactions of 1,000 rows so
// they never hold the writer for long.
func (d *Driver) InvocationTrim(ctx context.Context, p *plane.TrimParams) (int64, error) {
	if p.Namespace != "" {
		if err := plane.ValidateName("namespace", p.Namespace); err != nil {
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
		var n int64
		err := d.do(ctx, func(t *wtx) error {
			var err error
			n, err = t.trim(p.Namespace, p.Queue, p.FinishedBefore, 1000)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < 1000 {
			return total, nil
		}
	}
}
