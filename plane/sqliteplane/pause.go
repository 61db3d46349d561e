package sqliteplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// QueuePause implements plane.Driver. A resume marks the queue claimable, so the writer
// claims for its parked claimers in the same transaction (handoff.go), and wakes the
// others.
func (d *Driver) QueuePause(ctx context.Context, p *plane.PauseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	var changed bool
	err := d.do(ctx, func(t *wtx) error {
		var res sql.Result
		var err error
		if p.Paused {
			res, err = t.w.conn.ExecContext(t.ctx, `INSERT INTO queue_pauses (namespace, queue, paused_ms) VALUES (?, ?, ?)
				ON CONFLICT (namespace, queue) DO NOTHING`, p.Namespace, p.Queue, t.ms)
		} else {
			res, err = t.w.conn.ExecContext(t.ctx, `DELETE FROM queue_pauses WHERE namespace = ? AND queue = ?`, p.Namespace, p.Queue)
		}
		if err != nil {
			return fmt.Errorf("pause queue: %w", err)
		}
		n, _ := res.RowsAffected()
		changed = n > 0
		delete(t.w.paused, [2]string{p.Namespace, p.Queue})
		if changed && !p.Paused {
			t.markClaimable(p.Namespace, p.Queue)
			t.wake(planekit.QueueKey(p.Namespace, p.Queue))
		}
		return nil
	})
	return changed, err
}

// paused reports whether a queue is paused, from the writer's cache when it holds it.
func (t *wtx) paused(namespace, queue string) (bool, error) {
	key := [2]string{namespace, queue}
	if p, ok := t.w.paused[key]; ok {
		return p, nil
	}
	var one int
	err := t.w.st.paused.QueryRowContext(t.ctx, namespace, queue).Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("read pause: %w", err)
	}
	t.w.paused[key] = err == nil
	return err == nil, nil
}

// pausedQueues returns the paused queues of a namespace ("" for all).
func (d *Driver) pausedQueues(ctx context.Context, namespace string) (map[[2]string]bool, error) {
	rs, err := d.readDB.QueryContext(ctx, `SELECT namespace, queue FROM queue_pauses WHERE ?1 = '' OR namespace = ?1`, namespace)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	defer rs.Close()
	out := map[[2]string]bool{}
	for rs.Next() {
		var key [2]string
		if err := rs.Scan(&key[0], &key[1]); err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		out[key] = true
	}
	return out, rs.Err()
}
