package httpplane_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/skewtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

// skewedServer is an HTTP plane for a server whose plane's clock is this machine's plus
// skew (skewtest.Start).
func skewedServer(t *testing.T, skew time.Duration) (*httpplane.Driver, *skewtest.Server) {
	t.Helper()
	s := skewtest.Start(t, skew, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	drv, err := httpplane.New(s.URL, &httpplane.Config{Token: "-"})
	require.NoError(t, err)
	t.Cleanup(func() { drv.Close() })
	return drv, s
}

// claimOne submits a job and claims it through drv with a lease of ttl.
func claimOne(t *testing.T, drv *httpplane.Driver, ttl time.Duration) *plane.Job {
	t.Helper()
	_, err := drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
		Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
	require.NoError(t, err)
	jobs, err := drv.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Kind: plane.KindFIFO,
		Max: 1, LeaseTTL: ttl})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0]
}

// TestSkewedClientClock: the HTTP plane repeats a settle or heartbeat through an outage
// until the job's lease ends as this process reckons it on its own clock (the claim's
// answer, or the accepted heartbeat's sending, plus the lease TTL), whatever the server's
// clock says. Before, it compared the server's lease_expires_at with this machine's clock.
func TestSkewedClientClock(t *testing.T) {
	t.Parallel()

	// The client's clock runs 8 s ahead of the plane's: a 10 s lease read 2 s long, so a
	// settle sent during a 4 s outage gave up after 2 s (ErrUnavailable, the handler's
	// outcome lost and the job run again) while the lease held. Now it is sent again until
	// the outage ends, and the job succeeds once.
	t.Run("AheadKeepsRetryingWhileTheLeaseHolds", func(t *testing.T) {
		t.Parallel()
		drv, s := skewedServer(t, -8*time.Second)
		job := claimOne(t, drv, 10*time.Second)
		s.Down.Store(true)
		time.AfterFunc(4*time.Second, func() { s.Down.Store(false) })
		start := time.Now()
		errs, err := drv.InvocationSettleMany(context.Background(), []plane.SettleParams{
			{ID: job.ID, Token: job.Token, Outcome: plane.OutcomeSucceeded, Result: []byte{0x01}}})
		require.NoError(t, err, "the settle gave up after %s, within the lease", time.Since(start))
		require.NoError(t, errs[0])
		inv, err := drv.InvocationGet(t.Context(), job.ID)
		require.NoError(t, err)
		require.Equal(t, plane.StateSucceeded, inv.State)
		require.Equal(t, 1, inv.Attempt, "ran once")
	})

	// The client's clock runs 60 s behind the plane's: a 2 s lease read 62 s long, so a
	// heartbeat or settle during an outage was repeated for a minute after the lease had
	// ended (a worker's handler, stopped only once its heartbeat gives up, ran on beside the
	// next attempt). Now both give up about when the lease ends.
	t.Run("BehindStopsWhenTheLeaseEnds", func(t *testing.T) {
		t.Parallel()
		drv, s := skewedServer(t, 60*time.Second)
		job := claimOne(t, drv, 2*time.Second)
		// A heartbeat the plane accepts extends the lease by 2 s from its sending.
		hb, err := drv.InvocationHeartbeatMany(t.Context(), []plane.HeartbeatParams{{ID: job.ID, Token: job.Token, LeaseTTL: 2 * time.Second}})
		require.NoError(t, err)
		require.NoError(t, hb[0].Err)
		s.Down.Store(true)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // bounds the old code's minute
		defer cancel()
		start := time.Now()
		_, err = drv.InvocationHeartbeatMany(ctx, []plane.HeartbeatParams{{ID: job.ID, Token: job.Token, LeaseTTL: 2 * time.Second}})
		require.Error(t, err) // the 503s
		require.NoError(t, ctx.Err(), "the heartbeat gave up at the lease's end, not at ctx's")
		require.Less(t, time.Since(start), 15*time.Second)
		start = time.Now()
		_, err = drv.InvocationSettleMany(ctx, []plane.SettleParams{
			{ID: job.ID, Token: job.Token, Outcome: plane.OutcomeSucceeded, Result: []byte{0x01}}})
		require.Error(t, err) // the 503s
		require.NoError(t, ctx.Err(), "the settle gave up at the lease's end, not at ctx's")
		require.Less(t, time.Since(start), 15*time.Second)
	})
}
