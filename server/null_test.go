package server_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// sendBoth returns a sender of body in each request encoding: JSON (encoding/json) and
// msgpack (vmihailenco), so a nil in body is JSON null in one and msgpack nil in the other.
func (b *testBundle) sendBoth(t *testing.T, method, path string, body any) map[string]func() *response {
	t.Helper()
	js, err := json.Marshal(body)
	require.NoError(t, err)
	mp := mustMsgpack(t, body)
	return map[string]func() *response{
		"json":    func() *response { return b.do(t, method, path, api.ContentTypeJSON, js, "") },
		"msgpack": func() *response { return b.do(t, method, path, api.ContentTypeMsgpack, mp, "") },
	}
}

// TestNullOptionalIsAbsent: a null (JSON null, msgpack nil) for an optional field is that
// field left out, its default, in both encodings. Before, msgpack refused it ("want an
// integer, got nil") while JSON read it as the zero value.
func TestNullOptionalIsAbsent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	body := map[string]any{"payload": nil, "id": nil, "key": nil, "priority": nil, "max_attempts": nil,
		"attempt_timeout": nil, "deadline": nil, "metadata": nil, "not_before": nil, "delay": nil,
		"unique_for": nil, "debounce": nil, "concurrency_key": nil, "requirement": nil, "max_wait": nil}
	for name, send := range b.sendBoth(t, "POST", Q+"/invocations", body) {
		r := send()
		require.Equal(t, 200, r.status, "%s: %s", name, r.body)
		inv, err := b.back.InvocationGet(t.Context(), idOf(t, r))
		require.NoError(t, err)
		require.Equal(t, plane.MaxAttemptsDefault, inv.MaxAttempts, "%s: a null max_attempts is the default", name)
		require.Zero(t, inv.Priority, name)
		require.Empty(t, inv.Key, name)
		require.Equal(t, plane.StateQueued, inv.State, "%s: claimable now", name)
	}
	// In a batch and in a claim's nested fields, too.
	batch := map[string]any{"invocations": []any{map[string]any{"priority": nil, "max_attempts": nil}}, "max_wait": nil}
	for name, send := range b.sendBoth(t, "POST", Q+"/invocations/batch", batch) {
		r := send()
		require.Equal(t, 200, r.status, "%s: %s", name, r.body)
	}
	claim := map[string]any{"kind": nil, "max": nil, "lease_ttl": nil, "wait": nil, "worker": nil, "queues": nil, "offers": nil, "warm_host_keys": nil}
	for name, send := range b.sendBoth(t, "POST", Q+"/claim", claim) {
		r := send()
		require.Equal(t, 200, r.status, "%s: %s", name, r.body)
		var cr api.ClaimResponse
		c, err := api.CodecFor(r.header.Get("Content-Type"))
		require.NoError(t, err)
		require.NoError(t, c.Unmarshal(r.body, &cr))
		require.Len(t, cr.Jobs, 1, "%s: a null max is the default, one job", name)
	}
}

// idOf is the id of a submit's answer.
func idOf(t *testing.T, r *response) string {
	t.Helper()
	var sr api.SubmitResult
	c, err := api.CodecFor(r.header.Get("Content-Type"))
	require.NoError(t, err)
	require.NoError(t, c.Unmarshal(r.body, &sr), "%s", r.body)
	return sr.ID
}

// TestNullRequiredRefused: a null for a field that is not optional, or for an element of a
// list or a map that takes none, is 400 invalid naming the field in both encodings, and
// changes nothing. Before, JSON read it as the zero value: a settle with "token": null was
// tried with the token "" (and refused as lease_lost, not as bad input), a metadata value
// null was stored as "", a null list element as "".
func TestNullRequiredRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	r := b.doJSON(t, "POST", Q+"/invocations", map[string]any{}, "")
	require.Equal(t, 200, r.status, "%s", r.body)
	id := idOf(t, r)
	r = b.doJSON(t, "POST", Q+"/claim", map[string]any{}, "")
	require.Equal(t, 200, r.status, "%s", r.body)

	cases := []struct {
		name, path, field string
		body              any
	}{
		{"SettleToken", "/v1/invocations/" + id + "/settle", "token", map[string]any{"token": nil, "outcome": "succeeded"}},
		{"SettleOutcome", "/v1/invocations/" + id + "/settle", "outcome", map[string]any{"token": "x", "outcome": nil}},
		{"SettleErrorMessage", "/v1/invocations/" + id + "/settle", "error.message", map[string]any{"token": "x", "outcome": "failed", "error": map[string]any{"type": "e", "message": nil}}},
		{"Settles", "/v1/settle", "settles", map[string]any{"settles": nil}},
		{"SettlesElement", "/v1/settle", "settles[0]", map[string]any{"settles": []any{nil}}},
		{"HeartbeatToken", "/v1/invocations/" + id + "/heartbeat", "token", map[string]any{"token": nil}},
		{"Invocations", Q + "/invocations/batch", "invocations", map[string]any{"invocations": nil}},
		{"InvocationsElement", Q + "/invocations/batch", "invocations[1]", map[string]any{"invocations": []any{map[string]any{}, nil}}},
		{"MetadataValue", Q + "/invocations", "metadata.a", map[string]any{"metadata": map[string]any{"a": nil}}},
		{"BatchMetadataValue", Q + "/invocations/batch", "invocations[0].metadata.a", map[string]any{"invocations": []any{map[string]any{"metadata": map[string]any{"a": nil}}}}},
		{"QueuesElement", Q + "/claim", "queues[0]", map[string]any{"queues": []any{nil}}},
		{"SettleAndClaimClaim", Q + "/settle-and-claim", "claim", map[string]any{"settles": []any{}, "claim": nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for name, send := range b.sendBoth(t, "POST", tc.path, tc.body) {
				eb := send().requireError(t, 400, "invalid")
				require.NotNil(t, eb.Details, name)
				require.Equal(t, tc.field, eb.Details.Field, "%s: %s", name, eb.Message)
				// "null" in both codecs: "nil" reads to a Python SDK user (msgpack) as Go's.
				require.Contains(t, eb.Message, "got null", name)
				require.NotContains(t, eb.Message, "nil", name)
			}
		})
	}
	inv, err := b.back.InvocationGet(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, plane.StateRunning, inv.State, "no refused settle touched the job")
	require.Equal(t, int64(1), b.total(t), "no refused submit enqueued anything")
}
