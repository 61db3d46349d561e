package lakeshore_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/skewtest"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// skewedHTTPQueue is queue "test", its one job submitted, of a Dispatch over HTTP whose
// served plane's clock is this machine's plus skew (skewtest.Start).
func skewedHTTPQueue(t *testing.T, skew time.Duration) (*lakeshore.Queue, *skewtest.Server) {
	t.Helper()
	s := skewtest.Start(t, skew, testLogger(t))
	d, err := lakeshore.Open(t.Context(), s.URL, &lakeshore.Config{HTTP: &httpplane.Config{Token: "-"}, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	q, err := d.Queue("test", nil)
	require.NoError(t, err)
	submitN(t, q, 1, nil)
	return q, s
}

// TestWorkingSkewedClock: a worker over HTTP whose clock is off from the plane's keeps its
// lease, and stops its handler at the lease's end (ErrLeaseLost) when its heartbeats go
// unanswered, as one whose clock agrees does: the HTTP plane repeats a heartbeat until the
// lease ends as the worker reckons it on its own clock (plane.LeaseHeldUntil), never by
// comparing the server's lease_expires_at with the worker's clock as it did before.
func TestWorkingSkewedClock(t *testing.T) {
	t.Parallel()

	// The worker's clock runs 4 s ahead: its 12 s lease read 8 s long, and the heartbeat
	// sent 5 s in, during a 9 s outage, gave up 8 s in; the next one being due after the
	// lease's end, the handler was stopped (ErrLeaseLost) though the lease held 4 s more
	// and the server came back within it. Now the heartbeat is sent until 12 s, reaches
	// the server, and the job runs to its end and succeeds once.
	t.Run("AheadDoesNotStopEarly", func(t *testing.T) {
		t.Parallel()
		q, s := skewedHTTPQueue(t, -4*time.Second)
		var claimed time.Time
		handled, err := q.Working(t.Context(), func(ctx context.Context, job *lakeshore.Job) (any, error) {
			claimed = time.Now()
			s.Down.Store(true)
			time.AfterFunc(9*time.Second, func() { s.Down.Store(false) })
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-time.After(14 * time.Second):
				return "done", nil
			}
		}, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{LeaseTTL: 12 * time.Second, Wait: 5 * time.Second},
			HeartbeatInterval: 5 * time.Second})
		require.True(t, handled)
		require.NoError(t, err, "stopped %s after the claim", time.Since(claimed))
	})

	// The worker's clock runs 60 s behind: its 2 s lease read 62 s long, and a heartbeat
	// during an outage was repeated for a minute while the handler ran on past its lease
	// (beside the next attempt). Now the handler is stopped about when the lease ends.
	t.Run("BehindStopsAtTheLeasesEnd", func(t *testing.T) {
		t.Parallel()
		q, s := skewedHTTPQueue(t, 60*time.Second)
		handled, err := q.Working(t.Context(), func(ctx context.Context, job *lakeshore.Job) (any, error) {
			select { // heartbeats keep the short lease while the server answers
			case <-ctx.Done():
				t.Errorf("the handler was stopped while the server answered: %v", context.Cause(ctx))
				return nil, nil
			case <-time.After(3 * time.Second):
			}
			s.Down.Store(true)
			stopped := time.Now()
			select {
			case <-ctx.Done():
				require.ErrorIs(t, context.Cause(ctx), lakeshore.ErrLeaseLost)
				require.Less(t, time.Since(stopped), 15*time.Second)
			case <-time.After(30 * time.Second):
				t.Error("the handler ran on past its lease while the server did not answer its heartbeats")
			}
			return "stale", nil
		}, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{LeaseTTL: 2 * time.Second, Wait: 5 * time.Second}})
		require.True(t, handled)
		require.ErrorIs(t, err, lakeshore.ErrLeaseLost)
	})
}

// TestCreateTokenOnThePlanesClock: the SDK stamps a token's expiry on the plane's clock
// (Config.Now defaults to plane.ClockOf: here the SQLite plane's Config.Now, an hour behind
// this machine's; on PostgreSQL the database's), the clock a server over the plane checks it
// on, so a token minted with `lakeshore token create` on one machine lives its TTL on every
// server. Before, it was stamped on the minting machine's clock: an hour ahead of the
// plane's here, the ten-minute token lived an hour and ten minutes.
func TestCreateTokenOnThePlanesClock(t *testing.T) {
	t.Parallel()
	planeNow := func() time.Time { return time.Now().Add(-time.Hour) }
	back, err := sqliteplane.Open(t.Context(), ":memory:", &sqliteplane.Config{Now: planeNow})
	require.NoError(t, err)
	t.Cleanup(func() { back.Close() })
	d := lakeshore.New(back, &lakeshore.Config{Logger: testLogger(t)})
	secret, tok, err := d.Admin().CreateToken(t.Context(), &lakeshore.TokenOptions{Namespace: "*", Queue: "*",
		Permissions: []lakeshore.Permission{lakeshore.PermissionRead}, TTL: 10 * time.Minute})
	require.NoError(t, err)
	require.WithinDuration(t, planeNow().Add(10*time.Minute), tok.ExpiresAt, time.Minute)
	require.WithinDuration(t, planeNow(), tok.CreatedAt, time.Minute)

	srv := server.New(back, &server.Config{AdminToken: "lks_admin-secret", Logger: testLogger(t)})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Stop()
	})
	over, err := lakeshore.Open(t.Context(), ts.URL, &lakeshore.Config{HTTP: &httpplane.Config{Token: secret}, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { over.Close() })
	q, err := over.Queue("q", nil)
	require.NoError(t, err)
	_, err = q.Count(t.Context(), lakeshore.StateQueued)
	require.NoError(t, err, "the server takes the token as live")
}
