package compat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/skewtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
	"github.com/lakeshore-dev/lakeshore/server/compat"
)

// TestMain runs the tests, stops the test server, and then fails the run when a goroutine
// outlived its test (the planes and servers the tests start must end theirs).
func TestMain(m *testing.M) { pgtest.VerifyMain(m) }

// everyone is the principal of a server without tokens.
type everyone struct{}

func (everyone) Allows(string, string, ...plane.Permission) bool { return true }
func (everyone) Namespace() string                               { return "" }

func sqlite(t *testing.T) plane.Driver {
	drv, err := sqliteplane.Open(t.Context(), filepath.Join(t.TempDir(), "plane.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { drv.Close() })
	return drv
}

func postgres(t *testing.T) plane.Driver {
	drv, err := pgplane.Open(t.Context(), pgtest.Database(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { drv.Close() })
	return drv
}

// call posts body as msgpack to path and decodes the answer into a map.
func call(t *testing.T, url, path string, body any) (int, map[string]any) {
	t.Helper()
	return callAs(t, url, path, "", body)
}

// TestLeaseExtendedByPollAndPost: a job claimed through poll keeps its lease past the lease
// length while its worker polls or posts (a real worker sends no heartbeats), and loses it
// when the worker goes silent: its ack then answers 409 lease_lost and the job is queued
// again.
//
// The plane runs on the test's clock, which the test moves on: a lease extended every
// 1.5 s of a 3 s lease must not depend on how soon a loaded machine runs the next call.
func TestLeaseExtendedByPollAndPost(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	drv, err := sqliteplane.Open(t.Context(), filepath.Join(t.TempDir(), "plane.db"),
		&sqliteplane.Config{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	require.NoError(t, err)
	t.Cleanup(func() { drv.Close() })
	mux := http.NewServeMux()
	routes := compat.Routes(&compat.Config{
		Driver:       drv,
		Authenticate: func(*http.Request) (compat.Principal, error) { return everyone{}, nil },
		WriteError: func(w http.ResponseWriter, _ *http.Request, err error) {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, err.Error())
		},
		ReadBody: func(_ http.ResponseWriter, r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) },
		Done:     make(chan struct{}),
		LeaseTTL: 3 * time.Second, // margins for a loaded machine
	})
	for pattern, h := range routes {
		mux.HandleFunc(pattern, h)
	}
	ts := httptest.NewServer(mux)
	defer ts.Close()
	submit := "/v1/namespaces/default/producer/submit"
	poll := map[string]any{"worker_id": "w1", "timeout_s": 0, "queue": "q"}
	claim := func(id string) {
		status, out := call(t, ts.URL, submit, map[string]any{"invocation_id": id, "queue": "q", "args_blob": []byte{0x01}})
		require.Equal(t, http.StatusOK, status, out)
		status, out = call(t, ts.URL, "/v1/daemon/poll", poll)
		require.Equal(t, http.StatusOK, status, out)
		commands := out["commands"].([]any)
		require.Len(t, commands, 1)
		require.Equal(t, id, commands[0].(map[string]any)["body"].(map[string]any)["invocation_id"])
	}
	busy, silent := plane.NewIDGenerator().New(time.Now()), ""
	claim(busy)
	frame := []byte{0x94, 0x00, 0x00, 0xa1, 'x', 0xc0} // [VALUE, 0, "x", nil]
	for i := range 3 {
		advance(1500 * time.Millisecond) // 4.5 s in all: past the lease unless extended
		if i == 1 {
			status, out := call(t, ts.URL, "/v1/daemon/poll", poll) // no job: extends only
			require.Equal(t, http.StatusOK, status, out)
			require.Empty(t, out["commands"])
			continue
		}
		status, out := call(t, ts.URL, "/v1/daemon/result-chunk", map[string]any{"invocation_id": busy, "seq": i, "bytes": frame})
		require.Equal(t, http.StatusOK, status, out)
	}
	require.NoError(t, drv.Maintain(t.Context()))
	status, out := call(t, ts.URL, "/v1/daemon/ack", map[string]any{"invocation_id": busy, "state": "succeeded", "result_blob": []byte{0x02}})
	require.Equal(t, http.StatusOK, status, out)
	inv, err := drv.InvocationGet(t.Context(), busy)
	require.NoError(t, err)
	require.Equal(t, plane.StateSucceeded, inv.State)
	require.Equal(t, []byte{0x02}, inv.Result)

	silent = plane.NewIDGenerator().New(time.Now())
	claim(silent)
	advance(4 * time.Second)
	require.NoError(t, drv.Maintain(t.Context()))
	status, out = call(t, ts.URL, "/v1/daemon/ack", map[string]any{"invocation_id": silent, "state": "succeeded"})
	require.Equal(t, http.StatusConflict, status, out)
	require.Contains(t, out["text"], "lease")
	inv, err = drv.InvocationGet(t.Context(), silent)
	require.NoError(t, err)
	require.Equal(t, plane.StateQueued, inv.State)
}

// TestRememberedLeasesAreForgottenOnThePlanesClock: a replica forgets a lease it remembers
// (to extend it on its worker's next poll) an hour after the lease's end on the plane's
// clock, the one the lease was stamped on, not on the server machine's. Here the plane's
// clock is 2 h behind the machine's: the worker claims two jobs and keeps polling, and both
// are still held 8 minutes (plane time) later, past the 5-minute lease, so the first one's
// ack succeeds. Before, the second claim's lease record forgot the first lease at once (the
// machine's clock was past its end plus an hour), no poll extended it, and its ack answered
// 409 lease_lost: a job its worker was running was queued again.
func TestRememberedLeasesAreForgottenOnThePlanesClock(t *testing.T) {
	s := skewtest.Start(t, -2*time.Hour, slog.New(slog.DiscardHandler))
	submit := "/v1/namespaces/default/producer/submit"
	poll := map[string]any{"worker_id": "w1", "timeout_s": 0, "queue": "q"}
	var ids []string
	for range 2 {
		id := plane.NewIDGenerator().New(time.Now())
		status, out := call(t, s.URL, submit, map[string]any{"invocation_id": id, "queue": "q", "args_blob": []byte{0x01}})
		require.Equal(t, http.StatusOK, status, out)
		status, out = call(t, s.URL, "/v1/daemon/poll", poll)
		require.Equal(t, http.StatusOK, status, out)
		require.Len(t, out["commands"], 1)
		ids = append(ids, id)
	}
	for range 2 {
		s.Shift(4 * time.Minute)                               // 8 minutes in all: past the 5-minute lease unless extended
		status, out := call(t, s.URL, "/v1/daemon/poll", poll) // no job: extends only
		require.Equal(t, http.StatusOK, status, out)
		require.Empty(t, out["commands"])
	}
	require.NoError(t, s.Plane.Maintain(t.Context()))
	for _, id := range ids {
		status, out := call(t, s.URL, "/v1/daemon/ack", map[string]any{"invocation_id": id, "state": "succeeded", "result_blob": []byte{0x02}})
		require.Equal(t, http.StatusOK, status, "invocation %s: %v", id, out)
		inv, err := s.Plane.InvocationGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, plane.StateSucceeded, inv.State)
	}
}

// realPython is the python of the scratch venv with dreamlake-lakeshore (SEED_VENV, made by
// scripts/test.sh), or a skip (a failure with CI=true).
func realPython(t *testing.T) string {
	venv := os.Getenv("SEED_VENV")
	if venv == "" {
		venv = "/tmp/lakeshore-seed-venv"
	}
	py := filepath.Join(venv, "bin", "python")
	if err := exec.Command(py, "-c", "import dreamlake.lakeshore").Run(); err != nil {
		msg := "no dreamlake-lakeshore in " + venv + " (sh scripts/test.sh makes it; or set SEED_VENV): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

// realScript drives the real package's HttpDispatch through the job-queue snippets: submit,
// claim, post, ack, result, stream, keyed submits, a nack without retry, a topic, and
// run_worker with a generator @udf, a failing one and a thunk. It asserts as it goes and
// prints "ok".
const realScript = `
import os, time
import dreamlake.lakeshore as dls
from dreamlake.lakeshore import wire
from dreamlake.lakeshore.http_dispatch import HttpDispatch
from dreamlake.lakeshore.dispatch import DispatchError
import compatjobs

dp = HttpDispatch(os.environ["COMPAT_URL"], token=os.environ["COMPAT_TOKEN"])
q = dls.SyncQueue("jobs", dispatch=dp)
payload = {"pair": (1, 2.5), "s": "héllo", "b": b"\x00", "n": None, "l": [1, (2,)]}
inv = q.submit(payload)
job = dp.claim("jobs", "worker-1")
assert job.id == inv and job.envelope == wire.pack(payload)
q.post(job.id, ("frame", 1))
dp.ack(job.id, "worker-1", result=wire.pack({"echo": wire.unpack(job.envelope)}))
assert q.result(inv, timeout=10) == {"echo": payload}
assert list(q.stream(inv, timeout=10)) == [("frame", 1)]

k = q.submit("first", key="nightly-7")
assert q.submit("second", key="nightly-7") == k  # the key's existing invocation
job = dp.claim("jobs", "worker-1")
assert job.id == k and wire.unpack(job.envelope) == "first"
dp.nack(k, "worker-1", error="not now", retry=False)
try:
    q.result(k, timeout=10)
    raise AssertionError("no error")
except DispatchError as e:
    assert "not now" in str(e), e

t = q.topic("progress")
t.post({"step": 1}); t.post((2, 3)); t.post(None, final=True)
assert list(t.stream(timeout=10)) == [{"step": 1}, (2, 3)]

u = dls.SyncQueue("udf", dispatch=dp)
g = compatjobs.count.submit(3, _dispatch=dp)
b = compatjobs.boom.submit(_dispatch=dp)
th = u.submit(dls.thunk(lambda: 40 + 2))
assert dls.run_worker(u, once=True) == 1
assert dls.run_worker(u, once=True, retries=0) == 1
assert dls.run_worker(u, once=True, allow_pickled=True) == 1
assert u.result(g, timeout=10) == ["k0", "k1", "k2"]
assert list(u.stream(g, timeout=10)) == [["k0"], ["k1"], ["k2"]]
assert u.result(th, timeout=10) == 42
try:
    u.result(b, timeout=10)
    raise AssertionError("no error")
except DispatchError as e:
    assert "ValueError: nope" in str(e), e
start = time.monotonic()
assert dls.run_worker(u, once=True) == 0 and time.monotonic() - start < 5
print("ok")
`

const realJobs = `
import dreamlake.lakeshore as dls

@dls.udf(queue="udf")
def count(n):
    for i in range(n):
        yield [f"k{i}"]

@dls.udf(queue="udf")
def boom():
    raise ValueError("nope")
`

// TestRealPackageOnEveryPlane runs realScript with the real dreamlake-lakeshore 0.5.0 against
// a server with tokens on SQLite and on PostgreSQL.
func TestRealPackageOnEveryPlane(t *testing.T) {
	py := realPython(t)
	for name, open := range map[string]func(*testing.T) plane.Driver{"sqlite": sqlite, "postgres": postgres} {
		t.Run(name, func(t *testing.T) {
			drv := open(t)
			srv := server.New(drv, &server.Config{AdminToken: "admin-secret"})
			ts := httptest.NewServer(srv)
			defer func() {
				srv.Stop()
				ts.Close()
			}()
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "compatjobs.py"), []byte(realJobs), 0o600))
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, "-c", realScript)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "COMPAT_URL="+ts.URL, "COMPAT_TOKEN=admin-secret", "LAKESHORE_URL=")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
			require.Equal(t, "ok\n", string(out))
		})
	}
}

// TestStopEndsLongPolls: a poll waiting for a job and an open stream end at once when the
// server stops (503 shutting_down for the poll), not after their wait.
func TestStopEndsLongPolls(t *testing.T) {
	drv := sqlite(t)
	srv := server.New(drv, &server.Config{})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	type answer struct {
		status int
		took   time.Duration
	}
	polled, streamed := make(chan answer, 1), make(chan answer, 1)
	go func() {
		start := time.Now()
		status, _ := call(t, ts.URL, "/v1/daemon/poll", map[string]any{"worker_id": "w", "timeout_s": 25, "queue": "q"})
		polled <- answer{status, time.Since(start)}
	}()
	go func() {
		start := time.Now()
		r, err := http.Get(ts.URL + "/v1/namespaces/default/producer/invocations/some-topic/result/stream")
		if err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			streamed <- answer{r.StatusCode, time.Since(start)}
			return
		}
		streamed <- answer{0, time.Since(start)}
	}()
	time.Sleep(500 * time.Millisecond)
	srv.Stop()
	p, s := <-polled, <-streamed
	require.Equal(t, http.StatusServiceUnavailable, p.status)
	require.Less(t, p.took, 10*time.Second)
	require.Equal(t, http.StatusOK, s.status)
	require.Less(t, s.took, 10*time.Second)
}

// serveCompat serves the compatibility routes over drv on a test server (a replica: its
// own handlers and memory).
func serveCompat(t *testing.T, drv plane.Driver) string {
	return serveCompatAs(t, drv, everyone{})
}

// nobody is the principal of a token that grants nothing.
type nobody struct{}

func (nobody) Allows(string, string, ...plane.Permission) bool { return false }
func (nobody) Namespace() string                               { return "default" }

// TestForbiddenSaysWhatInWords: a refusal names the permissions as our routes do ("submit"),
// never a Go slice ("[submit]").
func TestForbiddenSaysWhatInWords(t *testing.T) {
	t.Parallel()
	url := serveCompatAs(t, sqlite(t), nobody{})
	code, out := call(t, url, "/v1/namespaces/default/producer/submit", map[string]any{
		"invocation_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "queue": "q", "args_blob": []byte{0xc0}, "run_config": map[string]any{"queue": "q"}})
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, out["text"], "the token does not grant submit on queue default/q")
	require.NotContains(t, out["text"], "[")
	code, out = call(t, url, "/v1/daemon/poll", map[string]any{"worker_id": "w", "timeout_s": 0, "queue": "q"})
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, out["text"], "the token does not grant consume on queue default/q")
}

func serveCompatAs(t *testing.T, drv plane.Driver, who compat.Principal) string {
	mux := http.NewServeMux()
	routes := compat.Routes(&compat.Config{
		Driver:       drv,
		Authenticate: func(*http.Request) (compat.Principal, error) { return who, nil },
		WriteError: func(w http.ResponseWriter, _ *http.Request, err error) {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, err.Error())
		},
		ReadBody: func(_ http.ResponseWriter, r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) },
		Done:     make(chan struct{}),
	})
	for pattern, h := range routes {
		mux.HandleFunc(pattern, h)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestReplicasShareLeases: the lease a poll took on one replica is in the plane, so the
// worker's frames and ack may reach another replica (two planes on one PostgreSQL database,
// as two `serve` processes): the job settles, and its attempt's END ends the journal. An
// ack of an attempt no poll took answers lease_lost on every replica.
func TestReplicasShareLeases(t *testing.T) {
	url := pgtest.Database(t)
	var replicas []string
	var drivers []plane.Driver
	for range 2 {
		drv, err := pgplane.Open(t.Context(), url, nil)
		require.NoError(t, err)
		t.Cleanup(func() { drv.Close() })
		drivers = append(drivers, drv)
		replicas = append(replicas, serveCompat(t, drv))
	}
	a, b := replicas[0], replicas[1]
	id := plane.NewIDGenerator().New(time.Now())
	status, out := call(t, a, "/v1/namespaces/default/producer/submit", map[string]any{"invocation_id": id, "queue": "q", "args_blob": []byte{0x01}})
	require.Equal(t, http.StatusOK, status, out)
	status, out = call(t, a, "/v1/daemon/poll", map[string]any{"worker_id": "w1", "timeout_s": 5, "queue": "q"})
	require.Equal(t, http.StatusOK, status, out)
	require.Len(t, out["commands"], 1)
	value := []byte{0x94, 0x00, 0x00, 0xa1, 'x', 0xc0} // [VALUE, 0, "x", nil]
	end := []byte{0x94, 0x03, 0x01, 0xc0, 0xc0}        // [END, 1, nil, nil]
	status, out = call(t, b, "/v1/daemon/result-chunk", map[string]any{"invocation_id": id, "seq": 0, "bytes": value})
	require.Equal(t, http.StatusOK, status, out)
	status, out = call(t, b, "/v1/daemon/result-chunk", map[string]any{"invocation_id": id, "seq": 1, "bytes": end, "final": true})
	require.Equal(t, http.StatusOK, status, out)
	inv, err := drivers[0].InvocationGet(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, plane.StateRunning, inv.State, "END ends the journal, not the job")
	status, out = call(t, b, "/v1/daemon/ack", map[string]any{"invocation_id": id, "state": "succeeded", "result_blob": []byte{0x02}})
	require.Equal(t, http.StatusOK, status, out)
	inv, err = drivers[1].InvocationGet(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, plane.StateSucceeded, inv.State)
	require.Equal(t, []byte{0x02}, inv.Result)
	res, err := drivers[0].FrameRead(t.Context(), &plane.FrameReadParams{Journal: plane.Journal{InvocationID: id}, Since: -1})
	require.NoError(t, err)
	require.True(t, res.Closed)
	require.Len(t, res.Frames, 2, "VALUE, then the worker's END: the ack derives no second END")
	require.Equal(t, plane.FrameEnd, res.Frames[1].Kind)

	// Claimed by our own SDK's verb, not by poll: no replica holds a lease for it.
	other := plane.NewIDGenerator().New(time.Now())
	status, out = call(t, a, "/v1/namespaces/default/producer/submit", map[string]any{"invocation_id": other, "queue": "q2", "args_blob": []byte{0x01}})
	require.Equal(t, http.StatusOK, status, out)
	jobs, err := drivers[0].InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q2", Kind: plane.KindFIFO, Max: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	for _, r := range replicas {
		status, out = call(t, r, "/v1/daemon/ack", map[string]any{"invocation_id": other, "state": "succeeded"})
		require.Equal(t, http.StatusConflict, status, out)
		require.Contains(t, out["text"], "lease")
	}
}

// callAs is call with a bearer token (none when empty).
func callAs(t *testing.T, url, path, token string, body any) (int, map[string]any) {
	t.Helper()
	b, err := msgpack.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-msgpack")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer r.Body.Close()
	raw, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	out := map[string]any{}
	if r.StatusCode == http.StatusOK {
		require.NoError(t, msgpack.Unmarshal(raw, &out))
	} else {
		out["text"] = string(raw)
	}
	return r.StatusCode, out
}

// mint makes a token of namespace ns for every queue over the server's own route.
func mint(t *testing.T, url, admin, ns string, perms ...string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"namespace": ns, "queue": "*", "permissions": perms})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/v1/tokens", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+admin)
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer r.Body.Close()
	var out struct {
		Secret string `json:"secret"`
	}
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.NoError(t, json.NewDecoder(r.Body).Decode(&out))
	return out.Secret
}

// TestPollExtendsOnlyItsTenantsLeases: the worker_id of a poll is the client's choice, so
// another tenant's poll naming the same worker id must not extend this tenant's leases (on
// the old code it did: a tenant could keep another's dead worker's jobs held for ever,
// never queued again). The owner's own poll still extends them.
func TestPollExtendsOnlyItsTenantsLeases(t *testing.T) {
	t.Parallel()
	drv := sqlite(t)
	const admin = "compat-admin-secret"
	srv := server.New(drv, &server.Config{AdminToken: admin})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Stop(); ts.Close() })
	a, b := mint(t, ts.URL, admin, "team-a", "submit", "consume"), mint(t, ts.URL, admin, "team-b", "submit", "consume")
	id := plane.NewIDGenerator().New(time.Now())
	status, out := callAs(t, ts.URL, "/v1/namespaces/team-a/producer/submit", a, map[string]any{"invocation_id": id, "queue": "q", "args_blob": []byte{0x01}})
	require.Equal(t, http.StatusOK, status, out)
	poll := map[string]any{"worker_id": "shared-name", "timeout_s": 0, "queue": "q"}
	status, out = callAs(t, ts.URL, "/v1/daemon/poll", a, poll)
	require.Equal(t, http.StatusOK, status, out)
	require.Len(t, out["commands"], 1)
	leaseEnd := func() time.Time {
		inv, err := drv.InvocationGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, plane.StateRunning, inv.State)
		return inv.LeaseExpiresAt
	}
	first := leaseEnd()
	time.Sleep(20 * time.Millisecond) // past the clock's millisecond
	status, out = callAs(t, ts.URL, "/v1/daemon/poll", b, poll)
	require.Equal(t, http.StatusOK, status, out)
	require.Empty(t, out["commands"])
	require.Equal(t, first, leaseEnd(), "team-b's poll extended nothing of team-a's")
	status, out = callAs(t, ts.URL, "/v1/daemon/poll", a, poll)
	require.Equal(t, http.StatusOK, status, out)
	require.True(t, leaseEnd().After(first), "team-a's own poll extends its lease")
}

// TestLongPollsBounded: the compatibility routes that wait (poll, await, a stream) take the
// server's long-poll slots like ours, so one tenant cannot hold more than its share (on the
// old code they took none: any number of 30-second polls and of streams without end); a
// wait beyond the share answers 503 too_many_long_polls at once, and a poll without a wait
// takes no slot.
func TestLongPollsBounded(t *testing.T) {
	t.Parallel()
	drv := sqlite(t)
	srv := server.New(drv, &server.Config{MaxLongPolls: 8, MaxLongPollsPerTenant: 2})
	ts := httptest.NewServer(srv)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Stop()
		}
		ts.Close()
	})
	id := plane.NewIDGenerator().New(time.Now())
	status, out := call(t, ts.URL, "/v1/namespaces/default/producer/submit", map[string]any{"invocation_id": id, "queue": "q", "args_blob": []byte{0x01}})
	require.Equal(t, http.StatusOK, status, out)
	await := "/v1/namespaces/default/producer/await"
	held := make(chan int, 2)
	go func() {
		status, _ := call(t, ts.URL, await, map[string]any{"invocation_id": id, "timeout_s": 20})
		held <- status
	}()
	streamed := make(chan int, 1)
	go func() {
		r, err := http.Get(ts.URL + "/v1/namespaces/default/producer/invocations/" + id + "/result/stream")
		if err != nil {
			streamed <- 0
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		streamed <- r.StatusCode
	}()
	require.Eventually(t, func() bool {
		r, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return bytes.Contains(b, []byte("lakeshore_http_long_polls_open 2"))
	}, 10*time.Second, 10*time.Millisecond, "the await and the stream hold a slot each")
	start := time.Now()
	status, out = call(t, ts.URL, await, map[string]any{"invocation_id": id, "timeout_s": 20})
	require.Equal(t, http.StatusServiceUnavailable, status, out)
	require.Contains(t, out["text"], "too_many_long_polls")
	require.Less(t, time.Since(start), 10*time.Second, "refused at once, not after its 20 s wait")
	status, out = call(t, ts.URL, await, map[string]any{"invocation_id": id, "timeout_s": 0})
	require.Equal(t, http.StatusOK, status, "no wait, no slot: %v", out)
	stopped = true
	srv.Stop()
	require.Equal(t, http.StatusServiceUnavailable, <-held, "the held await ends with the server's stop")
	require.Equal(t, http.StatusOK, <-streamed)
}

// TestForeignInvocationAnswersAsUnknown: the compatibility routes addressed by invocation id
// (await, ack, a result stream) answer another namespace's invocation exactly like an id no
// invocation has, the same status and the same bytes, as our routes do (docs/http-api.md,
// "Errors"): no existence oracle. On the old code another tenant's id answered "not found:
// invocation <id>" and an unknown one the plane's bare "not found".
func TestForeignInvocationAnswersAsUnknown(t *testing.T) {
	t.Parallel()
	drv := sqlite(t)
	const admin = "compat-admin-secret"
	srv := server.New(drv, &server.Config{AdminToken: admin})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Stop(); ts.Close() })
	a, b := mint(t, ts.URL, admin, "team-a", "submit", "consume", "read"), mint(t, ts.URL, admin, "team-b", "submit", "consume", "read")
	ids := plane.NewIDGenerator()
	theirs, unknown := ids.New(time.Now()), ids.New(time.Now().Add(time.Second))
	status, out := callAs(t, ts.URL, "/v1/namespaces/team-b/producer/submit", b, map[string]any{"invocation_id": theirs, "queue": "q", "args_blob": []byte{0x01}})
	require.Equal(t, http.StatusOK, status, out)
	answer := func(method, path string, body map[string]any) string {
		var rd io.Reader
		if body != nil {
			raw, err := msgpack.Marshal(body)
			require.NoError(t, err)
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, rd)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-msgpack")
		req.Header.Set("Authorization", "Bearer "+a)
		r, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer r.Body.Close()
		raw, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, r.StatusCode, "%s %s: %s", method, path, raw)
		return string(raw)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		path := "/v1/namespaces/" + ns + "/producer/await"
		require.Equal(t, answer("POST", path, map[string]any{"invocation_id": unknown}),
			answer("POST", path, map[string]any{"invocation_id": theirs}), "await in %s", ns)
	}
	require.Equal(t, answer("POST", "/v1/daemon/ack", map[string]any{"invocation_id": unknown, "state": "succeeded"}),
		answer("POST", "/v1/daemon/ack", map[string]any{"invocation_id": theirs, "state": "succeeded"}), "ack")
	stream := "/v1/namespaces/team-b/producer/invocations/%s/result/stream"
	require.Equal(t, strings.ReplaceAll(answer("GET", fmt.Sprintf(stream, unknown), nil), unknown, "ID"),
		strings.ReplaceAll(answer("GET", fmt.Sprintf(stream, theirs), nil), theirs, "ID"), "stream")
	inv, err := drv.InvocationGet(t.Context(), theirs)
	require.NoError(t, err)
	require.Equal(t, plane.StateQueued, inv.State, "nothing of team-b's changed")
}
