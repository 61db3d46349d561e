package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server/api"
)

// handlerFunc serves one route for an authenticated principal; a returned error is written
// as the error body.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p *principal) error

// handle registers an authenticated route.
func (s *Server) handle(method, pattern string, h handlerFunc) {
	s.routes = append(s.routes, Route{Method: method, Path: pattern})
	s.mux.HandleFunc(method+" "+pattern, func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err == nil {
			err = h(w, r, p)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// handlePublic registers a route that needs no token.
func (s *Server) handlePublic(method, pattern string, h http.HandlerFunc) {
	s.routes = append(s.routes, Route{Method: method, Path: pattern})
	s.mux.HandleFunc(method+" "+pattern, h)
}

func (s *Server) registerRoutes() {
	s.handlePublic("GET", "/healthz", s.handleHealthz)
	s.handlePublic("GET", "/readyz", s.handleReadyz)
	s.handlePublic("GET", "/v1/openapi.json", s.handleOpenAPI)
	s.handle("GET", "/metrics", s.handleMetrics)

	s.handle("POST", "/v1/submit", s.handleSubmit)
	s.handle("POST", "/v1/submit/batch", s.handleSubmitBatch)
	s.handle("GET", "/v1/invocations/{id}", s.handleGet)
	s.handle("GET", "/v1/invocations/{id}/wait", s.handleWait)
	s.handle("GET", "/v1/invocations/{id}/frames", s.handleInvocationFrames)
	s.handle("GET", "/v1/invocations/{id}/stream", s.handleInvocationStream)
	s.handle("POST", "/v1/invocations/{id}/cancel", s.handleCancel)
	s.handle("POST", "/v1/invocations/{id}/kill", s.handleKill)

	s.handle("POST", "/v1/claim", s.handleClaim)
	s.handle("POST", "/v1/settle", s.handleSettle)
	s.handle("POST", "/v1/heartbeat", s.handleHeartbeat)
	s.handle("POST", "/v1/post", s.handlePost)

	s.handle("GET", "/v1/queues", s.handleQueues)
	s.handle("GET", "/v1/queues/{namespace}/{queue}/count", s.handleCount)
	s.handle("GET", "/v1/queues/{namespace}/{queue}/admission", s.handleAdmissionGet)
	s.handle("PUT", "/v1/queues/{namespace}/{queue}/admission", s.handleAdmissionSet)
	s.handle("DELETE", "/v1/queues/{namespace}/{queue}/admission", s.handleAdmissionDelete)
	s.handle("GET", "/v1/queues/{namespace}/{queue}/topics/{topic}/frames", s.handleTopicFrames)
	s.handle("GET", "/v1/queues/{namespace}/{queue}/topics/{topic}/stream", s.handleTopicStream)

	s.handle("POST", "/v1/trim", s.handleTrim)
	s.handle("POST", "/v1/maintain", s.handleMaintain)

	s.handle("POST", "/v1/workers", s.handleWorkerRegister)
	s.handle("GET", "/v1/workers", s.handleWorkerList)
	s.handle("DELETE", "/v1/workers/{id}", s.handleWorkerRemove)

	s.handle("POST", "/v1/tokens", s.handleTokenCreate)
	s.handle("GET", "/v1/tokens", s.handleTokenList)
	s.handle("POST", "/v1/tokens/lookup", s.handleTokenLookup)
	s.handle("DELETE", "/v1/tokens/{id}", s.handleTokenRevoke)
}

// Permissions of the routes that read.
var readPerms = []plane.Permission{plane.PermissionRead, plane.PermissionSubmit}

// anyPerms: any permission on the queue (counts, admission, topics).
var anyPerms = []plane.Permission{plane.PermissionRead, plane.PermissionSubmit, plane.PermissionConsume}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.write(w, r, http.StatusOK, &api.HealthResponse{Status: "ok"})
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.stopped.Load() {
		s.writeError(w, r, api.ErrShuttingDown)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.drv.InvocationCount(ctx, &plane.CountParams{Namespace: plane.NamespaceDefault, Queue: "readyz", State: plane.StateQueued}); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.write(w, r, http.StatusOK, &api.HealthResponse{Status: "ready"})
}

// Query parameters.

func queryFloat(r *http.Request, name string) (float64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, plane.Invalid(name, v, "use a number")
	}
	return f, nil
}

func querySeconds(r *http.Request, name string) (time.Duration, error) {
	f, err := queryFloat(r, name)
	if err != nil {
		return 0, err
	}
	if f < 0 {
		return 0, plane.Invalid(name, f, "use seconds ≥ 0")
	}
	return api.Duration(f), nil
}

func queryInt(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, plane.Invalid(name, v, "use an integer")
	}
	return n, nil
}

// Long-polls.

// longPoll admits a waiting request: it caps wait at LongPollMax, takes a long-poll slot
// when wait > 0, and returns a context that also ends when the server stops. release must
// be called. Errors: ErrShuttingDown, ErrTooManyLongPolls.
func (s *Server) longPoll(r *http.Request, wait time.Duration) (ctx context.Context, capped time.Duration, release func(), err error) {
	if s.stopped.Load() {
		return nil, 0, nil, api.ErrShuttingDown
	}
	capped = min(wait, s.cfg.LongPollMax)
	slot := false
	if capped > 0 {
		select {
		case s.longPolls <- struct{}{}:
			slot = true
			s.metrics.longPolls.Inc()
		default:
			return nil, 0, nil, fmt.Errorf("%w: the server holds %d; retry later", api.ErrTooManyLongPolls, s.cfg.MaxLongPolls)
		}
	}
	c, cancel := context.WithCancelCause(r.Context())
	stopWatch := context.AfterFunc(s.stopCtx, func() { cancel(api.ErrShuttingDown) })
	return c, capped, func() {
		stopWatch()
		cancel(nil)
		if slot {
			<-s.longPolls
			s.metrics.longPolls.Dec()
		}
	}, nil
}

// stopErr turns an error that the server's stop caused into ErrShuttingDown.
func stopErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), api.ErrShuttingDown) {
		return fmt.Errorf("%w: retry", api.ErrShuttingDown)
	}
	return err
}

// Submits.

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.SubmitRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	var err error
	if req.Payload, err = s.value("payload", req.Payload); err != nil {
		return err
	}
	res, err := s.submit(r, p, req.Namespace, req.Queue, []api.SubmitInvocation{req.SubmitInvocation}, req.MaxWait)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &res[0])
	return nil
}

func (s *Server) handleSubmitBatch(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.SubmitBatchRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	for i := range req.Invocations {
		var err error
		if req.Invocations[i].Payload, err = s.value(fmt.Sprintf("invocations[%d].payload", i), req.Invocations[i].Payload); err != nil {
			return err
		}
	}
	res, err := s.submit(r, p, req.Namespace, req.Queue, req.Invocations, req.MaxWait)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.SubmitBatchResponse{Results: res})
	return nil
}

func (s *Server) submit(r *http.Request, p *principal, namespace, queue string, invs []api.SubmitInvocation, maxWait float64) ([]api.SubmitResult, error) {
	if err := authorizeQueue(p, namespace, queue, plane.PermissionSubmit); err != nil {
		return nil, err
	}
	if maxWait < 0 || math.IsNaN(maxWait) {
		return nil, plane.Invalid("max_wait", maxWait, "use seconds ≥ 0 (0: the server's long-poll limit)")
	}
	params := &plane.SubmitManyParams{Namespace: namespace, Queue: queue, Invocations: make([]plane.SubmitParams, len(invs))}
	for i := range invs {
		params.Invocations[i] = invs[i].Params()
	}
	// A submit to a full queue with on_full=block waits inside the driver: bound it by the
	// long-poll limit and end it when the server stops.
	wait := s.cfg.LongPollMax
	if maxWait > 0 {
		wait = min(wait, api.Duration(maxWait))
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	ctx, cancelStop := context.WithCancelCause(ctx)
	defer cancelStop(nil)
	defer context.AfterFunc(s.stopCtx, func() { cancelStop(api.ErrShuttingDown) })()
	res, err := s.drv.InvocationSubmitMany(ctx, params)
	if err != nil {
		return nil, stopErr(ctx, err)
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

// Invocations.

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	id := r.PathValue("id")
	if err := s.authorizeInvocation(r, p, id, readPerms...); err != nil {
		return err
	}
	inv, err := s.drv.InvocationGet(r.Context(), id)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, api.NewInvocation(inv))
	return nil
}

func (s *Server) handleWait(w http.ResponseWriter, r *http.Request, p *principal) error {
	id := r.PathValue("id")
	timeout, err := querySeconds(r, "timeout")
	if err != nil {
		return err
	}
	if err := s.authorizeInvocation(r, p, id, readPerms...); err != nil {
		return err
	}
	ctx, timeout, release, err := s.longPoll(r, timeout)
	if err != nil {
		return err
	}
	defer release()
	inv, err := s.drv.InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: timeout})
	if err != nil {
		return stopErr(ctx, err)
	}
	s.write(w, r, http.StatusOK, api.NewInvocation(inv))
	return nil
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, p *principal) error {
	id := r.PathValue("id")
	if err := s.authorizeInvocation(r, p, id, plane.PermissionSubmit); err != nil {
		return err
	}
	ok, err := s.drv.InvocationCancel(r.Context(), id)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: ok})
	return nil
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request, p *principal) error {
	id := r.PathValue("id")
	if err := s.authorizeInvocation(r, p, id, plane.PermissionSubmit); err != nil {
		return err
	}
	ok, err := s.drv.InvocationKill(r.Context(), id)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: ok})
	return nil
}

// Frames.

// frameQuery reads since, limit and wait.
func frameQuery(r *http.Request) (since int64, limit int, wait time.Duration, err error) {
	if since, err = queryInt(r, "since", -1); err != nil {
		return
	}
	var l int64
	if l, err = queryInt(r, "limit", 0); err != nil {
		return
	}
	if l < 0 || l > math.MaxInt32 {
		return 0, 0, 0, plane.Invalid("limit", l, "use 0 (the default) or a positive count")
	}
	wait, err = querySeconds(r, "wait")
	return since, int(l), wait, err
}

func (s *Server) handleInvocationFrames(w http.ResponseWriter, r *http.Request, p *principal) error {
	id := r.PathValue("id")
	if err := s.authorizeInvocation(r, p, id, readPerms...); err != nil {
		return err
	}
	return s.frames(w, r, plane.Journal{InvocationID: id})
}

func (s *Server) handleTopicFrames(w http.ResponseWriter, r *http.Request, p *principal) error {
	j := plane.Journal{Namespace: r.PathValue("namespace"), Queue: r.PathValue("queue"), Topic: r.PathValue("topic")}
	if err := authorizeQueue(p, j.Namespace, j.Queue, anyPerms...); err != nil {
		return err
	}
	return s.frames(w, r, j)
}

func (s *Server) frames(w http.ResponseWriter, r *http.Request, j plane.Journal) error {
	since, limit, wait, err := frameQuery(r)
	if err != nil {
		return err
	}
	ctx, wait, release, err := s.longPoll(r, wait)
	if err != nil {
		return err
	}
	defer release()
	res, err := s.drv.FrameRead(ctx, &plane.FrameReadParams{Journal: j, Since: since, Limit: limit, Wait: wait})
	if err != nil {
		return stopErr(ctx, err)
	}
	if len(res.Frames) == 0 && !res.Closed && ctx.Err() != nil {
		if err := stopErr(ctx, ctx.Err()); errors.Is(err, api.ErrShuttingDown) {
			return err
		}
	}
	s.write(w, r, http.StatusOK, api.NewFramesResponse(res))
	return nil
}

// Workers' calls.

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.ClaimRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if err := authorizeQueue(p, req.Namespace, req.Queue, plane.PermissionConsume); err != nil {
		return err
	}
	if req.Wait < 0 || math.IsNaN(req.Wait) {
		return plane.Invalid("wait", req.Wait, "use seconds ≥ 0")
	}
	ctx, wait, release, err := s.longPoll(r, api.Duration(req.Wait))
	if err != nil {
		return err
	}
	defer release()
	jobs, err := s.drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: req.Namespace, Queue: req.Queue,
		Kind: req.Kind, Temperature: req.Temperature, Max: req.Max, LeaseTTL: api.Duration(req.LeaseTTL),
		Wait: wait, Worker: req.Worker})
	if err != nil {
		return stopErr(ctx, err)
	}
	if len(jobs) == 0 && ctx.Err() != nil {
		if err := stopErr(ctx, ctx.Err()); errors.Is(err, api.ErrShuttingDown) {
			return err
		}
	}
	out := &api.ClaimResponse{Jobs: make([]api.Job, len(jobs))}
	for i, j := range jobs {
		out.Jobs[i] = api.NewJob(j)
	}
	s.metrics.claims.WithLabelValues(req.Namespace, req.Queue).Add(float64(len(jobs)))
	s.write(w, r, http.StatusOK, out)
	return nil
}

// authorizeJobs checks consume rights on every invocation named, all before any is
// touched.
func (s *Server) authorizeJobs(r *http.Request, p *principal, ids []string) error {
	for _, id := range ids {
		if err := s.authorizeInvocation(r, p, id, plane.PermissionConsume); err != nil {
			if errors.Is(err, plane.ErrNotFound) || errors.Is(err, plane.ErrInvalid) {
				continue // the driver reports it per item
			}
			return err
		}
	}
	return nil
}

func itemError(err error) *api.ErrorBody {
	if err == nil {
		return nil
	}
	b, _ := api.NewErrorBody(err)
	return &b
}

func (s *Server) handleSettle(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.SettleRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	params := make([]plane.SettleParams, len(req.Settles))
	ids := make([]string, len(req.Settles))
	for i := range req.Settles {
		sp, err := req.Settles[i].Params()
		if err != nil {
			return err
		}
		if len(sp.Result) > 0 || sp.Outcome == plane.OutcomeSucceeded {
			if sp.Result, err = s.value(fmt.Sprintf("settles[%d].result", i), sp.Result); err != nil {
				return err
			}
		}
		params[i], ids[i] = sp, sp.ID
	}
	if err := s.authorizeJobs(r, p, ids); err != nil {
		return err
	}
	errs, err := s.drv.InvocationSettleMany(r.Context(), params)
	if err != nil {
		return err
	}
	out := &api.SettleResponse{Results: make([]api.ItemResponse, len(errs))}
	for i, e := range errs {
		out.Results[i] = api.ItemResponse{Error: itemError(e)}
		if e == nil {
			s.metrics.settles.WithLabelValues(api.OutcomeName(params[i].Outcome)).Inc()
		}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.HeartbeatRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	params := make([]plane.HeartbeatParams, len(req.Heartbeats))
	ids := make([]string, len(req.Heartbeats))
	for i, h := range req.Heartbeats {
		if h.LeaseTTL < 0 || math.IsNaN(h.LeaseTTL) {
			return plane.Invalid("lease_ttl", h.LeaseTTL, "use seconds ≥ 0 (0: the default)")
		}
		params[i] = plane.HeartbeatParams{ID: h.ID, Token: h.Token, LeaseTTL: api.Duration(h.LeaseTTL)}
		ids[i] = h.ID
	}
	if err := s.authorizeJobs(r, p, ids); err != nil {
		return err
	}
	res, err := s.drv.InvocationHeartbeatMany(r.Context(), params)
	if err != nil {
		return err
	}
	out := &api.HeartbeatResponse{Results: make([]api.HeartbeatResult, len(res))}
	for i, h := range res {
		out.Results[i] = api.HeartbeatResult{LeaseExpiresAt: h.LeaseExpiresAt, Error: itemError(h.Err)}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handlePost(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.PostRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	j := plane.Journal{InvocationID: req.Journal.InvocationID, Namespace: req.Journal.Namespace,
		Queue: req.Journal.Queue, Topic: req.Journal.Topic}
	if j == (plane.Journal{}) {
		return plane.Invalid("journal", nil, `missing: give "journal": {"invocation_id": …} for a job's journal, or {"namespace", "queue", "topic"} for a topic`)
	}
	value, err := s.value("value", req.Value)
	if err != nil {
		return err
	}
	if j.InvocationID != "" {
		if err := s.authorizeInvocation(r, p, j.InvocationID, plane.PermissionConsume); err != nil {
			return err
		}
	} else if err := authorizeQueue(p, j.Namespace, j.Queue, plane.PermissionSubmit, plane.PermissionConsume); err != nil {
		return err
	}
	seq, err := s.drv.FramePost(r.Context(), &plane.FramePostParams{Journal: j, Token: req.Token, Value: value, Final: req.Final})
	if err != nil {
		return err
	}
	s.metrics.frames.Inc()
	s.write(w, r, http.StatusOK, &api.PostResponse{Seq: seq})
	return nil
}

// Queues.

func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns := r.URL.Query().Get("namespace")
	stats, err := s.drv.QueueStatsList(r.Context(), ns)
	if err != nil {
		return err
	}
	out := &api.QueuesResponse{Queues: make([]api.QueueStats, 0, len(stats))}
	for _, st := range stats {
		if !p.allows(st.Namespace, st.Queue, anyPerms...) {
			continue
		}
		out.Queues = append(out.Queues, api.QueueStats{Namespace: st.Namespace, Queue: st.Queue, Counts: st.Counts,
			Admission: api.NewAdmission(st.Admission)})
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handleCount(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q := r.PathValue("namespace"), r.PathValue("queue")
	if err := authorizeQueue(p, ns, q, anyPerms...); err != nil {
		return err
	}
	st, err := plane.ParseState(r.URL.Query().Get("state"))
	if err != nil {
		return err
	}
	n, err := s.drv.InvocationCount(r.Context(), &plane.CountParams{Namespace: ns, Queue: q, State: st})
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.CountResponse{Count: n})
	return nil
}

func (s *Server) handleAdmissionGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q := r.PathValue("namespace"), r.PathValue("queue")
	if err := authorizeQueue(p, ns, q, anyPerms...); err != nil {
		return err
	}
	a, err := s.drv.QueueAdmissionGet(r.Context(), ns, q)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.AdmissionResponse{Admission: api.NewAdmission(a)})
	return nil
}

func (s *Server) handleAdmissionSet(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q := r.PathValue("namespace"), r.PathValue("queue")
	if err := authorizeQueue(p, ns, q, plane.PermissionAdmin); err != nil {
		return err
	}
	var req api.Admission
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if err := s.drv.QueueAdmissionSet(r.Context(), &plane.AdmissionParams{Namespace: ns, Queue: q, Admission: *req.Plane()}); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.AdmissionResponse{Admission: &req})
	return nil
}

func (s *Server) handleAdmissionDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q := r.PathValue("namespace"), r.PathValue("queue")
	if err := authorizeQueue(p, ns, q, plane.PermissionAdmin); err != nil {
		return err
	}
	ok, err := s.drv.QueueAdmissionDelete(r.Context(), ns, q)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: ok})
	return nil
}

// Maintenance.

func (s *Server) handleTrim(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req api.TrimRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if req.Namespace == "" || req.Queue == "" {
		if err := authorizeGlobal(p, "a trim of every queue"); err != nil {
			return err
		}
	} else if err := authorizeQueue(p, req.Namespace, req.Queue, plane.PermissionAdmin); err != nil {
		return err
	}
	n, err := s.drv.InvocationTrim(r.Context(), &plane.TrimParams{Namespace: req.Namespace, Queue: req.Queue, FinishedBefore: req.FinishedBefore})
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.TrimResponse{Deleted: n})
	return nil
}

func (s *Server) handleMaintain(w http.ResponseWriter, r *http.Request, p *principal) error {
	if err := authorizeGlobal(p, "maintain"); err != nil {
		return err
	}
	if err := s.drv.Maintain(r.Context()); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: true})
	return nil
}

// Workers.

func (s *Server) handleWorkerRegister(w http.ResponseWriter, r *http.Request, p *principal) error {
	var req plane.WorkerInfo
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if !p.allowsNamespace(req.Namespace, plane.PermissionConsume) {
		return forbidden("namespace "+req.Namespace, plane.PermissionConsume)
	}
	for _, q := range req.Queues {
		if err := authorizeQueue(p, req.Namespace, q, plane.PermissionConsume); err != nil {
			return err
		}
	}
	if err := s.drv.WorkerRegister(r.Context(), &req); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: true})
	return nil
}

func (s *Server) handleWorkerList(w http.ResponseWriter, r *http.Request, p *principal) error {
	within, err := querySeconds(r, "seen_within")
	if err != nil {
		return err
	}
	ws, err := s.drv.WorkerList(r.Context(), &plane.WorkerListParams{Namespace: r.URL.Query().Get("namespace"), SeenWithin: within})
	if err != nil {
		return err
	}
	out := &api.WorkersResponse{Workers: make([]plane.WorkerInfo, 0, len(ws))}
	for _, wi := range ws {
		if p.allowsNamespace(wi.Namespace, anyPerms...) {
			out.Workers = append(out.Workers, wi)
		}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handleWorkerRemove(w http.ResponseWriter, r *http.Request, p *principal) error {
	id := r.PathValue("id")
	if !p.has([]plane.Permission{plane.PermissionConsume}) {
		return forbidden("workers", plane.PermissionConsume)
	}
	if p.scoped() {
		ws, err := s.drv.WorkerList(r.Context(), &plane.WorkerListParams{SeenWithin: math.MaxInt64})
		if err != nil {
			return err
		}
		for _, wi := range ws {
			if wi.ID == id && !p.allowsNamespace(wi.Namespace, plane.PermissionConsume) {
				return forbidden("namespace "+wi.Namespace, plane.PermissionConsume)
			}
		}
	}
	if err := s.drv.WorkerRemove(r.Context(), r.URL.Query().Get("namespace"), id); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: true})
	return nil
}

// Tokens.

// SecretPrefix starts every secret the server mints, so they are easy to spot in a leak.
const SecretPrefix = "lks_"

// NewSecret returns a random bearer secret: SecretPrefix and 32 random bytes in base64url.
func NewSecret() string {
	b := make([]byte, 32)
	rand.Read(b) //nolint:errcheck // crypto/rand.Read never fails
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) handleTokenCreate(w http.ResponseWriter, r *http.Request, p *principal) error {
	if err := authorizeGlobal(p, "creating tokens"); err != nil {
		return err
	}
	var req api.TokenCreateRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if req.TTL < 0 || math.IsNaN(req.TTL) {
		return plane.Invalid("ttl", req.TTL, "use seconds ≥ 0 (0: never expires)")
	}
	for _, perm := range req.Permissions {
		switch perm {
		case plane.PermissionSubmit, plane.PermissionConsume, plane.PermissionRead, plane.PermissionAdmin:
		default:
			return plane.Invalid("permission", string(perm), "use submit|consume|read|admin")
		}
	}
	for _, g := range []string{req.Namespace, req.Queue} {
		if _, err := path.Match(g, ""); err != nil {
			return plane.Invalid("glob", g, "use a path.Match pattern, e.g. * or train-*")
		}
	}
	tok := req.Token.Plane()
	now := s.cfg.Now()
	if tok.ID == "" {
		tok.ID = s.ids.New(now)
	}
	if tok.CreatedAt.IsZero() {
		tok.CreatedAt = now
	}
	if req.TTL > 0 {
		tok.ExpiresAt = now.Add(api.Duration(req.TTL))
	}
	var secret string
	if len(tok.Hash) == 0 {
		secret = NewSecret()
		tok.Hash = HashToken(secret)
	}
	tok.RevokedAt = time.Time{}
	if err := s.drv.TokenCreate(r.Context(), tok); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.TokenCreateResponse{Token: api.NewToken(tok), Secret: secret})
	return nil
}

func (s *Server) handleTokenList(w http.ResponseWriter, r *http.Request, p *principal) error {
	if err := authorizeGlobal(p, "listing tokens"); err != nil {
		return err
	}
	toks, err := s.drv.TokenList(r.Context())
	if err != nil {
		return err
	}
	out := &api.TokensResponse{Tokens: make([]api.Token, len(toks))}
	for i := range toks {
		out.Tokens[i] = api.NewToken(&toks[i])
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handleTokenLookup(w http.ResponseWriter, r *http.Request, p *principal) error {
	if err := authorizeGlobal(p, "looking up tokens"); err != nil {
		return err
	}
	var req api.TokenLookupRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	tok, err := s.drv.TokenGet(r.Context(), req.Hash)
	if err != nil {
		return err
	}
	out := api.NewToken(tok)
	out.Hash = tok.Hash
	s.write(w, r, http.StatusOK, &out)
	return nil
}

func (s *Server) handleTokenRevoke(w http.ResponseWriter, r *http.Request, p *principal) error {
	if err := authorizeGlobal(p, "revoking tokens"); err != nil {
		return err
	}
	ok, err := s.drv.TokenRevoke(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: ok})
	return nil
}
