package ui_test

// Browser tests of issue 29's dashboard items (17–21): per-queue run and wait times and
// throughput, pause and resume, delayed and retrying invocations apart from ready ones,
// workers' held jobs and stale workers, payload search, preformatted tracebacks, and the
// overview's loading state. Each saves a screenshot per page in $LAKESHORE_ARTIFACTS.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestDashboardQueueFigures: the queue page shows run and wait time percentiles and
// throughput by outcome over the last hour (from /ui/api/queue), the queued invocations
// split into ready, delayed and retrying with due times, and pauses and resumes the queue
// with its button (checked on the plane: a paused queue accepts a submit, a claim gets
// nothing, and a claim gets it after the resume).
func TestDashboardQueueFigures(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	for i := 0; i < 4; i++ {
		e.submit("default", "jobs", map[string]any{"payload": map[string]any{"i": i}})
	}
	for i := 0; i < 3; i++ {
		id, tok := e.claim("default", "jobs", "w-1")
		e.settle(id, tok, "succeeded", map[string]any{"result": "ok"})
	}
	// One failed attempt that will retry in an hour, one delayed, one ready.
	id, tok := e.claim("default", "jobs", "w-1")
	e.settle(id, tok, "retry", map[string]any{"retry_delay": 3600, "error": map[string]any{"type": "ValueError", "message": "flaky\nsecond line"}})
	retrying := id
	delayed := e.submit("default", "jobs", map[string]any{"payload": "later", "delay": 1800, "key": "later-1"})
	e.submit("default", "jobs", map[string]any{"payload": "now"})

	figures := e.call("GET", "/ui/api/queue?namespace=default&queue=jobs", adminToken, nil, 200)
	require.Equal(t, float64(3), figures["throughput"].(map[string]any)["succeeded"])
	require.Equal(t, float64(3), figures["run_time"].(map[string]any)["count"])
	require.Equal(t, float64(1), figures["ready"])
	require.Equal(t, float64(1), figures["delayed"])
	require.Equal(t, float64(1), figures["retrying"])
	e.call("GET", "/ui/api/queue?namespace=default&queue=", adminToken, nil, 400)
	reader := e.token("default", "*", []string{"read"}, 0)
	e.call("GET", "/ui/api/queue?namespace=other&queue=jobs", reader, nil, 403)

	b.open(adminToken, "#/q/default/jobs")
	require.Contains(t, b.text("#fig-run"), "run time")
	require.NotContains(t, b.text(`#fig-run [data-p="p50"]`), "—")
	require.NotContains(t, b.text(`#fig-wait [data-p="p95"]`), "—")
	require.Contains(t, b.text(`[data-throughput="succeeded"]`), "succeeded 3/h")
	require.Contains(t, b.text(`[data-split="ready"]`), "ready 1")
	require.Contains(t, b.text(`[data-split="delayed"]`), "delayed 1")
	require.Contains(t, b.text(`[data-split="retrying"]`), "retrying 1")
	require.Contains(t, b.text(`#waiting-table tr[data-id="`+retrying+`"]`), "retrying")
	require.Contains(t, b.text(`#waiting-table tr[data-id="`+retrying+`"]`), "ValueError: flaky …")
	require.Contains(t, b.text(`#waiting-table tr[data-id="`+delayed+`"]`), "delayed")
	require.NotEmpty(t, eval[string](b, `document.querySelector('#waiting-table tr[data-id="`+delayed+`"] [data-due]').dataset.due`))
	// The delayed one (due in 30 min) is listed before the retrying one (due in an hour).
	require.Equal(t, delayed, eval[string](b, `document.querySelector('#waiting-table tbody tr').dataset.id`))
	b.screenshot("issue29-queue-figures")

	// Pause with the button: submits are accepted, claims take nothing.
	require.Contains(t, b.text("#running-note"), "not paused")
	b.click("#queue-pause")
	require.Contains(t, b.text("#confirm .modal"), "Pause this queue?")
	b.click("#confirm-ok")
	require.Contains(t, b.text("#paused-badge"), "paused")
	stats := e.call("GET", "/v1/namespaces/default/queues/jobs/stats", adminToken, nil, 200)
	require.Equal(t, true, stats["paused"])
	held := e.submit("default", "jobs", map[string]any{"payload": "while paused"})
	res := e.call("POST", "/v1/namespaces/default/queues/jobs/claim", adminToken, map[string]any{"max": 5, "worker": "w-2"}, 200)
	require.Empty(t, res["jobs"], "a paused queue gives a claim nothing")
	b.screenshot("issue29-queue-paused")
	b.open(adminToken, "#/")
	require.Contains(t, b.text(`[data-paused="default/jobs"]`), "paused")
	b.screenshot("issue29-overview-paused")

	// Resume with the button: the queued invocations are claimable again.
	b.open(adminToken, "#/q/default/jobs")
	b.click("#queue-resume")
	b.click("#confirm-ok")
	b.text("#running-note")
	res = e.call("POST", "/v1/namespaces/default/queues/jobs/claim", adminToken, map[string]any{"max": 5, "worker": "w-2"}, 200)
	require.Len(t, res["jobs"], 2, "the ready one and the one submitted while paused")
	require.Contains(t, []string{res["jobs"].([]any)[0].(map[string]any)["id"].(string), res["jobs"].([]any)[1].(map[string]any)["id"].(string)}, held)

	// A read token sees the state, no button; pausing over the API is refused.
	b.open(reader, "#/q/default/jobs")
	b.text("#running-note")
	require.Zero(t, b.count("#queue-pause"))
	e.call("PUT", "/v1/namespaces/default/queues/jobs/pause", reader, nil, 403)
	b.noProblems(false)
}

// TestDashboardSearchAndTraceback: payload search by a JSON path (bounded, with "Scan
// older"), key prefix search, a failed invocation's traceback kept in lines, and the
// overview's loading state while its first answers are held back.
func TestDashboardSearchAndTraceback(t *testing.T) {
	var hold atomic.Bool
	release := make(chan struct{})
	e := newEnvWith(t, nil)
	// A proxy in front of the server holds /v1/queues while hold is set, so the overview's
	// first render can be seen.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() && r.URL.Path == "/v1/queues" {
			<-release
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, e.base+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		io.Copy(w, res.Body) //nolint:errcheck // test proxy
	}))
	t.Cleanup(proxy.Close)

	for i := 0; i < 250; i++ {
		user := "bob"
		if i%50 == 0 {
			user = "alice"
		}
		e.submit("default", "jobs", map[string]any{"payload": map[string]any{"input": map[string]any{"user": user, "n": i}, "tags": []string{"t" + fmt.Sprint(i%3)}},
			"key": fmt.Sprintf("batch-%03d", i)})
	}
	// The API answer first: the newest 200 are read, 4 of the 5 alice jobs among them.
	res := e.call("GET", "/ui/api/search?namespace=default&queue=jobs&path=input.user&value=alice", adminToken, nil, 200)
	require.Len(t, res["invocations"], 4)
	require.Equal(t, float64(200), res["scanned"])
	require.NotEmpty(t, res["next"])
	res = e.call("GET", "/ui/api/search?namespace=default&queue=jobs&path=input.user&value=alice&after="+res["next"].(string), adminToken, nil, 200)
	require.Len(t, res["invocations"], 1)
	res = e.call("GET", "/ui/api/search?namespace=default&queue=jobs&path=$.input.n&value=150", adminToken, nil, 200)
	require.Len(t, res["invocations"], 1)
	res = e.call("GET", "/ui/api/search?namespace=default&queue=jobs&path=tags.0&value=t1&key_prefix=batch-00", adminToken, nil, 200)
	require.Len(t, res["invocations"], 3) // batch-001, -004, -007
	bad := e.call("GET", "/ui/api/search?namespace=default&queue=jobs&path=a..b", adminToken, nil, 400)
	require.Contains(t, fmt.Sprint(bad), "path")

	b := newBrowser(t, e)
	b.open(adminToken, "#/q/default/jobs?key=batch-00")
	b.text("#inv-table")
	require.Equal(t, 10, b.count("#inv-table tbody tr"), "key prefix batch-00 lists batch-000 … batch-009")
	b.run(chromedp.SendKeys("#s-path", "input.user"), chromedp.SendKeys("#s-value", "alice"))
	b.click("#s-run")
	require.Contains(t, b.text("#s-summary"), "1 match in the 10 invocations read")
	b.open(adminToken, "#/q/default/jobs")
	b.run(chromedp.SendKeys("#s-path", "input.user"), chromedp.SendKeys("#s-value", "alice"))
	b.click("#s-run")
	require.Contains(t, b.text("#s-summary"), "4 matches in the 200 invocations read")
	b.click("#s-more")
	require.Contains(t, b.text("#s-summary"), "5 matches")
	require.Equal(t, 5, b.count("#s-table tbody tr"))
	b.screenshot("issue29-search")

	// A traceback keeps its lines.
	id, tok := e.claim("default", "jobs", "w-1")
	trace := "Traceback (most recent call last):\n  File \"job.py\", line 3, in run\n    model()\nNameError: name 'model' is not defined"
	e.settle(id, tok, "failed", map[string]any{"error": map[string]any{"type": "NameError", "message": trace}})
	b.open(adminToken, "#/i/"+id)
	b.text("#inv-traceback")
	require.Equal(t, "PRE", eval[string](b, `document.getElementById('inv-traceback').tagName`))
	require.Equal(t, trace, eval[string](b, `document.getElementById('inv-traceback').textContent`))
	require.Greater(t, eval[float64](b, `document.getElementById('inv-traceback').getBoundingClientRect().height`), 50.0, "four lines, not one")
	b.screenshot("issue29-traceback")

	// The overview says it is loading while its first answers are on their way.
	hold.Store(true)
	pb := &browser{t: t, ctx: b.ctx, e: &env{t: t, base: proxy.URL, srv: e.srv}}
	pb.open(adminToken, "#/")
	require.Contains(t, pb.text("#overview-loading"), "Loading queues")
	pb.screenshot("issue29-overview-loading")
	hold.Store(false)
	close(release)
	pb.text("#queue-table")
	require.Zero(t, pb.count("#overview-loading"))
	b.noProblems(false)
}

// TestDashboardWorkerHealth: the workers page lists each worker's held jobs with their age,
// marks a worker whose last heartbeat is older than its lease as stale (a plane whose clock
// was two minutes behind when that worker registered), and one holding a job whose lease
// expired as dead.
func TestDashboardWorkerHealth(t *testing.T) {
	var skew atomic.Int64 // nanoseconds the plane's clock is behind
	drv, err := sqliteplane.Open(t.Context(), filepath.Join(t.TempDir(), "lakeshore.db"),
		&sqliteplane.Config{Now: func() time.Time { return time.Now().Add(-time.Duration(skew.Load())) },
			MaintenanceInterval: time.Hour}) // an expired lease stays on its job (no maintenance pass)
	require.NoError(t, err)
	srv := server.New(drv, &server.Config{AdminToken: adminToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Stop()
		ts.CloseClientConnections()
		ts.Close()
		_ = srv.Close(context.Background()) // the data queues the requests opened
		drv.Close()
	})
	e := &env{t: t, base: ts.URL, srv: srv}

	skew.Store(int64(2 * time.Minute))
	e.call("PUT", "/v1/namespaces/default/workers/w-gone", adminToken, map[string]any{"host": "box-9", "pid": 9, "queues": []string{"jobs"}, "started_at": time.Now().Add(-time.Hour)}, 200)
	// w-dead holds a job whose lease (1 s, taken two minutes ago) has expired.
	e.call("PUT", "/v1/namespaces/default/workers/w-dead", adminToken, map[string]any{"host": "box-8", "pid": 8, "queues": []string{"jobs"}, "started_at": time.Now().Add(-time.Hour)}, 200)
	e.submit("default", "jobs", map[string]any{"payload": "orphan"})
	res := e.call("POST", "/v1/namespaces/default/queues/jobs/claim", adminToken, map[string]any{"max": 1, "worker": "w-dead", "lease_ttl": 1}, 200)
	require.Len(t, res["jobs"], 1)
	skew.Store(0)
	e.call("PUT", "/v1/namespaces/default/workers/w-live", adminToken, map[string]any{"host": "box-1", "pid": 1, "queues": []string{"jobs"}, "started_at": time.Now()}, 200)
	var held []string
	for i := 0; i < 2; i++ {
		e.submit("default", "jobs", map[string]any{"payload": i})
		id, _ := e.claim("default", "jobs", "w-live")
		held = append(held, id)
	}

	b := newBrowser(t, e)
	b.open(adminToken, "#/workers")
	require.Equal(t, "alive", b.text(`tr[data-worker="w-live"] [data-worker-status]`))
	require.Equal(t, "stale", b.text(`tr[data-worker="w-gone"] [data-worker-status]`))
	require.Contains(t, b.text(`tr[data-worker="w-gone"]`), "longer than its 30s lease")
	for _, id := range held {
		require.Contains(t, b.text(`tr[data-worker="w-live"] [data-held="`+id+`"]`), id[len(id)-8:])
		require.Regexp(t, `^\d+s$`, b.text(`tr[data-worker="w-live"] [data-age="`+id+`"]`))
	}
	require.Equal(t, 1, b.count(`tr[data-worker="w-gone"].stale`))
	require.Equal(t, "dead", b.text(`tr[data-worker="w-dead"] [data-worker-status]`))
	require.Contains(t, b.text(`tr[data-worker="w-dead"]`), "the leases of the 1 job it holds have expired")
	b.screenshot("issue29-workers")
	b.noProblems(false)
}
