package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestMetricsServerWideSeriesAreTheOperators: a series without a namespace label sums every
// tenant's traffic (requests by route and status, frames posted, settles by outcome,
// long-polls open), so a tenant token's scrape shows none of them: every line it gets is
// labelled with its own namespace. A token for every namespace ("*" / "*", even read-only)
// and the admin token see them. (On the code before, tenant-a's scrape counted tenant-b's
// frame, settle and requests.)
func TestMetricsServerWideSeriesAreTheOperators(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	a, _ := b.mint(t, "tenant-a", "*", 0, plane.PermissionSubmit, plane.PermissionRead, plane.PermissionConsume)
	everyRead, _ := b.mint(t, "*", "*", 0, plane.PermissionRead)
	require.Equal(t, 200, b.doJSON(t, "POST", "/v1/namespaces/tenant-a/queues/q/invocations", map[string]any{}, a).status)

	// tenant-b's traffic: a submit, a claim, a frame, a settle.
	bq := "/v1/namespaces/tenant-b/queues/q"
	require.Equal(t, 200, b.doJSON(t, "POST", bq+"/invocations", map[string]any{}, adminSecret).status)
	r := b.doJSON(t, "POST", bq+"/claim", map[string]any{}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	var cr api.ClaimResponse
	require.NoError(t, json.Unmarshal(r.body, &cr))
	require.Len(t, cr.Jobs, 1)
	job := cr.Jobs[0]
	require.Equal(t, 200, b.doJSON(t, "POST", "/v1/invocations/"+job.ID+"/frames", map[string]any{"token": job.Token, "value": 1}, adminSecret).status)
	require.Equal(t, 200, b.doJSON(t, "POST", "/v1/invocations/"+job.ID+"/settle", map[string]any{"token": job.Token, "outcome": "succeeded"}, adminSecret).status)

	r = b.do(t, "GET", "/metrics", "", nil, a)
	require.Equal(t, 200, r.status, "%s", r.body)
	text := string(r.body)
	require.Contains(t, text, `lakeshore_submits_total{namespace="tenant-a",queue="q"} 1`, "its own series stay")
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		require.Contains(t, line, `namespace="tenant-a"`, "a tenant's scrape holds only its namespace's series")
	}
	for _, name := range []string{"lakeshore_frames_posted_total", "lakeshore_settles_total", "lakeshore_http_request_duration_seconds", "lakeshore_http_long_polls_open"} {
		require.NotContains(t, text, name, "a server-wide series counts other tenants' traffic")
	}

	for _, tok := range []string{everyRead, adminSecret} {
		text := string(b.do(t, "GET", "/metrics", "", nil, tok).body)
		require.Contains(t, text, "lakeshore_frames_posted_total 1")
		require.Contains(t, text, `lakeshore_settles_total{outcome="succeeded"} 1`)
		require.Contains(t, text, "lakeshore_http_long_polls_open 0")
		require.Contains(t, text, `namespace="tenant-b"`)
	}
}
