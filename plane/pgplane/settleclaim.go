package pgplane

import (
	"cmp"
	"context"

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
	return planekit.SettleThenClaim(ctx, settle, p, d.settleClaim, d.claimAcross, (*tx).settleAll)
}

// settleClaim is a settle-and-claim of one queue (planekit.SettleClaim), served in a group
// (settleClaimGroup); a claim that then waits waits as InvocationClaimMany.
func (d *Driver) settleClaim(ctx context.Context, settle []plane.SettleParams, p *plane.ClaimParams, out []error) ([]*plane.Job, bool, error) {
	req := &settleClaimRequest{settle: settle, out: out, claim: &claimRequest{P: p, Claim: planekit.ClaimOf(p)}}
	return planekit.SettledClaim(ctx, p, req.claim, func() error {
		return cmp.Or(d.settleClaims.Do(ctx, req), req.claim.Err)
	}, d.InvocationClaimMany)
}

// settleAll settles in t (rows locked in id order, as settleClaimGroup does), each
// result into out.
func (t *tx) settleAll(settle []plane.SettleParams, out []error) error {
	return t.settleBatches([][]plane.SettleParams{settle}, [][]error{out})
}

// settleBatches settles batches in t, the result of batches[b][i] into outs[b][i]: every
// row locked with one statement, in id order (so concurrent transactions lock alike), then
// each settle in turn.
func (t *tx) settleBatches(batches [][]plane.SettleParams, outs [][]error) error {
	ids := planekit.SettledIDs(batches)
	if len(ids) == 0 {
		return nil
	}
	byID, err := t.headsByID(ids)
	if err != nil {
		return err
	}
	t.holdsRows = true // a claim after the settles promotes without waiting
	for b, batch := range batches {
		for i := range batch {
			outs[b][i] = t.settle(byID[batch[i].ID], &batch[i])
		}
	}
	return nil
}

// settleClaimRequest is one worker's settle-and-claim, served in a group.
type settleClaimRequest struct {
	settle []plane.SettleParams
	out    []error       // per settle
	claim  *claimRequest // its Err: the group's transaction failed
}

// maxSettleClaimGroup bounds the settles and claimed jobs of one group.
const maxSettleClaimGroup = 2000

// settleClaimGroup serves a group in one transaction: every settled row locked with one
// statement (in id order), the settles' writes sent with the first claim statement, then
// the claims, one statement per queue, kind and temperature, in arrival order.
func (d *Driver) settleClaimGroup(ctx context.Context, reqs []*settleClaimRequest) {
	batches, outs := make([][]plane.SettleParams, len(reqs)), make([][]error, len(reqs))
	claims := make([]*claimRequest, len(reqs))
	for i, r := range reqs {
		batches[i], outs[i], claims[i] = r.settle, r.out, r.claim
	}
	planekit.ServeClaims(ctx, claims, d.do, (*tx).settleBatches, batches, outs, (*tx).claimFor)
}
