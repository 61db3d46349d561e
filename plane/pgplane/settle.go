package pgplane

import (
	"cmp"
	"context"
	"slices"

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
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return []error{}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := &settleRequest{params: params, out: make([]error, len(params))}
	d.settles.do(ctx, req)
	return req.out, req.err
}

type settleRequest struct {
	params []plane.SettleParams
	out    []error
	err    error
}

// maxSettleGroup bounds one group's invocations, so one transaction stays short.
const maxSettleGroup = 2000

func newSettleGrouper(d *Driver) *grouper[*settleRequest] {
	return &grouper[*settleRequest]{max: maxSettleGroup, run: d.settleGroup,
		size: func(r *settleRequest) int { return len(r.params) }}
}

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
	if h == nil || !p.Scope.Covers(h.namespace, h.queue) {
		return plane.ErrNotFound
	}
	if err := t.holds(h, p.Token); err != nil {
		return err
	}
	t.apply(h, plane.SettleTransition(p, h.attempt, h.maxAttempts, t.d.cfg.Backoff, t.d.float64), planekit.Result(p))
	return nil
}

// InvocationHeartbeatMany implements plane.Driver: one transaction, the rows locked in id
// order, the new leases written in one batch.
func (d *Driver) InvocationHeartbeatMany(ctx context.Context, params []plane.HeartbeatParams) ([]plane.HeartbeatResult, error) {
	ids := make([]string, 0, len(params))
	for i := range params {
		if err := params[i].Validate(); err != nil {
			return nil, err
		}
		ids = append(ids, params[i].ID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make([]plane.HeartbeatResult, len(params))
	err := d.do(ctx, func(t *tx) error {
		byID, err := t.headsByID(ids)
		if err != nil {
			return err
		}
		for i, p := range params {
			out[i] = plane.HeartbeatResult{}
			h := byID[p.ID]
			if h == nil || !p.Scope.Covers(h.namespace, h.queue) {
				out[i].Err = plane.ErrNotFound
				continue
			}
			if err := t.holds(h, p.Token); err != nil {
				out[i].Err = err
				continue
			}
			expires := t.ms + cmp.Or(p.LeaseTTL, plane.LeaseTTLDefault).Milliseconds()
			t.exec(d.sql.setLease, h.id, expires)
			h.leaseExpiresMS = expires
			out[i].LeaseExpiresAt = planekit.FromMS(expires)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
