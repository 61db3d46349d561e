package server_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// readCounter is a plane that counts the invocation reads made through it.
type readCounter struct {
	plane.Driver
	reads atomic.Int64
}

func (c *readCounter) InvocationGet(ctx context.Context, id string) (*plane.Invocation, error) {
	c.reads.Add(1)
	return c.Driver.InvocationGet(ctx, id)
}

// TestScopedSettleReadsNothing (issue 28): with a queue-scoped token, settles, heartbeats
// and settle-and-claims of 1,000 jobs read no invocation before writing (the token's scope
// rides to the plane, which checks it on the row it locks), and another queue's job still
// answers not_found, unchanged, exactly like an unknown id.
func TestScopedSettleReadsNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	back, err := sqliteplane.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	drv := &readCounter{Driver: back}
	srv := server.New(drv, &server.Config{AdminToken: adminSecret})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Stop(); ts.Close(); back.Close() })
	b := &testBundle{back: back, srv: srv, ts: ts, logs: &syncBuffer{}}
	worker, _ := b.mint(t, "default", "jobs", 0, plane.PermissionConsume)
	client, err := httpplane.New(ts.URL, &httpplane.Config{Token: worker})
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })

	const n = 1000
	submit := func(ns, q string, k int) {
		_, err := back.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: ns, Queue: q, Invocations: make([]plane.SubmitParams, k)})
		require.NoError(t, err)
	}
	submit("default", "jobs", n+1)
	submit("default", "other", 1)
	// A lease far longer than the test: under -race on a loaded machine the 1000 claims,
	// heartbeats and settles below took over the default 30 s, the lease expired and the
	// job was queued again, failing the last check for a reason that is not the test's.
	other, err := back.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "other", LeaseTTL: plane.LeaseTTLMax})
	require.NoError(t, err)
	require.Len(t, other, 1)

	jobs, err := client.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "jobs", Max: n})
	require.NoError(t, err)
	require.Len(t, jobs, n)
	beats := make([]plane.HeartbeatParams, n)
	settles := make([]plane.SettleParams, n)
	for i, j := range jobs {
		beats[i] = plane.HeartbeatParams{ID: j.ID, Token: j.Token}
		settles[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
	}
	hb, err := client.InvocationHeartbeatMany(ctx, beats)
	require.NoError(t, err)
	for _, h := range hb {
		require.NoError(t, h.Err)
	}
	errs, err := client.InvocationSettleMany(ctx, settles)
	require.NoError(t, err)
	for _, e := range errs {
		require.NoError(t, e)
	}
	require.Zero(t, drv.reads.Load(), "no invocation read before a scoped settle or heartbeat")

	// Another queue's job, with its own fencing token: not found, and unchanged.
	foreign := plane.SettleParams{ID: other[0].ID, Token: other[0].Token, Outcome: plane.OutcomeSucceeded}
	errs, err = client.InvocationSettleMany(ctx, []plane.SettleParams{foreign})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], plane.ErrNotFound)
	hb, err = client.InvocationHeartbeatMany(ctx, []plane.HeartbeatParams{{ID: other[0].ID, Token: other[0].Token}})
	require.NoError(t, err)
	require.ErrorIs(t, hb[0].Err, plane.ErrNotFound)
	errs, claimed, err := client.InvocationSettleAndClaim(ctx, []plane.SettleParams{foreign}, &plane.ClaimParams{Namespace: "default", Queue: "jobs"})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], plane.ErrNotFound)
	require.Len(t, claimed, 1)
	require.Zero(t, drv.reads.Load())
	inv, err := back.InvocationGet(ctx, other[0].ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateRunning, inv.State, "the refused settles changed nothing")
}
