package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/server"
)

// TestDashboardCrossOriginPage: a server without an admin token (`lakeshore serve` on
// loopback) authenticates nobody, so what keeps a web page the user opens elsewhere from
// acting on it is the browser's same-origin rule, and that rule lets a page send "simple"
// cross-origin requests: a POST without a body, or with a text/plain one, needs no CORS
// preflight. A page of another origin cancelled a queued job, paused a schedule and
// submitted a job (the compatibility route's msgpack body sent as text/plain) through the
// user's Chromium. The server now refuses every state-changing request a browser marks as
// cross-origin (http.CrossOriginProtection), so none of them changes anything.
func TestDashboardCrossOriginPage(t *testing.T) {
	e := newEnvWith(t, func(cfg *server.Config) { cfg.AdminToken = "" })
	b := newBrowser(t, e)
	id := e.submit("default", "jobs", map[string]any{"payload": "keep me"})
	e.call("PUT", "/v1/namespaces/default/schedules/nightly", "", map[string]any{"queue": "jobs", "every": 3600.0}, 200)

	// The other origin: another loopback port serving a page that fires the requests.
	attack := fmt.Sprintf(`<!doctype html><script>
const t = %q;
const submit = new Uint8Array([0x81, 0xa5, 0x71, 0x75, 0x65, 0x75, 0x65, 0xa4, 0x6a, 0x6f, 0x62, 0x73]); // {"queue": "jobs"}
Promise.allSettled([
  fetch(t + '/v1/invocations/%s/cancel', {method: 'POST', mode: 'no-cors'}),
  fetch(t + '/v1/namespaces/default/schedules/nightly/pause', {method: 'POST', mode: 'no-cors'}),
  fetch(t + '/v1/namespaces/default/producer/submit', {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: submit}),
]).then(() => { window.__sent = true; });
</script>`, e.base, id)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, attack)
	}))
	t.Cleanup(evil.Close)

	b.run(chromedp.Navigate(evil.URL + "/"))
	require.Eventually(t, func() bool { return eval[bool](b, `window.__sent === true`) }, 15*time.Second, 100*time.Millisecond)

	require.Equal(t, "queued", e.state(id), "a page of another origin cancelled a job")
	listed := e.call("GET", "/v1/namespaces/default/queues/jobs/invocations", "", nil, 200)["invocations"].([]any)
	require.Len(t, listed, 1, "a page of another origin submitted a job")
	sc := e.call("GET", "/v1/schedules", "", nil, 200)["schedules"].([]any)[0].(map[string]any)
	require.NotEqual(t, true, sc["paused"], "a page of another origin paused a schedule: %v", sc)

	// The dashboard itself, on the server's origin, still acts: its cancel goes through.
	b.open("", "#/i/"+id)
	b.click("#inv-cancel")
	b.click("#confirm-ok")
	require.Eventually(t, func() bool { return e.state(id) == "cancelled" }, 10*time.Second, 100*time.Millisecond)
}

// TestDashboardEscapesEverywhere puts markup in every string a tenant controls that the
// dashboard shows beyond those of TestDashboardEscapes — a concurrency key (with a per-key
// limit and weight), a requirement's label value (the shapes card), a worker's id
// (printable ASCII: markup without spaces) and host, a retrying job's last error (the
// waiting list), a topic's value, a data queue's field name and values — and checks on
// each page that it is shown as text: no script ran, no element came from it. (It passed
// on the code it was written against: a sweep, not a fix.)
func TestDashboardEscapesEverywhere(t *testing.T) {
	e := newEnvWith(t, func(cfg *server.Config) { cfg.DataDir = t.TempDir() })
	b := newBrowser(t, e)
	evil := `<img src=x onerror="window.__pwned=1">`
	tight := `<svg/onload=window.__pwned=2>` // no spaces: a worker id
	q := "/v1/namespaces/default/queues/jobs"
	e.call("PUT", q+"/admission", adminToken, map[string]any{"concurrency_limits": map[string]any{evil: 1},
		"key_weights": map[string]any{evil: 2}}, 200)
	// The job that fails goes first: a claim takes the oldest.
	id := e.call("POST", q+"/invocations", adminToken, map[string]any{"payload": 3, "max_attempts": 3}, 200)["id"].(string)
	e.call("POST", q+"/invocations", adminToken, map[string]any{"payload": 1, "concurrency_key": evil}, 200)
	e.call("POST", q+"/invocations", adminToken, map[string]any{"payload": 2, "requirement": map[string]any{"labels": map[string]string{"zone": evil}}}, 200)
	claimed, tok := e.claim("default", "jobs", tight)
	require.Equal(t, id, claimed)
	e.settle(id, tok, "retry", map[string]any{"retry_delay": 3600.0, "error": map[string]any{"type": "EvilError", "message": evil}})
	e.call("PUT", "/v1/namespaces/default/workers/"+url.PathEscape(tight), adminToken, map[string]any{"host": evil, "pid": 1, "queues": []string{"jobs"},
		"started_at": time.Now(), "offers": map[string]any{"labels": map[string]string{"zone": evil}}}, 200)
	e.call("POST", q+"/topics/progress/frames", adminToken, map[string]any{"value": evil}, 200)
	e.call("POST", "/v1/namespaces/default/data/samples/records", adminToken, map[string]any{"records": []map[string]any{{evil: evil, "prompt": evil}}}, 200)

	check := func(page string) {
		t.Helper()
		require.False(t, eval[bool](b, `window.__pwned !== undefined`), "%s: a value ran as script", page)
		require.Zero(t, b.count(`img[src="x"], #main svg[onload]`), "%s: a value became an element", page)
	}
	b.open(adminToken, "#/q/default/jobs")
	require.Contains(t, b.text("#keys-table"), evil)
	require.Contains(t, b.text("#shapes-table"), evil)
	require.Contains(t, b.text("#waiting-table"), evil)
	check("queue")
	b.open(adminToken, "#/workers")
	require.Contains(t, b.text("#worker-table"), tight)
	require.Contains(t, b.text("#worker-table"), evil)
	check("workers")
	b.open(adminToken, "#/topics?ns=default&queue=jobs&topic=progress")
	require.Contains(t, b.text(`#topic-frames tr[data-seq="0"]`), `"<img src=x onerror=\"window.__pwned=1\">"`, "as JSON")
	check("topics")
	b.open(adminToken, "#/d/default/samples")
	require.Contains(t, b.text("#field-table"), evil)
	require.Contains(t, b.text("#record-table"), `"<img src=x onerror=\"window.__pwned=1\">"`, "as JSON")
	check("data queue")
	b.open(adminToken, "#/")
	b.text("#queue-table")
	check("overview")
	b.noProblems(false)
}
