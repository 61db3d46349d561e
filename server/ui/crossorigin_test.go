package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
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
