package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// workerOf returns the validated namespace and worker id of a worker route.
func workerOf(r *http.Request) (namespace, id string, err error) {
	namespace, id = r.PathValue("namespace"), r.PathValue("id")
	if err := plane.ValidateNamespace(namespace); err != nil {
		return "", "", err
	}
	if id == "" || len(id) > 128 {
		return "", "", plane.Invalid("worker id", id, "use 1–128 bytes (a ULID)")
	}
	return namespace, id, nil
}

// everSeen is the SeenWithin of the registry reads that check a worker id before it is
// replaced or removed: every stored worker, however long silent, so that a worker that
// missed its heartbeats is not open to a take-over.
const everSeen = 100 * 365 * 24 * time.Hour

// coversWorker reports whether p holds one of perms on every queue worker w serves (and
// on its namespace): a worker is listed and removed only by a token that could register
// it, so a token scoped to some queues never sees or removes a worker of others.
func coversWorker(p *principal, w *plane.WorkerInfo, perms ...plane.Permission) bool {
	if !p.allowsNamespace(w.Namespace, perms...) {
		return false
	}
	for _, q := range w.Queues {
		if !p.allows(w.Namespace, q, perms...) {
			return false
		}
	}
	return true
}

// othersWorker reports whether worker id of namespace is stored (however long silent) and
// serves a queue p does not cover with consume: one p may neither replace nor remove.
func (s *Server) othersWorker(r *http.Request, p *principal, namespace, id string) (bool, error) {
	if !p.scoped() {
		return false, nil
	}
	ws, err := s.drv.WorkerList(r.Context(), &plane.WorkerListParams{Namespace: namespace, SeenWithin: everSeen})
	if err != nil {
		return false, err
	}
	for i := range ws {
		if ws[i].ID == id {
			return !coversWorker(p, &ws[i], plane.PermissionConsume), nil
		}
	}
	return false, nil
}

func (s *Server) handleWorkerRegister(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, id, err := workerOf(r)
	if err != nil {
		return err
	}
	var req api.WorkerRegisterRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	for _, q := range req.Queues {
		if err := plane.ValidateName("queues", q); err != nil {
			return err
		}
	}
	if len(req.Host) > 255 || !utf8.ValidString(req.Host) || strings.ContainsFunc(req.Host, unicode.IsControl) {
		return plane.Invalid("host", req.Host, "use at most 255 bytes of UTF-8 without control characters")
	}
	if !p.allowsNamespace(ns, plane.PermissionConsume) {
		return forbidden(p, "namespace "+ns, plane.PermissionConsume)
	}
	for _, q := range req.Queues {
		if err := authorizeQueue(p, ns, q, plane.PermissionConsume); err != nil {
			return err
		}
	}
	// A registration replaces the worker of that id: a queue-scoped token replaces only a
	// worker whose every queue it covers (the check of removing), so that it cannot take
	// over another queue's worker by naming its id.
	if others, err := s.othersWorker(r, p, ns, id); err != nil {
		return err
	} else if others {
		return fmt.Errorf("%w: worker id %s is registered by a worker of queues the token does not cover; register under a new id",
			api.ErrForbidden, id)
	}
	info := &plane.WorkerInfo{ID: id, Namespace: ns, Host: req.Host, PID: req.PID, Queues: req.Queues, StartedAt: req.StartedAt,
		Provider: req.Provider, LaunchID: req.LaunchID, Running: req.Running, IdleSince: req.IdleSince,
		Offers: req.Offers.Offers(), WarmHostKeys: req.WarmHostKeys}
	if err := s.drv.WorkerRegister(r.Context(), info); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

func (s *Server) handleWorkerRemove(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, id, err := workerOf(r)
	if err != nil {
		return err
	}
	if !p.allowsNamespace(ns, plane.PermissionConsume) {
		return forbidden(p, "namespace "+ns, plane.PermissionConsume)
	}
	// A queue-scoped token removes only a worker whose every queue it covers, the check of
	// registering; any other is answered as an unknown one (nothing removed, no existence
	// oracle).
	if others, err := s.othersWorker(r, p, ns, id); err != nil {
		return err
	} else if others {
		s.write(w, r, http.StatusOK, &api.EmptyResponse{})
		return nil
	}
	if err := s.drv.WorkerRemove(r.Context(), ns, id); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

func (s *Server) handleWorkerList(w http.ResponseWriter, r *http.Request, p *principal) error {
	within, err := querySeconds(r, "seen_within")
	if err != nil {
		return err
	}
	ns := r.URL.Query().Get("namespace")
	if ns != "" {
		if err := plane.ValidateNamespace(ns); err != nil {
			return err
		}
	}
	ws, err := s.drv.WorkerList(r.Context(), &plane.WorkerListParams{Namespace: ns, SeenWithin: within})
	if err != nil {
		return err
	}
	out := &api.WorkersResponse{Workers: make([]api.Worker, 0, len(ws))}
	for i := range ws {
		if coversWorker(p, &ws[i], anyPerms...) {
			out.Workers = append(out.Workers, api.NewWorker(&ws[i]))
		}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}
