// Package skewtest starts, for tests, a real Lakeshore server over a SQLite plane whose
// clock is off from this machine's, behind a switch that makes it answer 503 (a server
// failing over): how a client whose clock disagrees with the plane's rides out an outage.
package skewtest

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// Server is a served plane whose clock is this machine's plus a skew.
type Server struct {
	// URL is the server's base URL.
	URL string
	// Plane is the served plane.
	Plane plane.Driver
	// Down, while set, makes the server answer every request 503.
	Down atomic.Bool

	shift atomic.Int64 // what Shift added to the plane's clock, in nanoseconds
}

// Shift moves the plane's clock on by d (a lease ends, a deadline passes, without the
// test waiting for it); this machine's clock is left as it is.
func (s *Server) Shift(d time.Duration) { s.shift.Add(int64(d)) }

// Start starts a server over a ":memory:" SQLite plane whose clock is time.Now plus skew
// (a client on this machine is off from the plane's clock by -skew) plus what Shift added,
// logging to logger. Everything is closed by t.Cleanup.
func Start(t *testing.T, skew time.Duration, logger *slog.Logger) *Server {
	t.Helper()
	s := &Server{}
	back, err := sqliteplane.Open(t.Context(), ":memory:", &sqliteplane.Config{Now: func() time.Time {
		return time.Now().Add(skew + time.Duration(s.shift.Load()))
	}})
	require.NoError(t, err)
	s.Plane = back
	srv := server.New(back, &server.Config{Logger: logger})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Down.Load() {
			http.Error(w, "failing over", http.StatusServiceUnavailable)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	s.URL = ts.URL
	t.Cleanup(func() {
		srv.Stop()
		ts.Close()
		back.Close()
	})
	return s
}
