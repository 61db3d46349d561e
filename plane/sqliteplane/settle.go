package sqliteplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationSettleMany implements plane.Driver.
func (d *Driver) InvocationSettleMany(ctx context.Context, params []plane.SettleParams) ([]error, error) {
	if err := planekit.ValidateAll(params); err != nil {
		return nil, err
	}
	out := make([]error, len(params))
	err := d.do(ctx, func(t *wtx) error { return t.settleMany(params, out) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// settle acks or nacks one invocation. The first result is the caller's error
// (ErrLeaseLost, ErrNotFound), the second a SQL failure.
func (t *wtx) settle(p *plane.SettleParams) (error, error) {
	if p.Outcome == plane.OutcomeSucceeded && p.Scope == (plane.Scope{}) {
		// The common case in one statement; anything unusual (a scoped caller, whose scope
		// is checked on the row read below) takes the path below.
		var ns, q string
		var priority float64
		err := t.w.st.ackHeld.QueryRowContext(t.ctx, planekit.Result(p), t.ms, p.ID, p.Token).Scan(&ns, &q, &priority)
		if err == nil {
			t.finished(p.ID, ns, q, priority, planekit.StateRunning, planekit.StateSucceeded)
			return nil, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("ack %s: %w", p.ID, err)
		}
	}
	h, err := t.head(p.ID)
	if err != nil {
		return nil, err
	}
	return planekit.Settle(p, h, t.holds, t.w.d.cfg.Backoff, t.w.rand.Float64, t.apply)
}

// InvocationHeartbeatMany implements plane.Driver.
func (d *Driver) InvocationHeartbeatMany(ctx context.Context, params []plane.HeartbeatParams) ([]plane.HeartbeatResult, error) {
	if err := planekit.ValidateAll(params); err != nil {
		return nil, err
	}
	var out []plane.HeartbeatResult
	err := d.do(ctx, func(t *wtx) (err error) {
		out, err = planekit.HeartbeatMany(params, t.ms, t.head, t.holds, func(h *head, expires int64) error {
			if _, err := t.w.st.setLease.ExecContext(t.ctx, expires, h.Seq); err != nil {
				return fmt.Errorf("heartbeat %s: %w", h.ID, err)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
