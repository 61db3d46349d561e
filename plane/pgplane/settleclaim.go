package pgplane

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationSettleAndClaim implements plane.Driver: the settles (rows locked in id order,
// as InvocationSettleMany does) and the claim of up to p.Max jobs (FOR UPDATE SKIP LOCKED,
// as InvocationClaimMany does) are one transaction. Calls of concurrent workers in this
// process are served together (group commit): one transaction, one lock of every settled
// row, one claim statement per queue and kind, and one commit for all of them, so a busy
// plane settles and claims many jobs per round trip and per commit. A claim that finds
// nothing and may wait goes on as InvocationClaimMany once the settles committed.
func (d *Driver) InvocationSettleAndClaim(ctx context.Context, settle []plane.SettleParams, p *plane.ClaimParams) ([]error, []*plane.Job, error) {
	if err := planekit.ValidateAll(settle); err != nil {
		return nil, nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if len(p.Queues) > 0 {
		out := make([]error, len(settle))
		jobs, committed, err := d.claimAcross(ctx, p, func(t *tx) error { return t.settleAll(settle, out) })
		if err != nil && !committed {
			return nil, nil, err
		}
		// Once the settles committed, a wait ended by ctx or Close is no error of the call.
		return out, jobs, nil
	}
	kind, _ := plane.ParseKind(string(p.Kind))
	req := &settleClaimRequest{
		settle: settle,
		out:    make([]error, len(settle)),
		claim:  &claimRequest{p: p, kind: kind, n: max(p.Max, 1), lease: cmp.Or(p.LeaseTTL, plane.LeaseTTLDefault)},
	}
	waitUntil := time.Now().Add(p.Wait)
	d.settleClaims.do(ctx, req)
	if req.err != nil {
		return nil, nil, req.err
	}
	if len(req.claim.jobs) > 0 || p.Wait == 0 {
		return req.out, req.claim.jobs, nil
	}
	rest := *p
	if rest.Wait = time.Until(waitUntil); rest.Wait <= 0 {
		return req.out, nil, nil
	}
	// The settles are committed: a wait ended by ctx or Close is no error of this call.
	jobs, _ := d.InvocationClaimMany(ctx, &rest)
	return req.out, jobs, nil
}

// settleAll settles in t (rows locked in id order, as settleClaimGroup does), each
// result into out.
func (t *tx) settleAll(settle []plane.SettleParams, out []error) error {
	if len(settle) == 0 {
		return nil
	}
	ids := make([]string, len(settle))
	for i := range settle {
		ids[i] = settle[i].ID
	}
	slices.Sort(ids)
	byID, err := t.headsByID(slices.Compact(ids))
	if err != nil {
		return err
	}
	for i := range settle {
		out[i] = t.settle(byID[settle[i].ID], &settle[i])
	}
	return nil
}

// settleClaimRequest is one worker's settle-and-claim, served in a group.
type settleClaimRequest struct {
	settle []plane.SettleParams
	out    []error // per settle
	claim  *claimRequest
	err    error // the group's transaction failed
}

// maxSettleClaimGroup bounds the settles and claimed jobs of one group.
const maxSettleClaimGroup = 2000

func newSettleClaimGrouper(d *Driver) *grouper[*settleClaimRequest] {
	return &grouper[*settleClaimRequest]{max: maxSettleClaimGroup, run: d.settleClaimGroup,
		size: func(r *settleClaimRequest) int { return len(r.settle) + r.claim.n }}
}

// settleClaimGroup serves a group in one transaction: every settled row locked with one
// statement (in id order), the settles' writes sent with the first claim statement, then
// the claims, one statement per queue, kind and temperature, in arrival order.
func (d *Driver) settleClaimGroup(ctx context.Context, reqs []*settleClaimRequest) {
	var ids []string
	for _, r := range reqs {
		for _, s := range r.settle {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	type partKey struct {
		namespace, queue string
		kind             plane.Kind
		temperature      uint64 // the bits: a NaN temperature (ignored by other kinds) is a key too
		offers           string // the offers' shape key: requests with offers are served apart
		warm             string // the warm host keys: requests with some are served apart
	}
	var order []partKey
	parts := map[partKey][]*claimRequest{}
	for _, r := range reqs {
		c := r.claim
		k := partKey{c.p.Namespace, c.p.Queue, c.kind, math.Float64bits(c.p.Temperature), (*plane.Requirement)(c.p.Offers).Shape(), strings.Join(c.p.WarmHostKeys, " ")}
		if _, ok := parts[k]; !ok {
			order = append(order, k)
		}
		parts[k] = append(parts[k], c)
	}
	err := d.do(ctx, func(t *tx) error {
		for _, r := range reqs {
			r.err = nil
			r.claim.jobs, r.claim.pending, r.claim.next, r.claim.err = nil, nil, 0, nil
		}
		if len(ids) > 0 {
			byID, err := t.headsByID(ids)
			if err != nil {
				return err
			}
			for _, r := range reqs {
				for i := range r.settle {
					r.out[i] = t.settle(byID[r.settle[i].ID], &r.settle[i])
				}
			}
		}
		for _, k := range order {
			if err := t.claimFor(parts[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for _, r := range reqs {
			r.err, r.claim.jobs = err, nil
		}
	}
}
