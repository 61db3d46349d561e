package sqliteplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

const scheduleColumns = `namespace, name, spec, paused, next_ms, last_ms, last_id, created_ms, updated_ms`

func scanSchedule(s scanner) (*planekit.ScheduleRow, error) {
	var r planekit.ScheduleRow
	var paused int
	if err := s.Scan(&r.Namespace, &r.Name, &r.Spec, &paused, &r.NextMS, &r.LastMS, &r.LastID, &r.CreatedMS, &r.UpdatedMS); err != nil {
		return nil, err
	}
	r.Paused = paused != 0
	return &r, nil
}

// ScheduleSet implements plane.Driver.
func (d *Driver) ScheduleSet(ctx context.Context, s *plane.Schedule) (*plane.Schedule, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var out *plane.Schedule
	err := d.do(ctx, func(t *wtx) error {
		row, err := planekit.ScheduleSetRow(s, t.now)
		if err != nil {
			return err
		}
		if s.Replacing != nil { // the writer's transaction: nothing changes it between the check and the set
			found, err := scanSchedule(t.w.conn.QueryRowContext(t.ctx,
				`SELECT `+scheduleColumns+` FROM schedules WHERE namespace = ?1 AND name = ?2`, s.Namespace, s.Name))
			queue, exists, err := planekit.StoredScheduleQueue(found, err, sql.ErrNoRows)
			if err != nil {
				return err
			}
			if err := plane.CheckReplacing(s, queue, exists); err != nil {
				return err
			}
		}
		stored, err := scanSchedule(t.w.conn.QueryRowContext(t.ctx, `INSERT INTO schedules (`+scheduleColumns+`)
			VALUES (?1, ?2, ?3, ?4, ?5, 0, '', ?6, ?6)
			ON CONFLICT (namespace, name) DO UPDATE SET spec = ?3, paused = ?4, next_ms = ?5, updated_ms = ?6
			RETURNING `+scheduleColumns, row.Namespace, row.Name, row.Spec, row.Paused, row.NextMS, t.ms))
		if err != nil {
			return fmt.Errorf("set schedule: %w", err)
		}
		out, err = stored.Schedule()
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleList implements plane.Driver.
func (d *Driver) ScheduleList(ctx context.Context, namespace string) ([]plane.Schedule, error) {
	if namespace != "" {
		if err := plane.ValidateNamespace(namespace); err != nil {
			return nil, err
		}
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	rs, err := d.readDB.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE ?1 = '' OR namespace = ?1 ORDER BY namespace, name`, namespace)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rs.Close()
	out := []plane.Schedule{}
	for rs.Next() {
		row, err := scanSchedule(rs)
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		s, err := row.Schedule()
		if err != nil {
			return nil, err
		}
		out = append(out, *s)
	}
	return out, rs.Err()
}

// ScheduleDelete implements plane.Driver.
func (d *Driver) ScheduleDelete(ctx context.Context, namespace, name string) (bool, error) {
	if err := validSchedule(namespace, name); err != nil {
		return false, err
	}
	var deleted bool
	err := d.do(ctx, func(t *wtx) error {
		res, err := t.w.conn.ExecContext(t.ctx, `DELETE FROM schedules WHERE namespace = ? AND name = ?`, namespace, name)
		if err != nil {
			return fmt.Errorf("delete schedule: %w", err)
		}
		n, _ := res.RowsAffected()
		deleted = n > 0
		return nil
	})
	return deleted, err
}

// SchedulePause implements plane.Driver.
func (d *Driver) SchedulePause(ctx context.Context, namespace, name string, paused bool) (*plane.Schedule, error) {
	if err := validSchedule(namespace, name); err != nil {
		return nil, err
	}
	var out *plane.Schedule
	err := d.do(ctx, func(t *wtx) error {
		row, err := scanSchedule(t.w.conn.QueryRowContext(t.ctx, `SELECT `+scheduleColumns+` FROM schedules
			WHERE namespace = ? AND name = ?`, namespace, name))
		if errors.Is(err, sql.ErrNoRows) {
			return plane.ScheduleNotFound(namespace, name)
		}
		if err != nil {
			return fmt.Errorf("pause schedule: %w", err)
		}
		if row.Paused != paused {
			next, err := planekit.ScheduleResume(row, paused, t.now)
			if err != nil {
				return err
			}
			if _, err := t.w.conn.ExecContext(t.ctx, `UPDATE schedules SET paused = ?, next_ms = ?, updated_ms = ?
				WHERE namespace = ? AND name = ?`, paused, next, t.ms, namespace, name); err != nil {
				return fmt.Errorf("pause schedule: %w", err)
			}
			row.Paused, row.NextMS, row.UpdatedMS = paused, next, t.ms
		}
		out, err = row.Schedule()
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fireSchedules submits the due ticks of up to limit schedules (next_ms at or before the
// transaction's clock) and moves each to its next tick, in the writer's transaction: the
// fire and the move commit together. Each fire is keyed by plane.ScheduleKey, so a tick
// submitted before cannot enqueue twice. It returns how many fires it submitted.
func (t *wtx) fireSchedules(limit int) (int, error) {
	rs, err := t.w.conn.QueryContext(t.ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE next_ms > 0 AND next_ms <= ? ORDER BY next_ms LIMIT ?`, t.ms, limit)
	if err != nil {
		return 0, fmt.Errorf("schedules: %w", err)
	}
	var rows []*planekit.ScheduleRow
	for rs.Next() {
		row, err := scanSchedule(rs)
		if err != nil {
			rs.Close()
			return 0, fmt.Errorf("schedules: %w", err)
		}
		rows = append(rows, row)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, fmt.Errorf("schedules: %w", err)
	}
	fired := 0
	for _, row := range rows {
		f, err := planekit.ScheduleFire(row, t.now)
		if err != nil {
			t.w.d.cfg.Logger.Warn("sqliteplane: schedule left unfired", "err", err)
			continue
		}
		if len(f.Submits) > 0 {
			a, err := t.admission(row.Namespace, f.Schedule.Queue)
			if err != nil {
				return 0, err
			}
			if err := f.Admit(a, func() (int64, error) { return t.queued(row.Namespace, f.Schedule.Queue) }); err != nil {
				return 0, err
			}
			if f.Skipped > 0 {
				t.w.d.cfg.Logger.Warn("sqliteplane: schedule tick skipped", "namespace", row.Namespace,
					"schedule", row.Name, "skipped", f.Skipped, "reason", f.SkipReason)
			}
		}
		lastMS, lastID := row.LastMS, row.LastID
		if len(f.Submits) > 0 {
			p := &plane.SubmitManyParams{Namespace: row.Namespace, Queue: f.Schedule.Queue, Invocations: f.Submits}
			out := make([]plane.SubmitResult, len(f.Submits))
			if err := t.submitUnadmitted(p, out); err != nil {
				return 0, err
			}
			fired += len(out)
			lastMS, lastID = f.Last.UnixMilli(), out[len(out)-1].ID
		}
		if _, err := t.w.conn.ExecContext(t.ctx, `UPDATE schedules SET next_ms = ?, last_ms = ?, last_id = ?,
			spec = COALESCE(?, spec) WHERE namespace = ? AND name = ?`,
			f.NextMS, lastMS, lastID, f.Spec, row.Namespace, row.Name); err != nil {
			return 0, fmt.Errorf("schedules: %w", err)
		}
	}
	return fired, nil
}

func validSchedule(namespace, name string) error {
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	return plane.ValidateName("schedule name", name)
}
