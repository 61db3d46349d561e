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

// TestRateLimitedOutOfRange: a "slow down" answer the plane would refuse as it stands —
// a negative or too long delay, an invalid key — is not lost (the job left running until
// its lease expires, then failed): the worker clamps the delay (negative: 1 s; above 366
// days: 366 days) and holds no invalid key, so the job goes back to its queue with its
// one attempt kept; the error's text says what was sent.
func TestRateLimitedOutOfRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		key      string
		after    time.Duration
		wantWait time.Duration
		text     string
	}{
		{"negative", "", -5 * time.Second, time.Second, "rate limited: retry after 1s"},
		{"zero", "", 0, time.Second, "rate limited: retry after 1s"},
		{"huge", "", 400 * 24 * time.Hour, 366 * 24 * time.Hour, "rate limited: retry after 8784h0m0s"},
		{"badkey", "a\x00b", time.Second, time.Second, `rate limited: invalid key "a\x00b" not held back: retry after 1s`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q, _ := setup(t, nil)
			id, err := q.Submit(t.Context(), 1, &lakeshore.SubmitOptions{MaxAttempts: 1})
			require.NoError(t, err)
			limited := lakeshore.RateLimited(c.key, c.after)
			require.Equal(t, c.text, limited.Error())
			start := time.Now()
			handled, err := q.Working(t.Context(), func(context.Context, *lakeshore.Job) (any, error) {
				return nil, limited
			}, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{Wait: 5 * time.Second}})
			require.True(t, handled)
			var rl *lakeshore.RateLimitedError
			require.True(t, errors.As(err, &rl), "the handler's error is returned: %v", err)
			require.NotErrorIs(t, err, lakeshore.ErrInvalid, "the settle was taken")
			inv, err := q.Get(t.Context(), id)
			require.NoError(t, err)
			require.Equal(t, lakeshore.StateQueued, inv.State, "handed back, not left running")
			require.Equal(t, 0, inv.Attempt, "no attempt consumed")
			require.Equal(t, "rate_limited", inv.Error.Type)
			require.Equal(t, c.text, inv.Error.Message)
			wait := inv.AvailableAt.Sub(start)
			require.InDelta(t, float64(c.wantWait), float64(wait), float64(2*time.Second), "claimable after %s", wait)
		})
	}
}
