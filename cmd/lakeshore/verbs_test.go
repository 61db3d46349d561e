package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestVerbs runs every verb against a SQLite file target.
func TestVerbs(t *testing.T) {
	t.Parallel()
	testVerbs(t, newCLI)
}

// TestVerbsOverHTTP runs the same verbs against a real server on loopback (LAKESHORE_URL's
// plane), so every verb works over HTTP as it does on the embedded plane.
func TestVerbsOverHTTP(t *testing.T) {
	t.Parallel()
	testVerbs(t, newHTTPCLI)
}

func testVerbs(t *testing.T, newCLI func(*testing.T) *cli) {

	t.Run("SubmitGetResult", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		id := c.ok("submit", "jobs", `{"text": "hi", "n": 3, "x": 1.5}`)
		require.Len(t, id, 26)
		k1 := c.ok("submit", "jobs", `{"other": true}`, "--key", "k1")
		require.NotEqual(t, id, k1)
		require.Equal(t, k1, c.ok("submit", "jobs", `{"different": 1}`, "--key", "k1"), "the same key returns the same id")
		// get, in both forms
		out := c.ok("get", id)
		require.Contains(t, out, "queued")
		require.Contains(t, out, `{"n":3,"text":"hi","x":1.5}`)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "get", id)), &got))
		require.Equal(t, "queued", got["state"])
		require.Equal(t, map[string]any{"text": "hi", "n": float64(3), "x": 1.5}, got["payload"])

		// a worker runs it (cat echoes the payload), then result and stream
		c.ok("worker", "jobs", "--once", "--", "cat")
		require.JSONEq(t, `{"exit_code":0,"stderr":"","stdout":"{\"n\":3,\"text\":\"hi\",\"x\":1.5}\n"}`, c.ok("result", id))
		require.Equal(t, "0\t{\"n\":3,\"text\":\"hi\",\"x\":1.5}", c.ok("stream", id))
		var res map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "result", id)), &res))
		require.Equal(t, "succeeded", res["state"])
	})

	t.Run("PayloadSources", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		file := filepath.Join(t.TempDir(), "p.json")
		require.NoError(t, os.WriteFile(file, []byte(`[1, 2]`), 0o600))
		for _, args := range [][]string{{"submit", "q", "--file", file}, {"submit", "q", "--string", "plain text"}} {
			c.ok(args...)
		}
		out, _, code := c.run(`{"from": "stdin"}`, "submit", "q")
		require.Zero(t, code)
		require.Contains(t, c.ok("get", strings.TrimSpace(out)), `{"from":"stdin"}`)
		_, errs, code := c.run("", "submit", "q", "not json")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errs, "not JSON")
		_, _, code = c.run("", "submit", "q", "1", "--file", file)
		require.Equal(t, exitUsage, code)
		_, errs, code = c.run("", "submit", "bad/name", "1")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errs, "queue name")
	})

	t.Run("ExitCodes", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		_, _, code := c.run("", "get", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
		require.Equal(t, exitNotFound, code)
		_, _, code = c.run("", "result", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
		require.Equal(t, exitNotFound, code)
		_, _, code = c.run("", "no-such-verb")
		require.Equal(t, exitUsage, code)
		_, _, code = c.run("", "get", "--no-such-flag", "x")
		require.Equal(t, exitUsage, code)
		_, _, code = c.run("", "get")
		require.Equal(t, exitUsage, code)

		id := c.ok("submit", "q", "1")
		start := time.Now()
		_, errs, code := c.run("", "result", id, "--timeout", "0")
		require.Equal(t, exitWaitTimeout, code, "--timeout 0 answers at once: %s", errs)
		require.Less(t, time.Since(start), 10*time.Second, "--timeout 0 does not wait the default 30 s")
		_, errs, code = c.run("", "result", id, "--timeout", "50ms")
		require.Equal(t, exitWaitTimeout, code, errs)

		// A failing job: exit 1 from result and submit --wait, its error on stderr.
		fail := c.ok("submit", "q", "2", "--max-attempts", "1")
		c.ok("worker", "q", "--max-jobs", "2", "--", "sh", "-c", `read x; [ "$x" = 1 ] || { echo "no good: $x" >&2; exit 7; }`)
		require.Contains(t, c.ok("result", id, "--timeout", "0"), `"exit_code":0`, "--timeout 0 prints an ended job's result")
		_, errs, code = c.run("", "result", fail, "--timeout", "0")
		require.Equal(t, exitJobFailed, code)
		require.Contains(t, errs, "exited with code 7")
		require.Contains(t, errs, "no good: 2")
		out, _, code := c.run("", "--json", "result", fail)
		require.Equal(t, exitJobFailed, code)
		require.Contains(t, out, `"state":"failed"`)

		// cancel: 0 when it cancelled, 1 when nothing changed
		q2 := c.ok("submit", "q", "3")
		require.Contains(t, c.ok("cancel", q2), "cancelled")
		out, _, code = c.run("", "cancel", q2)
		require.Equal(t, exitJobFailed, code)
		require.Equal(t, q2+" was already cancelled\n", out, "a second cancel says it already was, as queue pause does")
		_, _, code = c.run("", "result", q2)
		require.Equal(t, exitJobFailed, code)
		out, _, code = c.run("", "kill", id)
		require.Equal(t, exitJobFailed, code, "kill of a finished job changes nothing")
		require.Contains(t, out, "not killed: it already ended: ")
		out, _, code = c.run("", "kill", q2)
		require.Equal(t, exitJobFailed, code)
		require.Equal(t, q2+" not killed: it already ended: cancelled\n", out)
		q3 := c.ok("submit", "q", "4")
		out, _, code = c.run("", "kill", q3)
		require.Equal(t, exitJobFailed, code)
		require.Equal(t, q3+" not killed: it is queued (cancel ends a queued job)\n", out)
	})

	t.Run("SubmitWait", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		// The worker's exit and stderr are reported with a failed wait: a worker that
		// failed (it once could not open the new file beside the submit) leaves the job
		// queued, and the wait's timeout alone does not say so.
		workerCtx, stopWorker := context.WithCancel(t.Context())
		defer stopWorker()
		type exit struct {
			code   int
			stderr string
		}
		done := make(chan exit, 1)
		go func() {
			_, errs, code := c.runCtx(workerCtx, "", "worker", "w", "--once", "--", "sh", "-c", "cat >/dev/null; echo '{\"ok\": true}'")
			done <- exit{code, errs}
		}()
		out, errs, code := c.run("", "submit", "w", `"x"`, "--wait", "--timeout", "20s")
		if code != 0 {
			stopWorker()
			w := <-done
			t.Fatalf("submit --wait: exit %d\nstdout: %s\nstderr: %s\nthe worker: exit %d\nstderr: %s", code, out, errs, w.code, w.stderr)
		}
		require.JSONEq(t, `{"exit_code":0,"stderr":"","stdout":"{\"ok\": true}\n"}`, out)
		w := <-done
		require.Zero(t, w.code, w.stderr)
	})

	t.Run("CountQueuesAdmission", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		for range 3 {
			c.ok("submit", "a", "null")
		}
		c.ok("submit", "b", "null")
		require.Equal(t, "3", c.ok("count", "a", "queued"))
		require.Contains(t, c.ok("count", "a"), "queued     3")
		_, _, code := c.run("", "count", "a", "bogus")
		require.Equal(t, exitUsage, code)

		c.ok("queue", "set", "a", "--max-depth", "3", "--on-full", "reject", "--rate-limit", "100", "--deadline-cutoff", "2s")
		require.Contains(t, c.ok("queue", "get", "a"), "max depth        3")
		_, errs, code := c.run("", "submit", "a", "null")
		require.Equal(t, exitError, code, "a full queue rejects: %s", errs)
		require.Contains(t, errs, "full")
		_, _, code = c.run("", "queue", "set", "a", "--on-full", "sometimes")
		require.Equal(t, exitUsage, code)

		// A submit blocked on a full queue gives up after --timeout, with nothing written.
		c.ok("queue", "set", "a", "--max-depth", "3", "--on-full", "block")
		start := time.Now()
		_, errs, code = c.run("", "submit", "a", "null", "--timeout", "300ms")
		require.NotZero(t, code, "a blocked submit ends when its timeout passes: %s", errs)
		require.Contains(t, errs, "full")
		require.Less(t, time.Since(start), 10*time.Second)
		require.Equal(t, "3", c.ok("count", "a", "queued"))
		c.ok("queue", "set", "a", "--max-depth", "3", "--on-full", "reject", "--rate-limit", "100", "--deadline-cutoff", "2s")

		tbl := c.ok("queues")
		require.Contains(t, tbl, "QUEUED")
		require.Regexp(t, `default\s+a\s+3\s+0\s+0\s+0\s+0\s+0\s+0\s+max-depth=3 on-full=reject rate=100/s burst=100 deadline-cutoff=2s`, tbl)
		require.Regexp(t, `default\s+b\s+1\s`, tbl)
		var row map[string]any
		lines := strings.Split(c.ok("--json", "queues"), "\n")
		require.Len(t, lines, 2)
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &row))
		require.Equal(t, "a", row["queue"])
		require.Equal(t, float64(3), row["counts"].(map[string]any)["queued"])

		require.Contains(t, c.ok("queue", "clear", "a"), "cleared")
		require.Contains(t, c.ok("queue", "get", "a"), "no admission block")
		c.ok("submit", "a", "null")
	})

	t.Run("QueuePauseResume", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		id := c.ok("submit", "p", `"held"`)
		require.Equal(t, "p: paused", c.ok("queue", "pause", "p"))
		require.Equal(t, "p: was already paused", c.ok("queue", "pause", "p"))
		require.Regexp(t, `default\s+p\s+1\s+0\s+0\s+0\s+0\s+0\s+0\s+-\s+paused`, c.ok("queues"))
		var row map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "queues")), &row))
		require.Equal(t, true, row["paused"])
		c.ok("submit", "p", `"accepted while paused"`)
		require.Equal(t, "2", c.ok("count", "p", "queued"), "a paused queue accepts submits")
		require.Equal(t, "p: resumed", c.ok("queue", "resume", "p"))
		require.Equal(t, "p: was not paused", c.ok("queue", "resume", "p"))
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "queue", "pause", "p")), &out))
		require.Equal(t, map[string]any{"queue": "p", "paused": true, "changed": true}, out)
		c.ok("queue", "resume", "p")
		c.ok("worker", "p", "--once", "--", "cat")
		require.Contains(t, c.ok("get", id), "succeeded")
	})

	t.Run("WorkersList", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		started := filepath.Join(t.TempDir(), "started")
		c.ok("submit", "wq", "null")
		done := make(chan int, 1)
		go func() {
			_, _, code := c.run("", "worker", "wq", "--once", "--id", "w-test", "--lease", "300ms", "--",
				"sh", "-c", `touch "$0"; while [ ! -f "$0.go" ]; do sleep 0.02; done`, started)
			done <- code
		}()
		waitFile(t, started)
		out := c.ok("workers")
		require.Contains(t, out, "w-test")
		require.Contains(t, out, "wq")
		require.NoError(t, os.WriteFile(started+".go", nil, 0o600))
		require.Zero(t, <-done)
		require.NotContains(t, c.ok("workers"), "w-test", "a stopped worker is gone")
	})

	t.Run("TopicAndTrim", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		require.Equal(t, "0", c.ok("topic", "post", "q", "news", `{"a": 1}`))
		require.Equal(t, "1", c.ok("topic", "post", "q", "news", "--string", "two"))
		require.Equal(t, "0\t{\"a\":1}", c.ok("topic", "listen", "q", "news"))
		require.Equal(t, "1\t\"two\"", c.ok("topic", "listen", "q", "news", "--since", "0"))
		_, errs, code := c.run("", "topic", "listen", "q", "news", "--since", "1", "--timeout", "50ms")
		require.Equal(t, exitWaitTimeout, code)
		require.Contains(t, errs, "no value on topic news after seq 1 within 50ms: wait timed out")
		// From the start (the default --since -1), the message names no seq: before, it
		// said "after -1".
		_, errs, code = c.run("", "topic", "listen", "q", "empty", "--timeout", "50ms")
		require.Equal(t, exitWaitTimeout, code)
		require.Contains(t, errs, "no value on topic empty within 50ms: wait timed out")
		c.ok("topic", "post", "q", "news", "--final")
		require.Equal(t, "0\t{\"a\":1}\n1\t\"two\"", c.ok("topic", "listen", "q", "news", "--follow"))
		// A closed topic with no value after --since: none will ever come, exit 1 as a wait on
		// an ended job (before: exit 5, "listen to topic news after 1: journal closed").
		_, errs, code = c.run("", "topic", "listen", "q", "news", "--since", "1", "--timeout", "10s")
		require.Equal(t, exitJobFailed, code)
		require.Equal(t, "lakeshore: topic news is closed: no value after seq 1 will come\n", errs)

		id := c.ok("submit", "q", "1")
		c.ok("cancel", id)
		require.Equal(t, "trimmed 0", c.ok("trim", "q", "--older-than", "1h"))
		require.Equal(t, "trimmed 1", c.ok("trim", "q"))
		_, _, code = c.run("", "get", id)
		require.Equal(t, exitNotFound, code)
	})

	t.Run("CancelKillUnknownID", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		const id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
		for _, verb := range []string{"cancel", "kill", "result", "get"} {
			_, errs, code := c.run("", verb, id)
			require.Equal(t, exitNotFound, code)
			// Issue 29 item 9: the message names the id (once) and the likely causes.
			require.Equal(t, "lakeshore: "+verb+": invocation "+id+": not found: "+plane.NotFoundCauses+"\n", errs)
		}
	})

	t.Run("TokenJSON", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		var created map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "token", "create", "--id", "t1", "--can", "submit,read", "--queue", "jobs")), &created))
		require.Equal(t, "t1", created["id"])
		require.Equal(t, "jobs", created["queue"])
		require.Equal(t, []any{"submit", "read"}, created["can"])
		require.Nil(t, created["expires_at"])
		require.True(t, strings.HasPrefix(created["token"].(string), "lks_"), "the secret, once")

		var listed map[string]any
		line := c.ok("--json", "token", "list")
		require.NoError(t, json.Unmarshal([]byte(line), &listed))
		require.Regexp(t, `^\{"can":.*"created_at":.*"expires_at":.*"id":.*"namespace":.*"queue":.*"status":`, line,
			"keys in alphabetical order, as in every --json object")
		require.Equal(t, "t1", listed["id"])
		require.Equal(t, "live", listed["status"])
		require.NotContains(t, listed, "token", "never the secret")

		var revoked map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.ok("token", "revoke", "t1", "--json")), &revoked))
		require.Equal(t, map[string]any{"id": "t1", "revoked": true}, revoked)
		require.Contains(t, c.ok("token", "list"), "revoked", "a table without --json")
	})

	t.Run("Completion", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		require.Contains(t, c.ok("completion", "bash"), "__start_lakeshore")
	})
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamTimeoutDefault: stream gives up after 30 s of silence unless told otherwise
// (semantics: stream(id, since=-1, timeout=30 s)); a queued job with no worker must not hang
// a terminal forever.
func TestStreamTimeoutDefault(t *testing.T) {
	t.Parallel()
	c := newStreamCmd(&app{})
	f := c.Flags().Lookup("timeout")
	require.NotNil(t, f)
	require.Equal(t, lakeshore.StreamTimeoutDefault.String(), f.DefValue)
}
