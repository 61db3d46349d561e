package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
	"github.com/lakeshore-dev/lakeshore/server/ui"
)

func get(t *testing.T, url, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(b)
}

// TestAssets: the files are served with the security headers, and nothing else is.
func TestAssets(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ path, ctype string }{
		{"/ui/", "text/html"}, {"/ui/app.js", "javascript"}, {"/ui/style.css", "text/css"}, {"/ui/favicon.svg", "image/svg+xml"},
		{"/favicon.ico", "image/svg+xml"},
	} {
		res, body := get(t, e.base+c.path, "")
		require.Equal(t, 200, res.StatusCode, c.path)
		require.Contains(t, res.Header.Get("Content-Type"), c.ctype, c.path)
		require.Equal(t, ui.ContentSecurityPolicy, res.Header.Get("Content-Security-Policy"), c.path)
		require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
		require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
		require.NotEmpty(t, body)
	}
	require.NotContains(t, ui.ContentSecurityPolicy, "unsafe")
	for _, p := range []string{"/ui/nope.js", "/ui/assets/app.js", "/ui/.hidden", "/ui/%2e%2e/go.mod"} {
		res, _ := get(t, e.base+p, "")
		require.Equal(t, 404, res.StatusCode, p)
	}
	res, _ := get(t, e.base+"/ui", "")
	require.Equal(t, http.StatusMovedPermanently, res.StatusCode)
	require.Equal(t, "/ui/", res.Header.Get("Location"))
}

// TestAssetsSelfContained: the pages load nothing from outside the server and never parse
// text as HTML.
func TestAssetsSelfContained(t *testing.T) {
	files := map[string]string{}
	require.NoError(t, fs.WalkDir(os.DirFS("assets"), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile("assets/" + path)
		files[path] = string(b)
		return err
	}))
	require.Contains(t, files, "app.js")
	external := regexp.MustCompile(`(?i:(src|href)\s*=\s*["']?(https?:)?//)|url\(|@import`)
	for name, text := range files {
		require.False(t, external.MatchString(text), "%s loads something from outside: %s", name, external.FindString(text))
	}
	for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "EventSource"} {
		require.False(t, strings.Contains(files["app.js"], banned), "app.js uses %s", banned)
	}
	require.False(t, strings.Contains(files["index.html"], "<script>"), "no inline script")
	require.False(t, strings.Contains(files["app.js"], "style:"), "no inline style")
}

// TestLaunchDefaults: the launch policy defaults app.js fills in where the API leaves a
// member out (LAUNCH_DEFAULTS, the Providers page) are the plane's
// (plane.LaunchPolicy.WithDefaults), named as the API names them.
func TestLaunchDefaults(t *testing.T) {
	b, err := os.ReadFile("assets/app.js")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^const LAUNCH_DEFAULTS = (\{.*\});$`).FindSubmatch(b)
	require.NotNil(t, m, "app.js declares LAUNCH_DEFAULTS on one line")
	var got api.LaunchPolicy
	dec := json.NewDecoder(bytes.NewReader(m[1]))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&got), "LAUNCH_DEFAULTS names the API's members")
	want := api.NewProvider(&plane.ProviderRef{Policy: plane.LaunchPolicy{}.WithDefaults()}).Policy
	want.Command = nil
	require.Equal(t, want, got)
}

// TestDisableUI: with DisableUI nothing is served under /ui/.
func TestDisableUI(t *testing.T) {
	drv, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	defer drv.Close()
	srv := server.New(drv, &server.Config{DisableUI: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer srv.Stop()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/api/session", "/ui/api/history"} {
		res, body := get(t, ts.URL+p, "")
		require.Equal(t, 404, res.StatusCode, p)
		require.Contains(t, body, "route_not_found")
	}
}

// TestSession: who the token is and what it may do on a queue.
func TestSession(t *testing.T) {
	e := newEnv(t)
	ro := e.token("default", "train-*", []string{"read"}, 0)
	decode := func(body string) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &m), body)
		return m
	}
	res, body := get(t, e.base+"/ui/api/session", "")
	require.Equal(t, 200, res.StatusCode)
	require.Equal(t, map[string]any{"auth": true, "signed_in": false, "admin": false, "permissions": []any{}}, decode(body))
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))

	res, body = get(t, e.base+"/ui/api/session?namespace=default&queue=jobs", adminToken)
	require.Equal(t, 200, res.StatusCode)
	m := decode(body)
	require.Equal(t, true, m["admin"])
	require.Equal(t, []any{"read", "submit", "consume", "admin"}, m["queue_permissions"])

	res, body = get(t, e.base+"/ui/api/session?namespace=default&queue=train-1", ro)
	require.Equal(t, 200, res.StatusCode)
	m = decode(body)
	require.Equal(t, false, m["admin"])
	require.Equal(t, "train-*", m["queue"])
	require.Equal(t, []any{"read"}, m["queue_permissions"])
	_, body = get(t, e.base+"/ui/api/session?namespace=other&queue=train-1", ro)
	require.Equal(t, []any{}, decode(body)["queue_permissions"])
	res, body = get(t, e.base+"/ui/api/session?namespace=default&queue=a%20b", ro)
	require.Equal(t, 400, res.StatusCode)
	require.Contains(t, body, "invalid")

	res, body = get(t, e.base+"/ui/api/session", "lks_not-a-token")
	require.Equal(t, 401, res.StatusCode)
	require.Contains(t, body, "unauthorized")
	require.NotContains(t, body, "lks_not-a-token")
}

// TestHistory: the rate history counts submits and outcomes per queue and shows a token
// only the queues it covers.
func TestHistory(t *testing.T) {
	e := newEnv(t)
	ro := e.token("default", "*", []string{"read"}, 0)
	res, _ := get(t, e.base+"/ui/api/history", ro) // starts the sampler
	require.Equal(t, 200, res.StatusCode)
	for i := 0; i < 4; i++ {
		e.submit("default", "jobs", map[string]any{"payload": i})
	}
	e.submit("other", "hidden", map[string]any{"payload": 1})
	id, tok := e.claim("default", "jobs", "w")
	e.settle(id, tok, "failed", map[string]any{"error": map[string]any{"type": "E", "message": "m"}})
	total := func(token string) map[string]float64 {
		_, body := get(t, e.base+"/ui/api/history", token)
		var h struct {
			Interval float64     `json:"interval"`
			Queues   []ui.Series `json:"queues"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &h))
		require.Equal(t, 0.2, h.Interval)
		out := map[string]float64{}
		for _, q := range h.Queues {
			for _, p := range q.Points {
				// rate × the interval's length = its count (a loaded machine samples late:
				// the interval is then longer than 0.2 s and its rate lower)
				require.Greater(t, p.Seconds, 0.0)
				out[q.Namespace+"/"+q.Queue+" submitted"] += p.Submitted * p.Seconds
				out[q.Namespace+"/"+q.Queue+" failed"] += p.Failed * p.Seconds
			}
		}
		return out
	}
	require.Eventually(t, func() bool {
		m := total(adminToken)
		return m["default/jobs submitted"] > 3 && m["default/jobs failed"] > 0.5 && m["other/hidden submitted"] > 0.5
	}, 10*time.Second, 100*time.Millisecond)
	m := total(ro)
	require.Greater(t, m["default/jobs submitted"], 3.0)
	require.NotContains(t, m, "other/hidden submitted")
}

// TestHistoryStop: Stop ends the sampler; Start after Stop does nothing.
func TestHistoryStop(t *testing.T) {
	drv, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	defer drv.Close()
	calls := make(chan struct{}, 100)
	h := ui.NewHistory(func(ctx context.Context) ([]plane.QueueStats, error) {
		calls <- struct{}{}
		return drv.QueueStatsList(ctx, "")
	}, 10*time.Millisecond)
	require.Equal(t, 10*time.Millisecond, h.Interval())
	h.Start()
	h.Start()
	<-calls
	<-calls
	h.Stop()
	h.Stop()
	n := len(calls)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, n, len(calls), "no sample after Stop")
	h.Start()
	time.Sleep(30 * time.Millisecond)
	require.Equal(t, n, len(calls), "no sample after Start after Stop")
	require.Empty(t, h.Series(nil), "no queue, no series")
}

// TestStartUIHistory: the history samples from StartUIHistory on, before any /ui/ request.
func TestStartUIHistory(t *testing.T) {
	e := newEnv(t)
	e.submit("default", "jobs", map[string]any{"payload": 1})
	e.srv.StartUIHistory()
	firstRequest := time.Now()
	var h struct {
		Queues []ui.Series `json:"queues"`
	}
	require.Eventually(t, func() bool { // a point needs two samples, 200 ms apart
		_, body := get(t, e.base+"/ui/api/history", adminToken)
		require.NoError(t, json.Unmarshal([]byte(body), &h))
		return len(h.Queues) == 1 && len(h.Queues[0].Points) > 0
	}, 10*time.Second, 50*time.Millisecond)
	p := h.Queues[0].Points[0]
	sampled := p.Time.Add(-time.Duration(p.Seconds * float64(time.Second)))
	require.True(t, sampled.Before(firstRequest), "the first sample (%v) was taken before the first /ui/ request (%v)", sampled, firstRequest)
}
