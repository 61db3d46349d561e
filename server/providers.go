package server

import (
	"fmt"
	"net/http"
	"regexp"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// providerRoutes are the routes of elastic queues (issue 17): a queue's provider and the
// named leases supervisors take.
func (s *Server) providerRoutes() map[string]handlerFunc {
	q := api.QueuePath
	return map[string]handlerFunc{
		"GET " + q + "/provider":                         s.handleProviderGet,
		"PUT " + q + "/provider":                         s.handleProviderSet,
		"DELETE " + q + "/provider":                      s.handleProviderDelete,
		"GET /v1/providers":                              s.handleProviderList,
		"GET /v1/demand":                                 s.handleDemand,
		"POST /v1/namespaces/{namespace}/leases/acquire": s.handleLeaseAcquire,
		"POST /v1/namespaces/{namespace}/leases/release": s.handleLeaseRelease,
	}
}

func (s *Server) handleProviderGet(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	if err := authorizeQueue(p, ns, q, anyPerms...); err != nil {
		return err
	}
	redacted, err := redactedQuery(r)
	if err != nil {
		return err
	}
	ref, err := s.drv.QueueProviderGet(r.Context(), ns, q)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ProviderResponse{Provider: providerFor(p, ns, ref, redacted)})
	return nil
}

func (s *Server) handleProviderSet(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	var req api.Provider
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	params := &plane.ProviderParams{Namespace: ns, Queue: q, Provider: *req.Plane()}
	if err := params.Validate(); err != nil {
		return err
	}
	if err := authorizeProviderChange(p, ns, q); err != nil {
		return err
	}
	if err := s.drv.QueueProviderSet(r.Context(), params); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ProviderResponse{Provider: api.NewProvider(&params.Provider)})
	return nil
}

func (s *Server) handleProviderDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, err := queueOf(r)
	if err != nil {
		return err
	}
	if err := authorizeProviderChange(p, ns, q); err != nil {
		return err
	}
	ok, err := s.drv.QueueProviderDelete(r.Context(), ns, q)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: ok})
	return nil
}

func (s *Server) handleProviderList(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns := r.URL.Query().Get("namespace")
	if ns != "" {
		if err := plane.ValidateNamespace(ns); err != nil {
			return err
		}
	}
	redacted, err := redactedQuery(r)
	if err != nil {
		return err
	}
	list, err := s.drv.QueueProviderList(r.Context(), ns)
	if err != nil {
		return err
	}
	out := &api.QueueProvidersResponse{Queues: make([]api.QueueProvider, 0, len(list))}
	for i := range list {
		qp := &list[i]
		if p.allows(qp.Namespace, qp.Queue, anyPerms...) {
			out.Queues = append(out.Queues, api.QueueProvider{Namespace: qp.Namespace, Queue: qp.Queue, Provider: *providerFor(p, qp.Namespace, &qp.Provider, redacted)})
		}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

// seesProviderSecrets reports whether p may read the values of the launch policy's env of
// namespace's queues: the server's admin token, or an admin token of every queue of the
// namespace (queue "*"), which is what a supervisor needs to take the namespace's leases
// and launch its workers. A token scoped to queues, even their admin, is a tenant: the
// operator's env (HF_TOKEN, cloud keys) is not its to read.
func (p *principal) seesProviderSecrets(namespace string) bool {
	return p.adminsNamespace(namespace)
}

// redactedQuery reads the provider reads' redacted parameter: "true" asks for the tenant's
// view whatever the token (the dashboard's, so no screen shows a value), "false" or none
// for the token's own view. Errors: *plane.InvalidError for any other value.
func redactedQuery(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("redacted"); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, &plane.InvalidError{Field: "redacted", Value: v, Rule: "use true or false"}
	}
}

// providerFor converts ref to its wire form as p may read it (nil for nil): whole for a
// token that seesProviderSecrets, unless redacted asks for the tenant's view; otherwise
// every env value replaced by "xxxxx" (names kept, so a tenant sees what its workers get)
// and the command through plane.RedactCommand (a URL's password, an env assignment's
// value, a secret-named flag's value). Every value is
// hidden, not only those whose name looks secret (plane.RedactEnv): a name says nothing of
// AZURE_STORAGE_CONNECTION_STRING.
func providerFor(p *principal, namespace string, ref *plane.ProviderRef, redacted bool) *api.Provider {
	out := api.NewProvider(ref)
	if out == nil || !redacted && p.seesProviderSecrets(namespace) {
		return out
	}
	if out.Policy.Env != nil {
		env := make(map[string]string, len(out.Policy.Env))
		for k, v := range out.Policy.Env {
			env[k] = v
			if v != "" {
				env[k] = plane.Redacted
			}
		}
		out.Policy.Env = env
	}
	out.Policy.Command = plane.RedactCommand(out.Policy.Command)
	return out
}

// authorizeProviderChange allows setting or removing a queue's provider to the server's
// admin token only. A provider's policy names the command its workers run (and an exec:
// provider names a program), and a supervisor runs them with its own privileges on the
// operator's machines: a tenant token, even an admin of the queue, must not choose code
// those machines run. Tenants read their queues' providers (GET) with any permission.
func authorizeProviderChange(p *principal, ns, q string) error {
	if err := authorizeQueue(p, ns, q, plane.PermissionAdmin); err != nil {
		return err
	}
	if !p.all {
		return fmt.Errorf("%w: setting or removing a queue's provider needs the server's admin token (its workers run commands on the operator's machines)", api.ErrForbidden)
	}
	return nil
}

// leaseOf reads the namespace and body of a lease route, validated, and checks that p is an
// admin of every queue of the namespace.
func (s *Server) leaseOf(w http.ResponseWriter, r *http.Request, p *principal) (string, *api.LeaseRequest, error) {
	ns := r.PathValue("namespace")
	if err := plane.ValidateNamespace(ns); err != nil {
		return "", nil, err
	}
	var req api.LeaseRequest
	if err := s.readBody(w, r, &req); err != nil {
		return "", nil, err
	}
	if err := plane.ValidateLease(ns, req.Name, req.Holder); err != nil {
		return "", nil, err
	}
	if !p.adminsNamespace(ns) {
		return "", nil, fmt.Errorf("%w: leases need admin on every queue of namespace %s (a token for queue *)", api.ErrForbidden, ns)
	}
	return ns, &req, nil
}

func (s *Server) handleLeaseAcquire(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, req, err := s.leaseOf(w, r, p)
	if err != nil {
		return err
	}
	ttl, err := seconds("ttl", req.TTL)
	if err != nil {
		return err
	}
	ok, err := s.drv.LeaseAcquire(r.Context(), &plane.LeaseParams{Namespace: ns, Name: req.Name, Holder: req.Holder, TTL: ttl})
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.LeaseResponse{Acquired: ok})
	return nil
}

func (s *Server) handleLeaseRelease(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, req, err := s.leaseOf(w, r, p)
	if err != nil {
		return err
	}
	if err := s.drv.LeaseRelease(r.Context(), ns, req.Name, req.Holder); err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.EmptyResponse{})
	return nil
}

// handleDemand answers GET /v1/demand: Driver.DemandList filtered by the query's namespace,
// queue and shape ("default" names the default shape) and by what the token covers.
func (s *Server) handleDemand(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, q, shape := r.URL.Query().Get("namespace"), r.URL.Query().Get("queue"), r.URL.Query().Get("shape")
	if ns != "" {
		if err := plane.ValidateNamespace(ns); err != nil {
			return err
		}
	}
	if q != "" {
		if ns == "" {
			return plane.Invalid("queue", q, "give namespace with queue")
		}
		if err := plane.ValidateName("queue name", q); err != nil {
			return err
		}
	}
	switch {
	case shape == "default":
		shape = ""
	case shape == "":
		shape = "*"
	case !shapeKeyRe.MatchString(shape):
		return plane.Invalid("shape", shape, "use default or a shape key: sh1_ and 32 hex digits (lakeshore get shows a job's shape)")
	}
	list, err := s.drv.DemandList(r.Context(), ns)
	if err != nil {
		return err
	}
	out := &api.DemandResponse{Demand: make([]api.ShapeDemand, 0, len(list))}
	for i := range list {
		d := &list[i]
		if (q != "" && d.Queue != q) || (shape != "*" && d.Shape != shape) || !p.allows(d.Namespace, d.Queue, anyPerms...) {
			continue
		}
		out.Demand = append(out.Demand, api.NewShapeDemand(d))
	}
	if len(out.Demand) == 0 && q != "" && shape != "*" && p.allows(ns, q, anyPerms...) {
		// One queue's one shape, with nothing queued or running: its row, at zero, so that
		// an autoscaler's lookup of demand[0] reads 0 rather than finding no row. Its
		// requirement is not known here (no job holds it), so its capable workers are left
		// out unless it is the default shape.
		out.Demand = append(out.Demand, api.ShapeDemand{Namespace: ns, Queue: q, Shape: shape})
	}
	if len(out.Demand) > 0 {
		// The registry's live workers tell which shapes no worker can run now; a plane
		// without a registry (or a failed read) leaves the counts out, the demand stands.
		if ws, err := s.drv.WorkerList(r.Context(), &plane.WorkerListParams{Namespace: ns}); err == nil {
			for i := range out.Demand {
				d := &out.Demand[i]
				if d.Shape != "" && d.Requirement == nil {
					continue // an idle shape's zero row: its requirement is not known
				}
				capable, _ := plane.CapableWorkers(d.Requirement.Plane(), d.Namespace, d.Queue, ws)
				n := int64(capable)
				d.CapableWorkers = &n
			}
		}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}

// shapeKeyRe is the form of plane.Requirement.Shape's keys ("sh1_" and 32 hex digits).
var shapeKeyRe = regexp.MustCompile(`^sh1_[0-9a-f]{32}$`)
