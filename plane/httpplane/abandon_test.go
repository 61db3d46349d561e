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
// cancelled) against a submit, 100 times, the cancel and the submit let go at the same
// instant (each after its own jitter of up to 2 ms): whichever wins, the job is claimable
// by a live caller at once, not held by the cancelled claim until its 30 s lease expires.
// Covers the server (a long-poll whose connection half-closed or closed releases what it
// claims) and httpplane (the connection of a cancelled claim is half-closed and its answer
// still read, and an answer that arrives after ctx ended is given back).
func TestCancelledClaimHoldsNoJob(t *testing.T) {
	drv, _, _ := testServer(t, planetest.Options{}, nil, nil)
	ctx := t.Context()
	var won, cancelled atomic.Int64
	defer func() {
		t.Logf("the claim won the race %d times of 100, was cancelled %d times", won.Load(), cancelled.Load())
	}()
	for i := range 100 {
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
		time.Sleep(time.Duration(5+rand.N(10)) * time.Millisecond) // the claim is most likely parked by now
		go1 := make(chan struct{})
		go func() {
			<-go1
			time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
			cancel()
		}()
		submitted := make(chan []plane.SubmitResult, 1)
		go func() {
			<-go1
			time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
			res, err := drv.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: queue,
				Invocations: []plane.SubmitParams{{Payload: []byte("x")}}})
			if err != nil {
				t.Error(err)
			}
			submitted <- res
		}()
		close(go1)
		res := <-submitted
		require.Len(t, res, 1)
		claimErr := <-done
		if claimErr != nil {
			cancelled.Add(1)
			require.ErrorIs(t, claimErr, context.Canceled, "iteration %d", i)
		}
		start := time.Now()
		jobs, err := drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: queue,
			Kind: plane.KindFIFO, Max: 1, Wait: 10 * time.Second})
		require.NoError(t, err)
		if len(jobs) == 0 {
			inv, _ := drv.InvocationGet(ctx, res[0].ID)
			t.Logf("iteration %d: claim error %v; the job: %+v", i, claimErr, inv)
		}
		require.Len(t, jobs, 1, "iteration %d: the job stays held by the cancelled claim", i)
		require.Equal(t, res[0].ID, jobs[0].ID)
		require.Less(t, time.Since(start), 10*time.Second)
	}
}

// TestAbandonedClaimKeepsAttempt: a job claimed for a caller that went away was never run,
// so giving it back (the server for a long-poll whose connection closed, httpplane for an
// answer that came after ctx ended, plane.ReleaseAbandoned) does not use up its attempt: a
// job with max_attempts 1 comes to the next live claim as attempt 1, not failed. The same
// race as TestCancelledClaimHoldsNoJob, 50 times.
func TestAbandonedClaimKeepsAttempt(t *testing.T) {
	drv, _, _ := testServer(t, planetest.Options{}, nil, nil)
	ctx := t.Context()
	for i := range 50 {
		queue := fmt.Sprintf("keep-%d", i)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			jobs, err := drv.InvocationClaimMany(cctx, &plane.ClaimParams{Namespace: "default", Queue: queue,
				Kind: plane.KindFIFO, Max: 1, Wait: 5 * time.Second})
			if err == nil && len(jobs) > 0 {
				err = plane.ReleaseAbandoned(ctx, drv, jobs)
			}
			done <- err
		}()
		time.Sleep(time.Duration(5+rand.N(10)) * time.Millisecond)
		go func() {
			time.Sleep(time.Duration(rand.N(2000)) * time.Microsecond)
			cancel()
		}()
		res, err := drv.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: queue,
			Invocations: []plane.SubmitParams{{Payload: []byte("x"), MaxAttempts: 1}}})
		require.NoError(t, err)
		<-done
		jobs, err := drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: queue,
			Kind: plane.KindFIFO, Max: 1, Wait: 10 * time.Second})
		require.NoError(t, err)
		require.Len(t, jobs, 1, "iteration %d: the job is claimable, not failed", i)
		require.Equal(t, res[0].ID, jobs[0].ID)
		require.Equal(t, 1, jobs[0].Attempt, "iteration %d: the abandoned claim used no attempt", i)
		errs, err := drv.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token,
			Outcome: plane.OutcomeSucceeded, Result: []byte{0xc0}}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
		inv, err := drv.InvocationGet(ctx, res[0].ID)
		require.NoError(t, err)
		require.Equal(t, plane.StateSucceeded, inv.State)
		require.Equal(t, 1, inv.Attempt)
	}
}
