package server

import (
	"fmt"
	"net/http"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// handleSettleAndClaim settles invocations and claims from the path's queue in one
// transaction of the plane. Settles of invocations the token may not consume answer
// not_found item by item (as POST /v1/settle does) and the rest still go through. Once the
// plane settled, the answer is 200 with the results even if the claim's wait was ended by
// a shutdown, so the client never repeats a settle that is done.
func (s *Server) handleSettleAndClaim(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	var req api.SettleAndClaimRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if err := checkBatch("settles", len(req.Settles)); err != nil {
		return err
	}
	params := make([]plane.SettleParams, len(req.Settles))
	for i := range req.Settles {
		if params[i], err = s.settleParams(&req.Settles[i], fmt.Sprintf("settles[%d].", i)); err != nil {
			return err
		}
	}
	wait, err := waitSeconds("claim.wait", req.Claim.Wait)
	if err != nil {
		return err
	}
	ttl, err := leaseTTL("claim.lease_ttl", req.Claim.LeaseTTL)
	if err != nil {
		return err
	}
	claim := &plane.ClaimParams{Namespace: ns, Queue: q, Kind: plane.Kind(req.Claim.Kind), Temperature: req.Claim.Temperature,
		Max: req.Claim.Max, LeaseTTL: ttl, Wait: wait, Worker: req.Claim.Worker, Queues: req.Claim.Queues,
		Offers: req.Claim.Offers.Offers(), WarmHostKeys: req.Claim.WarmHostKeys}
	if err := claim.Validate(); err != nil {
		return err
	}
	if err := authorizeClaim(p, claim); err != nil {
		return err
	}
	scope, err := jobScope(p, len(params))
	if err != nil {
		return err
	}
	for i := range params {
		params[i].Scope = scope
	}
	ctx, wait, release, err := s.longPoll(r, p, wait)
	if err != nil {
		return err
	}
	defer release()
	claim.Wait = wait
	errs, jobs, err := s.drv.InvocationSettleAndClaim(ctx, params, claim)
	if err != nil {
		s.releaseAbandoned(r, jobs) // jobs a plane claimed before its error are no one's
		return stopErr(ctx, err)
	}
	out := &api.SettleAndClaimResponse{Results: make([]api.ItemResponse, len(params)), Jobs: make([]api.Job, len(jobs))}
	for i, e := range errs {
		out.Results[i] = api.ItemResponse{Error: itemError(plane.InvocationNotFound(e, ""))}
		if e == nil {
			s.metrics.settles.WithLabelValues(api.OutcomeName(params[i].Outcome)).Inc()
		}
	}
	for i, j := range jobs {
		out.Jobs[i] = api.NewJob(j)
	}
	s.countClaims(jobs)
	s.writeClaimed(w, r, p, out, jobs)
	return nil
}
