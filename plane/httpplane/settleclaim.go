package httpplane

import (
	"context"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationSettleAndClaim implements plane.Driver in one request (POST
// …/settle-and-claim), so the server settles and claims in one transaction. The request is
// not repeated once sent, as a claim is not; when it fails, the settles are sent again on
// their own by InvocationSettleMany (fenced, so a repeat is harmless: a settle that reached
// the server before the failure answers lease_lost) and no job is claimed. Jobs answered
// after ctx ended are given back at once (see claimed). A Wait longer
// than LongPollMax goes on as InvocationClaimMany.
func (d *Driver) InvocationSettleAndClaim(ctx context.Context, settle []plane.SettleParams, p *plane.ClaimParams) ([]error, []*plane.Job, error) {
	for i := range settle {
		if err := settle[i].Validate(); err != nil {
			return nil, nil, err
		}
	}
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	denied, err := d.outOfScope(ctx, len(settle), func(i int) (string, plane.Scope) { return settle[i].ID, settle[i].Scope })
	if err != nil {
		return nil, nil, err
	}
	if send, at := inScope(settle, denied); at != nil {
		for k := range send {
			send[k].Scope = plane.Scope{} // checked
		}
		errs, jobs, err := d.InvocationSettleAndClaim(ctx, send, p)
		if err != nil {
			return nil, nil, err
		}
		for k, e := range errs {
			denied[at[k]] = e
		}
		return denied, jobs, nil
	}
	end := time.Now().Add(p.Wait)
	wait := min(p.Wait, d.cfg.LongPollMax)
	if left, ok := remaining(ctx); ok && wait > 0 {
		// The answer must arrive before ctx's deadline: the settles' results are in it.
		wait = min(wait, max(left-blockMargin(left)-d.cfg.RequestTimeout/10, 0))
	}
	req := &api.SettleAndClaimRequest{Settles: make([]api.Settle, len(settle)),
		Claim: api.ClaimRequest{Kind: string(p.Kind), Temperature: p.Temperature, Max: p.Max,
			LeaseTTL: api.Seconds(p.LeaseTTL), Wait: api.Seconds(wait), Worker: p.Worker, Queues: p.Queues,
			Offers: api.NewOffers(p.Offers), WarmHostKeys: p.WarmHostKeys}}
	for i := range settle {
		req.Settles[i] = api.NewSettle(&settle[i])
	}
	var out api.SettleAndClaimResponse
	err = d.do(ctx, &call{method: "POST", path: queuePath(p.Namespace, p.Queue) + "/settle-and-claim", body: req, out: &out, wait: wait, claims: true})
	if err != nil {
		if ctx.Err() != nil || len(settle) == 0 {
			return nil, nil, err
		}
		errs, serr := d.InvocationSettleMany(ctx, settle)
		if serr != nil {
			return nil, nil, fmt.Errorf("%w (and settling alone: %w)", err, serr)
		}
		return errs, nil, nil
	}
	if len(out.Results) != len(settle) {
		return nil, nil, fmt.Errorf("settle and claim: the server answered %d results for %d settles", len(out.Results), len(settle))
	}
	errs := make([]error, len(out.Results))
	for i, r := range out.Results {
		d.leases.forget(settle[i].ID)
		if r.Error != nil {
			errs[i] = r.Error.Err()
		}
	}
	jobs := d.claimed(ctx, out.Jobs, p.LeaseTTL)
	if len(jobs) == 0 && p.Wait > 0 && time.Until(end) > 0 && ctx.Err() == nil {
		rest := *p
		rest.Wait = time.Until(end)
		jobs, _ = d.InvocationClaimMany(ctx, &rest) // the settles are done: a wait ended by ctx is no error
	}
	return errs, jobs, nil
}
