package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Submits.

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	var req api.SubmitRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	inv := req.Invocation()
	res, err := s.submit(r, p, ns, q, []api.SubmitInvocation{inv}, req.MaxWait, func(int) string { return "" })
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &res[0])
	return nil
}

func (s *Server) handleSubmitBatch(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	var req api.SubmitBatchRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	res, err := s.submit(r, p, ns, q, req.Invocations, req.MaxWait, func(i int) string { return fmt.Sprintf("invocations[%d].", i) })
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.SubmitBatchResponse{Results: res})
	return nil
}

// submit validates invs (prefix(i) starts the field names of invocation i in errors),
// authorizes, and submits.
func (s *Server) submit(r *http.Request, p *principal, namespace, queue string, invs []api.SubmitInvocation, maxWait float64,
	prefix func(int) string) ([]api.SubmitResult, error) {
	if maxWait < 0 || math.IsNaN(maxWait) {
		return nil, plane.Invalid("max_wait", maxWait, "use seconds ≥ 0 (0: the server's long-poll limit)")
	}
	params := &plane.SubmitManyParams{Namespace: namespace, Queue: queue, Invocations: make([]plane.SubmitParams, len(invs))}
	for i := range invs {
		pre := prefix(i)
		payload, err := s.value(pre+"payload", invs[i].Payload)
		if err != nil {
			return nil, err
		}
		if _, err := seconds(pre+"attempt_timeout", invs[i].AttemptTimeout); err != nil {
			return nil, err
		}
		for _, d := range []struct {
			name string
			v    float64
		}{{"delay", invs[i].Delay}, {"unique_for", invs[i].UniqueFor}, {"debounce", invs[i].Debounce}} {
			if _, err := delaySeconds(pre+d.name, d.v); err != nil {
				return nil, err
			}
		}
		params.Invocations[i] = invs[i].Params()
		params.Invocations[i].Payload = payload
	}
	if err := params.Validate(); err != nil {
		return nil, err
	}
	if err := authorizeQueue(p, namespace, queue, plane.PermissionSubmit); err != nil {
		return nil, err
	}
	res, err := s.submitBounded(r, p, params, api.Duration(maxWait))
	if err != nil {
		return nil, err
	}
	out := make([]api.SubmitResult, len(res))
	created := 0
	for i, sr := range res {
		out[i] = api.SubmitResult{ID: sr.ID, Existing: sr.Existing}
		if !sr.Existing {
			created++
		}
	}
	s.metrics.submits.WithLabelValues(namespace, queue).Add(float64(created))
	return out, nil
}

// submitBounded runs params on the plane for p's request r: the one bound of a submit that
// waits for room in a full queue (on_full=block) inside the driver, for our submit routes
// and the compatibility route's alike. It waits at most the long-poll limit
// (Config.LongPollMax; maxWait > 0 shortens it), ends when the server stops (shutting_down),
// and a token revoked or expired while it waited submits nothing (params.Recheck). A wait
// that ends without room answers the plane's queue_full (*plane.AdmissionError).
func (s *Server) submitBounded(r *http.Request, p *principal, params *plane.SubmitManyParams, maxWait time.Duration) ([]plane.SubmitResult, error) {
	wait := s.cfg.LongPollMax
	if maxWait > 0 {
		wait = min(wait, maxWait)
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	ctx, cancelStop := context.WithCancelCause(ctx)
	defer cancelStop(nil)
	defer context.AfterFunc(s.stopCtx, func() { cancelStop(api.ErrShuttingDown) })()
	params.Recheck = func() error { return s.recheckToken(r, p) }
	res, err := s.drv.InvocationSubmitMany(ctx, params)
	if err != nil {
		return nil, stopErr(ctx, err)
	}
	return res, nil
}

// Listing.

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	query := r.URL.Query()
	params := &plane.ListParams{Namespace: ns, Queue: q, KeyPrefix: query.Get("key_prefix"), After: query.Get("after")}
	if st := query.Get("state"); st != "" {
		if params.State, err = plane.ParseState(st); err != nil {
			return err
		}
	}
	limit, err := queryInt(r, "limit", 0)
	if err != nil {
		return err
	}
	if limit < 0 || limit > plane.ListLimitMax {
		return plane.Invalid("limit", limit, fmt.Sprintf("use 1–%d (0 or absent: %d)", plane.ListLimitMax, plane.ListLimitDefault))
	}
	params.Limit = int(limit)
	switch query.Get("order") {
	case "", "newest":
	case "oldest":
		params.Oldest = true
	default:
		return plane.Invalid("order", query.Get("order"), "use newest (default) or oldest")
	}
	if params.After != "" {
		if err := plane.ValidateID(params.After); err != nil {
			return plane.Invalid("after", params.After, "use the next cursor of the previous page")
		}
	}
	if err := authorizeQueue(p, ns, q, readPerms...); err != nil {
		return err
	}
	page, err := s.drv.InvocationList(r.Context(), params)
	if err != nil {
		return err
	}
	out := &api.ListResponse{Invocations: make([]api.Invocation, len(page.Invocations)), Next: page.Next}
	for i, inv := range page.Invocations {
		out.Invocations[i] = *api.NewInvocation(inv)
		out.Invocations[i].Payload, out.Invocations[i].Result = api.Value{}, api.Value{}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

// Invocations.

// invocationID returns the validated id of a route addressed by invocation.
func invocationID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	return id, plane.ValidateID(id)
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	id, err := invocationID(r)
	if err != nil {
		return err
	}
	if err := s.authorizeInvocation(r, p, id, readPerms...); err != nil {
		return err
	}
	inv, err := s.drv.InvocationGet(r.Context(), id)
	if err != nil {
		return err
	}
	out := api.NewInvocation(inv)
	if inv.State == plane.StateQueued && inv.Requirement != nil {
		// No capable worker is shown, not refused (docs/semantics.md, "Placement").
		if ws, err := s.drv.WorkerList(r.Context(), &plane.WorkerListParams{Namespace: inv.Namespace}); err == nil {
			n, _ := plane.CapableWorkers(inv.Requirement, inv.Namespace, inv.Queue, ws)
			out.CapableWorkers = &n
		}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handleWait(w http.ResponseWriter, r *http.Request, p *principal) error {
	id, err := invocationID(r)
	if err != nil {
		return err
	}
	timeout, err := queryWait(r, "timeout")
	if err != nil {
		return err
	}
	if err := s.authorizeInvocation(r, p, id, readPerms...); err != nil {
		return err
	}
	ctx, timeout, release, err := s.longPoll(r, p, timeout)
	if err != nil {
		return err
	}
	defer release()
	inv, err := s.drv.InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: timeout})
	if err == nil {
		if err := s.recheckToken(r, p); err != nil {
			return err // revoked or expired while it waited: not the result that came meanwhile
		}
	}
	if errors.Is(err, plane.ErrTimeout) {
		// Nothing yet: a normal answer, not 408 (which clients and proxies retry by
		// themselves).
		s.write(w, r, http.StatusOK, &api.WaitResponse{Done: false})
		return nil
	}
	if err != nil {
		return stopErr(ctx, err)
	}
	s.write(w, r, http.StatusOK, &api.WaitResponse{Done: true, Invocation: api.NewInvocation(inv)})
	return nil
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, p *principal) error {
	return s.changeInvocation(w, r, p, s.drv.InvocationCancel)
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request, p *principal) error {
	return s.changeInvocation(w, r, p, s.drv.InvocationKill)
}

func (s *Server) changeInvocation(w http.ResponseWriter, r *http.Request, p *principal, op func(context.Context, string) (bool, error)) error {
	id, err := invocationID(r)
	if err != nil {
		return err
	}
	if err := s.authorizeInvocation(r, p, id, plane.PermissionSubmit); err != nil {
		return err
	}
	ok, err := op(r.Context(), id)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: ok})
	return nil
}

// Settles and heartbeats.

// jobScope checks that p may consume, when it names any invocation (n > 0), and returns
// the scope the plane applies to the settles and heartbeats of p: an invocation of a
// namespace or queue p does not cover answers not_found from the plane, exactly what an
// unknown id gets, so no invocation is read before the write (see authorizeInvocation).
func jobScope(p *principal, n int) (plane.Scope, error) {
	if n > 0 && !p.has([]plane.Permission{plane.PermissionConsume}) {
		return plane.Scope{}, forbidden(p, "invocation", plane.PermissionConsume)
	}
	if !p.scoped() {
		return plane.Scope{}, nil
	}
	return plane.Scope{Namespace: p.tok.Namespace, Queue: p.tok.Queue}, nil
}

func itemError(err error) *api.ErrorBody {
	if err == nil {
		return nil
	}
	b, _, _ := publicErrorBody(err)
	return &b
}

// settleParams checks one settle; prefix starts its field names in errors.
func (s *Server) settleParams(st *api.Settle, prefix string) (plane.SettleParams, error) {
	sp, err := st.Params()
	if err != nil {
		return sp, &plane.InvalidError{Field: prefix + "outcome", Value: st.Outcome, Rule: api.OutcomeRule}
	}
	if !st.Result.IsZero() || sp.Outcome == plane.OutcomeSucceeded {
		if sp.Result, err = s.value(prefix+"result", st.Result); err != nil {
			return sp, err
		}
	}
	if sp.RetryDelay, err = delaySeconds(prefix+"retry_delay", st.RetryDelay); err != nil {
		return sp, err
	}
	if err := sp.Validate(); err != nil {
		var ie *plane.InvalidError
		if errors.As(err, &ie) && ie.Message == "" {
			c := *ie
			c.Field = prefix + ie.Field
			return sp, &c
		}
		return sp, err
	}
	return sp, nil
}

// checkBatch refuses a batch of n settles or heartbeats (field names them) over
// plane.SettleManyMax. Errors: *plane.InvalidError.
func checkBatch(field string, n int) error {
	if n > plane.SettleManyMax {
		return &plane.InvalidError{Field: field, Value: fmt.Sprintf("of %d items", n),
			Rule: fmt.Sprintf("send at most %d per request; split larger batches", plane.SettleManyMax)}
	}
	return nil
}

// settle settles params within p's scope; one error per item.
func (s *Server) settle(r *http.Request, p *principal, params []plane.SettleParams) ([]error, error) {
	scope, err := jobScope(p, len(params))
	if err != nil {
		return nil, err
	}
	for i := range params {
		params[i].Scope = scope
	}
	out := make([]error, len(params))
	if len(params) > 0 {
		errs, err := s.drv.InvocationSettleMany(r.Context(), params)
		if err != nil {
			return nil, err
		}
		for i, e := range errs {
			out[i] = e
			if e == nil {
				s.metrics.settles.WithLabelValues(api.OutcomeName(params[i].Outcome)).Inc()
			}
		}
	}
	return out, nil
}

func (s *Server) handleSettle(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.SettlesRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if err := checkBatch("settles", len(req.Settles)); err != nil {
		return err
	}
	params := make([]plane.SettleParams, len(req.Settles))
	for i := range req.Settles {
		var err error
		if params[i], err = s.settleParams(&req.Settles[i], fmt.Sprintf("settles[%d].", i)); err != nil {
			return err
		}
	}
	errs, err := s.settle(r, p, params)
	if err != nil {
		return err
	}
	out := &api.SettlesResponse{Results: make([]api.ItemResponse, len(errs))}
	for i, e := range errs {
		out.Results[i] = api.ItemResponse{Error: itemError(plane.InvocationNotFound(e, ""))}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handleSettleOne(w http.ResponseWriter, r *http.Request, p *principal) error {
	id, err := invocationID(r)
	if err != nil {
		return err
	}
	var req api.SettleRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	st := api.Settle{ID: id, Token: req.Token, Outcome: req.Outcome, Result: req.Result, Error: req.Error, RetryDelay: req.RetryDelay,
		RateLimitKey: req.RateLimitKey}
	sp, err := s.settleParams(&st, "")
	if err != nil {
		return err
	}
	errs, err := s.settle(r, p, []plane.SettleParams{sp})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		return errs[0]
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

// heartbeat extends the leases of params within p's scope.
func (s *Server) heartbeat(r *http.Request, p *principal, params []plane.HeartbeatParams) ([]plane.HeartbeatResult, error) {
	scope, err := jobScope(p, len(params))
	if err != nil {
		return nil, err
	}
	for i := range params {
		params[i].Scope = scope
	}
	if len(params) == 0 {
		return []plane.HeartbeatResult{}, nil
	}
	return s.drv.InvocationHeartbeatMany(r.Context(), params)
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.HeartbeatsRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if err := checkBatch("heartbeats", len(req.Heartbeats)); err != nil {
		return err
	}
	params := make([]plane.HeartbeatParams, len(req.Heartbeats))
	for i, h := range req.Heartbeats {
		ttl, err := leaseTTL(fmt.Sprintf("heartbeats[%d].lease_ttl", i), h.LeaseTTL)
		if err != nil {
			return err
		}
		params[i] = plane.HeartbeatParams{ID: h.ID, Token: h.Token, LeaseTTL: ttl}
	}
	res, err := s.heartbeat(r, p, params)
	if err != nil {
		return err
	}
	out := &api.HeartbeatsResponse{Results: make([]api.HeartbeatResult, len(res))}
	for i, h := range res {
		out.Results[i] = api.HeartbeatResult{LeaseExpiresAt: h.LeaseExpiresAt, Error: itemError(plane.InvocationNotFound(h.Err, ""))}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handleHeartbeatOne(w http.ResponseWriter, r *http.Request, p *principal) error {
	id, err := invocationID(r)
	if err != nil {
		return err
	}
	var req api.HeartbeatRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	ttl, err := leaseTTL("lease_ttl", req.LeaseTTL)
	if err != nil {
		return err
	}
	res, err := s.heartbeat(r, p, []plane.HeartbeatParams{{ID: id, Token: req.Token, LeaseTTL: ttl}})
	if err != nil {
		return err
	}
	if res[0].Err != nil {
		return res[0].Err
	}
	s.write(w, r, http.StatusOK, &api.HeartbeatResponse{LeaseExpiresAt: res[0].LeaseExpiresAt})
	return nil
}
