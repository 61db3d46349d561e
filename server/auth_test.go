package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

const adminSecret = "admin-secret-do-not-log-7f3a"

// mint creates a token over HTTP with the admin token and returns its secret.
func (b *testBundle) mint(t *testing.T, ns, queue string, ttl float64, perms ...plane.Permission) (string, api.Token) {
	t.Helper()
	r := b.doJSON(t, "POST", "/v1/tokens", map[string]any{"namespace": ns, "queue": queue, "permissions": perms, "ttl": ttl}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	var out api.TokenCreateResponse
	require.NoError(t, json.Unmarshal(r.body, &out))
	require.True(t, strings.HasPrefix(out.Secret, server.SecretPrefix))
	return out.Secret, out.Token
}

func TestAuth(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	b := setup(t, &server.Config{AdminToken: adminSecret, Now: clock})

	producer, _ := b.mint(t, "default", "jobs", 0, plane.PermissionSubmit)
	worker, _ := b.mint(t, "default", "jobs", 0, plane.PermissionConsume)
	reader, _ := b.mint(t, "default", "*", 0, plane.PermissionRead)
	trainer, _ := b.mint(t, "ml", "train-*", 0, plane.PermissionSubmit, plane.PermissionConsume)
	shortLived, _ := b.mint(t, "default", "jobs", 60, plane.PermissionSubmit)
	revoked, revokedTok := b.mint(t, "default", "jobs", 0, plane.PermissionSubmit)
	r := b.do(t, "DELETE", "/v1/tokens/"+revokedTok.ID, "", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	now.Add(int64(2 * time.Minute)) // shortLived has expired

	qp := func(ns, q, verb string) string { return "/v1/namespaces/" + ns + "/queues/" + q + "/" + verb }
	empty := map[string]any{}
	cases := []struct {
		name   string
		token  string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"Missing", "", "POST", qp("default", "jobs", "invocations"), empty, 401, "unauthorized"},
		{"Unknown", "lks_not-a-real-token", "POST", qp("default", "jobs", "invocations"), empty, 401, "unauthorized"},
		{"Expired", shortLived, "POST", qp("default", "jobs", "invocations"), empty, 401, "unauthorized"},
		{"Revoked", revoked, "POST", qp("default", "jobs", "invocations"), empty, 401, "unauthorized"},
		{"OtherQueue", producer, "POST", qp("default", "other", "invocations"), empty, 403, "forbidden"},
		{"OtherNamespace", producer, "POST", qp("ml", "jobs", "invocations"), empty, 403, "forbidden"},
		{"GlobMiss", trainer, "POST", qp("ml", "eval-1", "invocations"), empty, 403, "forbidden"},
		{"WorkerCannotSubmit", worker, "POST", qp("default", "jobs", "invocations"), empty, 403, "forbidden"},
		{"ReaderCannotSubmit", reader, "POST", qp("default", "jobs", "invocations"), empty, 403, "forbidden"},
		{"ProducerCannotClaim", producer, "POST", qp("default", "jobs", "claim"), empty, 403, "forbidden"},
		{"WorkerOtherQueueClaim", worker, "POST", qp("default", "other", "claim"), empty, 403, "forbidden"},
		{"ProducerCannotMintTokens", producer, "POST", "/v1/tokens", map[string]any{"namespace": "*", "queue": "*", "permissions": []string{"admin"}}, 403, "forbidden"},
		{"WorkerCannotListTokens", worker, "GET", "/v1/tokens", nil, 403, "forbidden"},
		{"ProducerCannotSetAdmission", producer, "PUT", qp("default", "jobs", "admission"), map[string]any{"max_depth": 1}, 403, "forbidden"},
		{"ProducerCannotTrimAll", producer, "POST", "/v1/trim", map[string]any{"finished_before": time.Now()}, 403, "forbidden"},
		{"ProducerCannotMaintain", producer, "POST", "/v1/maintain", nil, 403, "forbidden"},
		{"ReaderOtherNamespaceCount", reader, "GET", qp("ml", "train-1", "count?state=queued"), nil, 403, "forbidden"},
		{"MetricsNeedAToken", "", "GET", "/metrics", nil, 401, "unauthorized"},
		{"WrongScheme", "Basic " + adminSecret, "GET", "/v1/tokens", nil, 401, "unauthorized"},
		// Validation comes before authorization: a bad name is 400 whatever the token.
		{"BadNamespaceBeforeAuthz", trainer, "POST", qp("bad%20ns%21", "train-a", "invocations"), empty, 400, "invalid"},
		{"BadQueueBeforeAuthz", producer, "POST", qp("ml", "-x", "claim"), empty, 400, "invalid"},
		{"LeaseTTLUnbounded", worker, "POST", qp("default", "jobs", "claim"), map[string]any{"lease_ttl": 1e10}, 400, "invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r *response
			if strings.HasPrefix(tc.token, "Basic ") {
				r = b.doRawAuth(t, tc.method, tc.path, tc.token)
			} else {
				r = b.doJSON(t, tc.method, tc.path, tc.body, tc.token)
			}
			r.requireError(t, tc.status, tc.code)
		})
	}
	require.Zero(t, b.total(t), "nothing was written by refused requests")
	toks, err := b.back.TokenList(context.Background())
	require.NoError(t, err)
	require.Len(t, toks, 6, "no token was minted by a refused request")

	// What each token may do, it can.
	r = b.doJSON(t, "POST", qp("default", "jobs", "invocations"), empty, producer)
	require.Equal(t, 200, r.status, "%s", r.body)
	var sr api.SubmitResult
	require.NoError(t, json.Unmarshal(r.body, &sr))
	require.Equal(t, 200, b.doJSON(t, "POST", qp("ml", "train-7", "invocations"), empty, trainer).status)
	require.Equal(t, 200, b.do(t, "GET", "/v1/invocations/"+sr.ID, "", nil, reader).status, "read on default/*")
	require.Equal(t, 200, b.do(t, "GET", "/v1/invocations/"+sr.ID, "", nil, producer).status, "a producer reads what it submitted")
	// Another tenant's id answers exactly like an unknown id: no existence oracle.
	other := b.do(t, "GET", "/v1/invocations/"+sr.ID, "", nil, trainer)
	unknown := b.do(t, "GET", "/v1/invocations/01ARZ3NDEKTSV4RRFFQ69G5FAV", "", nil, trainer)
	other.requireError(t, 404, "not_found")
	require.Equal(t, unknown.status, other.status)
	require.Equal(t, string(unknown.body), string(other.body))
	for _, verb := range []string{"/wait?timeout=0", "/frames", "/stream"} {
		b.do(t, "GET", "/v1/invocations/"+sr.ID+verb, "", nil, trainer).requireError(t, 404, "not_found")
	}
	b.do(t, "POST", "/v1/invocations/"+sr.ID+"/cancel", "", nil, trainer).requireError(t, 404, "not_found")
	b.do(t, "POST", "/v1/invocations/"+sr.ID+"/cancel", "", nil, worker).requireError(t, 403, "forbidden")
	r = b.doJSON(t, "POST", qp("default", "jobs", "claim"), empty, worker)
	require.Equal(t, 200, r.status, "%s", r.body)
	var cr api.ClaimResponse
	require.NoError(t, json.Unmarshal(r.body, &cr))
	require.Len(t, cr.Jobs, 1)
	// A token for another queue cannot settle the job, even with its fencing token.
	settle := map[string]any{"settles": []map[string]any{{"id": cr.Jobs[0].ID, "token": cr.Jobs[0].Token, "outcome": "succeeded"}}}
	r = b.doJSON(t, "POST", "/v1/settle", settle, trainer)
	require.Equal(t, 200, r.status, "%s", r.body)
	var sres api.SettlesResponse
	require.NoError(t, api.JSON.Unmarshal(r.body, &sres))
	require.Equal(t, "not_found", sres.Results[0].Error.Code, "another tenant's job is not found, as an unknown id")
	b.doJSON(t, "POST", "/v1/invocations/"+cr.Jobs[0].ID+"/settle", map[string]any{"token": cr.Jobs[0].Token, "outcome": "succeeded"},
		trainer).requireError(t, 404, "not_found")
	inv, err := b.back.InvocationGet(context.Background(), cr.Jobs[0].ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateRunning, inv.State, "the refused settle changed nothing")
	require.Equal(t, 200, b.doJSON(t, "POST", "/v1/settle", settle, worker).status)

	// Queue listings only show what the token covers.
	r = b.do(t, "GET", "/v1/queues", "", nil, trainer)
	require.Equal(t, 200, r.status)
	var qr api.QueuesResponse
	require.NoError(t, json.Unmarshal(r.body, &qr))
	require.Len(t, qr.Queues, 1)
	require.Equal(t, "train-7", qr.Queues[0].Queue)

	// Secrets never reach the logs, nor token listings.
	logs := b.logs.String()
	for _, secret := range []string{adminSecret, producer, worker, reader, trainer, shortLived, revoked} {
		require.NotContains(t, logs, secret)
	}
	r = b.do(t, "GET", "/v1/tokens", "", nil, adminSecret)
	require.Equal(t, 200, r.status)
	require.NotContains(t, string(r.body), "hash")
}

func (b *testBundle) doRawAuth(t *testing.T, method, path, authorization string) *response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.ts.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", authorization)
	resp, err := b.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

// TestAuthOverHTTPPlane: the HTTP plane sends $LAKESHORE_TOKEN-style tokens and maps the
// auth errors to errors.Is-able values.
func TestAuthOverHTTPPlane(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	producer, _ := b.mint(t, "default", "jobs", 0, plane.PermissionSubmit)

	drv, err := httpplane.New(b.ts.URL, &httpplane.Config{Token: producer})
	require.NoError(t, err)
	defer drv.Close()
	res, err := drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "jobs", Invocations: []plane.SubmitParams{{}}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	_, err = drv.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "jobs", Kind: plane.KindFIFO})
	require.ErrorIs(t, err, httpplane.ErrForbidden)
	require.False(t, errors.Is(err, plane.ErrNotFound))

	anon, err := httpplane.New(b.ts.URL, &httpplane.Config{Token: "lks_wrong"})
	require.NoError(t, err)
	defer anon.Close()
	_, err = anon.InvocationGet(t.Context(), res[0].ID)
	require.ErrorIs(t, err, httpplane.ErrUnauthorized)

	// A token made through the HTTP plane (the CLI's way: the secret stays with the caller)
	// works at once.
	admin, err := httpplane.New(b.ts.URL, &httpplane.Config{Token: adminSecret})
	require.NoError(t, err)
	defer admin.Close()
	secret := server.NewSecret()
	require.NoError(t, admin.TokenCreate(t.Context(), &plane.TokenInfo{ID: "reader-1", Hash: server.HashToken(secret),
		Namespace: "default", Queue: "*", Permissions: []plane.Permission{plane.PermissionRead}}))
	rd, err := httpplane.New(b.ts.URL, &httpplane.Config{Token: secret})
	require.NoError(t, err)
	defer rd.Close()
	inv, err := rd.InvocationGet(t.Context(), res[0].ID)
	require.NoError(t, err)
	require.Equal(t, plane.StateQueued, inv.State)
	got, err := admin.TokenGet(t.Context(), server.HashToken(secret))
	require.NoError(t, err)
	require.Equal(t, "reader-1", got.ID)
	ok, err := admin.TokenRevoke(t.Context(), "reader-1")
	require.NoError(t, err)
	require.True(t, ok)
	_, err = rd.InvocationGet(t.Context(), res[0].ID)
	require.ErrorIs(t, err, httpplane.ErrUnauthorized, "revocation takes effect at once")
}

// TestMetricsScopedToToken (issue 11 item 8): /metrics shows a token only the series of
// namespaces and queues it covers; the admin token sees all.
func TestMetricsScopedToToken(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	a, _ := b.mint(t, "tenant-a", "*", 0, plane.PermissionSubmit, plane.PermissionRead)
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		r := b.doJSON(t, "POST", "/v1/namespaces/"+ns+"/queues/secret-"+ns+"/invocations", map[string]any{}, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	r := b.do(t, "GET", "/metrics", "", nil, a)
	require.Equal(t, 200, r.status)
	text := string(r.body)
	require.Contains(t, text, `lakeshore_queue_invocations{namespace="tenant-a",queue="secret-tenant-a",state="queued"} 1`)
	require.NotContains(t, text, "tenant-b", "another tenant's queue names and depths stay hidden")
	require.NotContains(t, text, "lakeshore_http_long_polls_open", "series without tenant labels are the operator's (TestMetricsServerWideSeriesAreTheOperators)")
	r = b.do(t, "GET", "/metrics", "", nil, adminSecret)
	require.Contains(t, string(r.body), `namespace="tenant-b"`)
}

// TestWorkersKeyedByNamespace (issue 11 item 7, HTTP side): a worker's route names its
// namespace; a consume token for namespace A can neither register nor remove a worker of
// namespace B, and listings show only what the token covers.
func TestWorkersKeyedByNamespace(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	a, _ := b.mint(t, "tenant-a", "*", 0, plane.PermissionConsume)
	reg := map[string]any{"host": "h", "pid": 1, "queues": []string{"q"}, "started_at": time.Now()}
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/tenant-b/workers/w1", reg, adminSecret).status)
	b.doJSON(t, "PUT", "/v1/namespaces/tenant-b/workers/w1", reg, a).requireError(t, 403, "forbidden")
	b.do(t, "DELETE", "/v1/namespaces/tenant-b/workers/w1", "", nil, a).requireError(t, 403, "forbidden")
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/tenant-a/workers/w1", reg, a).status)
	b.doJSON(t, "PUT", "/v1/namespaces/tenant-a/workers/w2", map[string]any{"queues": []string{"bad queue!"}}, a).requireError(t, 400, "invalid")
	b.doJSON(t, "PUT", "/v1/namespaces/tenant-a/workers/w2", map[string]any{"host": "evil\nline"}, a).requireError(t, 400, "invalid")
	r := b.do(t, "GET", "/v1/workers", "", nil, a)
	require.Equal(t, 200, r.status)
	var wr api.WorkersResponse
	require.NoError(t, api.JSON.Unmarshal(r.body, &wr))
	for _, w := range wr.Workers {
		require.Equal(t, "tenant-a", w.Namespace)
	}
}

// TestWorkersQueueScoped: a token scoped to some queues lists and removes only the
// workers whose every queue it covers, the check of registering: a consume token for
// team-a/q1 neither sees nor removes a worker serving secret-q (the removal answers as
// for an unknown worker and removes nothing), and still removes its own.
func TestWorkersQueueScoped(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	q1, _ := b.mint(t, "team-a", "q1", 0, plane.PermissionConsume)
	reg := func(queues ...string) map[string]any {
		return map[string]any{"host": "h", "pid": 1, "queues": queues, "started_at": time.Now()}
	}
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/team-a/workers/w9", reg("secret-q"), adminSecret).status)
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/team-a/workers/w8", reg("q1", "secret-q"), adminSecret).status)
	b.doJSON(t, "PUT", "/v1/namespaces/team-a/workers/w7", reg("secret-q"), q1).requireError(t, 403, "forbidden")
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/team-a/workers/w1", reg("q1"), q1).status)
	list := func(token string) []string {
		r := b.do(t, "GET", "/v1/workers?namespace=team-a", "", nil, token)
		require.Equal(t, 200, r.status)
		var wr api.WorkersResponse
		require.NoError(t, api.JSON.Unmarshal(r.body, &wr))
		var ids []string
		for _, w := range wr.Workers {
			ids = append(ids, w.ID)
		}
		sort.Strings(ids)
		return ids
	}
	require.Equal(t, []string{"w1"}, list(q1))
	require.Equal(t, 200, b.do(t, "DELETE", "/v1/namespaces/team-a/workers/w9", "", nil, q1).status)
	require.Equal(t, 200, b.do(t, "DELETE", "/v1/namespaces/team-a/workers/w8", "", nil, q1).status)
	require.Equal(t, []string{"w1", "w8", "w9"}, list(adminSecret), "nothing of the other queues was removed")
	require.Equal(t, 200, b.do(t, "DELETE", "/v1/namespaces/team-a/workers/w1", "", nil, q1).status)
	require.Equal(t, []string{"w8", "w9"}, list(adminSecret))
}

// TestLongPollShareByTenant: one token holding its share of the long-poll slots gets 503 on
// the next one, while another tenant's long-polls still get a slot.
func TestLongPollShareByTenant(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret, MaxLongPolls: 4, MaxLongPollsPerTenant: 2})
	a, _ := b.mint(t, "team-a", "*", 0, plane.PermissionConsume)
	other, _ := b.mint(t, "team-b", "*", 0, plane.PermissionConsume)
	claimA := "/v1/namespaces/team-a/queues/q/claim"
	held := make(chan *response, 2)
	for range 2 {
		go func() { held <- b.doJSON(t, "POST", claimA, map[string]any{"wait": 30}, a) }()
	}
	require.Eventually(t, func() bool {
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil, adminSecret).body), "lakeshore_http_long_polls_open 2")
	}, 10*time.Second, 5*time.Millisecond)
	r := b.doJSON(t, "POST", claimA, map[string]any{"wait": 1}, a)
	eb := r.requireError(t, 503, "too_many_long_polls")
	require.Contains(t, eb.Message, "share")
	start := time.Now()
	r = b.doJSON(t, "POST", "/v1/namespaces/team-b/queues/q/claim", map[string]any{"wait": 0.2}, other)
	require.Equal(t, 200, r.status, "another tenant still long-polls: %s", r.body)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "and it waited")
	b.srv.Stop()
	for range 2 {
		<-held
	}
}

// TestTokenCreateRefusesBadInput: an existing id is 400 naming id (never a 500); ids,
// globs, hashes and permissions are checked, each error naming its field.
func TestTokenCreateRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	_, tok := b.mint(t, "team-a", "*", 0, plane.PermissionRead)
	for _, c := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"ExistingID", map[string]any{"id": tok.ID, "namespace": "*", "queue": "*", "permissions": []string{"admin"}}, "id"},
		{"IDWithSpace", map[string]any{"id": "x y", "namespace": "team-a", "queue": "*", "permissions": []string{"read"}}, "id"},
		{"GlobWithSlash", map[string]any{"namespace": "a/b", "queue": "*", "permissions": []string{"read"}}, "namespace"},
		{"BadQueueGlob", map[string]any{"namespace": "a", "queue": "[", "permissions": []string{"read"}}, "queue"},
		{"ShortHash", map[string]any{"namespace": "team-a", "queue": "*", "permissions": []string{"read"}, "hash": "AAAA"}, "hash"},
		{"NoPermissions", map[string]any{"namespace": "team-a", "queue": "*", "permissions": []string{}}, "permissions"},
		// An id that DELETE /v1/tokens/{id} could not name (path cleaning changes it):
		// before, it was stored, and such a token could never be revoked over HTTP.
		{"IDDotDot", map[string]any{"id": "..", "namespace": "team-a", "queue": "*", "permissions": []string{"read"}}, "id"},
		{"IDDot", map[string]any{"id": ".", "namespace": "team-a", "queue": "*", "permissions": []string{"read"}}, "id"},
		{"IDDotDotSegment", map[string]any{"id": "x/../victim", "namespace": "team-a", "queue": "*", "permissions": []string{"read"}}, "id"},
		{"IDEmptySegment", map[string]any{"id": "a//b", "namespace": "team-a", "queue": "*", "permissions": []string{"read"}}, "id"},
		{"IDLeadingSlash", map[string]any{"id": "/a", "namespace": "team-a", "queue": "*", "permissions": []string{"read"}}, "id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := b.doJSON(t, "POST", "/v1/tokens", c.body, adminSecret)
			eb := r.requireError(t, 400, "invalid")
			require.True(t, strings.HasPrefix(eb.Message, "invalid "+c.field), "message %q names %s", eb.Message, c.field)
		})
	}
	// Every id the rule takes can be revoked over HTTP, a slash and dots included.
	for _, id := range []string{"a/b", "a.b", "..a", "a..", "x/.y", "%2e%2e", "a?b", "a#b"} {
		r := b.doJSON(t, "POST", "/v1/tokens", map[string]any{"id": id, "namespace": "team-a", "queue": "*", "permissions": []string{"read"}}, adminSecret)
		require.Equal(t, 200, r.status, "create %q: %s", id, r.body)
		r = b.do(t, "DELETE", "/v1/tokens/"+url.PathEscape(id), "", nil, adminSecret)
		require.Equal(t, 200, r.status, "revoke %q: %s", id, r.body)
		require.Contains(t, string(r.body), `"changed":true`, "revoke %q", id)
	}
}

// TestTokenIDOfRevokedTokenStaysTaken: revoking a token keeps its row (token list shows it
// revoked), so its id cannot be given to the token that replaces it; the refusal says so and
// how to rotate (a new id), where before it advised revoking the old token — which the
// operator rotating a token had just done, and which frees nothing.
func TestTokenIDOfRevokedTokenStaysTaken(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	body := map[string]any{"id": "team-a-train", "namespace": "team-a", "queue": "train", "permissions": []string{"read"}}
	require.Equal(t, 200, b.doJSON(t, "POST", "/v1/tokens", body, adminSecret).status)
	require.Equal(t, 200, b.do(t, "DELETE", "/v1/tokens/team-a-train", "", nil, adminSecret).status)
	eb := b.doJSON(t, "POST", "/v1/tokens", body, adminSecret).requireError(t, 400, "invalid")
	require.True(t, strings.HasPrefix(eb.Message, "invalid id"), eb.Message)
	require.NotContains(t, eb.Message, "revoke the old token")
	require.Contains(t, eb.Message, "revoked")
	require.Contains(t, eb.Message, "another id")
}

// TestClaimQueuesScoped: a claim over several queues (the body's queues) is refused with
// 403 when the token may not consume one of them — on claim and on settle-and-claim —
// and takes nothing; a token covering all of them claims from the queue that has work.
func TestClaimQueuesScoped(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	q1, _ := b.mint(t, "team-a", "q1", 0, plane.PermissionConsume)
	both, _ := b.mint(t, "team-a", "q*", 0, plane.PermissionConsume)
	submit := b.doJSON(t, "POST", "/v1/namespaces/team-a/queues/secret-q/invocations", map[string]any{"payload": "x"}, adminSecret)
	require.Equal(t, 200, submit.status, "%s", submit.body)
	b.doJSON(t, "POST", "/v1/namespaces/team-a/queues/q1/claim", map[string]any{"queues": []string{"secret-q"}}, q1).
		requireError(t, 403, "forbidden")
	b.doJSON(t, "POST", "/v1/namespaces/team-a/queues/q1/settle-and-claim",
		map[string]any{"settles": []any{}, "claim": map[string]any{"queues": []string{"q2", "secret-q"}}}, q1).
		requireError(t, 403, "forbidden")
	r := b.do(t, "GET", "/v1/namespaces/team-a/queues/secret-q/count?state=queued", "", nil, adminSecret)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.body), `"count":1`, "the refused claims took nothing")
	b.doJSON(t, "POST", "/v1/namespaces/team-a/queues/q1/invocations", map[string]any{"payload": "y"}, adminSecret)
	r = b.doJSON(t, "POST", "/v1/namespaces/team-a/queues/q2/claim", map[string]any{"queues": []string{"q1"}, "wait": 5}, both)
	require.Equal(t, 200, r.status, "%s", r.body)
	var cr api.ClaimResponse
	require.NoError(t, api.JSON.Unmarshal(r.body, &cr))
	require.Len(t, cr.Jobs, 1)
	require.Equal(t, "q1", cr.Jobs[0].Queue)
	r = b.doJSON(t, "POST", "/v1/namespaces/team-a/queues/q1/claim", map[string]any{"queues": make([]string, 1)}, both)
	eb := r.requireError(t, 400, "invalid")
	require.Contains(t, eb.Message, "queues")
}

// TestWorkerRegisterNoTakeOver: a registration replaces the worker of its id, so a token
// scoped to q1 may not register under the id of a worker serving a queue it does not cover
// (it would take that worker's entry over: its queues, host and pid). The stored worker is
// unchanged; the token still registers its own ids. Fails on the old code (200, replaced).
func TestWorkerRegisterNoTakeOver(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	q1, _ := b.mint(t, "team-a", "q1", 0, plane.PermissionConsume)
	reg := func(host string, queues ...string) map[string]any {
		return map[string]any{"host": host, "pid": 1, "queues": append([]string{}, queues...), "started_at": time.Now()}
	}
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/team-a/workers/w9", reg("gpu-host", "secret-q"), adminSecret).status)
	b.doJSON(t, "PUT", "/v1/namespaces/team-a/workers/w9", reg("evil", "q1"), q1).requireError(t, 403, "forbidden")
	b.doJSON(t, "PUT", "/v1/namespaces/team-a/workers/w9", reg("evil"), q1).requireError(t, 403, "forbidden")
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/team-a/workers/w1", reg("mine", "q1"), q1).status)
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/team-a/workers/w1", reg("mine-again", "q1"), q1).status, "its own worker, again")
	r := b.do(t, "GET", "/v1/workers?namespace=team-a", "", nil, adminSecret)
	require.Equal(t, 200, r.status)
	var wr api.WorkersResponse
	require.NoError(t, api.JSON.Unmarshal(r.body, &wr))
	got := map[string]api.Worker{}
	for _, w := range wr.Workers {
		got[w.ID] = w
	}
	require.Equal(t, "gpu-host", got["w9"].Host, "w9 was not taken over")
	require.Equal(t, []string{"secret-q"}, got["w9"].Queues)
	require.Equal(t, "mine-again", got["w1"].Host)
}

// TestMissingTokenNamesTheVariable: a CLI or SDK user without $LAKESHORE_TOKEN read
// "unauthorized: send Authorization: Bearer <token>", which names a header they never
// write; the answer now names the variable their client sends.
func TestMissingTokenNamesTheVariable(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	r := b.doJSON(t, "POST", "/v1/namespaces/default/queues/jobs/invocations", map[string]any{}, "")
	r.requireError(t, 401, "unauthorized")
	require.Contains(t, string(r.body), "$LAKESHORE_TOKEN")
	require.NotContains(t, string(r.body), adminSecret)
}

// TestAuthBadTokenNamesTheVariable: an unknown, expired or revoked token answered only
// "unauthorized: unknown token" (or "… was revoked"), leaving a CLI or SDK user to guess
// where the token came from; the answer now names $LAKESHORE_TOKEN, as the missing-token
// one does, and never echoes the token sent.
func TestAuthBadTokenNamesTheVariable(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	b := setup(t, &server.Config{AdminToken: adminSecret, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	shortLived, _ := b.mint(t, "default", "jobs", 60, plane.PermissionSubmit)
	revoked, revokedTok := b.mint(t, "default", "jobs", 0, plane.PermissionSubmit)
	require.Equal(t, 200, b.do(t, "DELETE", "/v1/tokens/"+revokedTok.ID, "", nil, adminSecret).status)
	now.Add(int64(2 * time.Minute))
	for name, tc := range map[string]struct{ token, reason string }{
		// A token trimmed by maintenance (revoked or expired more than the retention ago)
		// is unknown too: the answer says so, not only "set it to a token this server minted".
		"Unknown": {"lks_not-a-real-token", "unknown token: this server holds no such token: never minted here, or revoked or expired more than the retention period ago"},
		"Expired": {shortLived, "expired at 2026-01-01T00:01:00Z"},
		"Revoked": {revoked, "was revoked"},
	} {
		r := b.doJSON(t, "POST", "/v1/namespaces/default/queues/jobs/invocations", map[string]any{}, tc.token)
		r.requireError(t, 401, "unauthorized")
		require.Contains(t, string(r.body), tc.reason, name)
		require.Contains(t, string(r.body), "$LAKESHORE_TOKEN", name)
		require.NotContains(t, string(r.body), tc.token, "%s: the token is never echoed", name)
	}
}

// TestTrimNamespaceWithItsAdminToken: a trim of every queue of one namespace (namespace
// given, no queue: what `lakeshore trim --all` sends) is allowed to an admin token for every
// queue of that namespace, as docs/cli.md says of trim --all, and trims that namespace
// only; before, it needed an admin token for every namespace (403 'a trim of every
// queue'), so a tenant's admin could not run trim --all. A token of another namespace, or
// for some queues of it only, is still refused, and so is a trim without a namespace.
func TestTrimNamespaceWithItsAdminToken(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	teamAdmin, _ := b.mint(t, "team-a", "*", 0, plane.PermissionAdmin)
	queueAdmin, _ := b.mint(t, "team-a", "jobs", 0, plane.PermissionAdmin)
	cancelled := func(ns string) string {
		r := b.doJSON(t, "POST", "/v1/namespaces/"+ns+"/queues/jobs/invocations", map[string]any{"payload": 1}, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
		var sr api.SubmitResult
		require.NoError(t, json.Unmarshal(r.body, &sr))
		r = b.do(t, "POST", "/v1/invocations/"+sr.ID+"/cancel", "", nil, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
		return sr.ID
	}
	idA, idB := cancelled("team-a"), cancelled("team-b")
	later := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name  string
		token string
		body  map[string]any
	}{
		{"OtherNamespace", teamAdmin, map[string]any{"namespace": "team-b", "finished_before": later}},
		{"NoNamespace", teamAdmin, map[string]any{"finished_before": later}},
		{"QueueScopedAdmin", queueAdmin, map[string]any{"namespace": "team-a", "finished_before": later}},
	} {
		b.doJSON(t, "POST", "/v1/trim", c.body, c.token).requireError(t, 403, "forbidden")
	}
	r := b.doJSON(t, "POST", "/v1/trim", map[string]any{"namespace": "team-a", "finished_before": later}, teamAdmin)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.JSONEq(t, `{"deleted": 1}`, string(r.body))
	b.do(t, "GET", "/v1/invocations/"+idA, "", nil, adminSecret).requireError(t, 404, "not_found")
	require.Equal(t, 200, b.do(t, "GET", "/v1/invocations/"+idB, "", nil, adminSecret).status, "the other namespace's job is kept")
}
