package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Claims.

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	var req api.ClaimRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	wait, err := waitSeconds("wait", req.Wait)
	if err != nil {
		return err
	}
	ttl, err := leaseTTL("lease_ttl", req.LeaseTTL)
	if err != nil {
		return err
	}
	params := &plane.ClaimParams{Namespace: ns, Queue: q, Kind: plane.Kind(req.Kind), Temperature: req.Temperature,
		Max: req.Max, LeaseTTL: ttl, Wait: wait, Worker: req.Worker, Queues: req.Queues, Offers: req.Offers.Offers(),
		WarmHostKeys: req.WarmHostKeys}
	if err := params.Validate(); err != nil {
		return err
	}
	if err := authorizeClaim(p, params); err != nil {
		return err
	}
	ctx, wait, release, err := s.longPoll(r, p, wait)
	if err != nil {
		return err
	}
	defer release()
	params.Wait = wait
	jobs, err := s.drv.InvocationClaimMany(ctx, params)
	if err != nil {
		s.releaseAbandoned(r, jobs) // jobs a plane claimed before its error are no one's
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
	s.countClaims(jobs)
	s.writeClaimed(w, r, p, out, jobs)
	return nil
}

// authorizeClaim checks that p may consume every queue claim may take from.
func authorizeClaim(p *principal, claim *plane.ClaimParams) error {
	for _, q := range claim.QueueNames() {
		if err := authorizeQueue(p, claim.Namespace, q, plane.PermissionConsume); err != nil {
			return err
		}
	}
	return nil
}

// countClaims counts claimed jobs by their queue.
func (s *Server) countClaims(jobs []*plane.Job) {
	for _, j := range jobs {
		s.metrics.claims.WithLabelValues(j.Namespace, j.Queue).Inc()
	}
}

// Queues.

func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns := r.URL.Query().Get("namespace")
	if ns != "" {
		if err := plane.ValidateNamespace(ns); err != nil {
			return err
		}
	}
	stats, err := s.drv.QueueStatsList(r.Context(), ns)
	if err != nil {
		return err
	}
	out := &api.QueuesResponse{Queues: make([]api.QueueStats, 0, len(stats))}
	for i := range stats {
		if p.allows(stats[i].Namespace, stats[i].Queue, anyPerms...) {
			out.Queues = append(out.Queues, api.NewQueueStats(&stats[i]))
		}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, ns, q, anyPerms...); err != nil {
		return err
	}
	stats, err := s.drv.QueueStatsList(r.Context(), ns)
	if err != nil {
		return err
	}
	out := api.NewQueueStats(&plane.QueueStats{Namespace: ns, Queue: q})
	for i := range stats {
		if stats[i].Queue == q {
			out = api.NewQueueStats(&stats[i])
		}
	}
	for _, st := range plane.States() {
		if _, ok := out.Counts[string(st)]; !ok {
			out.Counts[string(st)] = 0
		}
	}
	s.write(w, r, http.StatusOK, &out)
	return nil
}

func (s *Server) handleCount(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	st := plane.StateQueued
	if name := r.URL.Query().Get("state"); name != "" {
		if st, err = plane.ParseState(name); err != nil {
			return err
		}
	}
	if err := authorizeQueue(p, ns, q, anyPerms...); err != nil {
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
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, ns, q, anyPerms...); err != nil {
		return err
	}
	a, err := s.drv.QueueAdmissionGet(r.Context(), ns, q)
	if err != nil {
		return err
	}
	// The block's tag, for a conditional set (If-Match) that merges into it.
	w.Header().Set("ETag", `"`+plane.AdmissionTag(a)+`"`)
	s.write(w, r, http.StatusOK, &api.AdmissionResponse{Admission: api.NewAdmission(a)})
	return nil
}

func (s *Server) handleAdmissionSet(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	var req api.Admission
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if _, err := seconds("deadline_cutoff", req.DeadlineCutoff); err != nil {
		return err
	}
	a := req.Plane()
	if err := a.Validate(); err != nil {
		return err
	}
	if err := authorizeQueue(p, ns, q, plane.PermissionAdmin); err != nil {
		return err
	}
	// If-Match makes the set conditional on the block's tag (GET's ETag; plane.AdmissionTag):
	// a block changed meanwhile is 412 changed, and nothing is written. One without a tag
	// is refused, not read as no condition (that would overwrite a block changed meanwhile).
	var ifMatch string
	if values := r.Header.Values("If-Match"); len(values) > 0 {
		ifMatch = strings.Trim(strings.TrimPrefix(strings.TrimSpace(values[0]), "W/"), `"`)
		if ifMatch == "" {
			return plane.Invalid("If-Match", values[0], `use the ETag of GET …/admission ("TAG"), or no If-Match for an unconditional set`)
		}
	}
	unlock, err := s.admitAdmissionBlock(r.Context(), ns, q)
	if err != nil {
		return err
	}
	// The block as the plane stored it, as GET shows it: defaults filled in (a burst that
	// follows the rate, plane.Admission.Burst), a null per-key override left out; this
	// set's own, never a racing set's.
	stored, err := s.drv.QueueAdmissionSet(r.Context(), &plane.AdmissionParams{Namespace: ns, Queue: q, Admission: *a, IfMatch: ifMatch})
	unlock()
	if err != nil {
		return err
	}
	w.Header().Set("ETag", `"`+plane.AdmissionTag(stored)+`"`)
	s.write(w, r, http.StatusOK, &api.AdmissionResponse{Admission: api.NewAdmission(stored)})
	return nil
}

func (s *Server) handleAdmissionDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
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

// handlePause answers PUT …/pause (pause) and DELETE …/pause (resume).
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, ns, q, plane.PermissionAdmin); err != nil {
		return err
	}
	ok, err := s.drv.QueuePause(r.Context(), &plane.PauseParams{Namespace: ns, Queue: q, Paused: r.Method == http.MethodPut})
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
	if req.Namespace != "" {
		if err := plane.ValidateNamespace(req.Namespace); err != nil {
			return err
		}
	}
	if req.Queue != "" {
		if err := plane.ValidateName("queue name", req.Queue); err != nil {
			return err
		}
	}
	switch {
	case req.Namespace == "":
		if err := authorizeGlobal(p, "a trim of every namespace"); err != nil {
			return err
		}
	case req.Queue == "":
		// Every queue of one namespace (lakeshore trim --all): an admin of all of them, the
		// leases' rule, not only a global admin.
		if !p.adminsNamespace(req.Namespace) {
			return fmt.Errorf("%w: a trim of every queue of namespace %s needs admin on every queue of it (a token for queue *), or name the queue",
				api.ErrForbidden, req.Namespace)
		}
	default:
		if err := authorizeQueue(p, req.Namespace, req.Queue, plane.PermissionAdmin); err != nil {
			return err
		}
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
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}
