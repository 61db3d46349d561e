package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// handlerFunc serves one route for an authenticated principal; a returned error is written
// as the error body.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p *principal) error

// registerRoutes registers a handler for every route of api.Routes(), the table the OpenAPI
// document is generated from. It panics when the table and the handlers disagree.
func (s *Server) registerRoutes() {
	public := map[string]http.HandlerFunc{
		"GET /healthz":         s.handleHealthz,
		"GET /readyz":          s.handleReadyz,
		"GET /v1/openapi.json": s.handleOpenAPI,
	}
	q, i := api.QueuePath, api.InvocationPath
	auth := map[string]handlerFunc{
		"GET /metrics": s.handleMetrics,

		"POST " + q + "/invocations":                     s.handleSubmit,
		"POST " + q + "/invocations/batch":               s.handleSubmitBatch,
		"GET " + q + "/invocations":                      s.handleList,
		"POST " + q + "/claim":                           s.handleClaim,
		"POST " + q + "/settle-and-claim":                s.handleSettleAndClaim,
		"GET " + q + "/count":                            s.handleCount,
		"GET " + q + "/stats":                            s.handleStats,
		"GET " + q + "/admission":                        s.handleAdmissionGet,
		"PUT " + q + "/admission":                        s.handleAdmissionSet,
		"DELETE " + q + "/admission":                     s.handleAdmissionDelete,
		"PUT " + q + "/pause":                            s.handlePause,
		"DELETE " + q + "/pause":                         s.handlePause,
		"POST " + q + "/topics/{topic}/frames":           s.handleTopicPost,
		"GET " + q + "/topics/{topic}/frames":            s.handleTopicFrames,
		"GET " + q + "/topics/{topic}/stream":            s.handleTopicStream,
		"GET " + i:                                       s.handleGet,
		"GET " + i + "/wait":                             s.handleWait,
		"GET " + i + "/frames":                           s.handleInvocationFrames,
		"GET " + i + "/stream":                           s.handleInvocationStream,
		"POST " + i + "/cancel":                          s.handleCancel,
		"POST " + i + "/kill":                            s.handleKill,
		"POST " + i + "/settle":                          s.handleSettleOne,
		"POST " + i + "/heartbeat":                       s.handleHeartbeatOne,
		"POST " + i + "/frames":                          s.handleInvocationPost,
		"POST /v1/settle":                                s.handleSettle,
		"POST /v1/heartbeat":                             s.handleHeartbeat,
		"GET /v1/queues":                                 s.handleQueues,
		"PUT /v1/namespaces/{namespace}/workers/{id}":    s.handleWorkerRegister,
		"DELETE /v1/namespaces/{namespace}/workers/{id}": s.handleWorkerRemove,
		"GET /v1/workers":                                s.handleWorkerList,
		"POST /v1/trim":                                  s.handleTrim,
		"POST /v1/maintain":                              s.handleMaintain,
		"POST /v1/tokens":                                s.handleTokenCreate,
		"GET /v1/tokens":                                 s.handleTokenList,
		"POST /v1/tokens/lookup":                         s.handleTokenLookup,
		"DELETE /v1/tokens/{id}":                         s.handleTokenRevoke,
	}
	for pattern, h := range s.dataRoutes() {
		auth[pattern] = h
	}
	for pattern, h := range s.codeRoutes() {
		auth[pattern] = h
	}
	for pattern, h := range s.scheduleRoutes() {
		auth[pattern] = h
	}
	for pattern, h := range s.providerRoutes() {
		auth[pattern] = h
	}
	for _, rt := range api.Routes() {
		pattern := rt.Method + " " + rt.Path
		s.routes = append(s.routes, rt)
		if h, ok := public[pattern]; ok {
			s.mux.HandleFunc(pattern, h)
			delete(public, pattern)
			continue
		}
		h, ok := auth[pattern]
		if !ok {
			panic("server: no handler for " + pattern)
		}
		delete(auth, pattern)
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			p, err := s.authenticate(r)
			if err == nil {
				err = h(w, r, p)
			}
			if err != nil {
				s.writeError(w, r, err)
			}
		})
	}
	for pattern := range auth {
		panic("server: " + pattern + " is not in api.Routes()")
	}
	for pattern := range public {
		panic("server: " + pattern + " is not in api.Routes()")
	}
}

// Permissions of the routes that read.
var readPerms = []plane.Permission{plane.PermissionRead, plane.PermissionSubmit}

// anyPerms: any permission on the queue (counts, admission, topics).
var anyPerms = []plane.Permission{plane.PermissionRead, plane.PermissionSubmit, plane.PermissionConsume}

// queueOf returns the namespace and queue of a route addressed by queue, validated (before
// any authorization). Errors: *plane.InvalidError.
func queueOf(r *http.Request) (namespace, queue string, err error) {
	namespace, queue = r.PathValue("namespace"), r.PathValue("queue")
	if err := plane.ValidateNamespace(namespace); err != nil {
		return "", "", err
	}
	if err := plane.ValidateName("queue name", queue); err != nil {
		return "", "", err
	}
	return namespace, queue, nil
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
	return querySecondsOf(name, f)
}

// queryWait is querySeconds for a wait parameter (?wait=: how long a read may wait for
// more), where a positive value under 1 ns is 0, do not wait, as it means (a client's time
// left to its deadline can come out that small), rather than refused.
func queryWait(r *http.Request, name string) (time.Duration, error) {
	f, err := queryFloat(r, name)
	if err != nil {
		return 0, err
	}
	return querySecondsOf(name, zeroBelowNanosecond(f))
}

// querySecondsOf checks the seconds f of query parameter name: ≥ 0, and positive ones at
// least 1 ns (belowNanosecond).
func querySecondsOf(name string, f float64) (time.Duration, error) {
	if f < 0 {
		return 0, plane.Invalid(name, f, "use seconds ≥ 0")
	}
	return duration(name, f)
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

// seconds checks a duration field of a body: finite and ≥ 0.
func seconds(field string, f float64) (time.Duration, error) {
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > maxSeconds {
		return 0, plane.Invalid(field, f, fmt.Sprintf("use seconds from 0 to %d (about 292 years)", int64(maxSeconds)))
	}
	return duration(field, f)
}

// waitSeconds is seconds for a wait field (a claim's wait: how long it may wait for a job),
// where a positive value under 1 ns is 0, do not wait, as it means, rather than refused.
func waitSeconds(field string, f float64) (time.Duration, error) {
	return seconds(field, zeroBelowNanosecond(f))
}

// zeroBelowNanosecond is f, or 0 for a belowNanosecond f.
func zeroBelowNanosecond(f float64) float64 {
	if belowNanosecond(f) {
		return 0
	}
	return f
}

// belowNanosecond reports whether f seconds is positive but shorter than the shortest
// duration (1 ns, what Go's time.Duration and so the Go SDK and every plane keep): it
// would round to 0, which means something else (no window, no lease, the default), so
// duration (and leaseTTL) refuse it rather than drop it. A wait's (waitSeconds,
// queryWait) is 0: there 0 means what it would (do not wait).
// 1e-9 itself is taken (1 ns): the rule is on the value given, not on its rounding.
func belowNanosecond(f float64) bool { return f > 0 && f < 1e-9 }

// duration is f seconds of field, already within the field's range, as a duration: a
// belowNanosecond f is refused (belowNanosecondRule), not rounded to 0. The one conversion
// of seconds, delaySeconds, querySeconds and a data lease.
func duration(field string, f float64) (time.Duration, error) {
	if belowNanosecond(f) {
		return 0, plane.Invalid(field, f, belowNanosecondRule)
	}
	return api.Duration(f), nil
}

// belowNanosecondRule is why a belowNanosecond value is refused, and what is allowed.
const belowNanosecondRule = "a positive duration must be at least 1e-09 seconds (1 ns), the shortest one kept; a shorter one would round to 0, which means none: use 0 for none, or at least 1e-09"

// maxSeconds is the longest duration a field in seconds may have: what time.Duration
// holds.
const maxSeconds = float64(math.MaxInt64 / int64(time.Second))

// delaySeconds checks a field in seconds the plane bounds by plane.DelayMax (delay,
// unique_for, debounce, retry_delay): finite, 0 to 366 days. Its rule is the plane's
// bound, so a refused value never names a wider range (seconds' 292 years) than the plane
// takes.
func delaySeconds(field string, f float64) (time.Duration, error) {
	if f < 0 || math.IsNaN(f) || f > plane.DelayMax.Seconds() {
		return 0, plane.Invalid(field, f, delaySecondsRule)
	}
	return duration(field, f)
}

// delaySecondsRule is delaySeconds' rule.
var delaySecondsRule = fmt.Sprintf("use seconds from 0 to %d (366 days)", int64(plane.DelayMax.Seconds()))

// everySeconds checks a schedule's every: finite, not negative (0: not an interval
// schedule), at most maxSeconds; the plane then asks for at least plane.ScheduleEveryMin.
func everySeconds(f float64) error {
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > maxSeconds {
		return plane.Invalid("every", f, fmt.Sprintf("use seconds from %g to %d, in whole milliseconds (or none, with a cron expression)",
			plane.ScheduleEveryMin.Seconds(), int64(maxSeconds)))
	}
	return nil
}

// leaseTTL checks a lease_ttl field: seconds ≥ 0 (0: the plane's default) and at most
// api.MaxLeaseTTL.
func leaseTTL(field string, f float64) (time.Duration, error) {
	if belowNanosecond(f) {
		return 0, plane.Invalid(field, f, belowNanosecondRule)
	}
	d, err := seconds(field, f)
	if err != nil || d > api.MaxLeaseTTL {
		return 0, plane.Invalid(field, f, leaseTTLRule)
	}
	return d, nil
}

// leaseTTLRule is leaseTTL's rule: the whole range, whichever end a value missed.
var leaseTTLRule = fmt.Sprintf("use seconds from 0 (the default, %d) to %d (%d days); heartbeat to keep a longer job",
	int64(plane.LeaseTTLDefault.Seconds()), int64(api.MaxLeaseTTL.Seconds()), int64(api.MaxLeaseTTL.Hours()/24))

// Long-polls.

// longPoll admits a waiting request: it caps wait at LongPollMax, takes a long-poll slot
// when wait > 0 (one of MaxLongPolls, and one of the MaxLongPollsPerTenant of p's tenant),
// and returns a context that also ends when the server stops. release must be called.
// Errors: ErrShuttingDown, ErrTooManyLongPolls.
func (s *Server) longPoll(r *http.Request, p *principal, wait time.Duration) (ctx context.Context, capped time.Duration, release func(), err error) {
	if s.stopped.Load() {
		return nil, 0, nil, api.ErrShuttingDown
	}
	capped = min(wait, s.cfg.LongPollMax)
	slot, tenant := false, ""
	if capped > 0 {
		tenant = longPollTenant(r, p)
		s.tenantMu.Lock()
		if s.tenantPolls[tenant] >= s.cfg.MaxLongPollsPerTenant {
			s.tenantMu.Unlock()
			return nil, 0, nil, fmt.Errorf("%w: this token (or namespace) holds its share of %d; retry later",
				api.ErrTooManyLongPolls, s.cfg.MaxLongPollsPerTenant)
		}
		s.tenantPolls[tenant]++
		s.tenantMu.Unlock()
		select {
		case s.longPolls <- struct{}{}:
			slot = true
			s.metrics.longPolls.Inc()
		default:
			s.releaseTenant(tenant)
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
			s.releaseTenant(tenant)
		}
	}, nil
}

// longPollTenant names whose share a long-poll takes: the token's id when the request has
// a stored token; else (auth off or the admin token) the namespace it addresses, "" for a
// route by invocation id.
func longPollTenant(r *http.Request, p *principal) string {
	if p != nil && p.tok != nil {
		return "token " + p.tok.ID
	}
	return "namespace " + r.PathValue("namespace")
}

func (s *Server) releaseTenant(tenant string) {
	s.tenantMu.Lock()
	defer s.tenantMu.Unlock()
	if s.tenantPolls[tenant]--; s.tenantPolls[tenant] <= 0 {
		delete(s.tenantPolls, tenant)
	}
}

// stopErr turns an error that the server's stop caused into ErrShuttingDown.
func stopErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), api.ErrShuttingDown) {
		return fmt.Errorf("%w: retry", api.ErrShuttingDown)
	}
	return err
}

// Health.

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.write(w, r, http.StatusOK, &api.HealthResponse{Status: "ok"})
}

// readyzTimeout bounds the plane read of /readyz.
const readyzTimeout = 2 * time.Second

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.stopped.Load() {
		s.writeError(w, r, api.ErrShuttingDown)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyzTimeout)
	defer cancel()
	if _, err := s.drv.InvocationCount(ctx, &plane.CountParams{Namespace: plane.NamespaceDefault, Queue: "readyz", State: plane.StateQueued}); err != nil {
		if ctx.Err() != nil && r.Context().Err() == nil {
			// The plane answered nothing within readyz's own bound (the plane returns that
			// context's error): its storage is as good as unreachable, not an internal error.
			err = fmt.Errorf("the plane did not answer within %s: %w", readyzTimeout, plane.ErrUnavailable)
		}
		s.writeError(w, r, err)
		return
	}
	s.write(w, r, http.StatusOK, &api.HealthResponse{Status: "ready"})
}
