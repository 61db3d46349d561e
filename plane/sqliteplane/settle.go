package sqliteplane

import (
	"cmp"
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
	h, ok, err := t.head(p.ID)
	if err != nil || !ok || !p.Scope.Covers(h.namespace, h.queue) {
		return plane.ErrNotFound, err
	}
	if lost, err := t.holds(h, p.Token); lost != nil || err != nil {
		return lost, err
	}
	return nil, t.apply(h, plane.SettleTransition(p, h.attempt, h.maxAttempts, t.w.d.cfg.Backoff, t.w.rand.Float64), planekit.Result(p))
}

// InvocationHeartbeatMany implements plane.Driver.
func (d *Driver) InvocationHeartbeatMany(ctx context.Context, params []plane.HeartbeatParams) ([]plane.HeartbeatResult, error) {
	if err := planekit.ValidateAll(params); err != nil {
		return nil, err
	}
	out := make([]plane.HeartbeatResult, len(params))
	err := d.do(ctx, func(t *wtx) error {
		for i, p := range params {
			out[i] = plane.HeartbeatResult{}
			h, ok, err := t.head(p.ID)
			if err != nil {
				return err
			}
			if !ok || !p.Scope.Covers(h.namespace, h.queue) {
				out[i].Err = plane.ErrNotFound
				continue
			}
			lost, err := t.holds(h, p.Token)
			if err != nil {
				return err
			}
			if lost != nil {
				out[i].Err = lost
				continue
			}
			expires := t.ms + cmp.Or(p.LeaseTTL, plane.LeaseTTLDefault).Milliseconds()
			if _, err := t.w.st.setLease.ExecContext(t.ctx, expires, h.seq); err != nil {
				return fmt.Errorf("heartbeat %s: %w", p.ID, err)
			}
			out[i].LeaseExpiresAt = planekit.FromMS(expires)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
