package lakeshore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

func TestAdmission(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, nil)
	ctx := t.Context()

	a, err := q.Admission(ctx)
	require.NoError(t, err)
	require.Nil(t, a, "no block: no limits")

	require.ErrorIs(t, q.SetAdmission(ctx, lakeshore.Admission{MaxDepth: -1}), lakeshore.ErrInvalid)
	require.ErrorIs(t, q.SetAdmission(ctx, lakeshore.Admission{OnFull: "drop"}), lakeshore.ErrInvalid)

	require.NoError(t, q.SetAdmission(ctx, lakeshore.Admission{MaxDepth: 1}))
	a, err = q.Admission(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, a.MaxDepth)

	_, err = q.Submit(ctx, 1, &lakeshore.SubmitOptions{Key: "one"})
	require.NoError(t, err)
	_, err = q.Submit(ctx, 2, nil)
	require.ErrorIs(t, err, lakeshore.ErrQueueFull)
	var aerr *lakeshore.AdmissionError
	require.ErrorAs(t, err, &aerr)
	_, err = q.Submit(ctx, 1, &lakeshore.SubmitOptions{Key: "one"})
	require.NoError(t, err, "an existing key bypasses admission")

	require.NoError(t, q.SetAdmission(ctx, lakeshore.Admission{MaxDepth: 1, OnFull: lakeshore.OnFullBlock}))
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = q.Submit(short, 2, nil)
	require.ErrorIs(t, err, lakeshore.ErrQueueFull, "a blocked submit whose ctx ends")

	ok, err := q.ClearAdmission(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = q.Submit(ctx, 2, nil)
	require.NoError(t, err)
}

// TestUpdateAdmissionReturnsTheStoredBlock: raising the rate of a block whose burst was
// never set moves the burst, and UpdateAdmission returns the block as stored (burst 1000),
// not the one it sent (the burst 10 it read).
func TestUpdateAdmissionReturnsTheStoredBlock(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, nil)
	ctx := t.Context()
	require.NoError(t, q.SetAdmission(ctx, lakeshore.Admission{RateLimit: 10}))
	got, err := q.UpdateAdmission(ctx, func(a *lakeshore.Admission) error {
		require.EqualValues(t, 10, a.Burst, "the default burst is read")
		a.RateLimit = 1000
		return nil
	})
	require.NoError(t, err)
	require.EqualValues(t, 1000, got.Burst)
	stored, err := q.Admission(ctx)
	require.NoError(t, err)
	require.Equal(t, stored, got)
}
