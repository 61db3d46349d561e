package httpplane_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/porttest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// restartable is a real server on a fixed loopback port that a test stops abruptly (every
// connection cut, as by SIGKILL) and starts again on the same port, over one plane.
type restartable struct {
	t    *testing.T
	addr string
	back plane.Driver

	mu  sync.Mutex
	srv *server.Server
	hs  *http.Server
	wg  sync.WaitGroup
}

func newRestartable(t *testing.T) *restartable {
	t.Helper()
	back, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	r := &restartable{t: t, back: back}
	// A port outside the ephemeral range: while the server is down no other socket (a
	// parallel test's listener, a client's connection) is given it, so start binds it again.
	ln, err := net.Listen("tcp", porttest.Restartable(t))
	require.NoError(t, err)
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(func() {
		r.kill()
		back.Close()
	})
	return r
}

func (r *restartable) serve(ln net.Listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv = server.New(r.back, &server.Config{Logger: slog.New(slog.NewTextHandler(testWriter{r.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	r.hs = &http.Server{Handler: r.srv}
	hs := r.hs
	r.wg.Go(func() { _ = hs.Serve(ln) })
}

// kill cuts every connection and stops listening.
func (r *restartable) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hs == nil {
		return
	}
	r.hs.Close()
	r.srv.Stop()
	r.wg.Wait()
	r.hs, r.srv = nil, nil
}

// start listens again on the same port.
func (r *restartable) start() {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	require.NoError(r.t, err)
	r.serve(ln)
}

func (r *restartable) url() string { return "http://" + r.addr }

// TestOutage: calls safe to repeat ride out a server restart until their own deadline;
// connection failures that are returned match plane.ErrUnavailable and keep their cause.
func TestOutage(t *testing.T) {
	t.Parallel()

	t.Run("WaitSurvivesRestart", func(t *testing.T) {
		t.Parallel()
		r := newRestartable(t)
		drv, err := httpplane.New(r.url(), &httpplane.Config{Token: "-"})
		require.NoError(t, err)
		defer drv.Close()
		res, err := drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
			Invocations: []plane.SubmitParams{{}}})
		require.NoError(t, err)
		id := res[0].ID

		type outcome struct {
			inv *plane.Invocation
			err error
			at  time.Duration
		}
		start := time.Now()
		done := make(chan outcome, 1)
		go func() {
			inv, err := drv.InvocationWait(context.Background(), &plane.WaitParams{ID: id, Timeout: 15 * time.Second})
			done <- outcome{inv, err, time.Since(start)}
		}()
		time.Sleep(200 * time.Millisecond) // let the wait park on the server
		r.kill()
		time.Sleep(2 * time.Second) // the server is down longer than the old retries lasted
		select {
		case o := <-done:
			t.Fatalf("the wait ended during the outage after %s: %v", o.at, o.err)
		default:
		}
		r.start()

		// Reads made now reach the new server.
		inv, err := drv.InvocationGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, plane.StateQueued, inv.State)

		// Finish the job behind the server; the wait sees it.
		jobs, err := r.back.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q",
			Kind: plane.KindFIFO, Max: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		result, err := wire.Marshal("done")
		require.NoError(t, err)
		errs, err := r.back.InvocationSettleMany(t.Context(), []plane.SettleParams{{ID: id, Token: jobs[0].Token,
			Outcome: plane.OutcomeSucceeded, Result: result}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
		o := <-done
		require.NoError(t, o.err)
		require.Equal(t, plane.StateSucceeded, o.inv.State)
		require.Less(t, o.at, 15*time.Second)
	})

	t.Run("DownUntilDeadline", func(t *testing.T) {
		t.Parallel()
		r := newRestartable(t)
		drv, err := httpplane.New(r.url(), &httpplane.Config{Token: "-"})
		require.NoError(t, err)
		defer drv.Close()
		res, err := drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
			Invocations: []plane.SubmitParams{{}}})
		require.NoError(t, err)
		id := res[0].ID
		r.kill()

		isUnavailable := func(t *testing.T, err error) {
			t.Helper()
			require.ErrorIs(t, err, plane.ErrUnavailable)
			require.ErrorIs(t, err, syscall.ECONNREFUSED, "the cause is kept")
			require.Equal(t, "unavailable", plane.Code(err))
		}

		// A wait retries until its own end, then reports the outage.
		start := time.Now()
		_, err = drv.InvocationWait(t.Context(), &plane.WaitParams{ID: id, Timeout: 2500 * time.Millisecond})
		isUnavailable(t, err)
		require.GreaterOrEqual(t, time.Since(start), 2400*time.Millisecond, "retried until the wait's end")
		// Not retried on to RequestTimeout (30 s, the end of a call with no wait of its own):
		// the bound is halfway between the two ends, not a verdict on the machine's speed.
		require.Less(t, time.Since(start), 2500*time.Millisecond+httpplane.RequestTimeoutDefault/2,
			"ended at the wait's end, not at the request timeout's")

		// A read retries until ctx's deadline.
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		start = time.Now()
		_, err = drv.InvocationGet(ctx, id)
		isUnavailable(t, err)
		require.GreaterOrEqual(t, time.Since(start), 2*time.Second, "retried until ctx's deadline")

		// Calls that are not safe to repeat give up after their few retries, still typed.
		_, err = drv.InvocationSettleMany(t.Context(), []plane.SettleParams{{ID: id, Token: "t", Outcome: plane.OutcomeSucceeded}})
		isUnavailable(t, err)
		_, err = drv.FramePost(t.Context(), &plane.FramePostParams{Journal: plane.Journal{InvocationID: id}, Token: "t", Value: []byte{0xc0}})
		isUnavailable(t, err)
		_, err = drv.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Kind: plane.KindFIFO, Max: 1})
		isUnavailable(t, err)
		require.False(t, errors.Is(err, plane.ErrTimeout))
	})
}
