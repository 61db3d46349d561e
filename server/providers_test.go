package server_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestProviderRoutesAuth: a queue's provider is set and removed with the server's admin
// token only (its command runs on the operator's machines; a tenant's admin token is
// refused) and read by any token of the queue; /v1/providers lists only covered queues; leases need admin on every
// queue of the namespace; a bad policy is invalid, naming the field.
func TestProviderRoutesAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	qp := func(ns, q string) string { return "/v1/namespaces/" + ns + "/queues/" + q + "/provider" }
	queueAdmin, _ := b.mint(t, "default", "jobs", 0, plane.PermissionAdmin)
	nsAdmin, _ := b.mint(t, "default", "*", 0, plane.PermissionAdmin)
	reader, _ := b.mint(t, "default", "jobs", 0, plane.PermissionRead)
	producer, _ := b.mint(t, "default", "jobs", 0, plane.PermissionSubmit)
	ref := map[string]any{"name": "local", "policy": map[string]any{"max_workers": 2, "idle_timeout": 30, "command": []string{"lakeshore", "worker", "jobs"}}}

	r := b.doJSON(t, "PUT", qp("default", "jobs"), ref, producer)
	require.Equal(t, 403, r.status, "%s", r.body)
	r = b.doJSON(t, "PUT", qp("default", "jobs"), map[string]any{"name": "local", "policy": map[string]any{"min_workers": 3, "max_workers": 2, "command": []string{"w"}}}, queueAdmin)
	require.Equal(t, 400, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "max workers")
	for _, tenant := range []string{queueAdmin, nsAdmin} {
		r = b.doJSON(t, "PUT", qp("default", "jobs"), ref, tenant)
		require.Equal(t, 403, r.status, "a tenant's admin token cannot choose the command a supervisor runs: %s", r.body)
		require.Contains(t, string(r.body), "server's admin token")
	}
	r = b.doJSON(t, "GET", qp("default", "jobs"), nil, reader)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.JSONEq(t, `{"provider":null}`, string(r.body), "a refused set changed nothing")
	r = b.doJSON(t, "PUT", qp("default", "jobs"), ref, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	r = b.doJSON(t, "PUT", qp("default", "other"), ref, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)

	r = b.doJSON(t, "GET", qp("default", "jobs"), nil, reader)
	require.Equal(t, 200, r.status, "%s", r.body)
	var got api.ProviderResponse
	require.NoError(t, json.Unmarshal(r.body, &got))
	require.Equal(t, "local", got.Provider.Name)
	require.Equal(t, 2, got.Provider.Policy.MaxWorkers)
	require.Equal(t, 30.0, got.Provider.Policy.IdleTimeout)

	r = b.doJSON(t, "GET", "/v1/providers", nil, reader)
	require.Equal(t, 200, r.status, "%s", r.body)
	var list api.QueueProvidersResponse
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Queues, 1, "a token sees only the queues it covers")
	require.Equal(t, "jobs", list.Queues[0].Queue)

	lease := map[string]any{"name": "provider/jobs", "holder": "h1", "ttl": 10}
	r = b.doJSON(t, "POST", "/v1/namespaces/default/leases/acquire", lease, queueAdmin)
	require.Equal(t, 403, r.status, "a queue's admin is not the namespace's: %s", r.body)
	r = b.doJSON(t, "POST", "/v1/namespaces/default/leases/acquire", lease, nsAdmin)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.JSONEq(t, `{"acquired":true}`, string(r.body))
	r = b.doJSON(t, "POST", "/v1/namespaces/default/leases/acquire", map[string]any{"name": "provider/jobs", "holder": "h2", "ttl": 10}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.JSONEq(t, `{"acquired":false}`, string(r.body))
	r = b.doJSON(t, "POST", "/v1/namespaces/default/leases/acquire", map[string]any{"name": "provider/jobs", "holder": "h2"}, adminSecret)
	require.Equal(t, 400, r.status, "a lease needs a ttl: %s", r.body)
	r = b.doJSON(t, "POST", "/v1/namespaces/default/leases/release", map[string]any{"name": "provider/jobs", "holder": "h1"}, nsAdmin)
	require.Equal(t, 200, r.status, "%s", r.body)

	r = b.doJSON(t, "DELETE", qp("default", "jobs"), nil, nsAdmin)
	require.Equal(t, 403, r.status, "%s", r.body)
	r = b.doJSON(t, "DELETE", qp("default", "jobs"), nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.JSONEq(t, `{"changed":true}`, string(r.body))
}

// TestProviderEnvHiddenFromQueueTokens: the launch policy's env (HF_TOKEN, cloud keys) is
// the operator's. A token scoped to the queue — read, submit, even its admin — reads the
// provider with every env value "xxxxx" (names kept) and a command URL's password
// redacted, on GET …/provider and GET /v1/providers; the server's admin token and a
// namespace admin (what a supervisor runs with) read them whole. Nothing of a value is in
// a refused request's error either.
func TestProviderEnvHiddenFromQueueTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	path := "/v1/namespaces/default/queues/jobs/provider"
	env := map[string]string{"HF_TOKEN": "hf_secretvalue1", "AZURE_STORAGE_CONNECTION_STRING": "AccountKey=secretvalue2", "EMPTY": ""}
	command := []string{"lakeshore", "worker", "--target", "http://u:secretvalue3@plane:7077", "jobs"}
	ref := map[string]any{"name": "local", "policy": map[string]any{"command": command, "env": env}}
	r := b.doJSON(t, "PUT", path, ref, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)

	queueAdmin, _ := b.mint(t, "default", "jobs", 0, plane.PermissionAdmin)
	reader, _ := b.mint(t, "default", "jobs", 0, plane.PermissionRead)
	producer, _ := b.mint(t, "default", "*", 0, plane.PermissionSubmit)
	nsAdmin, _ := b.mint(t, "default", "*", 0, plane.PermissionAdmin)
	otherAdmin, _ := b.mint(t, "other", "*", 0, plane.PermissionAdmin)
	for _, tenant := range []string{queueAdmin, reader, producer} {
		r = b.doJSON(t, "GET", path, nil, tenant)
		require.Equal(t, 200, r.status, "%s", r.body)
		require.NotContains(t, string(r.body), "secretvalue", "a queue token reads no env value nor a command's password")
		var got api.ProviderResponse
		require.NoError(t, json.Unmarshal(r.body, &got))
		require.Equal(t, map[string]string{"HF_TOKEN": "xxxxx", "AZURE_STORAGE_CONNECTION_STRING": "xxxxx", "EMPTY": ""}, got.Provider.Policy.Env)
		require.Equal(t, []string{"lakeshore", "worker", "--target", "http://u:xxxxx@plane:7077", "jobs"}, got.Provider.Policy.Command)

		r = b.doJSON(t, "GET", "/v1/providers", nil, tenant)
		require.Equal(t, 200, r.status, "%s", r.body)
		require.NotContains(t, string(r.body), "secretvalue")
		require.Contains(t, string(r.body), "HF_TOKEN")
	}
	r = b.doJSON(t, "GET", path, nil, otherAdmin)
	require.Equal(t, 403, r.status, "%s", r.body)
	require.NotContains(t, string(r.body), "secretvalue")
	for _, operator := range []string{adminSecret, nsAdmin} {
		r = b.doJSON(t, "GET", path, nil, operator)
		require.Equal(t, 200, r.status, "%s", r.body)
		var got api.ProviderResponse
		require.NoError(t, json.Unmarshal(r.body, &got))
		require.Equal(t, env, got.Provider.Policy.Env, "the operator and a supervisor's namespace token read the env whole")
		require.Equal(t, command, got.Provider.Policy.Command)
		r = b.doJSON(t, "GET", "/v1/providers?namespace=default", nil, operator)
		require.Equal(t, 200, r.status, "%s", r.body)
		require.Contains(t, string(r.body), "hf_secretvalue1")
	}
	// a refused change (a tenant, a bad env name) echoes no value
	bad := map[string]any{"name": "local", "policy": map[string]any{"command": command, "env": map[string]string{"BAD=NAME": "secretvalue4"}}}
	for _, tok := range []string{queueAdmin, adminSecret} {
		r = b.doJSON(t, "PUT", path, bad, tok)
		require.Contains(t, []int{400, 403}, r.status, "%s", r.body)
		require.NotContains(t, string(r.body), "secretvalue")
	}
}

// TestProviderRedactedView: ?redacted=true on GET …/provider and GET /v1/providers answers
// the operator's token as it answers a tenant (every env value "xxxxx", a command URL's
// password, an env assignment's value and a secret flag's value hidden: until 2026-12-06
// `env WANDB_API_KEY=… lakeshore worker --token …` was shown whole), which is what the dashboard's Providers page reads; false is the
// token's own view, and any other value is 400 invalid, naming the parameter.
func TestProviderRedactedView(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	path := "/v1/namespaces/default/queues/jobs/provider"
	command := []string{"env", "WANDB_API_KEY=secretvalue2", "lakeshore", "worker", "--target", "http://u:secretvalue3@plane:7077",
		"--token", "secretvalue4", "jobs"}
	ref := map[string]any{"name": "local", "policy": map[string]any{"command": command, "env": map[string]string{"HF_TOKEN": "hf_secretvalue1"}}}
	r := b.doJSON(t, "PUT", path, ref, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	for _, url := range []string{path + "?redacted=true", "/v1/providers?redacted=true"} {
		r = b.doJSON(t, "GET", url, nil, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
		require.NotContains(t, string(r.body), "secretvalue", url)
		require.Contains(t, string(r.body), `"HF_TOKEN":"xxxxx"`, url)
		require.Contains(t, string(r.body), "http://u:xxxxx@plane:7077", url)
		require.Contains(t, string(r.body), `"WANDB_API_KEY=xxxxx"`, url)
		require.Contains(t, string(r.body), `"--token","xxxxx","jobs"`, url)
	}
	r = b.doJSON(t, "GET", path+"?redacted=false", nil, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "hf_secretvalue1")
	for _, url := range []string{path + "?redacted=yes", "/v1/providers?redacted=1"} {
		r = b.doJSON(t, "GET", url, nil, adminSecret)
		require.Equal(t, 400, r.status, "%s", r.body)
		require.Contains(t, string(r.body), "redacted")
		require.Contains(t, string(r.body), `"invalid"`)
	}
}
