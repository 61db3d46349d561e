package server_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestUIQueueFigures: /ui/api/queue's percentiles, throughput and ready/delayed/retrying
// split on known data, and its bad input (issue 29 items 17, 19).
func TestUIQueueFigures(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := t.Context()
	for i := range 20 {
		_, err := b.back.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "jobs",
			Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
		require.NoError(t, err)
		jobs, err := b.back.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "jobs", Kind: plane.KindFIFO})
		require.NoError(t, err)
		outcome := plane.OutcomeSucceeded
		if i%4 == 0 {
			outcome = plane.OutcomeFailed
		}
		_, err = b.back.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: outcome,
			Result: []byte{0xc0}, Error: &plane.ErrorInfo{Type: "error", Message: "x"}}})
		require.NoError(t, err)
	}
	_, err := b.back.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "jobs",
		Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}, {Payload: []byte{0xc0}, Delay: time.Hour}}})
	require.NoError(t, err)

	status, out := b.jsonCall(t, "GET", "/ui/api/queue?namespace=default&queue=jobs", "")
	require.Equal(t, 200, status, "%v", out)
	require.Equal(t, map[string]any{"succeeded": 15.0, "failed": 5.0, "timeout": 0.0, "killed": 0.0, "cancelled": 0.0}, out["throughput"])
	run := out["run_time"].(map[string]any)
	require.Equal(t, 20.0, run["count"])
	require.LessOrEqual(t, run["p50"].(float64), run["p95"].(float64))
	require.Equal(t, 1.0, out["ready"])
	require.Equal(t, 1.0, out["delayed"])
	require.Equal(t, 0.0, out["retrying"])
	require.Equal(t, false, out["capped"])
	require.Len(t, out["waiting"], 1)

	for _, bad := range []string{"namespace=default&queue=", "namespace=bad/ns&queue=q", "namespace=default&queue=%ff"} {
		status, out := b.jsonCall(t, "GET", "/ui/api/queue?"+bad, "")
		require.Equal(t, 400, status, "%s: %v", bad, out)
	}
}

// TestUISearch: /ui/api/search by a JSON path and value, bounded, and its bad input
// (issue 29 item 21).
func TestUISearch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for i := range 5 {
		status, out := b.jsonCall(t, "POST", Q+"/invocations", fmt.Sprintf(`{"payload": {"user": {"name": %q, "n": %d}, "tags": ["a", "b%d"]}, "key": "k-%d"}`,
			map[bool]string{true: "ann", false: "bo"}[i%2 == 0], i, i, i))
		require.Equal(t, 200, status, "%v", out)
	}
	search := func(query string) []any {
		t.Helper()
		status, out := b.jsonCall(t, "GET", "/ui/api/search?namespace=default&queue=jobs&"+query, "")
		require.Equal(t, 200, status, "%s: %v", query, out)
		require.Equal(t, 200.0, out["scan_limit"])
		return out["invocations"].([]any)
	}
	require.Len(t, search("path=user.name&value=ann"), 3)
	require.Len(t, search("path=$.user.name&value=%22bo%22"), 2, "a JSON string value")
	require.Len(t, search("path=user.n&value=4"), 1, "a JSON number")
	require.Len(t, search("path=tags.1&value=b3"), 1, "an array index")
	require.Len(t, search("path=user"), 5, "no value: has the path")
	require.Len(t, search("path=user.missing"), 0)
	require.Len(t, search("path=user.name&value=ann&key_prefix=k-4"), 1)
	hit := search("path=user.n&value=0")[0].(map[string]any)
	require.Nil(t, hit["payload"], "rows come without payloads")
	for _, bad := range []string{"path=", "path=a..b", "path=%ff", "path=x&state=nope"} {
		status, out := b.jsonCall(t, "GET", "/ui/api/search?namespace=default&queue=jobs&"+bad, "")
		require.Equal(t, 400, status, "%s: %v", bad, out)
		b, _ := json.Marshal(out)
		require.Contains(t, string(b), "invalid")
	}
}
