package lakeshore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// TestRateLimited: a handler's lakeshore.RateLimited hands the job back without consuming
// an attempt and holds its concurrency key back; a job with one attempt survives it.
func TestRateLimited(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, nil)
	id, err := q.Submit(t.Context(), 1, &lakeshore.SubmitOptions{MaxAttempts: 1, ConcurrencyKey: "upstream"})
	require.NoError(t, err)
	limited := func(_ context.Context, j *lakeshore.Job) (any, error) {
		require.Equal(t, "upstream", j.ConcurrencyKey)
		return nil, lakeshore.RateLimited(j.ConcurrencyKey, 50*time.Millisecond)
	}
	handled, err := q.Working(t.Context(), limited, nil)
	require.True(t, handled)
	var rl *lakeshore.RateLimitedError
	require.True(t, errors.As(err, &rl), "the handler's error is returned: %v", err)
	require.Equal(t, "upstream", rl.Key)
	inv, err := q.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, lakeshore.StateQueued, inv.State)
	require.Equal(t, 0, inv.Attempt, "no attempt consumed")
	require.Equal(t, "rate_limited", inv.Error.Type)

	handled, err = q.Working(t.Context(), func(context.Context, *lakeshore.Job) (any, error) { return 2, nil },
		&lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{Wait: 10 * time.Second}})
	require.NoError(t, err)
	require.True(t, handled, "claimable again once the delay has passed")
	inv, err = q.Get(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, lakeshore.StateSucceeded, inv.State)
	require.Equal(t, 1, inv.Attempt)
}
