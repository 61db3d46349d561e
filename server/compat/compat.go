// Package compat serves the HTTP routes of the dreamlake-lakeshore 0.5.0 package's
// HttpDispatch (issue 24) on top of a plane.Driver, so that package's SyncQueue, Queue,
// run_worker, stream and topics run against `lakeshore serve` with only LAKESHORE_URL set.
//
// The routes, all msgpack bodies:
//
//	POST /v1/namespaces/{namespace}/producer/submit                         submit
//	POST /v1/namespaces/{namespace}/producer/await                          wait (bounded)
//	GET  /v1/namespaces/{namespace}/producer/invocations/{id}/result/stream frames, re-framed
//	POST /v1/daemon/poll                                                    claim one
//	POST /v1/daemon/ack                                                     settle
//	POST /v1/daemon/result-chunk                                            post one frame
//
// Every route maps onto the driver's verbs. The lease token of a job handed out by poll is
// kept in the plane (a topic of LeaseQueue), so several replicas serve one fleet; each
// replica also remembers the leases it handed out, to extend them on the worker's next poll.
// docs/http-api.md, "Compatibility routes", is the contract.
package compat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// TopicQueue is the queue a compatibility topic lives on: the real package names topics
// only by name, ours by (namespace, queue, topic).
const TopicQueue = "_topics"

// LeaseTTLDefault is the lease of a job claimed through /v1/daemon/poll. The real worker
// sends no heartbeats; its lease is extended to this length from now on every poll by the
// same worker_id and on every frame it posts for the job.
const LeaseTTLDefault = 5 * time.Minute

// waitMax bounds one long-poll (poll, await) whatever timeout_s asks.
const waitMax = 30 * time.Second

// Principal is who a request acts as, as the server's authentication found it.
type Principal interface {
	// Allows reports whether the principal may use one of perms on (namespace, queue).
	Allows(namespace, queue string, perms ...plane.Permission) bool
	// Namespace is the token's namespace pattern, "" for the admin token or auth off.
	Namespace() string
}

// Config wires the routes to a server.
type Config struct {
	// Driver is the plane behind the server.
	Driver plane.Driver
	// Authenticate finds the principal of a request (the server's bearer tokens).
	Authenticate func(r *http.Request) (Principal, error)
	// WriteError writes err as the server's typed error body.
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
	// ReadBody reads a request body within the server's limit (its errors are the
	// server's: a body over the limit answers 413). Required.
	ReadBody func(w http.ResponseWriter, r *http.Request) ([]byte, error)
	// Done is closed when the server stops: open streams end then.
	Done <-chan struct{}
	// LeaseTTL is the lease of a claimed job; 0 means LeaseTTLDefault.
	LeaseTTL time.Duration
	// Now is the plane's clock, the one its leases end on: a lease a replica remembers is
	// forgotten an hour after its end on this clock, never on the server machine's, which
	// may be off from the plane's by any amount. nil: plane.ClockOf(Driver). The server
	// passes its Config.Now.
	Now func() time.Time
	// LongPoll admits a request that waits (a poll, an await, a stream) under the server's
	// bounds of long-polls open at once, in all and per tenant, as the server's own
	// long-polls: it returns the context of the wait (ended when the server stops, too),
	// the wait capped by the server's limit, and release, which must be called; an error
	// (too many long-polls, shutting down) is answered as is. wait 0 takes no slot. nil:
	// no bound but waitMax, and the wait ends when Done is closed.
	LongPoll func(r *http.Request, p Principal, wait time.Duration) (ctx context.Context, capped time.Duration, release func(), err error)
	// Recheck looks p's token up again (the server's recheckToken: at most once a second)
	// before a wait hands out what came meanwhile: each delivery of a result stream, the
	// jobs of a poll that waited, the state an await waited for. An error (the token was
	// revoked or expired since: unauthorized) ends the stream, or is the answer, the jobs
	// given back unrun. nil: no check (a principal that cannot be revoked).
	Recheck func(r *http.Request, p Principal) error
	// Submit runs a submit for p's request r under the server's bound of a submit that
	// waits for room in a full queue (on_full=block): the same wait as the server's own
	// submit routes (its long-poll limit), ended when the server stops, with the token
	// looked up again after a wait (params.Recheck). nil: the driver's submit, waiting at
	// most waitMax, ended when Done is closed, rechecked with Recheck.
	Submit func(r *http.Request, p Principal, params *plane.SubmitManyParams) ([]plane.SubmitResult, error)
}

// Routes returns the compatibility routes, pattern → handler, for an http.ServeMux.
func Routes(cfg *Config) map[string]http.HandlerFunc {
	h := &handlers{cfg: *cfg}
	if h.cfg.LeaseTTL <= 0 {
		h.cfg.LeaseTTL = LeaseTTLDefault
	}
	if h.cfg.Now == nil {
		h.cfg.Now = plane.ClockOf(h.cfg.Driver)
	}
	h.leases = newLeases(h.cfg.Now)
	p := "/v1/namespaces/{namespace}/producer"
	return map[string]http.HandlerFunc{
		"POST " + p + "/submit":                        h.wrap(h.submit),
		"POST " + p + "/await":                         h.wrap(h.await),
		"GET " + p + "/invocations/{id}/result/stream": h.wrap(h.stream),
		"POST /v1/daemon/poll":                         h.wrap(h.poll),
		"POST /v1/daemon/ack":                          h.wrap(h.ack),
		"POST /v1/daemon/result-chunk":                 h.wrap(h.resultChunk),
	}
}

type handlers struct {
	cfg    Config
	leases *leases
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, p Principal) error

func (h *handlers) wrap(f handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := h.cfg.Authenticate(r)
		if err == nil {
			err = f(w, r, p)
		}
		if err != nil {
			h.cfg.WriteError(w, r, err)
		}
	}
}

// untilStop returns r's context, also ended when the server stops: long-polls and streams
// end at once on a graceful shutdown.
func (h *handlers) untilStop(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-h.cfg.Done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// longPoll admits a wait of r under Config.LongPoll (without it: untilStop).
func (h *handlers) longPoll(r *http.Request, p Principal, wait time.Duration) (context.Context, time.Duration, func(), error) {
	if h.cfg.LongPoll != nil {
		return h.cfg.LongPoll(r, p, wait)
	}
	ctx, cancel := h.untilStop(r)
	return ctx, wait, cancel, nil
}

// recheck is Config.Recheck, nil without one.
func (h *handlers) recheck(r *http.Request, p Principal) error {
	if h.cfg.Recheck == nil {
		return nil
	}
	return h.cfg.Recheck(r, p)
}

// stopped turns the error of a wait that untilStop's context ended into the server's
// shutting_down (503, Retry-After: 1) when the server stopped it, not the client.
func stopped(ctx context.Context, r *http.Request, err error) error {
	if err != nil && ctx.Err() != nil && r.Context().Err() == nil {
		return fmt.Errorf("%w: the server is stopping", api.ErrShuttingDown)
	}
	return err
}

// readBody decodes the msgpack body of r into v, read by Config.ReadBody. Errors: the
// server's for the body itself, *plane.InvalidError for one that is not the route's map.
func (h *handlers) readBody(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := h.cfg.ReadBody(w, r)
	if err != nil {
		return err
	}
	if err := wire.Unmarshal(b, v); err != nil {
		return plane.Invalid("body", nil, "a msgpack map of the route's fields: "+err.Error())
	}
	return nil
}

// writeBody answers v as msgpack.
func writeBody(w http.ResponseWriter, v any) error {
	b, err := wire.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: encode answer: %v", api.ErrInternal, err)
	}
	w.Header().Set("Content-Type", "application/x-msgpack")
	_, _ = w.Write(b)
	return nil
}

// seconds turns timeout_s into a wait, at most waitMax and never negative.
func seconds(s float64) time.Duration {
	if !(s > 0) {
		return 0
	}
	return min(time.Duration(s*float64(time.Second)), waitMax)
}

// daemonNamespace is the namespace of the daemon routes, which name none: the token's
// namespace when it is one name (no glob), else "default".
func daemonNamespace(p Principal) string {
	ns := p.Namespace()
	if ns == "" || plane.ValidateNamespace(ns) != nil {
		return plane.NamespaceDefault
	}
	return ns
}

// invocation returns invocation id when p may use one of perms on its queue (and, when
// namespace is set, it is of that namespace). An invocation p may not see answers exactly
// like an unknown one, errNoInvocation either way: the same bytes, so that no answer tells
// a token which ids exist in another namespace. Errors: plane.ErrNotFound,
// *plane.InvalidError.
func (h *handlers) invocation(ctx context.Context, p Principal, namespace, id string, perms ...plane.Permission) (*plane.Invocation, error) {
	if err := plane.ValidateID(id); err != nil {
		return nil, err
	}
	inv, err := h.cfg.Driver.InvocationGet(ctx, id)
	if errors.Is(err, plane.ErrNotFound) {
		return nil, errNoInvocation
	}
	if err != nil {
		return nil, err
	}
	if namespace != "" && inv.Namespace != namespace || !p.Allows(inv.Namespace, inv.Queue, perms...) {
		return nil, errNoInvocation
	}
	return inv, nil
}

// errNoInvocation is the answer about an invocation id that names none the token may use,
// unknown or another tenant's alike: the causes our routes name (plane.InvocationNotFound),
// never the id, which the client knows. Before, another tenant's id answered "not found:
// invocation <id>" and an unknown one the plane's bare "not found", an existence oracle
// (TestForeignInvocationAnswersAsUnknown).
var errNoInvocation = plane.InvocationNotFound(plane.ErrNotFound, "")

// forbidden is the 403 error for perms on a queue, in the words of our routes' (server's
// forbidden): "the token does not grant submit or consume on queue ns/q".
func forbidden(namespace, queue string, perms ...plane.Permission) error {
	names := make([]string, len(perms))
	for i, p := range perms {
		names[i] = string(p)
	}
	return fmt.Errorf("%w: the token does not grant %s on queue %s/%s", api.ErrForbidden, strings.Join(names, " or "), namespace, queue)
}
