package plane_test

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestMaxAttemptsBounded: max_attempts takes 0 (the default) to MaxAttemptsMax; above it,
// as below 0, a submit and a schedule are refused as invalid naming the field and saying
// what is allowed. Before, any positive number was taken (PostgreSQL then failed on one
// beyond its integer column).
func TestMaxAttemptsBounded(t *testing.T) {
	t.Parallel()
	require.Contains(t, plane.MaxAttemptsRule, strconv.Itoa(plane.MaxAttemptsMax), "the rule states the bound")
	schedule := func(n int) *plane.Schedule {
		return &plane.Schedule{Namespace: "n", Name: "s", Queue: "q", Every: time.Minute, MaxAttempts: n}
	}
	for _, n := range []int{0, 1, plane.MaxAttemptsDefault, plane.MaxAttemptsMax} {
		p := &plane.SubmitManyParams{Namespace: "n", Queue: "q", Invocations: []plane.SubmitParams{{MaxAttempts: n}}}
		require.NoError(t, p.Validate(), "max_attempts %d", n)
		require.NoError(t, schedule(n).Validate(), "schedule max_attempts %d", n)
	}
	for _, n := range []int{-1, plane.MaxAttemptsMax + 1, 1 << 31, math.MaxInt} {
		p := &plane.SubmitManyParams{Namespace: "n", Queue: "q", Invocations: []plane.SubmitParams{{}, {MaxAttempts: n}}}
		err := p.Validate()
		require.ErrorIs(t, err, plane.ErrInvalid, "max_attempts %d", n)
		var ie *plane.InvalidError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "invocations[1].max_attempts", ie.Field)
		require.Equal(t, plane.MaxAttemptsRule, ie.Rule)
		require.Contains(t, err.Error(), "use 1 to 10000 attempts, or 0 for the default (3)")
		err = schedule(n).Validate()
		require.ErrorIs(t, err, plane.ErrInvalid, "schedule max_attempts %d", n)
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "max_attempts", ie.Field)
	}
}
