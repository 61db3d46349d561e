package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

// TestSettleBatchBounded: a settle or heartbeat batch is one write transaction every other
// writer waits for, so one request carries at most plane.SettleManyMax of them, as a batch
// submit: 10,001 answer 400 invalid naming the field, and change nothing (the claimed job
// among them is still running). On the old code any number went through (200,000
// heartbeats held the writer for seconds, and another tenant's submit with it). The HTTP
// plane sends a larger InvocationSettleMany or InvocationHeartbeatMany in turns.
func TestSettleBatchBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	drv, err := httpplane.New(b.ts.URL, nil)
	require.NoError(t, err)
	defer drv.Close()
	_, err = drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: []plane.SubmitParams{{}}})
	require.NoError(t, err)
	// The lease outlives the test: under the race detector on a loaded 2-core machine the
	// 10,001-item requests below took over 30 s (plane.LeaseTTLDefault), and the claimed job's
	// lease ran out before the heartbeat that was to extend it.
	const lease = 10 * time.Minute
	jobs, err := drv.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Kind: plane.KindFIFO, Max: 1, LeaseTTL: lease})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	job := jobs[0]
	n := plane.SettleManyMax + 1
	settles := make([]map[string]any, n)
	heartbeats := make([]map[string]any, n)
	for i := range n {
		settles[i] = map[string]any{"id": job.ID, "token": "other", "outcome": "failed"}
		heartbeats[i] = map[string]any{"id": job.ID, "token": "other"}
	}
	settles[0]["token"], heartbeats[0]["token"] = job.Token, job.Token
	for _, c := range []struct {
		path, field string
		body        map[string]any
	}{
		{"/v1/settle", "settles", map[string]any{"settles": settles}},
		{"/v1/heartbeat", "heartbeats", map[string]any{"heartbeats": heartbeats}},
		{"/v1/namespaces/default/queues/q/settle-and-claim", "settles", map[string]any{"settles": settles, "claim": map[string]any{}}},
	} {
		eb := b.doJSON(t, "POST", c.path, c.body, "").requireError(t, 400, "invalid")
		require.NotNil(t, eb.Details, c.path)
		require.Equal(t, c.field, eb.Details.Field, c.path)
		require.Contains(t, eb.Message, fmt.Sprint(plane.SettleManyMax))
	}
	inv, err := drv.InvocationGet(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateRunning, inv.State, "nothing settled")
	require.Equal(t, job.LeaseExpiresAt, inv.LeaseExpiresAt, "nothing extended")

	// The HTTP plane splits: every item answered, in order.
	hb := make([]plane.HeartbeatParams, n)
	sp := make([]plane.SettleParams, n)
	for i := range n {
		hb[i] = plane.HeartbeatParams{ID: job.ID, Token: "other", LeaseTTL: lease}
		sp[i] = plane.SettleParams{ID: job.ID, Token: "other", Outcome: plane.OutcomeFailed}
	}
	hb[n-1].Token, sp[n-1].Token = job.Token, job.Token
	res, err := drv.InvocationHeartbeatMany(t.Context(), hb)
	require.NoError(t, err)
	require.Len(t, res, n)
	require.ErrorIs(t, res[0].Err, plane.ErrLeaseLost)
	require.NoError(t, res[n-1].Err, "the last one, in the second request, extends")
	errs, err := drv.InvocationSettleMany(t.Context(), sp)
	require.NoError(t, err)
	require.Len(t, errs, n)
	require.ErrorIs(t, errs[0], plane.ErrLeaseLost)
	require.NoError(t, errs[n-1])
	inv, err = drv.InvocationGet(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateFailed, inv.State)
}
