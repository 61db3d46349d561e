package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// How a one-shot verb treats an HTTP plane that refuses connections (issue 11 item 1):
// it says "retrying…" on stderr after reachNoticeAfter and fails after reachGiveUp, instead
// of riding out an outage in silence as workers and waits do.
const (
	reachNoticeAfter = time.Second
	reachGiveUp      = 2 * time.Second
	reachRetryEvery  = 100 * time.Millisecond
)

// reachability decides, before a verb opens its plane, whether the plane can be reached.
// It is an interface so that the check can move into the HTTP plane's own retry policy
// (httpplane's fail-fast option on branch api) without touching the verbs.
type reachability interface {
	// check returns nil when target may be used (a local plane, or a server that accepts
	// connections), else an error matching lakeshore.ErrUnavailable.
	check(ctx context.Context, target string, notes io.Writer) error
}

// dialCheck is the reachability of one-shot verbs: a TCP dial to an http(s) target's host,
// retried while the connection is refused, for up to reachGiveUp. Other dial errors
// (timeouts, DNS) are left to the HTTP plane's own retries.
type dialCheck struct {
	noticeAfter, giveUp, every time.Duration
}

// A list of servers ("http://a:7077,http://b:7077", replicas the HTTP plane fails over
// between) passes when any of them accepts connections.
func (c dialCheck) check(ctx context.Context, target string, notes io.Writer) error {
	var hosts []string
	for _, one := range strings.Split(target, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil || (!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) || u.Host == "" {
			return nil
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[strings.EqualFold(u.Scheme, "https")])
		}
		hosts = append(hosts, host)
	}
	start := time.Now()
	noticed := false
	for {
		refused := 0
		for _, host := range hosts {
			var d net.Dialer
			dctx, cancel := context.WithTimeout(ctx, c.giveUp)
			conn, err := d.DialContext(dctx, "tcp", host)
			cancel()
			if err == nil {
				conn.Close()
				return nil
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				refused++
			}
		}
		if refused < len(hosts) {
			return nil // not all refusals: the plane's own retries decide
		}
		elapsed := time.Since(start)
		if elapsed >= c.giveUp {
			return refusedError(target, fmt.Sprintf("tried for %s", c.giveUp))
		}
		if !noticed && elapsed >= c.noticeAfter {
			fmt.Fprintf(notes, "lakeshore: %s refuses connections; retrying…\n", plane.RedactURL(target))
			noticed = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.every):
		}
	}
}

// refusedError is the error of a command whose http(s) plane refused connections to the
// end: it names the server (without a password) and that nothing answers there, never the
// dial's Go words; detail says how long it tried. It matches lakeshore.ErrUnavailable.
func refusedError(target, detail string) error {
	return fmt.Errorf("nothing answers at %s: it refuses connections (%s; is 'lakeshore serve' running?): %w",
		plane.RedactURL(target), detail, lakeshore.ErrUnavailable)
}

// rideOutError is err, the error a verb that rides out an outage (rideOut) ended with after
// elapsed, made as clear as a one-shot verb's: when the plane still refused connections when
// its retries gave up (a submit's after 30 s), refusedError, naming the server, instead of
// "POST /v1/…: plane unavailable (Post …: dial tcp …: connection refused)". Any other error
// is returned as it is.
func (a *app) rideOutError(err error, elapsed time.Duration) error {
	target := a.planeURL()
	if !a.rideOut || target == "" || !errors.Is(err, lakeshore.ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
		return err
	}
	return refusedError(target, fmt.Sprintf("gave up after %s", elapsed.Round(time.Second)))
}

// planeURL is the target a verb opens: --target, else $LAKESHORE_URL.
func (a *app) planeURL() string { return cmp.Or(a.target, os.Getenv(lakeshore.EnvURL)) }
