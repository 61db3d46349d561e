package server

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// This file keeps what a request may not do to the server, and what an answer may not
// tell a caller: requests refused before any handler (a declared body over the limit,
// bytes that are not UTF-8 in the path or the query), and error bodies cleaned of the
// storage's internals and of bytes JSON cannot carry.

// unavailableMessage is all a caller learns of an unavailable storage (502 unavailable):
// the database's user, name, host, port and dial errors go to the server's log only.
const unavailableMessage = "the queue's storage is unavailable; retry"

// checkRequest refuses, before any handler runs, a request whose declared Content-Length
// exceeds the body limit (413 at once, without waiting for a body that may never come),
// what a web page of another site made a browser send (checkBrowser: 403 forbidden) and a
// request whose path segments or query parameters are not UTF-8 (400 invalid naming the
// parameter, the bad bytes escaped). pattern is the matched route ("" when none).
func (s *Server) checkRequest(r *http.Request, pattern string) error {
	if pattern == "PUT "+api.CodePath {
		if r.ContentLength > s.cfg.MaxCodeBytes {
			return codeTooLarge(s.cfg.MaxCodeBytes)
		}
	} else if r.ContentLength > s.cfg.MaxBodyBytes {
		return &tooLargeError{limit: s.cfg.MaxBodyBytes}
	}
	if err := s.checkBrowser(r); err != nil {
		return err
	}
	if err := checkPathUTF8(r, pattern); err != nil {
		return err
	}
	return checkQuery(r.URL.RawQuery)
}

// checkBrowser refuses what a web page of another site can make the user's browser send
// (docs/http-api.md, "Browsers"). Errors: api.ErrForbidden.
//
//   - A state-changing request (any method but GET, HEAD and OPTIONS) that the browser
//     marks as coming from another origin (Sec-Fetch-Site, else Origin against Host:
//     http.CrossOriginProtection). A page may send a POST without a body, or with a
//     text/plain one, to any address without asking the server first (no CORS
//     preflight); a server without an admin token authenticates nobody, so nothing else
//     kept such a page from cancelling jobs, pausing schedules or submitting there. With
//     a token it changes nothing: a page of another origin cannot send the token.
//   - Without an admin token, a request that came over loopback naming a host that is
//     neither an IP address nor localhost (nor a name under .localhost). A page whose DNS
//     name was made to point at 127.0.0.1 (DNS rebinding) is same-origin with itself, so
//     the browser lets it read the answers, and it could read and change everything; an
//     IP address or localhost cannot be rebound. A request that came over another
//     address (--insecure-no-auth) or a unix socket is not checked.
func (s *Server) checkBrowser(r *http.Request) error {
	if err := s.crossOrigin.Check(r); err != nil {
		return fmt.Errorf("%w: a web page of another origin may not change anything here (the browser marked the request "+
			"cross-origin: Sec-Fetch-Site or Origin); only pages of this server, such as its dashboard, may", api.ErrForbidden)
	}
	if s.authOn || loopbackHostName(r.Host) {
		return nil
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); !ok || !local.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: this server has no admin token, so over loopback it answers only requests addressed to "+
		"localhost or an IP address (http://127.0.0.1:PORT), never to another name (host %q): a web page whose DNS name points "+
		"at this machine could otherwise use it; address it so, or give the server an admin token", api.ErrForbidden, cut(r.Host, plane.MaxQuotedBytes))
}

// loopbackHostName reports whether a Host header (with or without its port) names an IP
// address, localhost or a name under .localhost (which browsers resolve to loopback
// themselves), or is empty (HTTP/1.0): names no DNS answer can move elsewhere.
func loopbackHostName(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host == "" || host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// checkPathUTF8 names the route's path parameter ({namespace}, {queue}, …) whose segment
// is not UTF-8, or "path" when no route matched.
func checkPathUTF8(r *http.Request, pattern string) error {
	if utf8.ValidString(r.URL.Path) {
		return nil
	}
	_, routePath, _ := strings.Cut(pattern, " ")
	names := strings.Split(routePath, "/")
	for i, seg := range strings.Split(r.URL.EscapedPath(), "/") {
		v, err := url.PathUnescape(seg)
		if err != nil || utf8.ValidString(v) {
			continue
		}
		name := "path"
		if i < len(names) && strings.HasPrefix(names[i], "{") {
			name = strings.Trim(names[i], "{}.")
		}
		return plane.Invalid(name, escapeInvalidUTF8(v), "use UTF-8 (percent-encode its bytes)")
	}
	return plane.Invalid("path", escapeInvalidUTF8(r.URL.Path), "use UTF-8 (percent-encode its bytes)")
}

// checkQuery names the query parameter whose name or value is not UTF-8, or that is given
// more than once: every handler reads one value of a parameter (the first), so
// "put_id=a&put_id=b" or "partition=a&partition=b" was done with the first and the other
// dropped unsaid; no route takes a list as repeated parameters (fields= is one value,
// comma-separated).
func checkQuery(rawQuery string) error {
	if rawQuery == "" {
		return nil
	}
	q, _ := url.ParseQuery(rawQuery)                // malformed pairs are dropped, as r.URL.Query() does
	for _, k := range slices.Sorted(maps.Keys(q)) { // the same parameter named every time
		vs := q[k]
		if !utf8.ValidString(k) {
			return plane.Invalid("query parameter name", escapeInvalidUTF8(k), "use UTF-8 (percent-encode its bytes)")
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return plane.Invalid(k, escapeInvalidUTF8(v), "use UTF-8 (percent-encode its bytes)")
			}
		}
		if len(vs) > 1 {
			return plane.Invalid(k, strings.Join(vs, ", "), fmt.Sprintf("given %d times; give each query parameter once", len(vs)))
		}
	}
	return nil
}

// invocationNotFound names the likely causes in a not_found answer of a route addressed by
// invocation id (plane.InvocationNotFound), never the id: the answer about another
// tenant's id is the same as about an unknown one; the client names the id it asked for.
func invocationNotFound(r *http.Request, err error) error {
	if strings.Contains(r.Pattern, " /v1/invocations/{id}") {
		return plane.InvocationNotFound(err, "")
	}
	return err
}

// escapeInvalidUTF8 returns s with each byte that is not part of valid UTF-8 written as
// \xNN, so that an answer can quote it.
func escapeInvalidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// publicErrorBody is api.NewErrorBody as a caller may see it: an unavailable storage
// answers unavailableMessage and a full disk its DiskFullError.PublicMessage, without the
// file's path (hidden is the error's own text, for the server's log), and
// every text is UTF-8 (invalid bytes escaped), so that encoding the answer cannot fail.
func publicErrorBody(err error) (body api.ErrorBody, status int, hidden string) {
	body, status = api.NewErrorBody(err)
	var full *plane.DiskFullError
	switch {
	case body.Code == plane.ErrUnavailable.Code:
		hidden = err.Error()
		body.Message = unavailableMessage
		body.Details = nil
	case errors.As(err, &full):
		// The full file's path is the server's, for its log only.
		hidden = err.Error()
		body.Message = full.PublicMessage()
	}
	body.Message = escapeInvalidUTF8(body.Message)
	if d := body.Details; d != nil {
		d.Field, d.Rule, d.Detail = escapeInvalidUTF8(d.Field), escapeInvalidUTF8(d.Rule), escapeInvalidUTF8(d.Detail)
		if v, ok := d.Value.(string); ok {
			d.Value = escapeInvalidUTF8(v)
		}
	}
	return body, status, hidden
}

// metricsHandler serves g for a scrape: a collector's error (the plane's depth, when its
// storage is unavailable) is logged here, and the scrape answers the metrics it has,
// never the error's text.
func (s *Server) metricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := g.Gather()
		if err != nil {
			s.log.Error("metrics: a collector failed", logError, cut(err.Error(), maxLoggedError))
			err = errors.New(unavailableMessage)
		}
		return fams, err
	}), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
