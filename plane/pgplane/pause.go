package pgplane

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// QueuePause implements plane.Driver. The claim statements skip a paused queue (claimWhere
// in statements.go). A resume wakes the queue like a submit: this process's parked claimers
// are served before the commit (handoff.go), other processes' by NOTIFY.
func (d *Driver) QueuePause(ctx context.Context, p *plane.PauseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	var changed bool
	err := d.do(ctx, func(t *tx) error {
		if err := t.flush(); err != nil {
			return err
		}
		var tag pgconn.CommandTag
		var err error
		if p.Paused {
			tag, err = t.tx.Exec(t.ctx, `INSERT INTO `+d.schema+`.queue_pauses (namespace, queue, paused_ms) VALUES ($1, $2, $3)
				ON CONFLICT (namespace, queue) DO NOTHING`, p.Namespace, p.Queue, t.ms)
		} else {
			tag, err = t.tx.Exec(t.ctx, `DELETE FROM `+d.schema+`.queue_pauses WHERE namespace = $1 AND queue = $2`, p.Namespace, p.Queue)
		}
		if err != nil {
			return fmt.Errorf("pause queue: %w", err)
		}
		changed = tag.RowsAffected() > 0
		if changed && !p.Paused {
			t.wakeQueue(p.Namespace, p.Queue)
		}
		return nil
	})
	return changed, err
}

// pausedQueues returns the paused queues of a namespace ("" for all).
func (d *Driver) pausedQueues(ctx context.Context, namespace string) (map[[2]string]bool, error) {
	rs, err := d.pool.Query(ctx, `SELECT namespace, queue FROM `+d.schema+`.queue_pauses WHERE $1 = '' OR namespace = $1`, namespace)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("queue stats: %w", err))
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
	if err := rs.Err(); err != nil {
		return nil, d.failure(ctx, fmt.Errorf("queue stats: %w", err))
	}
	return out, nil
}
