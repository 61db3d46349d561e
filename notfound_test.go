package lakeshore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestNotFoundNamesTheID (issue 29, item 9): Get, Result, Cancel, Kill and Stream of an
// unknown id answer ErrNotFound (code not_found) naming the id and the likely causes.
func TestNotFoundNamesTheID(t *testing.T) {
	d, err := lakeshore.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	defer d.Close()
	q, err := d.Queue("jobs", nil)
	require.NoError(t, err)
	id := plane.NewIDGenerator().New(time.Now())
	check := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, lakeshore.ErrNotFound, what)
		require.Contains(t, err.Error(), id, what)
		require.Contains(t, err.Error(), "retention", what)
		require.Contains(t, err.Error(), "namespace", what)
	}
	_, err = q.Get(t.Context(), id)
	check("get", err)
	check("result", q.Result(t.Context(), id, nil, &lakeshore.ResultOptions{Timeout: time.Second}))
	_, err = q.Cancel(t.Context(), id)
	check("cancel", err)
	_, err = q.Kill(t.Context(), id)
	check("kill", err)
	streamed := false
	for _, err := range q.Stream(t.Context(), id, lakeshore.FromStart, nil) {
		check("stream", err)
		streamed = true
		break
	}
	require.True(t, streamed, "the stream of an unknown id yields its error")
}
