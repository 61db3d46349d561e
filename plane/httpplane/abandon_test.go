package httpplane_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// TestCancelledClaimHoldsNoJob races a long-poll claim whose caller goes away (its ctx is
// cancelled) against a submit, 50 times: whichever wins, the job is claimable by a live
// caller at once, not held by the cancelled claim until its 30 s lease expires. Covers the
// server (a long-poll whose connection closed releases what it claimed) and httpplane (an
// answer that arrives after ctx ended is given back).
func TestCancelledClaimHoldsNoJob(t *testing.T) {
	drv, _, _ := testServer(t, planetest.Options{}, nil, nil)
	ctx := t.Context()
	var won atomic.Int64
	defer func() { t.Logf("the claim won the race %d times of 50", won.Load()) }()
	for i := range 50 {
		queue := fmt.Sprintf("abandon-%d", i)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			jobs, err := drv.InvocationClaimMany(cctx, &plane.ClaimParams{Namespace: "default", Queue: queue,
				Kind: plane.KindFIFO, Max: 1, Wait: 5 * time.Second})
			if err == nil && len(jobs) > 0 {
				// The claim won the race before its caller went away: a live caller, which
				// gives the job back itself.
				won.Add(1)
				err = plane.ReleaseAbandoned(ctx, drv, jobs)
			}
			done <- err
		}()
		time.Sleep(time.Duration(rand.N(20)) * time.Millisecond)
		go func() {
			time.Sleep(time.Duration(rand.N(3000)) * time.Microsecond)
			cancel()
		}()
		res, err := drv.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: queue,
			Invocations: []plane.SubmitParams{{Payload: []byte("x")}}})
		require.NoError(t, err)
		claimErr := <-done
		if claimErr != nil {
			require.ErrorIs(t, claimErr, context.Canceled, "iteration %d", i)
		}
		start := time.Now()
		jobs, err := drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: queue,
			Kind: plane.KindFIFO, Max: 1, Wait: 5 * time.Second})
		require.NoError(t, err)
		if len(jobs) == 0 {
			inv, _ := drv.InvocationGet(ctx, res[0].ID)
			t.Logf("iteration %d: claim error %v; the job: %+v", i, claimErr, inv)
		}
		require.Len(t, jobs, 1, "iteration %d: the job stays held by the cancelled claim", i)
		require.Equal(t, res[0].ID, jobs[0].ID)
		require.Less(t, time.Since(start), 5*time.Second)
	}
}
