package pgplane

import (
	"context"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationSettleMany implements plane.Driver. Settles from concurrent callers are grouped:
// while one group's transaction runs, the next callers queue up, and the first of them then
// settles all of the queue in one transaction (lock the rows in id order, one batch of
// writes, commit), so a busy plane settles many jobs per round trip and per commit — the
// shape of River's batch completer, without its timer: a lone settle goes out at once.
func (d *Driver) InvocationSettleMany(ctx context.Context, params []plane.SettleParams) ([]error, error) {
	if err := planekit.ValidateAll(params); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		if err := d.checkOpen(); err != nil {
			return nil, err
		}
		return []error{}, nil
	}
	req := &settleRequest{params: params, out: make([]error, len(params))}
	if err := d.settles.Do(ctx, req); err != nil {
		return nil, err
	}
	return req.out, req.err
}

type settleRequest struct {
	params []plane.SettleParams
	out    []error
	err    error
}

// maxSettleGroup bounds one group's invocations, so one transaction stays short.
const maxSettleGroup = 2000

// settleGroup settles every request of group in one transaction.
func (d *Driver) settleGroup(ctx context.Context, group []*settleRequest) {
	batches, outs := make([][]plane.SettleParams, len(group)), make([][]error, len(group))
	for i, r := range group {
		batches[i], outs[i] = r.params, r.out
	}
	err := d.do(ctx, func(t *tx) error { return t.settleBatches(batches, outs) })
	for _, r := range group {
		if err != nil {
			r.out, r.err = nil, err
		}
	}
}

// settle acks or nacks one invocation (h nil: it does not exist; one outside p's scope
// answers alike). It returns the caller's
// error: nil, ErrLeaseLost or ErrNotFound.
func (t *tx) settle(h *head, p *plane.SettleParams) error {
	logical, _ := planekit.Settle(p, h, t.holds, t.d.cfg.Backoff, t.d.rand.Float64, t.apply)
	return logical
}

// InvocationHeartbeatMany implements plane.Driver: one transaction, the rows locked in id
// order, the new leases written in one batch.
func (d *Driver) InvocationHeartbeatMany(ctx context.Context, params []plane.HeartbeatParams) ([]plane.HeartbeatResult, error) {
	if err := planekit.ValidateAll(params); err != nil {
		return nil, err
	}
	ids := planekit.HeartbeatIDs(params)
	var out []plane.HeartbeatResult
	err := d.do(ctx, func(t *tx) error {
		byID, err := t.headsByID(ids)
		if err != nil {
			return err
		}
		out, err = planekit.HeartbeatMany(params, t.ms, func(id string) (*head, error) { return byID[id], nil }, t.holds,
			func(h *head, expires int64) error { t.exec(d.sql.setLease, h.ID, expires); return nil })
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
