package server_test

import (
	"maps"
	"net/http"
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
