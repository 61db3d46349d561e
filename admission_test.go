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
