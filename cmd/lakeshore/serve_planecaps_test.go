package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeTopicAndWorkerCaps: `serve --max-topics-per-queue 1 --max-workers-per-namespace
// 1` gives the plane served those caps: the first post to a second topic of a queue, and
// the registration of a second worker of a namespace, answer 409 limit_exceeded naming the
// cap and its flag; the topic and the worker held go on. A value the flags cannot take — 0,
// or any value with an http(s) target — exits 2 before anything listens, naming the flag.
// (The flags did not exist before: this test fails on the old code.)
func TestServeTopicAndWorkerCaps(t *testing.T) {
	t.Parallel()
	p := startServe(t, filepath.Join(t.TempDir(), "plane.db"), "--max-topics-per-queue", "1", "--max-workers-per-namespace", "1")
	send := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, p.url+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(out)
	}
	topic := func(name string) string { return "/v1/namespaces/default/queues/q/topics/" + name + "/frames" }
	status, body := send("POST", topic("a"), `{"value": 1}`)
	require.Equal(t, http.StatusOK, status, body)
	status, body = send("POST", topic("b"), `{"value": 1}`)
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, `"limit_exceeded"`)
	require.Contains(t, body, "queue q of namespace default holds 1 topics, its maximum (1)")
	require.Contains(t, body, "--max-topics-per-queue")
	status, body = send("POST", topic("a"), `{"value": 2}`)
	require.Equal(t, http.StatusOK, status, "the topic held takes posts: %s", body)

	worker := `{"host": "h", "pid": 1, "queues": ["q"]}`
	status, body = send("PUT", "/v1/namespaces/default/workers/w1", worker)
	require.Equal(t, http.StatusOK, status, body)
	status, body = send("PUT", "/v1/namespaces/default/workers/w2", worker)
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, "namespace default holds 1 registered workers, its maximum (1)")
	require.Contains(t, body, "--max-workers-per-namespace")
	status, body = send("PUT", "/v1/namespaces/default/workers/w1", worker)
	require.Equal(t, http.StatusOK, status, "the worker held refreshes: %s", body)

	db := filepath.Join(t.TempDir(), "plane.db")
	for _, tc := range []struct {
		target, flag, value, says string
	}{
		{db, "--max-topics-per-queue", "0", "invalid --max-topics-per-queue 0: use a number of topics ≥ 1, or a negative number for no cap (default 100000)"},
		{db, "--max-workers-per-namespace", "0", "invalid --max-workers-per-namespace 0: use a number of workers ≥ 1, or a negative number for no cap (default 100000)"},
		{"http://127.0.0.1:9", "--max-topics-per-queue", "5", "invalid --max-topics-per-queue 5: it applies to a SQLite or PostgreSQL --target"},
		{"http://127.0.0.1:9", "--max-workers-per-namespace", "5", "invalid --max-workers-per-namespace 5: it applies to a SQLite or PostgreSQL --target"},
	} {
		c := &cli{t: t, target: tc.target}
		_, errs, code := c.run("", "serve", "--addr", "127.0.0.1:0", tc.flag, tc.value)
		require.Equal(t, exitUsage, code, "%s %s: %s", tc.target, tc.value, errs)
		require.Contains(t, errs, tc.says)
	}
	require.NoFileExists(t, db, "refused before the plane was opened")
}

// TestServeRetention: `serve --retention 1ms` gives the plane served that retention, so
// maintenance (every 250 ms on SQLite) deletes a cancelled job soon after, and `get` then
// answers not found; the queued job beside it is kept (retention trims terminal jobs only).
// 0, or any value with an http(s) target, exits 2 before anything listens, naming the flag.
// (The flag did not exist before: this test fails on the old code.)
func TestServeRetention(t *testing.T) {
	t.Parallel()
	p := startServe(t, filepath.Join(t.TempDir(), "plane.db"), "--retention", "1ms")
	c := &cli{t: t, target: p.url}
	ended := c.ok("submit", "q", `"x"`)
	kept := c.ok("submit", "q", `"y"`)
	c.ok("cancel", ended)
	deadline := time.Now().Add(time.Minute) // a bound on a failure, not a wait: the loop ends when the trim is seen
	for {
		_, errs, code := c.run("", "get", ended)
		if code != 0 {
			require.Contains(t, errs, "not found", "trimmed by retention")
			break
		}
		require.True(t, time.Now().Before(deadline), "the cancelled job was never trimmed")
		time.Sleep(50 * time.Millisecond)
	}
	require.Contains(t, c.ok("get", kept), "queued", "a queued job is not trimmed")

	db := filepath.Join(t.TempDir(), "plane.db")
	for _, tc := range []struct {
		target, value, says string
	}{
		{db, "0", "invalid --retention 0s: use a non-zero duration, e.g. 6h or 168h (negative: keep for ever; default 168h0m0s)"},
		{"http://127.0.0.1:9", "6h", "invalid --retention 6h0m0s: it applies to a SQLite or PostgreSQL --target"},
		// A postgres:// target's retention= that disagrees: named by the flag, not as "the
		// Config value" of Go (before); nothing is reached (no server listens on port 9).
		{"postgres://u@127.0.0.1:9/db?retention=2h", "1h", "invalid --retention 1h0m0s: the --target's retention=2h0m0s says otherwise"},
	} {
		c := &cli{t: t, target: tc.target}
		_, errs, code := c.run("", "serve", "--addr", "127.0.0.1:0", "--retention", tc.value)
		require.Equal(t, exitUsage, code, "%s %s: %s", tc.target, tc.value, errs)
		require.Contains(t, errs, tc.says)
	}
	require.NoFileExists(t, db, "refused before the plane was opened")
}
