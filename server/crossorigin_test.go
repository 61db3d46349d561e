package server_test

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/server"
)

// send is doHeaders answering the status and the body as text.
func send(b *testBundle, t *testing.T, method, path string, body []byte, headers map[string]string) (int, string) {
	t.Helper()
	r := b.doHeaders(t, method, path, body, headers)
	return r.status, string(r.body)
}

// TestCrossOriginBrowserRequests: a web page of another origin could make the user's
// browser change things on the server with the requests it sends without a CORS preflight
// (a POST without a body, or a text/plain one), which a server without an admin token
// carried out (server/ui's TestDashboardCrossOriginPage does it in Chromium). A
// state-changing request a browser marks cross-origin is now refused with 403 forbidden,
// with or without authentication, and changes nothing; reads, same-origin requests and
// clients that are no browser are served as before.
func TestCrossOriginBrowserRequests(t *testing.T) {
	t.Parallel()
	submit := []byte(`{"payload": 1}`)
	for _, admin := range []string{"", "admin-secret"} {
		b := setup(t, &server.Config{AdminToken: admin})
		auth := map[string]string{"Content-Type": api.ContentTypeJSON}
		if admin != "" {
			auth["Authorization"] = "Bearer " + admin
		}
		with := func(extra map[string]string) map[string]string {
			h := maps.Clone(auth)
			maps.Copy(h, extra)
			return h
		}
		q := "/v1/namespaces/default/queues/jobs/invocations"
		for _, hdr := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
			{"Origin": "http://evil.example"},
		} {
			status, body := send(b, t, "POST", q, submit, with(hdr))
			require.Equal(t, http.StatusForbidden, status, "%v: %s", hdr, body)
			require.Contains(t, body, `"code":"forbidden"`)
			require.Contains(t, body, "a web page of another origin may not change anything here")
			status, body = send(b, t, "GET", q, nil, with(hdr))
			require.Equal(t, http.StatusOK, status, "a read: %s", body)
		}
		require.Zero(t, b.total(t), "nothing was submitted")
		for _, hdr := range []map[string]string{
			nil,                               // no browser
			{"Sec-Fetch-Site": "same-origin"}, // the dashboard
			{"Sec-Fetch-Site": "none"},        // typed in the address bar
			{"Origin": b.ts.URL},              // an older browser, same origin
		} {
			status, body := send(b, t, "POST", q, submit, with(hdr))
			require.Equal(t, http.StatusOK, status, "%v: %s", hdr, body)
		}
		require.EqualValues(t, 4, b.total(t))
	}
}

// TestNoAuthLoopbackHostNames: a server without an admin token, reached over loopback,
// answered a request for any host name, so a web page whose DNS name was made to point at
// 127.0.0.1 (DNS rebinding: same-origin with itself, so the browser lets it read the
// answers) could read every queue and change anything. Over loopback it now answers only
// requests addressed to an IP address, localhost or a name under .localhost; another name
// gets 403 forbidden saying why. With an admin token any name is served (the page has no
// token to send).
func TestNoAuthLoopbackHostNames(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, port, _ := strings.Cut(strings.TrimPrefix(b.ts.URL, "http://"), ":")
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port} {
		for _, route := range [][2]string{{"GET", "/v1/queues"}, {"POST", "/v1/maintain"}, {"GET", "/ui/"}} {
			status, body := send(b, t, route[0], route[1], nil, map[string]string{"Host": host})
			require.Equal(t, http.StatusForbidden, status, "%s %s for %s: %s", route[0], route[1], host, body)
			require.Contains(t, body, `"code":"forbidden"`)
			require.Contains(t, body, "answers only requests addressed to localhost or an IP address")
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost.:" + port, "dash.localhost:" + port,
		"[::1]:" + port, "localhost", "10.1.2.3:" + port} {
		status, body := send(b, t, "GET", "/v1/queues", nil, map[string]string{"Host": host})
		require.Equal(t, http.StatusOK, status, "%s: %s", host, body)
	}

	authed := setup(t, &server.Config{AdminToken: "admin-secret"})
	status, body := send(authed, t, "GET", "/v1/queues", nil, map[string]string{"Host": "evil.example:" + port, "Authorization": "Bearer admin-secret"})
	require.Equal(t, http.StatusOK, status, "with a token any name is served: %s", body)
}
