package pgplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

const scheduleColumns = `namespace, name, spec, paused, next_ms, last_ms, last_id, created_ms, updated_ms`

func scanSchedule(s pgx.Row) (*planekit.ScheduleRow, error) {
	var r planekit.ScheduleRow
	if err := s.Scan(&r.Namespace, &r.Name, &r.Spec, &r.Paused, &r.NextMS, &r.LastMS, &r.LastID, &r.CreatedMS, &r.UpdatedMS); err != nil {
		return nil, err
	}
	return &r, nil
}

// ScheduleSet implements plane.Driver.
func (d *Driver) ScheduleSet(ctx context.Context, s *plane.Schedule) (*plane.Schedule, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var out *plane.Schedule
	err := d.do(ctx, func(t *tx) error {
		row, err := planekit.ScheduleSetRow(s, t.now)
		if err != nil {
			return err
		}
		onConflict := `DO UPDATE SET spec = $3, paused = $4, next_ms = $5, updated_ms = $6`
		if s.Replacing != nil {
			// The stored row, locked until commit; with none expected, a row inserted
			// meanwhile makes the insert below do nothing (no row: the schedule changed).
			found, err := scanSchedule(t.queryRow(`SELECT `+scheduleColumns+`
				FROM `+d.schema+`.schedules WHERE namespace = $1 AND name = $2 FOR UPDATE`, s.Namespace, s.Name))
			queue, exists, err := planekit.StoredScheduleQueue(found, err, pgx.ErrNoRows)
			if err != nil {
				return err
			}
			if err := plane.CheckReplacing(s, queue, exists); err != nil {
				return err
			}
			if !exists {
				onConflict = `DO NOTHING`
			}
		}
		stored, err := scanSchedule(t.queryRow(`INSERT INTO `+d.schema+`.schedules AS s (`+scheduleColumns+`)
			VALUES ($1, $2, $3, $4, $5, 0, '', $6, $6)
			ON CONFLICT (namespace, name) `+onConflict+`
			RETURNING `+scheduleColumns, row.Namespace, row.Name, row.Spec, row.Paused, row.NextMS, t.ms))
		if errors.Is(err, pgx.ErrNoRows) {
			return plane.ErrScheduleChanged
		}
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
	rs, err := d.pool.Query(ctx, `SELECT `+scheduleColumns+` FROM `+d.schema+`.schedules
		WHERE $1 = '' OR namespace = $1 ORDER BY namespace COLLATE "C", name COLLATE "C"`, namespace)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list schedules: %w", err))
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
	return out, d.failure(ctx, rs.Err())
}

// ScheduleDelete implements plane.Driver.
func (d *Driver) ScheduleDelete(ctx context.Context, namespace, name string) (bool, error) {
	if err := validSchedule(namespace, name); err != nil {
		return false, err
	}
	var deleted bool
	err := d.do(ctx, func(t *tx) error {
		if err := t.flush(); err != nil {
			return err
		}
		tag, err := t.tx.Exec(t.ctx, `DELETE FROM `+d.schema+`.schedules WHERE namespace = $1 AND name = $2`, namespace, name)
		if err != nil {
			return fmt.Errorf("delete schedule: %w", err)
		}
		deleted = tag.RowsAffected() > 0
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
	err := d.do(ctx, func(t *tx) error {
		row, err := scanSchedule(t.queryRow(`SELECT `+scheduleColumns+` FROM `+d.schema+`.schedules
			WHERE namespace = $1 AND name = $2 FOR UPDATE`, namespace, name))
		if errors.Is(err, pgx.ErrNoRows) {
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
			t.exec(`UPDATE `+d.schema+`.schedules SET paused = $1, next_ms = $2, updated_ms = $3
				WHERE namespace = $4 AND name = $5`, paused, next, t.ms, namespace, name)
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
// transaction's clock, rows locked FOR UPDATE SKIP LOCKED so two passes never take one
// schedule) and moves each to its next tick, in this transaction: the fire and the move
// commit together or not at all. Each fire is keyed by plane.ScheduleKey, so a tick that a
// former leader submitted resolves to its invocation. It returns how many schedules it
// found due.
func (t *tx) fireSchedules(limit int) (int, error) {
	rs, err := t.query(`SELECT `+scheduleColumns+` FROM `+t.d.schema+`.schedules
		WHERE next_ms > 0 AND next_ms <= $1 ORDER BY next_ms LIMIT $2 FOR UPDATE SKIP LOCKED`, t.ms, limit)
	if err != nil {
		return 0, err
	}
	var rows []*planekit.ScheduleRow
	for rs.Next() {
		row, err := scanSchedule(rs)
		if err != nil {
			rs.Close()
			return 0, err
		}
		rows = append(rows, row)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, err
	}
	for _, row := range rows {
		f, err := planekit.ScheduleFire(row, t.now)
		if err != nil {
			t.d.cfg.Logger.Warn("pgplane: schedule left unfired", "err", err)
			continue
		}
		if len(f.Submits) > 0 {
			// The admission row locked as a submit locks it: the depth decision is ordered
			// with the queue's submits.
			a, err := t.admission(row.Namespace, f.Schedule.Queue, true)
			if err != nil {
				return 0, err
			}
			if err := f.Admit(a, func() (int64, error) {
				var queued int64
				if err := t.queryRow(t.d.sql.countQueued, row.Namespace, f.Schedule.Queue).Scan(&queued); err != nil {
					return 0, fmt.Errorf("count queued: %w", err)
				}
				return queued + t.pending(row.Namespace, f.Schedule.Queue, planekit.StateQueued), nil
			}); err != nil {
				return 0, err
			}
			if f.Skipped > 0 {
				t.d.cfg.Logger.Warn("pgplane: schedule tick skipped", "namespace", row.Namespace,
					"schedule", row.Name, "skipped", f.Skipped, "reason", f.SkipReason)
			}
		}
		lastMS, lastID := row.LastMS, row.LastID
		if len(f.Submits) > 0 {
			p := &plane.SubmitManyParams{Namespace: row.Namespace, Queue: f.Schedule.Queue, Invocations: f.Submits}
			out := make([]plane.SubmitResult, len(f.Submits))
			if err := t.submitMany(p, out, nil, false); err != nil {
				return 0, err
			}
			lastMS, lastID = f.Last.UnixMilli(), out[len(out)-1].ID
		}
		t.exec(`UPDATE `+t.d.schema+`.schedules SET next_ms = $1, last_ms = $2, last_id = $3,
			spec = COALESCE($6::bytea, spec) WHERE namespace = $4 AND name = $5`,
			f.NextMS, lastMS, lastID, row.Namespace, row.Name, f.Spec)
	}
	return len(rows), nil
}

func validSchedule(namespace, name string) error {
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	return plane.ValidateName("schedule name", name)
}
