package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// TestJobsRowsKeepOneLine (issue 29, item 14): a multi-line error (a traceback) shows its
// first line in its `lakeshore jobs` row, and whole in `lakeshore get`.
func TestJobsRowsKeepOneLine(t *testing.T) {
	c := newCLI(t)
	d, err := lakeshore.Open(t.Context(), c.target, nil)
	require.NoError(t, err)
	defer d.Close()
	q, err := d.Queue("tb", nil)
	require.NoError(t, err)
	id, err := q.Submit(t.Context(), 1, nil)
	require.NoError(t, err)
	job, err := q.Claim(t.Context(), &lakeshore.ClaimOptions{Wait: time.Second})
	require.NoError(t, err)
	require.NotNil(t, job)
	cause := errors.New("bad input 7\n\nTraceback (most recent call last):\n  File \"w.py\", line 3, in f\nValueError: bad input 7")
	require.NoError(t, q.Nack(t.Context(), job, cause, false))

	out := c.ok("jobs", "tb", "--state", "failed")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "a header and one row:\n%s", out)
	require.Contains(t, lines[1], id)
	require.Contains(t, lines[1], "bad input 7")
	require.NotContains(t, out, "Traceback")
	require.Contains(t, c.ok("get", id), "Traceback (most recent call last)", "get shows the whole error")

	require.Equal(t, "JobStopped: stopped by SIGINT, released for retry", errorSummary("JobStopped", "stopped by SIGINT, released for retry"))
	require.Equal(t, "ValueError: x", errorSummary("ValueError", "ValueError: x\ntrace"))
	require.Equal(t, strings.Repeat("é", 57)+"...", errorSummary("", strings.Repeat("é", 70)), "cut at a rune boundary")
}
