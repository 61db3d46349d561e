// Package httpplane is a plane.Driver that calls a Lakeshore server over HTTP (`lakeshore
// serve`, package server): the plane behind lakeshore.Open("http://…") and LAKESHORE_URL.
//
// It keeps connections alive and reuses them, bounds every call with a timeout, maps the
// server's error bodies back to the plane's sentinels and detail types (so errors.Is and
// errors.As work as in process), and retries only what is safe to repeat: reads, waits,
// heartbeats, registrations, and submits, which carry client-chosen ULIDs so a retried
// submit never creates a second job. Long waits are split into requests no longer than
// Config.LongPollMax and repeated until the caller's wait ends.
//
// Reads and waits (get, count, queue stats, listings, frame reads, result waits, worker and
// token lists) and submits ride out a server outage (a restart, a dropped connection): they
// are retried with capped backoff until their own deadline, the end of the wait or ctx's
// deadline (RequestTimeout when ctx has none). Settles and heartbeats carry a fencing token,
// so they are retried until ctx ends or the lease would have expired. Claims and posts are
// not repeated once sent. Config.Unreachable makes calls fail fast on a server that refuses
// connections (one-shot CLI verbs), and Config.OnRetry reports each retry. A connection
// failure that is finally returned wraps plane.ErrUnavailable and keeps its cause.
//
// New accepts several servers (replicas of one plane), separated by commas:
// "http://a:7077,http://b:7077". Calls go to one of them; a connection failure or a 502,
// 503 or 504 answer moves every later call of the Driver to the next server (failover), and
// a call that may be retried (the rules above, unchanged) is retried there at once.
package httpplane

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// EnvToken names the environment variable of the default bearer token.
const EnvToken = "LAKESHORE_TOKEN"

// Config configures an HTTP plane. A nil *Config means all defaults.
type Config struct {
	// HTTPClient sends the requests. Its Timeout should be zero: the plane bounds each
	// request itself (long-polls last longer than ordinary calls). Defaults to a client
	// whose transport keeps up to 1024 idle connections to the server.
	HTTPClient *http.Client

	// LongPollMax is the longest wait asked of the server in one request; longer waits
	// are repeated requests. Keep it at or under the server's limit (60 s by default).
	// Defaults to LongPollMaxDefault.
	LongPollMax time.Duration

	// Now is the clock of the invocation ids the plane makes for submits (ULIDs carry
	// their time, and claims order by id). Give it the served plane's clock when that one
	// is not the real time (tests). Defaults to time.Now.
	Now func() time.Time

	// MaxRetries bounds the retries of a call that is safe to repeat, after a connection
	// error or a 502, 503 or 504 answer. Reads, waits and submits are instead retried
	// until their deadline (see the package comment). Defaults to MaxRetriesDefault; -1
	// disables all retries.
	MaxRetries int

	// RequestTimeout bounds one request beyond the wait it asks for. Defaults to
	// RequestTimeoutDefault.
	RequestTimeout time.Duration

	// Token is the bearer token sent with every request. Defaults to $LAKESHORE_TOKEN;
	// empty sends none.
	Token string

	// Unreachable, when > 0, bounds how long a call keeps retrying a server that refuses
	// connections ("connection refused": nothing listens): once that long has passed since
	// the first refusal, the call fails with plane.ErrUnavailable. A one-shot CLI verb sets
	// about 2 s; workers and waits keep the default, 0, and ride out a restart.
	Unreachable time.Duration

	// OnRetry, when set, is called before each retry of a call with the attempt that
	// failed (1 for the first), the time since the call began and that attempt's error,
	// e.g. to print "retrying…" on stderr once elapsed passes a second. It must not block.
	OnRetry func(attempt int, elapsed time.Duration, err error)
}

// Defaults.
const (
	// LongPollMaxDefault is under the server's default cap of 60 s.
	LongPollMaxDefault = 50 * time.Second
	// MaxRetriesDefault is the number of retries of a call safe to repeat.
	MaxRetriesDefault = 4
	// RequestTimeoutDefault bounds a request beyond its wait.
	RequestTimeoutDefault = 30 * time.Second
	// retryBase is the first retry delay; it doubles, with jitter, up to retryMax.
	retryBase = 50 * time.Millisecond
	retryMax  = 2 * time.Second
)

// Driver is a plane.Driver over HTTP. Safe for concurrent use.
type Driver struct {
	bases []string // scheme://host[:port][/prefix] of each server, without a trailing slash
	// current is the index in bases of the server calls go to; a failure there moves it on.
	current atomic.Int32
	client  *http.Client
	cfg     Config
	ids     *plane.IDGenerator
	ownTr   *http.Transport // the transport New made, closed by Close

	leases leaseBook // lease ends of the jobs claimed here (on this process's clock), bounding settle retries
	// settles coalesces concurrent InvocationSettleMany calls into batched requests.
	settles settleGroup
	// submits coalesces concurrent InvocationSubmitMany calls to one queue.
	submits submitGroup
	// codeHeld holds "namespace/queue/digest" of the code archives the server answered it
	// holds (CodeUpload): they are not asked for again.
	codeHeld sync.Map

	closeCtx context.Context
	close    context.CancelFunc
	closed   atomic.Bool
}

// leaseBook remembers when the leases of the jobs claimed or heartbeated through this
// driver end, as this process reckons it on its monotonic clock (plane.LeaseHeldUntil:
// the claim's answer's arrival, or the sending of the heartbeat the server accepted, plus
// the lease TTL asked for), so settles and heartbeats are retried until their lease ends.
// Never the server's lease_expires_at, which is on the plane's clock: compared with this
// machine's, a skewed client retried a settle long past its lease, or gave up on it while
// the lease still held (docs/operations.md, "One clock").
type leaseBook struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (b *leaseBook) note(id string, heldUntil time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]time.Time{}
	}
	if len(b.m) >= 1<<16 { // drop expired leases of jobs never settled here
		now := time.Now()
		for k, t := range b.m {
			if t.Before(now) {
				delete(b.m, k)
			}
		}
	}
	b.m[id] = heldUntil
}

func (b *leaseBook) forget(id string) {
	b.mu.Lock()
	delete(b.m, id)
	b.mu.Unlock()
}

func (b *leaseBook) latest(ids []string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var end time.Time
	for _, id := range ids {
		if t, ok := b.m[id]; ok && t.After(end) {
			end = t
		}
	}
	return end
}

// leaseEnd is when the retries of a settle or heartbeat of ids stop: the latest end of
// their leases as this process reckons it (leaseBook; else, for jobs not claimed here,
// plane.LeaseTTLDefault from now), or ctx's deadline when that is earlier. Past it a
// settle cannot succeed anyway; a call whose lease already ended is sent once.
func (d *Driver) leaseEnd(ctx context.Context, ids []string) time.Time {
	end := d.leases.latest(ids)
	if end.IsZero() {
		end = time.Now().Add(plane.LeaseTTLDefault)
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	return end
}

var _ plane.Driver = (*Driver)(nil)

// New returns a Driver for the server at baseURL (http:// or https://, optionally with a
// path prefix), or for several replicas of one plane separated by commas (see the package
// comment: failover). It makes no request. Errors: *plane.InvalidError for a bad URL, or
// a token no HTTP header carries (plane.ValidateToken: a newline in $LAKESHORE_TOKEN).
func New(baseURL string, cfg *Config) (*Driver, error) {
	bases, err := ParseServers(baseURL)
	if err != nil {
		return nil, err
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if cfg == nil || cfg.Token == "" {
		c.Token = os.Getenv(EnvToken)
	}
	if err := plane.ValidateToken(c.Token); err != nil {
		return nil, err
	}
	c.LongPollMax = cmp.Or(c.LongPollMax, LongPollMaxDefault)
	c.MaxRetries = cmp.Or(c.MaxRetries, MaxRetriesDefault)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, RequestTimeoutDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.LongPollMax < 0 || c.RequestTimeout < 0 {
		return nil, plane.Invalid("timeout", nil, "use positive durations")
	}
	d := &Driver{bases: bases, cfg: c, ids: plane.NewIDGenerator()}
	d.client = c.HTTPClient
	if d.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 1024
		tr.MaxIdleConnsPerHost = 1024
		tr.IdleConnTimeout = 90 * time.Second
		d.ownTr = tr
		d.client = &http.Client{Transport: tr}
	}
	d.closeCtx, d.close = context.WithCancel(context.Background())
	return d, nil
}

// ParseServers splits a server list, "http://a:7077" or "http://a:7077,http://b:7077", into
// base URLs without a trailing slash. Errors: *plane.InvalidError naming the bad URL.
func ParseServers(list string) ([]string, error) {
	var bases []string
	for _, one := range strings.Split(list, ",") {
		one = strings.TrimSpace(one)
		u, err := url.Parse(one)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, plane.Invalid("server URL", plane.RedactURL(one), "use http(s)://host[:port], or several separated by commas")
		}
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, plane.Invalid("server URL", plane.RedactURL(one), "use http(s)://host[:port][/prefix] without user, query or fragment")
		}
		bases = append(bases, strings.TrimSuffix(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"))
	}
	return bases, nil
}

// server returns the index of the server calls go to now.
func (d *Driver) server() int { return int(d.current.Load()) }

// failover moves later calls from server i, which failed, to the next server. A failure
// reported by a call that started on an older choice does not move the choice again.
func (d *Driver) failover(i int) {
	if len(d.bases) > 1 {
		d.current.CompareAndSwap(int32(i), int32((i+1)%len(d.bases)))
	}
}

// Close ends calls in progress (they return plane.ErrClosed), makes later calls fail with
// plane.ErrClosed and closes idle connections. It does not stop the server or its plane.
// Safe to call twice.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.close()
	if d.ownTr != nil {
		d.ownTr.CloseIdleConnections()
	}
	return nil
}

// call is one API call.
type call struct {
	method string
	path   string // under the base URL, with path segments escaped
	query  url.Values
	body   any // encoded as msgpack; nil for none
	// raw, when not nil, is the request body as is (instead of body), of type
	// contentType.
	raw         []byte
	contentType string
	out         any // decoded from a 2xx answer; nil to ignore it
	// safe: repeating the call has no effect beyond the first, so it may be retried after
	// a connection error or a 502/503/504 even when the request may have reached the
	// server. Unsafe calls are retried only when the connection failed before sending.
	safe bool
	// wait is how long the server may hold the request (added to RequestTimeout).
	wait time.Duration
	// waitParam, when set, is the query parameter that carries wait in seconds; a retry
	// shortens it so that the call still ends by until.
	waitParam string
	// until, when set, makes the call ride out an outage: a connection failure or a
	// 502/503/504 is retried with capped backoff, however many times, until then (or ctx
	// ends) instead of MaxRetries times. Only for calls that are safe to repeat.
	until time.Time
	// ctx is the request's context when set (a blocked submit detaches it from the
	// caller's deadline); else the caller's.
	ctx context.Context
	// claims: the answer carries claimed jobs. When the caller's ctx ends, the request's
	// connection is half-closed (its write side shut: the server reads EOF, which ends
	// the long-poll, and gives back what it claims after that), and the answer is still
	// read to the end, up to claimAnswerWait for its first byte: closing the connection
	// under an answer the server already sent would leave its jobs held until their lease
	// expires, whereas an answer read is given back by the caller (see claimed). A
	// connection that cannot be half-closed is given claimGrace instead before it
	// closes.
	claims bool
	// ifMatch, when set, is sent as If-Match (a conditional set: plane.AdmissionParams).
	ifMatch string
	// sent is set by do: when the last attempt was sent (a heartbeat's lease runs from the
	// attempt the server answered).
	sent time.Time
}

// claimAnswerWait is how long a claim whose caller went away waits, after half-closing
// its connection, for the server's answer to begin before closing the connection. The
// server answers at once when it reads the EOF; this bounds a server or proxy that does
// not.
const claimAnswerWait = 5 * time.Second

// claimGrace is how long a claim whose caller went away still waits for an answer already
// on its way before its connection closes, when that connection cannot be half-closed.
const claimGrace = 50 * time.Millisecond

// do performs c and decodes its answer, retrying as c allows.
func (d *Driver) do(ctx context.Context, c *call) error {
	if d.closed.Load() {
		return plane.ErrClosed
	}
	body := c.raw
	if c.body != nil {
		var err error
		if body, err = api.Msgpack.Marshal(c.body); err != nil {
			return fmt.Errorf("encode %s %s: %w", c.method, c.path, err)
		}
	}
	rest := c.path
	if len(c.query) > 0 {
		rest += "?" + c.query.Encode()
	}
	reqCtx := cmp.Or(c.ctx, ctx)
	var last error // the last attempt's connection failure
	start := time.Now()
	var firstRefused time.Time
	for attempt := 0; ; attempt++ {
		if attempt > 0 && c.waitParam != "" && !c.until.IsZero() {
			// The server holds the retry only for what is left of the wait.
			c.wait = max(min(c.wait, time.Until(c.until)), 0)
			q := url.Values{}
			for k, v := range c.query {
				q[k] = v
			}
			q.Set(c.waitParam, strconv.FormatFloat(api.Seconds(c.wait), 'g', -1, 64))
			rest = c.path + "?" + q.Encode()
		}
		srv := d.server()
		c.sent = time.Now()
		err, retryAfter, retryable := d.once(ctx, reqCtx, c, d.bases[srv]+rest, body)
		if err != nil && (errors.Is(err, plane.ErrUnavailable) || errors.Is(err, errServerDown)) {
			d.failover(srv)
		}
		if err != nil && ctx.Err() != nil && last != nil {
			// ctx ended the call while the server was out of reach: say both.
			return fmt.Errorf("%w; last attempt: %w", ctx.Err(), last)
		}
		if err == nil || !retryable || d.cfg.MaxRetries < 0 {
			return err
		}
		last = nil
		if errors.Is(err, plane.ErrUnavailable) {
			last = err
		}
		if d.cfg.Unreachable > 0 && errors.Is(err, syscall.ECONNREFUSED) {
			if firstRefused.IsZero() {
				firstRefused = time.Now()
			}
			if time.Since(firstRefused) >= d.cfg.Unreachable {
				return err
			}
		}
		if c.until.IsZero() && attempt >= d.cfg.MaxRetries {
			return err
		}
		left := time.Until(c.until)
		if !c.until.IsZero() && left <= 0 {
			return err
		}
		delay := min(retryBase<<min(attempt, 16), retryMax)
		delay = delay/2 + rand.N(delay/2+1)
		delay = max(delay, retryAfter)
		if len(d.bases) > 1 && (attempt+1)%len(d.bases) != 0 {
			// Failing over: the next server has not been tried in this round.
			delay = 0
		}
		if !c.until.IsZero() {
			delay = min(delay, left)
		}
		if d.cfg.Unreachable > 0 && !firstRefused.IsZero() {
			delay = min(delay, max(d.cfg.Unreachable-time.Since(firstRefused), time.Millisecond))
		}
		if d.cfg.OnRetry != nil {
			d.cfg.OnRetry(attempt+1, time.Since(start), err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if last != nil {
				return fmt.Errorf("%w; last attempt: %w", ctx.Err(), last)
			}
			return ctx.Err()
		case <-d.closeCtx.Done():
			t.Stop()
			return plane.ErrClosed
		}
	}
}

// deadline is the end of the outage retries of a call with no wait of its own: ctx's
// deadline, else RequestTimeout from now.
func (d *Driver) deadline(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(d.cfg.RequestTimeout)
}

// waitDeadline is the end of the outage retries of a wait that ends at end (zero: a wait
// of 0, which has no end of its own).
func (d *Driver) waitDeadline(ctx context.Context, waits bool, end time.Time) time.Time {
	if !waits {
		return d.deadline(ctx)
	}
	return end
}

// once sends one request. It reports whether the error may be retried, and the server's
// Retry-After.
func (d *Driver) once(ctx, reqCtx context.Context, c *call, u string, body []byte) (err error, retryAfter time.Duration, retryable bool) {
	if c.claims {
		reqCtx = context.WithoutCancel(reqCtx)
	}
	rctx, cancel := context.WithTimeout(reqCtx, c.wait+d.cfg.RequestTimeout)
	defer cancel()
	rctx, cancelClose := context.WithCancelCause(rctx)
	defer cancelClose(nil)
	defer context.AfterFunc(d.closeCtx, func() { cancelClose(plane.ErrClosed) })()
	if c.claims {
		var mu sync.Mutex
		var (
			answering bool        // the answer's first byte arrived
			finished  bool        // once returned: the connection is no longer this call's
			gone      bool        // ctx ended
			conn      net.Conn    // the request's connection, once the transport has one
			grace     *time.Timer // closes the connection if no answer begins in time
		)
		// abandon half-closes the connection (with mu held, once ctx ended and the
		// connection is known) and bounds the wait for the answer. Once the answer began
		// (or the call returned), the connection may already be back in the pool, serving
		// another request: it is left alone.
		abandon := func() {
			if answering || finished {
				return
			}
			halfClosed := false
			if cw, ok := conn.(interface{ CloseWrite() error }); ok {
				halfClosed = cw.CloseWrite() == nil
			}
			if grace != nil {
				return // a retry, on a fresh connection, of a request already abandoned
			}
			wait := claimGrace
			if halfClosed {
				wait = claimAnswerWait
			}
			grace = time.AfterFunc(wait, func() {
				mu.Lock()
				started := answering
				mu.Unlock()
				if !started {
					cancelClose(context.Cause(ctx))
				}
			})
		}
		defer func() {
			mu.Lock()
			finished = true
			if grace != nil {
				grace.Stop()
			}
			mu.Unlock()
		}()
		defer context.AfterFunc(ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			gone = true
			if conn != nil {
				abandon()
			}
		})()
		rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				mu.Lock()
				defer mu.Unlock()
				conn = info.Conn
				if gone {
					abandon()
				}
			},
			GotFirstResponseByte: func() {
				mu.Lock()
				answering = true
				mu.Unlock()
			},
		})
	}

	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, c.method, u, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.method, c.path, err), 0, false
	}
	if body != nil {
		req.Header.Set("Content-Type", cmp.Or(c.contentType, api.ContentTypeMsgpack))
	}
	req.Header.Set("Accept", api.ContentTypeMsgpack)
	if c.ifMatch != "" {
		req.Header.Set("If-Match", `"`+c.ifMatch+`"`)
	}
	if d.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+d.cfg.Token)
	}
	// stopped is why a request that failed was not the server's doing, never retried: the
	// driver closed (its cause on rctx) or the caller's ctx ended; nil when neither.
	stopped := func() error {
		switch {
		case errors.Is(context.Cause(rctx), plane.ErrClosed):
			return plane.ErrClosed
		case ctx.Err() != nil:
			return ctx.Err()
		}
		return nil
	}
	resp, err := d.client.Do(req)
	if err != nil {
		if why := stopped(); why != nil {
			return why, 0, false
		}
		if untrusted(err) && len(d.bases) == 1 {
			// A certificate this machine does not trust stays untrusted: no retry can
			// pass (with several servers the next one is tried, as for any failure).
			return unavailable(c, err), 0, false
		}
		return unavailable(c, err), 0, c.safe || dialError(err) || serverClosedIdle(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if why := stopped(); why != nil {
			return why, 0, false
		}
		return unavailable(c, fmt.Errorf("read answer: %w", err)), 0, c.safe
	}
	codec := api.Msgpack
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == api.ContentTypeJSON {
		codec = api.JSON
	}
	if resp.StatusCode/100 == 2 {
		if c.out == nil {
			return nil, 0, false
		}
		if err := codec.Unmarshal(data, c.out); err != nil {
			if c.claims && ctx.Err() != nil {
				// The server saw the caller go away and answered nothing.
				return ctx.Err(), 0, false
			}
			return fmt.Errorf("%s %s: %v", c.method, c.path, api.AnswerDecodeError(resp.Header.Get("Content-Type"), err)), 0, false
		}
		return nil, 0, false
	}
	retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
	var eb api.ErrorBody
	if e := codec.Unmarshal(data, &eb); e != nil || eb.Code == "" {
		err = fmt.Errorf("%s %s: HTTP %d: %s", c.method, c.path, resp.StatusCode, snippet(data))
		if c.method == http.MethodHead {
			// A HEAD answer has no body to say what went wrong: its status does.
			if e := headStatus(resp.StatusCode); e != nil {
				err = fmt.Errorf("%s %s: %w", c.method, c.path, e)
			}
		}
	} else {
		err = eb.Err()
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		err = serverDown{err}
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return err, retryAfter, c.safe
	case http.StatusServiceUnavailable:
		// too_many_long_polls and shutting_down were not served: any call may repeat.
		if errors.Is(err, api.ErrTooManyLongPolls) || errors.Is(err, api.ErrShuttingDown) {
			return err, retryAfter, true
		}
		return err, retryAfter, c.safe && !errors.Is(err, plane.ErrClosed)
	}
	return err, retryAfter, false
}

// headStatus is the error of a HEAD answer's status, which comes without a body; nil for
// a status with none of its own.
func headStatus(status int) error {
	switch status {
	case http.StatusUnauthorized:
		return plane.ErrUnauthorized
	case http.StatusForbidden:
		return plane.ErrForbidden
	case http.StatusNotFound:
		return plane.ErrNotFound
	case http.StatusNotImplemented:
		return plane.ErrNotImplemented
	}
	return nil
}

// unavailable wraps a connection failure of c (the server down, unreachable, or gone
// mid-answer) so that it matches plane.ErrUnavailable and keeps its cause. A refused
// connection reads as refusedError does, naming the server and what to check instead of
// the dial's Go words.
func unavailable(c *call, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		err = &refusedError{err: err}
	} else if untrusted(err) {
		err = &untrustedError{err: err}
	}
	return fmt.Errorf("%s %s: %w (%w)", c.method, c.path, plane.ErrUnavailable, err)
}

// untrusted reports whether err is the TLS handshake's refusal of the server's certificate
// (an unknown authority, a name it does not hold, expired).
func untrusted(err error) bool {
	var cve *tls.CertificateVerificationError
	return errors.As(err, &cve)
}

// untrustedError is a server whose certificate this machine does not trust. Its message
// keeps Go's reason and adds the way to trust a self-signed certificate or a private CA
// (SSL_CERT_FILE, which the Go and Python clients read); it unwraps to the handshake's error.
type untrustedError struct{ err error }

func (e *untrustedError) Error() string {
	return e.err.Error() + " (to trust a self-signed certificate or a private CA, set SSL_CERT_FILE to its PEM file; " +
		"the certificate must also name the host in the URL)"
}

func (e *untrustedError) Unwrap() error { return e.err }

// refusedError is a connection the server's host refused: nothing listens at that address.
// Its message names the server (scheme and host, from the request's URL, which carries no
// credentials) and asks whether `lakeshore serve` runs there; it unwraps to the dial's
// error, so errors.Is(err, syscall.ECONNREFUSED) still holds.
type refusedError struct{ err error }

func (e *refusedError) Error() string {
	server := "the server"
	var ue *url.Error
	if errors.As(e.err, &ue) {
		if u, err := url.Parse(ue.URL); err == nil && u.Host != "" {
			server = u.Scheme + "://" + u.Host
		}
	}
	return "nothing answers at " + server + ": it refuses connections; is 'lakeshore serve' running there?"
}

func (e *refusedError) Unwrap() error { return e.err }

// errServerDown matches an answer of a server that cannot serve now (502, 503 or 504):
// the Driver fails over to its next server.
var errServerDown = errors.New("server cannot serve now")

// serverDown marks err, a 502, 503 or 504 answer, as matching errServerDown; it reads and
// unwraps as err.
type serverDown struct{ err error }

func (e serverDown) Error() string   { return e.err.Error() }
func (e serverDown) Unwrap() []error { return []error{e.err, errServerDown} }

// dialError reports whether err happened before the request was sent (nothing reached
// the server), so even an unsafe call may be retried.
// serverClosedIdle reports whether err is net/http's "server closed idle connection": the
// pooled connection the request went out on had been closed by the server while idle (its
// FIN in flight; after a claim whose caller went away, the server closes the connection
// that caller half-closed), so the server never read the request and any call may be sent
// again on a fresh connection. net/http retries it only for idempotent methods and does
// not export the error, so its text is matched.
func serverClosedIdle(err error) bool {
	return strings.Contains(err.Error(), "http: server closed idle connection")
}

func dialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return min(time.Duration(n)*time.Second, time.Minute)
	}
	return 0
}

func snippet(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.TrimSpace(string(b))
}

// pathID escapes one path segment.
func pathID(s string) string { return url.PathEscape(s) }

// remaining returns how long until ctx's deadline, and whether it has one.
func remaining(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(dl), true
}
