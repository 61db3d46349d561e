package ui_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestDashboardServerTime measures the server time of the requests behind the first render
// of the overview and of the queue page over a queue of LAKESHORE_UI_PERF invocations
// (e.g. 1000000; unset: skipped), in process (no network), the median of 21 renders, and,
// when chromium is installed, the time until the browser shows each page. Run:
//
//	LAKESHORE_UI_PERF=1000000 go test ./server/ui -run ServerTime -v -timeout 30m
func TestDashboardServerTime(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LAKESHORE_UI_PERF"))
	if n <= 0 {
		t.Skip("set LAKESHORE_UI_PERF=1000000 to measure the dashboard over a large queue")
	}
	ctx := context.Background()
	drv, err := sqliteplane.Open(ctx, filepath.Join(t.TempDir(), "lakeshore.db"), nil)
	require.NoError(t, err)
	defer drv.Close()

	start := time.Now()
	const batch = 1000
	payload := []byte{0x81, 0xa1, 'x', 0x01} // {"x": 1}
	for done := 0; done < n; done += batch {
		params := &plane.SubmitManyParams{Namespace: "default", Queue: "big"}
		for i := 0; i < min(batch, n-done); i++ {
			params.Invocations = append(params.Invocations, plane.SubmitParams{Payload: payload, Key: fmt.Sprintf("k-%08d", done+i)})
		}
		_, err := drv.InvocationSubmitMany(ctx, params)
		require.NoError(t, err)
	}
	// Some work in every state: claims, successes, failures.
	jobs, err := drv.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "big", Max: 200, Worker: "w-1"})
	require.NoError(t, err)
	var settles []plane.SettleParams
	for i, j := range jobs[:150] {
		out := plane.OutcomeSucceeded
		if i%3 == 0 {
			out = plane.OutcomeFailed
		}
		settles = append(settles, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: out, Result: payload,
			Error: &plane.ErrorInfo{Type: "E", Message: "m"}})
	}
	_, err = drv.InvocationSettleMany(ctx, settles)
	require.NoError(t, err)
	t.Logf("filled %d invocations in %s", n, time.Since(start).Round(time.Millisecond))

	srv := server.New(drv, &server.Config{AdminToken: adminToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer srv.Stop()
	q := "/v1/namespaces/default/queues/big"
	pages := []struct {
		name string
		urls []string
	}{
		{"overview", []string{"/ui/", "/ui/api/session", "/v1/queues", "/ui/api/history", "/v1/workers?seen_within=60",
			q + "/invocations?state=queued&order=oldest&limit=1"}},
		{"queue page", []string{"/ui/api/session?namespace=default&queue=big", q + "/stats", q + "/invocations?limit=50"}},
		{"queue page, failed only", []string{q + "/invocations?limit=50&state=failed"}},
		{"queue page, key prefix", []string{q + "/invocations?limit=50&key_prefix=k-0099"}},
		{"queue page, a later page (cursor)", []string{q + "/invocations?limit=50&after=" + jobs[len(jobs)-1].ID}},
		{"invocation page", []string{"/v1/invocations/" + jobs[0].ID, "/ui/api/session?namespace=default&queue=big",
			"/v1/invocations/" + jobs[0].ID + "/frames?since=-1"}},
	}
	for _, p := range pages {
		var times []time.Duration
		for range 21 {
			var total time.Duration
			for _, u := range p.urls {
				req := httptest.NewRequest("GET", u, nil)
				req.Header.Set("Authorization", "Bearer "+adminToken)
				rec := httptest.NewRecorder()
				t0 := time.Now()
				srv.ServeHTTP(rec, req)
				total += time.Since(t0)
				require.Equal(t, http.StatusOK, rec.Code, "%s: %s", u, rec.Body.String())
			}
			times = append(times, total)
		}
		slices.Sort(times)
		t.Logf("%-32s server time %8s (median of 21; max %s) over %d invocations: %v", p.name, times[10].Round(10*time.Microsecond),
			times[20].Round(10*time.Microsecond), n, p.urls)
		if p.name == "overview" || p.name == "queue page" {
			require.Less(t, times[10], 300*time.Millisecond, "target: < 300 ms server time")
		}
	}

	if _, ok := chromiumInstalled(); !ok {
		return
	}
	ts := httptest.NewServer(srv)
	defer srv.Close(context.Background()) // after ts.Close: the data queues the requests opened
	defer ts.Close()
	e := &env{t: t, base: ts.URL, srv: srv}
	b := newBrowser(t, e)
	for _, p := range []struct{ fragment, sel string }{
		{"#/", `#queue-table tr[data-queue="default/big"]`},
		{"#/q/default/big", "#inv-table"},
		{"#/i/" + jobs[0].ID, "#payload"},
	} {
		b.open(adminToken, "#/workers") // another page first, so the timed load starts clean
		b.text("h1")
		t0 := time.Now()
		b.run(chromedp.Navigate(ts.URL + "/ui/" + p.fragment))
		b.text(p.sel)
		t.Logf("browser: %-24s shown in %s (navigation to the element visible, headless Chromium)", p.fragment,
			cmp.Or(time.Since(t0).Round(time.Millisecond), time.Millisecond))
	}
	b.noProblems(false)
}

// TestDashboardHundredOpen measures what 100 open dashboards cost: each loads the assets and
// the overview's requests, then keeps an invocation page open (one live stream, the only
// thing a dashboard holds between requests). Server and clients share this process, so the
// figures are an upper bound of the server's share.
func TestDashboardHundredOpen(t *testing.T) {
	e := newEnv(t)
	id := e.submit("default", "jobs", map[string]any{"payload": map[string]any{"x": 1}})
	e.claim("default", "jobs", "w-1")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	defer client.CloseIdleConnections()
	do := func(path string, accept string) *http.Response {
		req, err := http.NewRequest("GET", e.base+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := client.Do(req)
		require.NoError(t, err)
		require.Equal(t, 200, res.StatusCode, path)
		return res
	}
	measure := func() (heap uint64, goroutines int) {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse, runtime.NumGoroutine()
	}
	heap0, g0 := measure()
	var streams []*http.Response
	for range 100 {
		for _, p := range []string{"/ui/", "/ui/app.js", "/ui/style.css", "/ui/api/session", "/v1/queues", "/ui/api/history", "/v1/workers?seen_within=60"} {
			res := do(p, "")
			io.Copy(io.Discard, res.Body) //nolint:errcheck // measuring
			res.Body.Close()
		}
		streams = append(streams, do("/v1/invocations/"+id+"/stream?since=-1&timeout=60", "text/event-stream"))
	}
	heap1, g1 := measure()
	for _, s := range streams {
		s.Body.Close()
	}
	t.Logf("100 open dashboards (each with one live stream): heap +%.1f MiB (%.0f KiB each), goroutines +%d, server and clients in one process",
		float64(int64(heap1)-int64(heap0))/(1<<20), float64(int64(heap1)-int64(heap0))/1024/100, g1-g0)
}
