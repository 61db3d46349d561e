package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/server"
)

// TestRootLeadsToTheDashboard: a new user opening the URL `lakeshore serve` prints
// (http://127.0.0.1:7077) in a browser got a JSON 404 (route_not_found). The root now
// redirects to the dashboard; with --no-ui it stays a 404, and no other path moves.
func TestRootLeadsToTheDashboard(t *testing.T) {
	t.Parallel()
	noFollow := func(b *testBundle) *http.Client {
		c := *b.ts.Client()
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return &c
	}
	get := func(b *testBundle, path string) *http.Response {
		resp, err := noFollow(b).Get(b.ts.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}

	b := setup(t, nil)
	resp := get(b, "/")
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "/ui/", resp.Header.Get("Location"))
	require.Equal(t, http.StatusNotFound, get(b, "/nope").StatusCode, "only the root moves")
	require.Equal(t, http.StatusOK, get(b, "/ui/").StatusCode)

	off := setup(t, &server.Config{DisableUI: true})
	require.Equal(t, http.StatusNotFound, get(off, "/").StatusCode, "no dashboard: nothing to lead to")
}

// TestUnknownUIAPIRouteIsJSON: a GET of a path under /ui/api/ that is no route of the
// dashboard fell through to its static files and answered a plain-text "404 page not
// found"; it answers the typed JSON error of every other unknown API path
// (route_not_found), and the dashboard's routes and pages are unmoved.
func TestUnknownUIAPIRouteIsJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, path := range []string{"/ui/api/nope", "/ui/api/", "/ui/api/session/extra", "/ui/api/queue/x"} {
		b.do(t, "GET", path, "", nil, "").requireError(t, http.StatusNotFound, "route_not_found")
	}
	r := b.do(t, "POST", "/ui/api/session", "", nil, "")
	r.requireError(t, http.StatusMethodNotAllowed, "method_not_allowed")
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/ui/api/session", "", nil, "").status)
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/ui/", "", nil, "").status)
}
