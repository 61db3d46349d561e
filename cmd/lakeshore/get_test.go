package main

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// TestGetShowsEveryField: get shows each field a job carries that a user set or that
// changes while it runs — the attempt timeout, the deadline, the free-form metadata and the
// lease's end — in the text view, and the attempt timeout in --json too (as
// attempt_timeout_s, seconds, as the CLI writes durations), on the file plane and over
// HTTP. A job without them shows none of those rows or keys. Before, only --json showed the
// deadline, the lease and the metadata, and neither form the attempt timeout.
func TestGetShowsEveryField(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) *cli{"File": newCLI, "HTTP": newHTTPCLI} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			d, err := lakeshore.Open(t.Context(), c.target, nil)
			require.NoError(t, err)
			defer d.Close()
			q, err := d.Queue("q", nil)
			require.NoError(t, err)
			deadline := time.Now().Add(time.Hour).Truncate(time.Second)
			id, err := q.Submit(t.Context(), "x", &lakeshore.SubmitOptions{AttemptTimeout: 90 * time.Second,
				Deadline: deadline, Metadata: map[string]string{"team": "eval", "run": "7"}})
			require.NoError(t, err)
			plain := c.ok("submit", "q", `"y"`)

			out := c.ok("get", id)
			require.Regexp(t, `attempt timeout\s+1m30s\n`, out)
			require.Regexp(t, `deadline\s+`+regexp.QuoteMeta(formatTime(deadline))+`\n`, out)
			require.Regexp(t, `metadata\s+run=7\n\s+team=eval\n`, out)
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "get", id)), &got))
			require.Equal(t, 90.0, got["attempt_timeout_s"])
			require.Equal(t, map[string]any{"team": "eval", "run": "7"}, got["metadata"])

			out = c.ok("get", plain)
			for _, row := range []string{"attempt timeout", "deadline", "metadata", "lease expires"} {
				require.NotContains(t, out, row)
			}
			require.NotContains(t, c.ok("--json", "get", plain), "attempt_timeout")

			job, err := q.Claim(t.Context(), &lakeshore.ClaimOptions{LeaseTTL: time.Hour})
			require.NoError(t, err)
			require.NotNil(t, job)
			out = c.ok("get", job.ID)
			require.Regexp(t, `lease expires\s+`+regexp.QuoteMeta(formatTime(job.LeaseExpiresAt))+`\n`, out)
		})
	}
}
