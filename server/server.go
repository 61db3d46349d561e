// Package server is Lakeshore's HTTP API (/v1) over any plane.Driver: every driver
// operation as a route, bodies in msgpack or JSON, bearer-token authorization per namespace
// and queue, limits on bodies and long-polls, request ids in logs, and Prometheus metrics.
// The http.Server that runs it (timeouts, TLS, listening) belongs to `lakeshore serve`.
package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"gocloud.dev/blob"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server/ui"
)

// Config configures a Server. A nil *Config means all defaults: no authentication, no
// metrics registry of the caller's (a private one), warnings logged to stderr.
type Config struct {
	// AdminToken is the secret of the admin bearer token: it may do everything, including
	// minting access tokens. Empty: the server runs open, with no authentication at all
	// (`lakeshore serve` then only binds loopback). Defaults to "".
	AdminToken string

	// DataDir is the root of the data queues (package persist) the server serves under
	// /v1/namespaces/{ns}/data/{queue}: each lives in DataDir/{ns}/{queue}/, opened at its
	// first request. Empty: no data queues (their routes answer 501 not_implemented).
	// Defaults to "".
	DataDir string

	// DataConfig configures the data queues' file stores (its Dir is ignored). Defaults
	// to persist's defaults.
	DataConfig *persist.Config

	// MaxOpenDataQueues bounds the data queues open at once (each a store with its
	// files or connections): to open another, the least recently used one no request
	// holds is closed (its tail flushed); when requests hold every one, a request for
	// another gets 503 too_many_long_polls with Retry-After (see MaxDataQueuesPerTenant).
	// Defaults to MaxOpenDataQueuesDefault.
	MaxOpenDataQueues int

	// MaxDataQueuesPerTenant bounds the distinct data queues one tenant (as for
	// MaxLongPollsPerTenant: a stored token, else a namespace) holds at once with requests
	// that wait (streams, reads and GetMeta that wait, puts blocked by back-pressure, waits
	// for a change): past it such a request gets 503 too_many_long_polls. A queue a request
	// holds is never closed to make room, so without it one tenant waiting on
	// MaxOpenDataQueues queues held them all and every other tenant's data requests were
	// refused. Defaults to a quarter of MaxOpenDataQueues (at least 1).
	MaxDataQueuesPerTenant int

	// DataQueueIdle is how long a data queue stays open with no request holding it
	// before it is closed (it reopens at the next request). Defaults to
	// DataQueueIdleDefault; -1 keeps idle queues open (up to MaxOpenDataQueues).
	DataQueueIdle time.Duration

	// DataStores, when set, opens and lists the data queues instead of file stores
	// under DataDir (DataDir and DataConfig are then ignored): `lakeshore serve --data
	// postgres://…?blob=…` sets it to the distributed store (persist/lakestore), so that
	// any number of servers serve the same queues. Defaults to nil.
	DataStores DataStores

	// Gatherer serves /metrics. Defaults to Registerer when it is a Gatherer, else a
	// private registry.
	Gatherer prometheus.Gatherer

	// Logger receives one line per request (successes at debug level, or info with
	// LogRequests; client errors at info; server errors at error; ends of long-polls by a
	// shutdown at debug) with its request id. Tokens are never logged. Defaults to
	// warnings and errors on stderr.
	Logger *slog.Logger

	// LogRequests logs successful requests at info level instead of debug, so that a
	// logger at info level (`lakeshore serve -v`) shows one line for every request.
	// Defaults to false.
	LogRequests bool

	// LongPollMax caps the wait of any long-poll (claim, wait, frames, a blocked submit).
	// Clients that want longer waits repeat the call. Defaults to LongPollMaxDefault.
	LongPollMax time.Duration

	// MaxBodyBytes bounds a request body. Defaults to MaxBodyBytesDefault.
	MaxBodyBytes int64

	// CodeDir is the root of the code archives shipped with runs (PUT and GET
	// /v1/namespaces/{ns}/queues/{q}/code/{digest}, docs/fabric.md): each is
	// CodeDir/{ns}/{queue}/{digest}.tar.gz. Empty, without CodeBucket: no code routes
	// (they answer 501 not_implemented). Defaults to "".
	CodeDir string

	// CodeBucket, when set, keeps the code archives in this bucket instead of CodeDir, as
	// objects code/{ns}/{queue}/{digest}.tar.gz: every server of a PostgreSQL plane given
	// the same bucket serves the same archives (`lakeshore serve --code-store`, or the
	// bucket of `--data`). Uploads are spooled to os.TempDir before their check. The caller
	// opens and closes it. Defaults to nil.
	CodeBucket *blob.Bucket

	// MaxCodeBytes bounds one code archive (compressed); its files may unpack to at most
	// 16 times that, and to at most 64 times the archive's own size (at least 64 MiB).
	// Defaults to MaxCodeBytesDefault.
	MaxCodeBytes int64

	// MaxDataQueuesPerNamespace caps the data queues one namespace holds (stored, whether
	// open or not; unlike MaxDataQueuesPerTenant, which bounds the queues waited on at
	// once): a put that would create one more answers 409 limit_exceeded and creates
	// nothing; puts into the queues it holds go on. Defaults to
	// MaxDataQueuesPerNamespaceDefault; negative: no cap (caps.go).
	MaxDataQueuesPerNamespace int

	// MaxCodeBytesPerNamespace caps the bytes of code archives one namespace holds in the
	// code store (the server never deletes one): an upload of a new archive that would
	// take the namespace past it answers 409 limit_exceeded and stores nothing; an upload
	// of an archive already stored is answered as before. Defaults to
	// MaxCodeBytesPerNamespaceDefault; negative: no cap (caps.go).
	MaxCodeBytesPerNamespace int64

	// MaxAdmissionBlocksPerNamespace caps the admission blocks (declared queues: PUT
	// …/admission) one namespace holds: setting one on a queue without one answers 409
	// limit_exceeded and stores nothing; replacing a queue's block is never refused.
	// Defaults to MaxAdmissionBlocksPerNamespaceDefault; negative: no cap (caps.go).
	MaxAdmissionBlocksPerNamespace int

	// MaxLongPolls bounds the long-polls and streams open at once; beyond it a waiting
	// request gets 503 too_many_long_polls with Retry-After. Defaults to
	// MaxLongPollsDefault.
	MaxLongPolls int

	// MaxLongPollsPerTenant bounds the long-polls and streams one tenant holds at once: one
	// stored token, or (auth off, the admin token) one namespace; so one tenant cannot take
	// every slot of MaxLongPolls. Defaults to a quarter of MaxLongPolls (at least 1).
	MaxLongPollsPerTenant int

	// Now is the clock of token expiry: a token's ExpiresAt is stamped and checked on it;
	// the compatibility routes (server/compat) forget the leases they remember on it too.
	// Defaults to the plane's clock (plane.ClockOf(drv): the SQLite plane's Config.Now, the
	// PostgreSQL plane's database clock), so that every server over one plane, on machines
	// whose clocks disagree, ends a token at the same instant, and a token stamped by the
	// SDK on the plane's clock (Admin.CreateToken) is checked on the same one; time.Now for a
	// driver that keeps no clock (docs/operations.md, "One clock").
	Now func() time.Time

	// RawValues accepts payloads, results and frame values in msgpack bodies as opaque
	// bytes, stored as given (plane.Driver's contract, which the conformance suite checks
	// with raw bytes). Defaults to false: each must be one value the wire codec accepts
	// (api.CheckWire: else 400 invalid naming the field and the problem), and an absent one
	// is stored as msgpack nil (0xc0), so that every reader can decode what the server
	// stored. JSON values are always checked.
	RawValues bool

	// Registerer receives the server's metrics. Defaults to a private registry.
	Registerer prometheus.Registerer

	// DisableUI turns the web dashboard at /ui/ off (`lakeshore serve --no-ui`). Defaults
	// to false: the dashboard is served (package server/ui; docs/dashboard.md).
	DisableUI bool

	// UIHistoryInterval is how often the dashboard's rate history samples the plane's
	// per-queue counters, from StartUIHistory or the first /ui/ request until Stop. Defaults to
	// ui.HistoryIntervalDefault (10 s).
	UIHistoryInterval time.Duration

	// StreamPing is how often a live stream sends a keep-alive when no frame comes.
	// Defaults to StreamPingDefault.
	StreamPing time.Duration
}

// Defaults.
const (
	// LongPollMaxDefault caps one long-poll.
	LongPollMaxDefault = 60 * time.Second
	// MaxBodyBytesDefault is the largest payload plus 1 MiB for the envelope.
	MaxBodyBytesDefault = plane.MaxValueBytes + 1<<20
	// MaxCodeBytesDefault bounds one code archive: 100 MiB.
	MaxCodeBytesDefault = 100 << 20
	// MaxLongPollsDefault bounds the long-polls open at once.
	MaxLongPollsDefault = 10000
	// MaxOpenDataQueuesDefault bounds the data queues open at once.
	MaxOpenDataQueuesDefault = 128
	// DataQueueIdleDefault is how long an unused data queue stays open.
	DataQueueIdleDefault = 2 * time.Minute
	// StreamPingDefault is the keep-alive interval of live streams.
	StreamPingDefault = 15 * time.Second
	// RequestIDHeader carries the request id (taken from the client when it is a short
	// token, else made by the server) and is echoed in every response.
	RequestIDHeader = "X-Request-Id"
)

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	out.LongPollMax = cmp.Or(out.LongPollMax, LongPollMaxDefault)
	out.MaxBodyBytes = cmp.Or(out.MaxBodyBytes, MaxBodyBytesDefault)
	out.MaxCodeBytes = cmp.Or(out.MaxCodeBytes, MaxCodeBytesDefault)
	out.MaxLongPolls = cmp.Or(out.MaxLongPolls, MaxLongPollsDefault)
	out.MaxLongPollsPerTenant = min(cmp.Or(out.MaxLongPollsPerTenant, max(out.MaxLongPolls/4, 1)), out.MaxLongPolls)
	out.StreamPing = cmp.Or(out.StreamPing, StreamPingDefault)
	out.MaxOpenDataQueues = cmp.Or(out.MaxOpenDataQueues, MaxOpenDataQueuesDefault)
	out.MaxDataQueuesPerTenant = min(cmp.Or(out.MaxDataQueuesPerTenant, max(out.MaxOpenDataQueues/4, 1)), out.MaxOpenDataQueues)
	out.DataQueueIdle = cmp.Or(out.DataQueueIdle, DataQueueIdleDefault)
	out.MaxDataQueuesPerNamespace = cmp.Or(out.MaxDataQueuesPerNamespace, MaxDataQueuesPerNamespaceDefault)
	out.MaxCodeBytesPerNamespace = cmp.Or(out.MaxCodeBytesPerNamespace, MaxCodeBytesPerNamespaceDefault)
	out.MaxAdmissionBlocksPerNamespace = cmp.Or(out.MaxAdmissionBlocksPerNamespace, MaxAdmissionBlocksPerNamespaceDefault)
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if out.Registerer == nil {
		reg := prometheus.NewRegistry()
		out.Registerer = reg
		if out.Gatherer == nil {
			out.Gatherer = reg
		}
	}
	if out.Gatherer == nil {
		if g, ok := out.Registerer.(prometheus.Gatherer); ok {
			out.Gatherer = g
		} else {
			out.Gatherer = prometheus.NewRegistry()
		}
	}
	return out
}

// Log keys.
const (
	logRequestID = "request_id"
	logMethod    = "method"
	logRoute     = "route"
	logPath      = "path"
	logStatus    = "status"
	logCode      = "code"
	logDuration  = "duration"
	logError     = "error"
	logField     = "field"
)

// Bounds of what a log line or an error answer carries of a request: a request's values
// are never logged (a client error logs its code and the field it names), and a path or
// a server error's text is cut.
const (
	maxLoggedPath      = 512
	maxLoggedError     = 1024
	maxErrorAnswerText = 4096 // a message or rule: values in it are cut at plane.MaxQuotedBytes already
)

// loggedField is the field of a client error as logged: the body field, without the
// path inside its value (which may hold the client's map keys).
func loggedField(f string) string {
	f, _, _ = strings.Cut(f, " at ")
	return cut(f, plane.MaxQuotedBytes)
}

// cut returns s cut to n bytes at a rune boundary, with "…" when cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// StatusClientClosedRequest is the status logs and metrics record for a request whose
// client went away before the answer (nginx's 499); nothing is sent.
const StatusClientClosedRequest = 499

// Server is the HTTP API over a plane.Driver. It is an http.Handler; Stop ends its
// long-polls and streams for a graceful shutdown. Safe for concurrent use.
type Server struct {
	drv     plane.Driver
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	routes  []api.Route
	metrics *metrics
	ids     *plane.IDGenerator
	data    *dataQueues
	code    codeStore // nil: no code routes

	authOn    bool
	adminHash [sha256.Size]byte
	cursors   *cursorSealer // seals the listing cursors of scoped tokens (cursor.go); nil without auth

	crossOrigin *http.CrossOriginProtection // refuses state-changing cross-origin browser requests (checkBrowser)

	longPolls chan struct{} // semaphore of open long-polls

	capLocks     namespaceLocks // serialize each cap's count and creation per namespace (caps.go)
	codeReserved reservedBytes  // the room uploads of code archives under way hold (caps.go)

	tenantMu    sync.Mutex
	tenantPolls map[string]int // open long-polls by longPollTenant
	// tenantDataQueues counts, by longPollTenant, the waits on each data queue (dataLongPoll).
	tenantDataQueues map[string]map[string]int
	stopCtx          context.Context
	stop             context.CancelCauseFunc
	stopped          atomic.Bool

	history *ui.History // the dashboard's rate history; nil with DisableUI
}

// New returns a Server exposing drv. The caller keeps ownership of drv (closing it after
// the server has stopped). It registers its metrics with cfg.Registerer and panics if they
// are already registered there, like prometheus.MustRegister.
func New(drv plane.Driver, cfg *Config) *Server {
	c := cfg.withDefaults()
	if c.Now == nil {
		c.Now = plane.ClockOf(drv)
	}
	s := &Server{drv: drv, cfg: c, log: c.Logger, mux: http.NewServeMux(), ids: plane.NewIDGenerator(),
		crossOrigin: http.NewCrossOriginProtection(),
		longPolls:   make(chan struct{}, c.MaxLongPolls), tenantPolls: map[string]int{}, tenantDataQueues: map[string]map[string]int{},
		data: &dataQueues{stores: dataStoresOf(&c), log: c.Logger, maxOpen: c.MaxOpenDataQueues, idle: max(c.DataQueueIdle, 0), stop: make(chan struct{})}}
	s.stopCtx, s.stop = context.WithCancelCause(context.Background())
	switch {
	case c.CodeBucket != nil:
		s.code = bucketCodeStore{c.CodeBucket}
	case c.CodeDir != "":
		s.code = dirCodeStore(c.CodeDir)
	}
	if c.AdminToken != "" {
		s.authOn = true
		s.adminHash = sha256.Sum256([]byte(c.AdminToken))
		s.cursors = newCursorSealer(c.AdminToken)
	}
	s.metrics = newMetrics(c.Registerer, drv)
	s.data.metrics = newDataMetrics(c.Registerer, s.data)
	s.registerRoutes()
	s.mountCompat()
	s.registerUI()
	return s
}

// Routes returns every registered route, for documentation and tests.
func (s *Server) Routes() []api.Route { return append([]api.Route(nil), s.routes...) }

// Stop starts a graceful shutdown: /readyz turns 503, open long-polls and streams end at
// once with 503 shutting_down (Retry-After: 1), and new ones are refused the same way;
// short requests are still served until the http.Server shuts down. Safe to call twice.
func (s *Server) Stop() {
	s.stopped.Store(true)
	s.stop(api.ErrShuttingDown)
	if s.history != nil {
		s.history.Stop()
	}
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rid := r.Header.Get(RequestIDHeader)
	if !validRequestID(rid) {
		rid = s.ids.New(start)
	}
	w.Header().Set(RequestIDHeader, rid)
	rw := &recorder{ResponseWriter: w, status: http.StatusOK}

	var h http.Handler = s.mux // the mux sets the path values
	_, route := s.mux.Handler(r)
	if route == "" || r.URL.Path != cleanPath(r.URL.Path) {
		route = "unmatched"
		h = http.HandlerFunc(s.unmatched)
	}
	if err := s.checkRequest(r, route); err != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, err) })
	}
	r = r.WithContext(context.WithValue(r.Context(), requestKey{}, &requestInfo{id: rid}))
	func() {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic in handler", logRequestID, rid, logRoute, route, logError, fmt.Sprint(v))
				if !rw.wrote {
					s.writeError(rw, r, fmt.Errorf("%w: panic", api.ErrInternal))
				}
			}
		}()
		h.ServeHTTP(rw, r)
	}()

	d := time.Since(start)
	s.metrics.observe(route, r.Method, rw.status, d)
	attrs := []any{logRequestID, rid, logMethod, r.Method, logRoute, route, logStatus, rw.status, logDuration, d}
	if rw.code != "" {
		attrs = append(attrs, logCode, rw.code)
	}
	switch {
	case rw.status == StatusClientClosedRequest:
		s.log.Debug("request cancelled by the client", attrs...)
	case rw.code == api.ErrShuttingDown.Code:
		// A long-poll ended by a graceful shutdown: expected, not an error.
		s.log.Debug("request ended by the shutdown", attrs...)
	case rw.code == api.ErrTooManyLongPolls.Code:
		s.log.Warn("request", append(attrs, logPath, cut(r.URL.Path, maxLoggedPath), logError, cut(rw.msg, maxLoggedError))...)
	case rw.status >= 500:
		s.log.Error("request", append(attrs, logPath, cut(r.URL.Path, maxLoggedPath), logError, cut(rw.msg, maxLoggedError))...)
	case rw.status >= 400:
		// The client's mistake: its code and the field it named, never the values it sent.
		if rw.field != "" {
			attrs = append(attrs, logField, rw.field)
		}
		s.log.Info("request", append(attrs, logPath, cut(r.URL.Path, maxLoggedPath))...)
	case s.cfg.LogRequests:
		s.log.Info("request", attrs...)
	default:
		s.log.Debug("request", attrs...)
	}
}

// cleanPath returns p cleaned like the mux would, keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// unmatched answers a request no route matched: 405 with Allow when the path exists for
// other methods, else 404. Unclean paths (with "..", "//" or ".") never match.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == cleanPath(r.URL.Path) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			if m == r.Method {
				continue
			}
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := s.mux.Handler(probe); p != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.writeError(w, r, fmt.Errorf("%w: %s %s: use %s", api.ErrMethodNotAllowed, r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
	}
	s.writeError(w, r, fmt.Errorf("%w: %s %s (see /v1/openapi.json)", api.ErrRouteNotFound, r.Method, r.URL.Path))
}

type requestKey struct{}

type requestInfo struct {
	id string
}

// recorder remembers the status and error code of a response for logs and metrics.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	code   string
	msg    string
	field  string // the field a client error names
}

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	r.wrote = true
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// responseCodec picks the response encoding: msgpack when Accept names it (or names
// nothing and the request body was msgpack), else JSON.
func responseCodec(r *http.Request) api.Codec {
	accept := r.Header.Get("Accept")
	switch {
	case strings.Contains(accept, api.ContentTypeMsgpack), strings.Contains(accept, "application/x-msgpack"),
		strings.Contains(accept, "application/vnd.msgpack"):
		return api.Msgpack
	case accept == "" || accept == "*/*":
		if c, err := api.CodecFor(r.Header.Get("Content-Type")); err == nil {
			return c
		}
	}
	return api.JSON
}

// write writes v with status in the response codec.
func (s *Server) write(w http.ResponseWriter, r *http.Request, status int, v any) {
	s.writeAnswer(w, r, status, v) //nolint:errcheck // the client went away; nothing to do
}

// writeAnswer is write, reporting whether the answer could not be encoded or sent.
func (s *Server) writeAnswer(w http.ResponseWriter, r *http.Request, status int, v any) error {
	c := responseCodec(r)
	b, err := c.Marshal(v)
	if err != nil {
		err = fmt.Errorf("%w: encode response: %v", api.ErrInternal, err)
		s.writeError(w, r, err)
		return err
	}
	w.Header().Set("Content-Type", c.ContentType())
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// writeClaimed answers a claim (or a settle-and-claim) with out, which carries jobs. A
// caller that went away is not a claimer: when the request's context ended before the
// answer (a long-poll whose connection closed) or the answer could not be sent, the jobs
// are given back at once (plane.ReleaseAbandoned) instead of staying held until their
// lease expires. An answer that was sent is the caller's, whatever happens to it after.
// A stored token revoked or expired while the claim waited (recheckToken) gets the jobs
// given back and 401, as its settles would: they are no one's either.
func (s *Server) writeClaimed(w http.ResponseWriter, r *http.Request, p *principal, out any, jobs []*plane.Job) {
	if len(jobs) > 0 && r.Context().Err() != nil {
		s.releaseAbandoned(r, jobs)
		s.writeError(w, r, r.Context().Err())
		return
	}
	if len(jobs) > 0 {
		if err := s.recheckToken(r, p); err != nil {
			s.releaseAbandoned(r, jobs)
			s.writeError(w, r, err)
			return
		}
	}
	err := s.writeAnswer(w, r, http.StatusOK, out)
	if err == nil && len(jobs) > 0 {
		err = http.NewResponseController(w).Flush()
	}
	if err != nil && len(jobs) > 0 {
		s.releaseAbandoned(r, jobs)
	}
}

// releaseAbandoned gives back jobs (none: nothing) claimed for a caller that went away.
func (s *Server) releaseAbandoned(r *http.Request, jobs []*plane.Job) {
	if len(jobs) == 0 {
		return
	}
	if err := plane.ReleaseAbandoned(r.Context(), s.drv, jobs); err != nil {
		s.log.Warn("release the jobs of a claim whose caller went away", "jobs", len(jobs), "error", err)
	}
}

// writeError writes the error body of err with its status (and Retry-After when known).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	err = invocationNotFound(r, err)
	body, status, hidden := publicErrorBody(err)
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || status >= 500) {
		// The client went away (a long-poll it gave up on): not a server error, and there
		// is no one to answer.
		if rec, ok := w.(*recorder); ok && !rec.wrote {
			rec.status, rec.wrote, rec.code = StatusClientClosedRequest, true, "client_closed_request"
		}
		// Not kept alive: a client that half-closed the connection (httpplane's abandoned
		// claim) must not find it in its pool, closed by this side a moment later.
		w.Header().Set("Connection", "close")
		return
	}
	var tl *tooLargeError
	if errors.As(err, &tl) {
		status = http.StatusRequestEntityTooLarge
	}
	if rec, ok := w.(*recorder); ok && hidden != "" {
		rec.msg = hidden // the log has what the caller is not told
	}
	if status == http.StatusInternalServerError && !errors.Is(err, api.ErrInternal) {
		// Keep server internals out of the body; the log has them.
		if rec, ok := w.(*recorder); ok {
			rec.msg = err.Error()
		}
		body.Message = "internal error"
	}
	if body.Details != nil && body.Details.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(max(1, body.Details.RetryAfter+0.999)), 10))
	} else if body.Code == api.ErrTooManyLongPolls.Code || body.Code == api.ErrShuttingDown.Code {
		w.Header().Set("Retry-After", "1")
	}
	body.Message = cut(body.Message, maxErrorAnswerText)
	if d := body.Details; d != nil {
		d.Field, d.Rule = cut(d.Field, maxErrorAnswerText), cut(d.Rule, maxErrorAnswerText)
	}
	if rec, ok := w.(*recorder); ok {
		rec.code = body.Code
		if rec.msg == "" {
			rec.msg = body.Message
		}
		if body.Details != nil {
			rec.field = loggedField(body.Details.Field)
		}
	}
	s.write(w, r, status, &body)
}

// readBody decodes the request body into v. Errors: ErrUnsupportedMediaType, and
// *plane.InvalidError for a malformed or oversized body (413 for the latter).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) error {
	c, err := api.CodecFor(r.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	data, err := s.readRaw(w, r)
	if err != nil {
		return err
	}
	return c.UnmarshalRequest(data, v)
}

// readRaw reads the request body, at most Config.MaxBodyBytes. Errors: a body over the
// limit (invalid, 413), *plane.InvalidError for a body cut short.
func (s *Server) readRaw(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &tooLargeError{limit: mbe.Limit}
		}
		return nil, bodyCut("body", err)
	}
	return data, nil
}

// bodyCut is the error of a request body whose reading failed short of its end (what
// readRaw and a code upload read): *plane.InvalidError saying what happened in words, never
// the read's own error, whose text names the connection's addresses ("read tcp
// 10.0.0.5:7077->10.0.0.9:51234: i/o timeout": the server's address and port behind a
// proxy) and Go's internals. what names the body ("body", "code archive").
func bodyCut(what string, err error) error {
	var ne net.Error
	why := "the connection failed before its end"
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		why = "it ended before the length its Content-Length (or chunking) declared"
	case errors.As(err, &ne) && ne.Timeout():
		why = "it stopped arriving before its end, until the server's read deadline passed"
	}
	return &plane.InvalidError{Field: "request body", Rule: "send a complete " + what + ": " + why}
}

// value checks a payload, result or frame value named field: one value the wire codec
// accepts (JSON values were mapped and checked while decoding), and msgpack nil when
// absent. With Config.RawValues msgpack values are stored as given. Errors:
// *plane.InvalidError naming field and the problem.
func (s *Server) value(field string, v api.Value) ([]byte, error) {
	if v.Wire == nil {
		if s.cfg.RawValues {
			return nil, nil
		}
		return api.NilValue(), nil
	}
	if s.cfg.RawValues {
		return v.Wire, nil
	}
	if err := plane.ValidateValueSize(field, len(v.Wire)); err != nil {
		return nil, err
	}
	if v.Checked() {
		return v.Wire, nil
	}
	if err := api.CheckWire(v.Wire); err != nil {
		return nil, &plane.InvalidError{Field: field, Rule: "send one value the wire codec accepts (docs/wire.md): " + err.Error()}
	}
	return v.Wire, nil
}

// tooLargeError is a body over MaxBodyBytes: code invalid, status 413.
type tooLargeError struct {
	limit int64
	// advice replaces the default advice (store large data in a blob store).
	advice string
}

func (e *tooLargeError) hint() string {
	if e.advice != "" {
		return e.advice
	}
	return "store large data in a blob store and pass its key"
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("invalid request body: larger than %d bytes; %s", e.limit, e.hint())
}

func (e *tooLargeError) Is(target error) bool { return target == plane.ErrInvalid }

func (e *tooLargeError) As(target any) bool {
	if p, ok := target.(**plane.InvalidError); ok {
		*p = &plane.InvalidError{Field: "request body", Rule: fmt.Sprintf("at most %d bytes; %s", e.limit, e.hint())}
		return true
	}
	return false
}
