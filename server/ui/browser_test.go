package ui_test

// Browser tests of the dashboard: a real server (package server over a SQLite plane) on
// loopback, real jobs submitted, claimed and settled through the HTTP API, and Debian's
// Chromium driven headless with chromedp. Without chromium they skip with the install
// command; with CI=true they fail instead. Screenshots go to $LAKESHORE_ARTIFACTS, else a
// temporary directory named in the log.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

const adminToken = "admin-secret-for-ui-tests"

// env is a server with a plane and a browser.
type env struct {
	t    *testing.T
	base string
	srv  *server.Server
}

func newEnv(t *testing.T) *env { return newEnvWith(t, nil) }

// newEnvWith is newEnv with a last change to the server's configuration.
func newEnvWith(t *testing.T, configure func(*server.Config)) *env {
	t.Helper()
	// The plane's clock (and so the server's, which defaults to it) is the wall clock at the
	// start advanced by the monotonic clock: a step of the host's wall clock mid-test moves
	// no lease, rate bucket or age (a CI machine's time sync once stepped it ~43 s forward
	// between a claim and the page that showed it: the lease had expired, the key's bucket
	// had refilled 43 s).
	start := time.Now()
	steady := func() time.Time { return start.Add(time.Since(start)) }
	drv, err := sqliteplane.Open(t.Context(), filepath.Join(t.TempDir(), "lakeshore.db"), &sqliteplane.Config{Now: steady})
	require.NoError(t, err)
	cfg := &server.Config{AdminToken: adminToken, UIHistoryInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if configure != nil {
		configure(cfg)
	}
	srv := server.New(drv, cfg)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Stop()
		ts.CloseClientConnections()
		ts.Close()
		_ = srv.Close(context.Background()) // the data queues the requests opened
		drv.Close()
	})
	return &env{t: t, base: ts.URL, srv: srv}
}

// call sends a JSON request with token and decodes the answer; it fails the test on a
// status other than want.
func (e *env) call(method, path, token string, body any, want int) map[string]any {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(e.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	require.NoError(e.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	require.Equal(e.t, want, res.StatusCode, "%s %s: %s", method, path, data)
	out := map[string]any{}
	if len(data) > 0 {
		require.NoError(e.t, json.Unmarshal(data, &out), string(data))
	}
	return out
}

func (e *env) submit(ns, queue string, body map[string]any) string {
	e.t.Helper()
	return e.call("POST", "/v1/namespaces/"+ns+"/queues/"+queue+"/invocations", adminToken, body, 200)["id"].(string)
}

// claim claims one job of queue as worker and returns its id and lease token.
func (e *env) claim(ns, queue, worker string) (id, token string) {
	e.t.Helper()
	res := e.call("POST", "/v1/namespaces/"+ns+"/queues/"+queue+"/claim", adminToken, map[string]any{"max": 1, "worker": worker}, 200)
	jobs := res["jobs"].([]any)
	require.Len(e.t, jobs, 1)
	j := jobs[0].(map[string]any)
	return j["id"].(string), j["token"].(string)
}

func (e *env) settle(id, token, outcome string, extra map[string]any) {
	e.t.Helper()
	body := map[string]any{"token": token, "outcome": outcome}
	for k, v := range extra {
		body[k] = v
	}
	e.call("POST", "/v1/invocations/"+id+"/settle", adminToken, body, 200)
}

func (e *env) state(id string) string {
	e.t.Helper()
	return e.call("GET", "/v1/invocations/"+id, adminToken, nil, 200)["state"].(string)
}

// token makes an access token and returns its secret.
func (e *env) token(ns, queue string, perms []string, ttl float64) string {
	e.t.Helper()
	body := map[string]any{"namespace": ns, "queue": queue, "permissions": perms}
	if ttl > 0 {
		body["ttl"] = ttl
	}
	return e.call("POST", "/v1/tokens", adminToken, body, 200)["secret"].(string)
}

// browser is a headless Chromium tab that records console errors and exceptions.
type browser struct {
	t   *testing.T
	ctx context.Context
	e   *env

	mu       sync.Mutex
	problems []string // console errors, exceptions, error log entries
	network  []string // failed loads (4xx answers the page expected, e.g. a bad id)
}

// chromiumInstalled returns the path of Debian's chromium when it is installed.
func chromiumInstalled() (string, bool) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// chromiumPath finds Debian's chromium, or skips (fails with CI=true).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p, ok := chromiumInstalled(); ok {
		return p
	}
	msg := "chromium is not installed: apt-get install -y chromium (Debian's package; the tests never download a browser)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func newBrowser(t *testing.T, e *env) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1360, 900),
		chromedp.Flag("no-proxy-server", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, e: e}
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			switch {
			case m.Type == chromedp.ConsoleError && m.Source == "network":
				b.network = append(b.network, m.Text+" "+m.URL)
			case m.Type == chromedp.ConsoleError || m.IsException():
				b.problems = append(b.problems, m.String()+" "+m.URL)
			}
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-done
	})
	return b
}

// run runs actions with a deadline.
func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, expr)
	return v
}

// open loads the dashboard at fragment with token in the tab's session storage.
func (b *browser) open(token, fragment string) {
	b.t.Helper()
	// The token goes into the origin's session storage from another document of the
	// server (the icon), so the dashboard then loads afresh, as after a sign-in.
	b.run(chromedp.Navigate(b.e.base + "/ui/favicon.svg"))
	eval[any](b, fmt.Sprintf("sessionStorage.setItem('lakeshore.token', %q)", token))
	b.run(chromedp.Navigate(b.e.base + "/ui/" + fragment))
}

// text waits for sel to be visible and returns its text, read in one evaluation in the
// page: the dashboard re-renders live, so a node that one call found (chromedp's
// TextContent after WaitVisible) may be gone by the next ("No node with given id found").
// A node re-rendered away between the wait and the read is waited for again.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	read := fmt.Sprintf("(() => { const e = document.querySelector(%q); return e === null ? null : e.textContent })()", sel)
	for {
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
			b.mu.Lock()
			problems := append(b.problems, b.network...)
			b.mu.Unlock()
			b.t.Fatalf("%s never became visible: %v\npage: %s\nconsole: %q", sel, err, eval[string](b, "document.body.innerText"), problems)
		}
		s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](read))
		require.NoError(b.t, err, sel)
		if s != nil {
			return *s
		}
	}
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf("document.querySelectorAll(%q).length", sel))
}

// click waits for sel to be visible and clicks it. A node the live re-render replaced
// between the wait and the click is looked up and clicked again.
//
// The click is the element's own (HTMLElement.click, in one evaluation with the lookup), not
// a mouse event at the coordinates chromedp measured: the pages lay out live (a table that
// arrives above a form moves it down), and a click at coordinates measured before the move
// lands elsewhere (a search whose button was missed this way never ran, under the race
// detector in CI).
func (b *browser) click(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	press := fmt.Sprintf("(() => { const e = document.querySelector(%q); if (e === null) return false; e.click(); return true })()", sel)
	for {
		err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel)))
		if err == nil {
			var clicked *bool
			if clicked, err = chromedp.Run(ctx, chromedp.Evaluate[*bool](press)); err == nil && clicked != nil && *clicked {
				return
			}
		}
		if ctx.Err() != nil || (err != nil && !strings.Contains(err.Error(), "No node with given id found")) {
			require.NoError(b.t, err, sel)
			require.NoError(b.t, ctx.Err(), "%s: re-rendered away at each try", sel)
		}
	}
}

// screenshot saves a full-page PNG named name into the artifacts directory.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	b.run(chromedp.Sleep(150 * time.Millisecond))
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	path := filepath.Join(artifacts(b.t), name+".png")
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
}

// noProblems fails on console errors and exceptions; failed loads too unless allowed.
func (b *browser) noProblems(allowNetwork bool) {
	b.t.Helper()
	time.Sleep(100 * time.Millisecond) // let the last messages arrive
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(b.t, b.problems, "console errors or exceptions")
	if !allowNetwork {
		require.Empty(b.t, b.network, "failed loads")
	}
}

var (
	artifactsOnce sync.Once
	artifactsDir  string
)

func artifacts(t *testing.T) string {
	artifactsOnce.Do(func() {
		artifactsDir = os.Getenv("LAKESHORE_ARTIFACTS")
		if artifactsDir == "" {
			artifactsDir, _ = os.MkdirTemp("", "lakeshore-ui-screenshots-")
		}
		os.MkdirAll(artifactsDir, 0o755)
	})
	t.Logf("screenshots in %s", artifactsDir)
	return artifactsDir
}

func pngBase64(t *testing.T) string {
	img := image.NewRGBA(image.Rect(0, 0, 24, 16))
	for x := 0; x < 24; x++ {
		for y := 0; y < 16; y++ {
			img.Set(x, y, color.RGBA{uint8(x * 10), uint8(y * 15), 180, 255})
		}
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestDashboardOverview signs in with the form, sees every queue of both namespaces with
// depth by state, the rate chart and the active worker, and a screenshot.
func TestDashboardOverview(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	for i := 0; i < 5; i++ {
		e.submit("default", "jobs", map[string]any{"payload": map[string]any{"i": i}})
	}
	e.submit("other", "hidden", map[string]any{"payload": 1})
	id, tok := e.claim("default", "jobs", "w-1")
	e.settle(id, tok, "succeeded", map[string]any{"result": "ok"})
	e.call("PUT", "/v1/namespaces/default/workers/w-1", adminToken, map[string]any{"host": "box-1", "pid": 42, "queues": []string{"jobs"}, "started_at": time.Now()}, 200)

	b.run(chromedp.Navigate(e.base + "/ui/"))
	b.run(chromedp.WaitVisible(chromedp.CSS("#login")), chromedp.SendKeys(chromedp.CSS("#token"), adminToken),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	require.Equal(t, "4", b.text(`#queue-table tr[data-queue="default/jobs"] td[data-count="queued"]`))
	require.Equal(t, "1", b.text(`#queue-table tr[data-queue="default/jobs"] td[data-count="succeeded"]`))
	require.Equal(t, "1", b.text(`#queue-table tr[data-queue="other/hidden"] td[data-count="queued"]`))
	require.Contains(t, b.text("#who"), "admin")
	// The rate history samples every 200 ms here: a submit shows on the chart.
	e.submit("default", "jobs", map[string]any{"payload": "late"})
	require.Eventually(t, func() bool {
		return b.count("#chart-total path") == 3
	}, 15*time.Second, 200*time.Millisecond)
	b.screenshot("overview")
	b.noProblems(false)
}

// TestDashboardQueueActions clicks bulk cancel, retry and kill and the admission edit, and
// checks the plane changed each time.
func TestDashboardQueueActions(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	var queued []string
	for i := 0; i < 3; i++ {
		queued = append(queued, e.submit("default", "jobs", map[string]any{"payload": map[string]any{"n": i}, "key": fmt.Sprintf("order-%d", i)}))
	}
	// Claims take the oldest first: claim and fail one, claim another and keep it running.
	failedID, tok := e.claim("default", "jobs", "w-1")
	e.settle(failedID, tok, "failed", map[string]any{"error": map[string]any{"type": "ValueError", "message": "bad input"}})
	runningID, _ := e.claim("default", "jobs", "w-1")
	queuedID := queued[2]

	b.open(adminToken, "#/q/default/jobs")
	b.text("#inv-table")
	b.screenshot("queue")

	// Cancel the queued one.
	b.click(`input.pick[data-id="` + queuedID + `"]`)
	b.click("#bulk-cancel")
	require.Contains(t, b.text("#confirm .modal"), "Cancel 1 invocation?")
	b.click("#confirm-ok")
	require.Eventually(t, func() bool { return e.state(queuedID) == "cancelled" }, 10*time.Second, 100*time.Millisecond)

	// Kill the running one.
	b.text(`tr[data-id="` + queuedID + `"] .badge[data-state="cancelled"]`)
	b.click(`input.pick[data-id="` + runningID + `"]`)
	b.click("#bulk-kill")
	b.click("#confirm-ok")
	require.Eventually(t, func() bool { return e.state(runningID) == "killed" }, 10*time.Second, 100*time.Millisecond)

	// Retry (resubmit) the failed one, after declining once.
	b.text(`tr[data-id="` + runningID + `"] .badge[data-state="killed"]`)
	b.click(`input.pick[data-id="` + failedID + `"]`)
	b.click("#bulk-retry")
	b.click("#confirm-cancel")
	require.Equal(t, 3, len(e.call("GET", "/v1/namespaces/default/queues/jobs/invocations", adminToken, nil, 200)["invocations"].([]any)))
	b.click("#bulk-retry")
	b.click("#confirm-ok")
	var copyID string
	require.Eventually(t, func() bool {
		invs := e.call("GET", "/v1/namespaces/default/queues/jobs/invocations?state=queued", adminToken, nil, 200)["invocations"].([]any)
		if len(invs) != 1 {
			return false
		}
		copyID = invs[0].(map[string]any)["id"].(string)
		return true
	}, 10*time.Second, 100*time.Millisecond)
	cp := e.call("GET", "/v1/invocations/"+copyID, adminToken, nil, 200)
	require.Equal(t, map[string]any{"n": float64(0)}, cp["payload"])
	require.Equal(t, map[string]any{"retried_from": failedID}, cp["metadata"])

	// Filters: the state filter and the key prefix.
	b.open(adminToken, "#/q/default/jobs?state=killed")
	b.text("#inv-table")
	require.Equal(t, 1, b.count("#inv-table tbody tr"))
	b.open(adminToken, "#/q/default/jobs?key=order-2")
	b.text("#inv-table")
	require.Equal(t, 1, b.count("#inv-table tbody tr"))
	require.Equal(t, "order-2", b.text("#inv-table tbody td.key"))

	// The time range: ids carry their creation time, so the bounds are cursors.
	b.open(adminToken, "#/q/default/jobs?to=2000-01-01T00:00:00")
	b.text("#empty")
	b.open(adminToken, "#/q/default/jobs?from=2999-01-01T00:00:00")
	b.text("#empty")
	b.open(adminToken, "#/q/default/jobs?from=2000-01-01T00:00:00&to=2999-01-01T00:00:00")
	b.text("#inv-table")
	require.Equal(t, 4, b.count("#inv-table tbody tr"))
	b.open(adminToken, "#/q/default/jobs?key=order-2")
	b.text("#inv-table")

	// Edit the admission block.
	b.click("#adm-edit")
	b.run(chromedp.SendKeys(chromedp.CSS("#adm-max_depth"), "500"), chromedp.SetValue(chromedp.CSS("#adm-on_full"), "block"))
	b.click("#adm-save")
	require.Eventually(t, func() bool {
		a, _ := e.call("GET", "/v1/namespaces/default/queues/jobs/admission", adminToken, nil, 200)["admission"].(map[string]any)
		return a != nil && a["max_depth"] == float64(500) && a["on_full"] == "block"
	}, 10*time.Second, 100*time.Millisecond)
	// The server holds the block as soon as the PUT commits; the page re-renders when the
	// PUT's answer reaches it, a moment later.
	require.Eventually(t, func() bool { return strings.Contains(b.text("#admission-view"), "max depth 500 (block)") },
		10*time.Second, 50*time.Millisecond, "the page shows the saved block")
	b.screenshot("queue-after-actions")
	b.noProblems(false)
}

// TestDashboardInvocation shows an invocation's envelope, an ndarray, an image, bytes and
// NaN, then watches journal frames arrive live and kills it from its page.
func TestDashboardInvocation(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	id := e.submit("default", "vision", map[string]any{"key": "img-1", "metadata": map[string]string{"run": "7"}, "payload": map[string]any{
		"weights": map[string]any{"$ndarray": map[string]any{"dtype": "float32", "shape": []int{2}, "data": "AACAPwAAAEA="}},
		"picture": map[string]any{"$image": map[string]any{"format": "png", "data": pngBase64(t)}},
		"raw":     map[string]any{"$bytes": "AAEC"},
		"loss":    map[string]any{"$float": "NaN"},
	}})
	_, tok := e.claim("default", "vision", "gpu-7")

	b.open(adminToken, "#/i/"+id)
	require.Contains(t, b.text("#payload"), "ndarray float32 shape [2]")
	require.Contains(t, b.text("#payload"), "[1, 2]")
	require.Contains(t, b.text("#payload"), "bytes (3)")
	require.Contains(t, b.text("#payload"), "NaN")
	require.Eventually(t, func() bool {
		return eval[int](b, `(document.querySelector('#payload img')||{}).naturalWidth||0`) == 24
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, "img-1", b.text("#inv-key"))
	b.text("#frames-empty")
	require.Zero(t, b.count("#inv-capable"), "no requirement: no worker count")

	// A queued job no live worker can run says so (docs/semantics.md, "Placement").
	gpu := e.submit("default", "vision", map[string]any{"payload": 1, "requirement": map[string]any{"gpus": 1, "gpu_type": "a100"}})
	b.open(adminToken, "#/i/"+gpu)
	require.Contains(t, b.text("#inv-capable"), "no capable worker")
	require.Contains(t, b.text("#inv-requires"), `"gpu_type":"a100"`)
	b.open(adminToken, "#/i/"+id)

	// Frames posted after the page opened appear live.
	e.call("POST", "/v1/invocations/"+id+"/frames", adminToken, map[string]any{"token": tok, "value": map[string]any{"step": 1, "loss": 0.5}}, 200)
	require.Contains(t, b.text(`#frames tr[data-seq="0"]`), `"step":1`)
	e.call("POST", "/v1/invocations/"+id+"/frames", adminToken, map[string]any{"token": tok, "value": map[string]any{"step": 2}}, 200)
	require.Contains(t, b.text(`#frames tr[data-seq="1"]`), `{"step":2}`)
	b.screenshot("invocation")

	b.click("#inv-kill")
	b.click("#confirm-ok")
	require.Eventually(t, func() bool { return e.state(id) == "killed" }, 10*time.Second, 100*time.Millisecond)
	b.text(`#inv-head .badge[data-state="killed"]`)
	b.noProblems(false)
}

// TestDashboardRun: an invocation of a compute mode shows what it asks of its worker and
// what it runs (docs/fabric.md): requirement, shape, mode, host key, code digest,
// function and git context, from its fields and metadata; a plain one shows no such card.
func TestDashboardRun(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	digest := strings.Repeat("ab", 32)
	id := e.submit("default", "fabric", map[string]any{"payload": 1,
		"requirement": map[string]any{"gpus": 1, "gpu_type": "a100", "cpus_milli": 500, "memory_bytes": 16 << 30, "labels": map[string]string{"zone": "east"}},
		"metadata": map[string]string{"lakeshore.mode": "a100", "lakeshore.host_key": "hk1_0123456789abcdef0123456789abcdef",
			"lakeshore.code": digest, "lakeshore.function": "mylib.ops:greet",
			"lakeshore.git": `{"commit":"0123456789abcdef0123456789abcdef01234567","branch":"main","dirty":true,"diff_sha256":""}`}})
	plain := e.submit("default", "fabric", map[string]any{"payload": 2})

	b.open(adminToken, "#/i/"+id)
	require.Equal(t, "cpus=0.5,memory=16.0 GiB,gpus=1,gpu_type=a100,label.zone=east", b.text("#inv-requirement"))
	require.True(t, strings.HasPrefix(b.text("#inv-shape"), "sh1_"))
	require.Equal(t, "a100", b.text("#inv-mode"))
	require.Equal(t, "hk1_0123456789abcdef0123456789abcdef", b.text("#inv-host-key"))
	require.Equal(t, digest[:12]+"…", b.text("#inv-code"))
	require.Equal(t, "mylib.ops:greet", b.text("#inv-function"))
	require.Equal(t, "main @ 0123456789ab (dirty)", b.text("#inv-git"))
	b.screenshot("invocation-run")

	b.open(adminToken, "#/i/"+plain)
	b.text("#inv-key")
	require.Equal(t, 0, b.count("#inv-run"))
	b.noProblems(false)
}

// TestDashboardShapes: a queue with jobs of several shapes lists each shape's queued and
// running jobs and its live capable workers; queued jobs no live worker can run are marked,
// and the marks go when a worker able to run both shapes registers.
func TestDashboardShapes(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	e.submit("default", "shaped", map[string]any{"payload": 1})
	e.submit("default", "shaped", map[string]any{"payload": 2, "requirement": map[string]any{"gpus": 1, "gpu_type": "a100"}})
	e.submit("default", "shaped", map[string]any{"payload": 3, "requirement": map[string]any{"gpus": 1, "gpu_type": "a100"}})
	shape := (&plane.Requirement{GPUs: 1, GPUType: "a100"}).Shape()

	b.open(adminToken, "#/q/default/shaped")
	row := `#shapes-table tr[data-shape="` + shape + `"]`
	require.Contains(t, b.text(row), "gpus=1,gpu_type=a100")
	require.Equal(t, "0 (no capable worker)", b.text(row+` td[data-capable]`))
	// No live worker at all: the default shape's job has none either.
	require.Equal(t, 2, b.count(`#shapes-table tr.no-capable`))
	require.Contains(t, b.text(`#shapes-table tr[data-shape="default"]`), "(none: any worker)")
	b.screenshot("queue-shapes")

	reg := map[string]any{"host": "h", "pid": 1, "queues": []string{"shaped"}, "started_at": time.Now(), "offers": map[string]any{"gpus": 1, "gpu_type": "a100"}}
	e.call("PUT", "/v1/namespaces/default/workers/gpu-1", adminToken, reg, 200)
	require.Eventually(t, func() bool { return b.text(row+` td[data-capable]`) == "1" }, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, 0, b.count(`#shapes-table tr.no-capable`))
	b.noProblems(false)
}

// TestDashboardWorkersAndTopics shows a live worker with its running job, and a topic's
// recent values with a new one arriving live.
func TestDashboardWorkersAndTopics(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	e.submit("default", "jobs", map[string]any{"payload": 1})
	jobID, _ := e.claim("default", "jobs", "w-7")
	e.call("PUT", "/v1/namespaces/default/workers/w-7", adminToken, map[string]any{"host": "gpu-box", "pid": 4242, "queues": []string{"jobs"}, "started_at": time.Now()}, 200)

	b.open(adminToken, "#/workers")
	row := b.text(`#worker-table tr[data-worker="w-7"]`)
	require.Contains(t, row, "gpu-box")
	require.Contains(t, row, "4242")
	require.Contains(t, row, jobID[len(jobID)-8:])
	b.screenshot("workers")

	topic := "/v1/namespaces/default/queues/jobs/topics/progress/frames"
	for i := 0; i < 60; i++ {
		e.call("POST", topic, adminToken, map[string]any{"value": map[string]any{"epoch": i}}, 200)
	}
	b.open(adminToken, "#/topics?ns=default&queue=jobs&topic=progress")
	require.Contains(t, b.text(`#topic-frames tr[data-seq="59"]`), `{"epoch":59}`)
	require.Equal(t, 0, b.count(`#topic-frames tr[data-seq="0"]`), "only recent values are read")
	e.call("POST", topic, adminToken, map[string]any{"value": map[string]any{"epoch": 60}}, 200)
	require.Contains(t, b.text(`#topic-frames tr[data-seq="60"]`), `{"epoch":60}`)
	b.screenshot("topics")
	b.noProblems(false)
}

// TestDashboardSchedules lists a schedule that has fired (its last fire links the job it
// submitted), a cron schedule with its next fire and a schedule whose ticks a full queue
// skipped (the count and why); pausing one from the page shows it paused.
func TestDashboardSchedules(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	e.call("PUT", "/v1/namespaces/default/queues/full/admission", adminToken, map[string]any{"max_depth": 1}, 200)
	e.call("POST", "/v1/namespaces/default/queues/full/invocations", adminToken, map[string]any{"payload": 0}, 200)
	e.call("PUT", "/v1/namespaces/default/schedules/tick", adminToken, map[string]any{"queue": "jobs", "every": 1.0, "payload": map[string]any{"n": 1}}, 200)
	e.call("PUT", "/v1/namespaces/default/schedules/blocked", adminToken, map[string]any{"queue": "full", "every": 1.0}, 200)
	e.call("PUT", "/v1/namespaces/default/schedules/nightly", adminToken, map[string]any{"queue": "eval", "cron": "0 3 * * *", "time_zone": "Europe/Paris"}, 200)
	e.call("PUT", "/v1/namespaces/default/schedules/tenant", adminToken, map[string]any{"queue": "eval", "cron": "0 4 * * *", "concurrency_key": "tenant-7"}, 200)
	var lastID string
	require.Eventually(t, func() bool {
		for _, sc := range e.call("GET", "/v1/schedules", adminToken, nil, 200)["schedules"].([]any) {
			if m := sc.(map[string]any); m["name"] == "tick" && m["last_id"] != nil {
				lastID = m["last_id"].(string)
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "the interval schedule fires")
	require.Eventually(t, func() bool {
		for _, sc := range e.call("GET", "/v1/schedules", adminToken, nil, 200)["schedules"].([]any) {
			if m := sc.(map[string]any); m["name"] == "blocked" && m["skipped"] != nil {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "the full queue's schedule skips a tick")

	b.open(adminToken, "#/schedules")
	row := b.text(`#schedule-table tr[data-schedule="default/tick"]`)
	require.Contains(t, row, "every 1s")
	require.Contains(t, row, "jobs")
	nightly := b.text(`#schedule-table tr[data-schedule="default/nightly"]`)
	require.Contains(t, nightly, "0 3 * * * (Europe/Paris)")
	require.Contains(t, nightly, "eval")
	require.Equal(t, "eval", b.text(`#schedule-table tr[data-schedule="default/nightly"] td.sched-queue`), "no key: the queue alone")
	require.Equal(t, "key tenant-7", b.text(`#schedule-table tr[data-schedule="default/tenant"] td.sched-queue div`), "the fires' concurrency key under the queue")
	require.Equal(t, "0", b.text(`#schedule-table tr[data-schedule="default/nightly"] td.sched-skipped`), "nothing skipped")
	require.Contains(t, b.text(`#schedule-table tr[data-schedule="default/blocked"] td.sched-skipped`), "queue default/full full", "the skips and why")
	// It fires every second: the link is to its latest fire, lastID or a later one.
	require.Equal(t, 1, b.count(`#schedule-table tr[data-schedule="default/tick"] a[href^="#/i/01"]`), "the last fire links its job")
	require.Equal(t, "tick", e.call("GET", "/v1/invocations/"+lastID, adminToken, nil, 200)["metadata"].(map[string]any)["schedule"])
	b.screenshot("schedules")

	b.click(`#schedule-table tr[data-schedule="default/nightly"] button.sched-pause`)
	require.Contains(t, b.text(`#schedule-table tr[data-schedule="default/nightly"] button.sched-resume`), "Resume")
	require.Contains(t, b.text(`#schedule-table tr[data-schedule="default/nightly"]`), "paused")
	b.screenshot("schedules-paused")
	b.noProblems(false)
}

// TestDashboardSchedulesPages: 105 schedules are more than a page (100): the page shows
// the first 100 and a pager whose Next shows the other 5, and Previous the first again.
func TestDashboardSchedulesPages(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	for i := range 105 {
		e.call("PUT", fmt.Sprintf("/v1/namespaces/default/schedules/s%03d", i), adminToken, map[string]any{"queue": "jobs", "every": 3600.0}, 200)
	}
	b.open(adminToken, "#/schedules")
	b.text(`#schedule-table tr[data-schedule="default/s099"]`)
	require.Equal(t, 100, b.count(`#schedule-table tbody tr`), "one page of 100")
	require.Equal(t, 0, b.count(`#schedule-table tr[data-schedule="default/s100"]`))
	b.click(`#sched-next`)
	b.text(`#schedule-table tr[data-schedule="default/s104"]`)
	require.Equal(t, 5, b.count(`#schedule-table tbody tr`), "the second page holds the other 5")
	b.click(`#sched-prev`)
	b.text(`#schedule-table tr[data-schedule="default/s000"]`)
	b.noProblems(false)
}

// TestDashboardProviders: the Providers page lists the queues with a provider that the
// token covers, made through the API: the provider, its policy's limits (given, and the
// plane's defaults where the API leaves them out), resources, command, env names, and the
// registered workers the provider launched for the queue (not one started by hand, nor one
// another provider launched). A token that is not an admin of the whole namespace — read on
// every queue, or admin of the queue itself — sees each env value and a command URL's
// password as the API shows it, "xxxxx", and the page holds neither anywhere; with the
// server's admin token the page asks for the same redacted view (GET /v1/providers?redacted=true)
// and sees the other namespace's queue.
func TestDashboardProviders(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	const envSecret, plainSecret, argSecret = "hf-secret-value-9f3a", "plain-value-7c1d", "pw-in-argument-4b2e"
	e.call("PUT", "/v1/namespaces/default/queues/gpu/provider", adminToken, map[string]any{"name": "local", "policy": map[string]any{
		"min_workers": 1, "max_workers": 4, "jobs_per_worker": 2, "scale_up_step": 2, "cooldown": 30.0,
		"command":   []string{"lakeshore", "worker", "gpu", "--db", "postgres://trainer:" + argSecret + "@db/x", "--", "python", "train step.py"},
		"env":       map[string]any{"HF_TOKEN": envSecret, "MODE": plainSecret, "EMPTY": ""},
		"resources": map[string]any{"gpus": 1, "memory_mb": 4096}}}, 200)
	e.call("PUT", "/v1/namespaces/default/queues/cpu/provider", adminToken, map[string]any{"name": "slurm", "policy": map[string]any{
		"command": []string{"lakeshore", "worker", "cpu"}}}, 200)
	e.call("PUT", "/v1/namespaces/other/queues/hidden/provider", adminToken, map[string]any{"name": "local", "policy": map[string]any{
		"command": []string{"true"}}}, 200)
	worker := func(id string, extra map[string]any) {
		reg := map[string]any{"host": "gpu-box", "pid": 7, "queues": []string{"gpu"}, "started_at": time.Now()}
		for k, v := range extra {
			reg[k] = v
		}
		e.call("PUT", "/v1/namespaces/default/workers/"+id, adminToken, reg, 200)
	}
	worker("w-busy", map[string]any{"provider": "local", "launch_id": "launch-busy", "running": 2})
	worker("w-idle", map[string]any{"provider": "local", "launch_id": "launch-idle", "idle_since": time.Now().Add(-3 * time.Minute)})
	worker("w-hand", nil)
	worker("w-slurm", map[string]any{"provider": "slurm", "launch_id": "launch-slurm"})

	for name, tok := range map[string]string{
		"read":        e.token("default", "*", []string{"read"}, 0),
		"queue admin": e.token("default", "gpu", []string{"admin"}, 0),
	} {
		b.open(tok, "#/providers")
		gpu := `#provider-table tr[data-provider="default/gpu"]`
		require.Equal(t, "local", b.text(gpu+` td[data-provider-name]`), name)
		require.Contains(t, b.text(gpu+` td[data-limits]`), "1–4, 2 jobs per worker", name)
		require.Contains(t, b.text(gpu+` td[data-limits]`), "scale-up 2 per tick", name)
		require.Contains(t, b.text(gpu+` td[data-timers]`), "cooldown 30s", name)
		require.Contains(t, b.text(gpu+` td[data-timers]`), "idle timeout 1m 0s", name)
		require.Equal(t, "gpus=1 memory MiB=4096", b.text(gpu+` td[data-resources]`), name)
		require.Equal(t, "lakeshore worker gpu --db postgres://trainer:xxxxx@db/x -- python 'train step.py'", b.text(gpu+` td[data-command]`), name)
		require.Equal(t, "HF_TOKEN=xxxxx", b.text(gpu+` [data-env="HF_TOKEN"]`), name)
		require.Equal(t, "MODE=xxxxx", b.text(gpu+` [data-env="MODE"]`), name)
		require.Equal(t, "EMPTY=", b.text(gpu+` [data-env="EMPTY"]`), name)
		require.Contains(t, b.text(gpu+` td[data-launched]`), "2 registered of at most 4", name)
		require.Contains(t, b.text(gpu+` [data-launch="launch-busy"]`), "running 2 jobs", name)
		require.Contains(t, b.text(gpu+` [data-launch="launch-idle"]`), "idle for 3m", name)
		require.Equal(t, 0, b.count(gpu+` [data-launch="launch-slurm"]`), "another provider's launch")
		if name == "read" {
			cpu := `#provider-table tr[data-provider="default/cpu"]`
			require.Equal(t, "slurm", b.text(cpu+` td[data-provider-name]`))
			require.Contains(t, b.text(cpu+` td[data-limits]`), "0–1, 1 job per worker", "the plane's defaults")
			require.Contains(t, b.text(cpu+` td[data-limits]`), "scale-up no cap")
			require.Contains(t, b.text(cpu+` td[data-timers]`), "register timeout 2m 0s")
			require.Equal(t, "provider defaults", b.text(cpu+` td[data-resources]`))
			require.Contains(t, b.text(cpu+` td[data-launched]`), "0 registered of at most 1")
			b.screenshot("providers-read")
		} else {
			require.Equal(t, 1, b.count(`#provider-table tbody tr`), "a token of one queue sees that queue's provider only")
		}
		require.Equal(t, 0, b.count(`#provider-table tr[data-provider="other/hidden"]`), name)
		page := eval[string](b, "document.documentElement.outerHTML")
		for _, secret := range []string{envSecret, plainSecret, argSecret} {
			require.NotContains(t, page, secret, "%s: the page shows no more than the API does", name)
		}
	}

	b.open(adminToken, "#/providers")
	gpu := `#provider-table tr[data-provider="default/gpu"]`
	require.Equal(t, "HF_TOKEN=xxxxx", b.text(gpu+` [data-env="HF_TOKEN"]`), "the page asks for the redacted view, even with the admin token")
	require.Equal(t, "lakeshore worker gpu --db postgres://trainer:xxxxx@db/x -- python 'train step.py'", b.text(gpu+` td[data-command]`))
	page := eval[string](b, "document.documentElement.outerHTML")
	for _, secret := range []string{envSecret, plainSecret, argSecret} {
		require.NotContains(t, page, secret, "admin: no screen shows a value")
	}
	b.text(`#provider-table tr[data-provider="other/hidden"]`)
	b.screenshot("providers-admin")
	b.noProblems(false)
}

// TestDashboardNoProviders: without a queue with a provider the page says so and how to
// attach one.
func TestDashboardNoProviders(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	b.open(adminToken, "#/providers")
	require.Contains(t, b.text(`#no-providers`), "lakeshore queue set QUEUE --provider")
	b.noProblems(false)
}

// TestDashboardReadOnly: a read-only token for one namespace sees its queues but not the
// other namespace's, and no action button anywhere.
func TestDashboardReadOnly(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	id := e.submit("default", "jobs", map[string]any{"payload": 1})
	e.submit("default", "jobs", map[string]any{"payload": 2})
	e.submit("other", "hidden", map[string]any{"payload": 3})
	ro := e.token("default", "*", []string{"read"}, 0)

	b.open(ro, "#/")
	b.text(`#queue-table tr[data-queue="default/jobs"]`)
	require.Equal(t, 0, b.count(`#queue-table tr[data-queue="other/hidden"]`))
	require.Equal(t, 1, b.count("#queue-table tbody tr"))
	require.Contains(t, b.text("#who"), "read on default/*")

	b.open(ro, "#/q/default/jobs")
	b.text("#inv-table")
	require.Equal(t, 0, b.count("#bulk button"))
	require.Equal(t, 0, b.count("input.pick"))
	require.Equal(t, 0, b.count("#adm-edit"))
	b.screenshot("queue-read-only")

	b.open(ro, "#/i/"+id)
	b.text("#payload")
	require.Equal(t, 0, b.count("#inv-head button"))

	// Schedules: listed, but no pause or resume (the server would refuse them).
	e.call("PUT", "/v1/namespaces/default/schedules/nightly", adminToken, map[string]any{"queue": "jobs", "cron": "0 3 * * *"}, 200)
	b.open(ro, "#/schedules")
	require.Contains(t, b.text(`#schedule-table tr[data-schedule="default/nightly"]`), "0 3 * * *")
	require.Equal(t, 0, b.count("#schedule-table button"))

	b.open(ro, "#/q/other/hidden")
	require.Contains(t, b.text(`.error[data-error="not_found"]`), "does not exist, or your token may not read it")
	b.noProblems(true)
}

// TestDashboardEscapes submits <script> and <img onerror> payloads and keys: the pages
// show them as text, create no element from them, and run no script.
func TestDashboardEscapes(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	evil := `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`
	id := e.submit("default", "jobs", map[string]any{"key": evil, "payload": map[string]any{evil: evil, "list": []string{evil}},
		"metadata": map[string]string{"note": evil}})
	tok := ""
	_, tok = e.claim("default", "jobs", evil)
	e.call("POST", "/v1/invocations/"+id+"/frames", adminToken, map[string]any{"token": tok, "value": evil}, 200)
	// An error's type is a name (the plane refuses markup there); its message is free text.
	e.settle(id, tok, "failed", map[string]any{"error": map[string]any{"type": "EvilError", "message": evil}})
	// A provider's command and env value, and a launched worker's launch id, are free text.
	e.call("PUT", "/v1/namespaces/default/queues/jobs/provider", adminToken, map[string]any{"name": "local", "policy": map[string]any{
		"command": []string{evil}, "env": map[string]any{"NOTE": evil}}}, 200)
	e.call("PUT", "/v1/namespaces/default/workers/launched", adminToken, map[string]any{"host": "h", "pid": 1, "queues": []string{"jobs"},
		"started_at": time.Now(), "provider": "local", "launch_id": evil}, 200)

	check := func() {
		t.Helper()
		require.False(t, eval[bool](b, `window.__pwned !== undefined`), "a payload ran as script")
		require.Zero(t, b.count(`#main script, img[src="x"]`), "a payload became an element")
	}
	b.open(adminToken, "#/q/default/jobs")
	require.Equal(t, evil, b.text("#inv-table tbody td.key"))
	check()
	b.open(adminToken, "#/i/"+id)
	require.Equal(t, evil, b.text("#inv-key"))
	require.Contains(t, b.text("#payload"), `"<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"`)
	require.Contains(t, b.text("#inv-error"), evil)
	b.text(`#frames tr[data-seq="0"]`)
	b.screenshot("escapes")
	check()
	b.open(adminToken, "#/providers")
	require.Equal(t, "NOTE=xxxxx", b.text(`#provider-table [data-env="NOTE"]`), "the page reads the redacted view: an env value never reaches it")
	require.Contains(t, b.text(`#provider-table td[data-command]`), "<script>")
	require.Contains(t, b.text(`#provider-table td[data-launched] .mono`), evil)
	check()
	b.noProblems(false)
}

// TestDashboardBadInput: an expired token, an unknown queue, an unknown or malformed id,
// and a namespace the token cannot read each get a clear message.
func TestDashboardBadInput(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	other := e.submit("other", "hidden", map[string]any{"payload": 1})
	scoped := e.token("default", "*", []string{"read", "submit"}, 0)
	expired := e.token("default", "*", []string{"read"}, 1)

	b.open(adminToken, "#/q/default/nosuchqueue")
	require.Contains(t, b.text("#queue-empty"), "does not exist yet")
	b.open(adminToken, "#/i/01JBZZZZZZZZZZZZZZZZZZZZZZ")
	require.Contains(t, b.text(`.error[data-error="not_found"]`), "This invocation does not exist, or your token may not read it.")
	b.open(adminToken, "#/i/not-an-id")
	require.Contains(t, b.text(`.error[data-error="invalid"]`), "Not valid")
	b.open(scoped, "#/i/"+other)
	require.Contains(t, b.text(`.error[data-error="not_found"]`), "does not exist, or your token may not read it")
	b.open(scoped, "#/q/other/hidden")
	require.Contains(t, b.text(`.error[data-error="not_found"]`), "does not exist, or your token may not read it")
	b.open(adminToken, "#/i/%E0%A4%A")
	require.Contains(t, b.text(`.error[data-error="invalid"]`), "Not valid")
	b.open(adminToken, "#/nowhere")
	require.Contains(t, b.text(".error"), "No such page")

	time.Sleep(1100 * time.Millisecond)
	b.open(expired, "#/")
	require.Contains(t, b.text("#login-error"), "expired")
	b.screenshot("expired-token")
	b.open("wrong-token", "#/")
	require.Contains(t, b.text("#login-error"), "unknown token")
	b.noProblems(true)
}

// TestDashboardData shows a data queue: its partitions with each task's consumption as a
// progress bar, the fields and their readiness, the latest records, storage figures and KV
// keys. The data routes come with the data queues over HTTP (server.Config.DataDir); a
// build without them skips (the field is set by name so that this file compiles either
// way).
func TestDashboardData(t *testing.T) {
	e := newEnvWith(t, func(cfg *server.Config) {
		f := reflect.ValueOf(cfg).Elem().FieldByName("DataDir")
		if !f.IsValid() {
			t.Skip("this build serves no data queues (no server.Config.DataDir)")
		}
		f.SetString(t.TempDir())
	})
	b := newBrowser(t, e)
	d := "/v1/namespaces/default/data/samples"
	evil := `<img src=x onerror="window.__pwned=1">`
	var records []map[string]any
	for i := 0; i < 8; i++ {
		records = append(records, map[string]any{"prompt": fmt.Sprintf("%d+%d", i, i), "reward": 0.5})
	}
	idx := e.call("POST", d+"/records", adminToken, map[string]any{"records": records}, 200)["indexes"].([]any)
	require.Len(t, idx, 8)
	e.call("POST", d+"/fields", adminToken, map[string]any{"indexes": idx[:3], "records": []map[string]any{{"answer": "0"}, {"answer": "2"}, {"answer": "4"}}}, 200)
	e.call("POST", d+"/consumption/mark", adminToken, map[string]any{"task": "train", "indexes": idx[:6]}, 200)
	e.call("POST", d+"/kv", adminToken, map[string]any{"keys": []string{"run-1", evil}, "records": []map[string]any{{"step": 1}, {"step": 2}}}, 200)

	b.open(adminToken, "#/data")
	require.Contains(t, b.text(`#data-table tr[data-queue="default/samples"]`), "samples")
	b.click(`#data-table tr[data-queue="default/samples"] a`)
	require.Contains(t, b.text(`#partition-table tr[data-partition="default"] .consumption[data-task="train"]`), "6 / 10 (60%)")
	require.Contains(t, b.text(`#field-table tr[data-field="answer"]`), "3 / 10")
	require.Contains(t, b.text(`#field-table tr[data-field="prompt"]`), "8 / 10")
	require.Contains(t, b.text(`#record-table`), `"prompt":"7+7"`)
	require.Contains(t, b.text(`#kv-table`), "run-1")
	require.Contains(t, b.text(`#kv-table`), evil)
	require.Contains(t, b.text(`#data-stats`), "records")
	require.False(t, eval[bool](b, `window.__pwned !== undefined`))
	require.Zero(t, b.count(`img[src="x"]`))
	b.screenshot("data-queue")

	// A token without data:read on the queue is told so.
	ro := e.token("default", "*", []string{"read"}, 0)
	b.open(ro, "#/d/default/samples")
	require.NotEmpty(t, b.text(`.error`))
	b.noProblems(true)
}

// TestDashboardUndecodableValue: a stored payload the wire codec cannot decode (a server
// with RawValues, or rows written by other tools) is named as such, and the page works.
func TestDashboardUndecodableValue(t *testing.T) {
	e := newEnvWith(t, func(cfg *server.Config) { cfg.RawValues = true })
	b := newBrowser(t, e)
	body, err := (&api.SubmitRequest{Payload: api.Value{Wire: []byte{0xc1, 0xff, 0x00}}}).MarshalMsg(nil)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", e.base+"/v1/namespaces/default/queues/raw/invocations", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/msgpack")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode, out)

	b.open(adminToken, "#/i/"+out["id"].(string))
	require.Contains(t, b.text("#payload"), "a stored value that does not decode (raw msgpack, 3 bytes)")
	b.text(`#inv-head .badge[data-state="queued"]`)
	b.noProblems(false)
}

// TestDashboardNoAuth: a server without authentication (loopback) opens without a sign-in.
func TestDashboardNoAuth(t *testing.T) {
	e := newEnvWith(t, func(cfg *server.Config) { cfg.AdminToken = "" })
	b := newBrowser(t, e)
	e.submit("default", "jobs", map[string]any{"payload": 1})
	b.run(chromedp.Navigate(e.base + "/ui/"))
	require.Equal(t, "1", b.text(`#queue-table tr[data-queue="default/jobs"] td[data-count="queued"]`))
	require.Contains(t, b.text("#who"), "no authentication")
	require.Zero(t, b.count("#login"))
	b.noProblems(false)
}

// TestDashboardConcurrencyKeys: the queue page lists its concurrency keys with their
// running jobs against the limit, the key at its limit marked, each key's rate limit and
// when its bucket next has a token (issue 27 item 6).
func TestDashboardConcurrencyKeys(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t, e)
	e.call("PUT", "/v1/namespaces/default/queues/keyed/admission", adminToken, map[string]any{"concurrency_limit": 1,
		"key_rate_limit": 0.001, "key_burst": 1, "key_rate_limits": map[string]any{"tenant-c": 5}}, 200)
	for _, key := range []string{"tenant-a", "tenant-a", "tenant-b"} {
		e.call("POST", "/v1/namespaces/default/queues/keyed/invocations", adminToken, map[string]any{"payload": 1, "concurrency_key": key}, 200)
	}
	res := e.call("POST", "/v1/namespaces/default/queues/keyed/claim", adminToken, map[string]any{"max": 1, "worker": "w1"}, 200)
	require.Len(t, res["jobs"], 1)
	claimed := res["jobs"].([]any)[0].(map[string]any)["concurrency_key"].(string)
	other := map[string]string{"tenant-a": "tenant-b", "tenant-b": "tenant-a"}[claimed]

	b.open(adminToken, "#/q/default/keyed")
	row := b.text(`#keys-table tr[data-key="` + claimed + `"]`)
	require.Contains(t, row, "1 / 1 (at its limit)")
	require.NotContains(t, b.text(`#keys-table tr[data-key="`+other+`"]`), "at its limit")
	require.Contains(t, b.text(`#admission-view`), "1 running per concurrency key")
	require.Contains(t, b.text(`#admission-view`), "1 per-key rate")
	// The claimed key drew its bucket's one token at 0.001/s: its next token is ~1000 s
	// away; the other key never drew, so it may start now.
	require.Equal(t, "0.001/s, burst 1", b.text(`#keys-table tr[data-key="`+claimed+`"] td[data-rate]`))
	require.Contains(t, b.text(`#keys-table tr[data-key="`+claimed+`"] td[data-next-start]`), "in 16m")
	require.Equal(t, 1, b.count(`#keys-table tr.rate-held[data-key="`+claimed+`"]`))
	require.Equal(t, "now", b.text(`#keys-table tr[data-key="`+other+`"] td[data-next-start]`))
	b.screenshot("queue-keys")

	// Saving the admission form keeps the concurrency limit it does not show.
	b.click(`#adm-edit`)
	b.run(chromedp.SendKeys(chromedp.CSS("#adm-max_depth"), "50"))
	b.click(`#adm-save`)
	require.Eventually(t, func() bool {
		a, _ := e.call("GET", "/v1/namespaces/default/queues/keyed/admission", adminToken, nil, 200)["admission"].(map[string]any)
		return a != nil && a["max_depth"] == 50.0
	}, 10*time.Second, 50*time.Millisecond, "the form saved")
	a := e.call("GET", "/v1/namespaces/default/queues/keyed/admission", adminToken, nil, 200)["admission"].(map[string]any)
	require.Equal(t, 1.0, a["concurrency_limit"], "the concurrency limit survives a save from the form")
	require.Equal(t, map[string]any{"tenant-c": 5.0}, a["key_rate_limits"], "the per-key rates survive a save from the form")
	b.noProblems(false)
}
