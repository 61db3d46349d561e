package pgplane

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationSettleAndClaim implements plane.Driver: the settles (rows locked in id order,
// as InvocationSettleMany does) and the first claim (FOR UPDATE SKIP LOCKED, as
// InvocationClaimMany does) are one transaction, so one commit per job for a sequential
// worker. It is not grouped with other callers' settles or claims. A claim that finds
// nothing and may wait goes on as InvocationClaimMany once the settles committed.
func (d *Driver) InvocationSettleAndClaim(ctx context.Context, settle []plane.SettleParams, p *plane.ClaimParams) ([]error, []*plane.Job, error) {
	for i := range settle {
		if err := settle[i].Validate(); err != nil {
			return nil, nil, err
		}
	}
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, nil, err
	}
	kind, _ := plane.ParseKind(string(p.Kind))
	req := &claimRequest{p: p, kind: kind, n: max(p.Max, 1), lease: cmp.Or(p.LeaseTTL, plane.LeaseTTLDefault)}
	waitUntil := time.Now().Add(p.Wait)
	ids := make([]string, len(settle))
	for i := range settle {
		ids[i] = settle[i].ID
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make([]error, len(settle))
	err := d.do(ctx, func(t *tx) error {
		req.jobs, req.pending, req.next, req.err = nil, nil, 0, nil
		if len(ids) > 0 {
			heads, err := t.heads(d.sql.headMany, ids)
			if err != nil {
				return err
			}
			byID := make(map[string]*head, len(heads))
			for _, h := range heads {
				byID[h.id] = h
			}
			for i := range settle {
				out[i] = t.settle(byID[settle[i].ID], &settle[i])
			}
		}
		return t.claimFor([]*claimRequest{req})
	})
	if err != nil {
		return nil, nil, err
	}
	if len(req.jobs) > 0 || p.Wait == 0 {
		return out, req.jobs, nil
	}
	rest := *p
	if rest.Wait = time.Until(waitUntil); rest.Wait <= 0 {
		return out, nil, nil
	}
	// The settles are committed: a wait ended by ctx or Close is no error of this call.
	jobs, _ := d.InvocationClaimMany(ctx, &rest)
	return out, jobs, nil
}
