package httpplane_test

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/porttest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

// TestSettleOutlivesRestart (issue 11 item 1): an ack sent while the server is down for
// longer than the old four retries (about 0.75 s) is not dropped: settles are fenced, so the
// HTTP plane repeats them until the lease ends, and the job succeeds once, not twice.
// Heartbeats ride out the outage the same way.
func TestSettleOutlivesRestart(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	drv, err := httpplane.New(r.url(), &httpplane.Config{Token: "-"})
	require.NoError(t, err)
	defer drv.Close()
	res, err := drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
		Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}, {Payload: []byte{0xc0}}}})
	require.NoError(t, err)
	jobs, err := drv.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Kind: plane.KindFIFO,
		Max: 2, LeaseTTL: 20 * time.Second})
	require.NoError(t, err)
	require.Len(t, jobs, 2)

	r.kill()
	type result struct {
		errs []error
		err  error
	}
	settled := make(chan result, 1)
	go func() {
		errs, err := drv.InvocationSettleMany(context.Background(), []plane.SettleParams{
			{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded, Result: []byte{0x01}}})
		settled <- result{errs, err}
	}()
	beat := make(chan error, 1)
	go func() {
		hb, err := drv.InvocationHeartbeatMany(context.Background(), []plane.HeartbeatParams{{ID: jobs[1].ID, Token: jobs[1].Token}})
		if err == nil {
			err = hb[0].Err
		}
		beat <- err
	}()
	time.Sleep(2 * time.Second) // down far longer than the old retries lasted
	select {
	case res := <-settled:
		t.Fatalf("the settle gave up during the outage: %v %v", res.errs, res.err)
	default:
	}
	r.start()
	res2 := <-settled
	require.NoError(t, res2.err)
	require.NoError(t, res2.errs[0])
	require.NoError(t, <-beat)
	inv, err := drv.InvocationGet(t.Context(), res[0].ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateSucceeded, inv.State)
	require.Equal(t, 1, inv.Attempt, "ran once")
}

// TestUnreachableFailsFast (issue 11 item 1): with Config.Unreachable a call against a port
// where nothing listens fails with ErrUnavailable within about that long instead of riding
// out RequestTimeout (30 s), and OnRetry reports the retries as they happen.
func TestUnreachableFailsFast(t *testing.T) {
	t.Parallel()
	addr := refusedAddr(t)
	var retries atomic.Int32
	var lastElapsed atomic.Int64
	drv, err := httpplane.New("http://"+addr, &httpplane.Config{Token: "-", Unreachable: 500 * time.Millisecond,
		OnRetry: func(attempt int, elapsed time.Duration, err error) {
			retries.Add(1)
			lastElapsed.Store(int64(elapsed))
			if !errors.Is(err, plane.ErrUnavailable) {
				t.Errorf("OnRetry got %v", err)
			}
		}})
	require.NoError(t, err)
	defer drv.Close()
	start := time.Now()
	_, err = drv.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	took := time.Since(start)
	require.ErrorIs(t, err, plane.ErrUnavailable)
	require.Less(t, took, 3*time.Second, "fails fast on connection refused")
	require.GreaterOrEqual(t, took, 400*time.Millisecond, "after retrying for about Unreachable")
	require.Positive(t, retries.Load(), "OnRetry saw the retries")
	require.Positive(t, lastElapsed.Load())
}

// TestRefusedConnectionSaysWhatToCheck: a call to a port where nothing listens fails with
// an error that names the server and asks whether `lakeshore serve` runs there, instead of
// the dial's Go words ("Post \"http://…\": dial tcp …: connect: connection refused", which
// an SDK user saw before); it still matches ErrUnavailable and ECONNREFUSED (the CLI's
// checks).
func TestRefusedConnectionSaysWhatToCheck(t *testing.T) {
	t.Parallel()
	addr := refusedAddr(t)
	drv, err := httpplane.New("http://"+addr, &httpplane.Config{Token: "-", Unreachable: 100 * time.Millisecond})
	require.NoError(t, err)
	defer drv.Close()
	_, err = drv.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.ErrorIs(t, err, plane.ErrUnavailable)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Contains(t, err.Error(), "nothing answers at http://"+addr+": it refuses connections; is 'lakeshore serve' running there?")
	require.NotContains(t, err.Error(), "dial tcp")
}

// refusedAddr returns a loopback address where nothing listens while the test runs:
// connections to it are refused (porttest.Refused).
func refusedAddr(t *testing.T) string { return porttest.Refused(t) }
