package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/porttest"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// The tests of this file SIGKILL the processes of per-key flow control (concurrency keys,
// a worker's "slow down"), schedules and dedup windows — `lakeshore serve`, `lakeshore
// worker`, PostgreSQL — and check that no job is lost, none runs twice in one attempt, the
// keys' counts equal a recount of the invocations, and every wait ends.

// killable is a `lakeshore serve` on one target that can be SIGKILLed and started again on
// the same address, so its clients and workers reach it again as they retry.
type killable struct {
	t      *testing.T
	target string   // the plane's target
	args   []string // serve's other flags (a data store's)
	addr   string
	p      *servedProcess
}

// startKillable starts `lakeshore serve --target target args…` on a loopback port it then
// keeps: one outside the ephemeral range (porttest.Restartable), which no other socket is
// given while the server is down between a kill and its restart.
func startKillable(t *testing.T, target string, args ...string) *killable {
	t.Helper()
	k := &killable{t: t, target: target, args: args, addr: porttest.Restartable(t)}
	k.restart()
	return k
}

func (k *killable) url() string { return "http://" + k.addr }

// kill SIGKILLs the server and waits until it is gone.
func (k *killable) kill() {
	k.t.Helper()
	require.NoError(k.t, k.p.cmd.Process.Signal(syscall.SIGKILL))
	<-k.p.done
}

// restart starts the server again on its address, target and flags.
func (k *killable) restart() {
	k.t.Helper()
	k.p = startServe(k.t, k.target, append(slices.Clone(k.args), "--addr", k.addr)...)
}

// open opens a client of the server that keeps retrying while it is down.
func (k *killable) open(ctx context.Context) *lakeshore.Dispatch {
	k.t.Helper()
	d, err := lakeshore.Open(ctx, k.url(), &lakeshore.Config{HTTP: &httpplane.Config{MaxRetries: 1000}})
	require.NoError(k.t, err)
	k.t.Cleanup(func() { d.Close() })
	return d
}

// execWorker is a `lakeshore worker` child process.
type execWorker struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
}

// startExecWorker starts `lakeshore --target url worker args…`.
func startExecWorker(t *testing.T, url string, args ...string) *execWorker {
	t.Helper()
	w := &execWorker{cmd: exec.Command(binary, append([]string{"--target", url, "worker"}, args...)...),
		stderr: &lockedBuffer{}, done: make(chan struct{})}
	w.cmd.Stderr = w.stderr
	require.NoError(t, w.cmd.Start())
	go func() { w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.done
	})
	return w
}

func (w *execWorker) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGKILL))
	<-w.done
}

// jobLog reads DIR/log, the lines the jobs' commands append: "start|end PAYLOAD ID ATTEMPT".
type jobRun struct {
	event, payload, id string
	attempt            int
}

func readJobLog(t *testing.T, dir string) []jobRun {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var runs []jobRun
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			continue // a line being appended
		}
		n, err := strconv.Atoi(fields[3])
		require.NoError(t, err)
		runs = append(runs, jobRun{fields[0], fields[1], fields[2], n})
	}
	return runs
}

// keyedCommand is a worker's command for payloads "KEY-N": it logs its start, waits for
// DIR/go (sleeping a little after it, so the runs of a key overlap if a claim starts more
// than the limit), and logs its end.
func keyedCommand(dir string) []string {
	return []string{"--", "sh", "-c", `echo "start $1 $LAKESHORE_JOB_ID $LAKESHORE_ATTEMPT" >> "$0/log"
while [ ! -f "$0/go" ]; do sleep 0.02; done
sleep 0.05
echo "end $1 $LAKESHORE_JOB_ID $LAKESHORE_ATTEMPT" >> "$0/log"`, dir, "{}"}
}

// recount compares the key stats of q with a count of its invocations, keyed, claimable
// (queued and due) and running, until they agree, and returns them.
func recountKeys(t *testing.T, ctx context.Context, q *lakeshore.Queue) map[string][2]int64 {
	t.Helper()
	var stats, counted map[string][2]int64
	agree := func() bool {
		keys, err := q.ConcurrencyKeys(ctx)
		if err != nil {
			return false
		}
		stats = map[string][2]int64{}
		for _, k := range keys {
			stats[k.Key] = [2]int64{k.Queued, k.Running}
		}
		counted = map[string][2]int64{}
		now := time.Now()
		for inv, err := range q.All(ctx, nil) {
			if err != nil {
				return false
			}
			if inv.ConcurrencyKey == "" {
				continue
			}
			c := counted[inv.ConcurrencyKey]
			switch {
			case inv.State == lakeshore.StateRunning:
				c[1]++
			case inv.State == lakeshore.StateQueued && !inv.AvailableAt.After(now):
				c[0]++
			default:
				continue
			}
			counted[inv.ConcurrencyKey] = c
		}
		for k, c := range stats { // a key kept for its rate state only counts nothing
			if c == [2]int64{} {
				delete(stats, k)
			}
		}
		return fmt.Sprint(stats) == fmt.Sprint(counted)
	}
	require.Eventually(t, agree, 30*time.Second, 20*time.Millisecond, "key stats %v equal a recount %v", stats, counted)
	return stats
}

// maxOverlap is the largest number of runs of one key that logged a start and no end yet,
// over the runs that logged both (a run killed with its worker logs no end).
func maxOverlap(runs []jobRun) map[string]int {
	ended := map[string]bool{}
	for _, r := range runs {
		if r.event == "end" {
			ended[fmt.Sprint(r.id, r.attempt)] = true
		}
	}
	open, most := map[string]int{}, map[string]int{}
	for _, r := range runs {
		if !ended[fmt.Sprint(r.id, r.attempt)] {
			continue
		}
		key, _, _ := strings.Cut(r.payload, "-")
		if r.event == "start" {
			open[key]++
			most[key] = max(most[key], open[key])
		} else {
			open[key]--
		}
	}
	return most
}

// checkOnceEach checks that every job of ids succeeded, that no attempt of a job logged two
// ends, and that the attempt that succeeded is the one that logged the last end.
func checkOnceEach(t *testing.T, ctx context.Context, q *lakeshore.Queue, ids []string, runs []jobRun) (rerun int) {
	t.Helper()
	ends := map[string][]int{}
	for _, r := range runs {
		if r.event == "end" {
			ends[r.id] = append(ends[r.id], r.attempt)
		}
	}
	for _, id := range ids {
		inv, err := q.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateSucceeded, inv.State, "job %s", id)
		e := ends[id]
		require.NotEmpty(t, e, "job %s logged an end", id)
		require.Len(t, slices.Compact(slices.Sorted(slices.Values(e))), len(e), "job %s: no attempt ran to its end twice: %v", id, e)
		require.Equal(t, inv.Attempt, slices.Max(e), "job %s: the attempt that succeeded ran last", id)
		if len(e) > 1 || inv.Attempt > 1 {
			rerun++
		}
	}
	return rerun
}

// keyedRig is a queue "k" with concurrency limit 2 and 12 jobs, 6 of key a and 6 of key b.
type keyedRig struct {
	q   *lakeshore.Queue
	ids []string
	dir string
	// waited gets the outcome of a wait for each job's result, started at submit.
	waited chan error
}

const keyedLimit = 2

func newKeyedRig(t *testing.T, ctx context.Context, d *lakeshore.Dispatch) *keyedRig {
	return newKeyedRigOf(t, ctx, d, 6)
}

func newKeyedRigOf(t *testing.T, ctx context.Context, d *lakeshore.Dispatch, perKey int) *keyedRig {
	t.Helper()
	q, err := d.Queue("k", nil)
	require.NoError(t, err)
	require.NoError(t, q.SetAdmission(ctx, lakeshore.Admission{ConcurrencyLimit: keyedLimit}))
	r := &keyedRig{q: q, dir: t.TempDir()}
	for i := range perKey {
		for _, key := range []string{"a", "b"} {
			id, err := q.Submit(ctx, fmt.Sprintf("%s-%d", key, i), &lakeshore.SubmitOptions{ConcurrencyKey: key, MaxAttempts: 10})
			require.NoError(t, err)
			r.ids = append(r.ids, id)
		}
	}
	r.waited = make(chan error, len(r.ids))
	for _, id := range r.ids {
		go func() {
			_, err := q.ResultValue(ctx, id, &lakeshore.ResultOptions{Timeout: -1})
			r.waited <- err
		}()
	}
	return r
}

// waitRunning waits until every key runs its limit of jobs (their commands logged a start).
func (r *keyedRig) waitRunning(t *testing.T, ctx context.Context) {
	t.Helper()
	require.Eventually(t, func() bool {
		keys, err := r.q.ConcurrencyKeys(ctx)
		if err != nil || len(keys) != 2 {
			return false
		}
		for _, k := range keys {
			if k.Running != keyedLimit {
				return false
			}
		}
		return len(readJobLog(t, r.dir)) >= 2*keyedLimit
	}, 30*time.Second, 10*time.Millisecond)
}

// release lets the commands end.
func (r *keyedRig) release(t *testing.T) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "go"), nil, 0o600))
}

// waitEnds waits until n runs logged their end.
func (r *keyedRig) waitEnds(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		ended := 0
		for _, run := range readJobLog(t, r.dir) {
			if run.event == "end" {
				ended++
			}
		}
		return ended >= n
	}, 60*time.Second, 5*time.Millisecond)
}

// finish lets the commands end, waits until every job succeeded, and checks the runs.
func (r *keyedRig) finish(t *testing.T, ctx context.Context) {
	t.Helper()
	r.release(t)
	require.Eventually(t, func() bool {
		n, err := r.q.Count(ctx, lakeshore.StateSucceeded)
		return err == nil && n == int64(len(r.ids))
	}, 60*time.Second, 20*time.Millisecond)
	for range r.ids {
		require.NoError(t, <-r.waited, "a wait for a result started before the kills ends with it")
	}
	runs := readJobLog(t, r.dir)
	rerun := checkOnceEach(t, ctx, r.q, r.ids, runs)
	for key, most := range maxOverlap(runs) {
		require.LessOrEqual(t, most, keyedLimit, "key %s never ran more than its limit at once", key)
	}
	require.Empty(t, recountKeys(t, ctx, r.q), "no key counts a job once all ended")
	t.Logf("%d jobs succeeded, %d of them run again after the kill", len(r.ids), rerun)
}

// keyedTargets are the planes the keyed kill tests run on: a SQLite file and PostgreSQL.
func keyedTargets(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"SQLite":     func(t *testing.T) string { return filepath.Join(t.TempDir(), "plane.db") },
		"PostgreSQL": func(t *testing.T) string { return pgtest.Database(t) },
	}
}

// TestKeyedWorkerKilled: a worker holding the leases of a concurrency key's limit of jobs
// (2 of key a, 2 of key b) is SIGKILLed. Once the leases expire the keys count no running
// job (their stats equal a recount of the invocations: none stuck at the limit), a second
// worker runs every job to success, no key ever runs more than its limit at once, no
// attempt runs twice, and no key counts anything at the end.
func TestKeyedWorkerKilled(t *testing.T) {
	for name, target := range keyedTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			s := startKillable(t, target(t))
			r := newKeyedRig(t, ctx, s.open(ctx))
			w := startExecWorker(t, s.url(), append([]string{"k", "--concurrency", "8", "--lease", "1s"}, keyedCommand(r.dir)...)...)
			r.waitRunning(t, ctx)
			w.kill(t)
			require.Eventually(t, func() bool {
				stats := recountKeys(t, ctx, r.q)
				return stats["a"] == [2]int64{6, 0} && stats["b"] == [2]int64{6, 0}
			}, 30*time.Second, 20*time.Millisecond, "the dead worker's leases expire and free their keys")
			startExecWorker(t, s.url(), append([]string{"k", "--concurrency", "8", "--lease", "3s"}, keyedCommand(r.dir)...)...)
			r.finish(t, ctx)
		})
	}
}

// TestKeyedServerKilled: `lakeshore serve` is SIGKILLed while a worker holds the limit of
// two concurrency keys and kept down until their leases ended, then SIGKILLed again
// mid-burn-down, and started again on the same file or database each time. The keys' stats equal a recount of the invocations after each
// restart, every job succeeds, no attempt runs twice, no key runs over its limit, and the
// waits for the jobs' results, started before the kills, end with them.
func TestKeyedServerKilled(t *testing.T) {
	for name, target := range keyedTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			s := startKillable(t, target(t))
			r := newKeyedRig(t, ctx, s.open(ctx))
			startExecWorker(t, s.url(), append([]string{"k", "--concurrency", "8", "--lease", "2s"}, keyedCommand(r.dir)...)...)
			r.waitRunning(t, ctx)
			// The first kill outlasts the running jobs' leases: the restarted server finds
			// them expired, and the worker's next heartbeat is answered lease-lost.
			var expiry time.Time
			for inv, err := range r.q.All(ctx, &lakeshore.ListOptions{State: lakeshore.StateRunning}) {
				require.NoError(t, err)
				if inv.LeaseExpiresAt.After(expiry) {
					expiry = inv.LeaseExpiresAt
				}
			}
			s.kill()
			for time.Now().Before(expiry.Add(100 * time.Millisecond)) {
				time.Sleep(10 * time.Millisecond) // waits out the plane's clock, not another process
			}
			s.restart()
			recountKeys(t, ctx, r.q)
			r.release(t)
			r.waitEnds(t, 6)
			s.kill()
			s.restart()
			recountKeys(t, ctx, r.q)
			r.finish(t, ctx)
		})
	}
}

// TestKeyedPostgresKilled: PostgreSQL itself is crashed (pg_ctl stop -m immediate) while a
// worker holds the limit of two concurrency keys through `lakeshore serve`, and again
// mid-burn-down, and started again each time. The keys' stats equal a recount of the invocations after the restart, and every
// job succeeds without an attempt run twice or a key over its limit. It crashes the test
// binary's shared server, so it never runs in parallel with other tests.
func TestKeyedPostgresKilled(t *testing.T) {
	db := pgtest.Database(t)
	srv := pgtest.Shared(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := startKillable(t, db)
	r := newKeyedRig(t, ctx, s.open(ctx))
	startExecWorker(t, s.url(), append([]string{"k", "--concurrency", "8", "--lease", "3s"}, keyedCommand(r.dir)...)...)
	r.waitRunning(t, ctx)
	require.NoError(t, srv.Crash())
	require.NoError(t, srv.Resume())
	recountKeys(t, ctx, r.q)
	r.release(t)
	r.waitEnds(t, 6)
	require.NoError(t, srv.Crash())
	require.NoError(t, srv.Resume())
	recountKeys(t, ctx, r.q)
	r.finish(t, ctx)
}

// TestRateLimitedKilled: a job of key k with one attempt is handed back by its worker's
// "slow down" answer (--rate-limited-exit 75, --rate-limited-delay 4s), and a second job of
// k waits behind the hold. The worker and then `lakeshore serve` are SIGKILLed during the
// hold, and the server started again. Neither job is lost, the handed-back one kept its
// attempt (it succeeds with its one attempt), and neither starts before the hold ends.
func TestRateLimitedKilled(t *testing.T) {
	for name, target := range keyedTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			s := startKillable(t, target(t))
			q, err := s.open(ctx).Queue("rl", nil)
			require.NoError(t, err)
			dir := t.TempDir()
			// The first run of a payload answers "slow down"; later runs log and succeed.
			command := []string{"rl", "--rate-limited-exit", "75", "--rate-limited-delay", "4s", "--",
				"sh", "-c", `if [ ! -f "$0/slowed-$1" ]; then touch "$0/slowed-$1"; exit 75; fi
echo "end $1 $LAKESHORE_JOB_ID $LAKESHORE_ATTEMPT" >> "$0/log"`, dir, "{}"}
			first, err := q.Submit(ctx, "k-0", &lakeshore.SubmitOptions{ConcurrencyKey: "k", MaxAttempts: 1})
			require.NoError(t, err)
			w := startExecWorker(t, s.url(), command...)
			var held *lakeshore.Invocation
			require.Eventually(t, func() bool {
				held, err = q.Get(ctx, first)
				return err == nil && held.State == lakeshore.StateQueued && held.Error != nil
			}, 30*time.Second, 10*time.Millisecond, "the job is handed back")
			require.Equal(t, "rate_limited", held.Error.Type)
			require.Equal(t, 0, held.Attempt, "the slow-down kept the attempt")
			// A second job of the key, created after the slow-down: only the hold keeps it.
			second, err := q.Submit(ctx, "k-1", &lakeshore.SubmitOptions{ConcurrencyKey: "k", MaxAttempts: 1})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "slowed-k-1"), nil, 0o600))
			w.kill(t)
			s.kill()
			s.restart()
			after, err := q.Get(ctx, first)
			require.NoError(t, err)
			require.Equal(t, lakeshore.StateQueued, after.State)
			require.Equal(t, 0, after.Attempt)
			require.Equal(t, held.AvailableAt, after.AvailableAt)
			waiting, err := q.Get(ctx, second)
			require.NoError(t, err)
			require.Equal(t, lakeshore.StateQueued, waiting.State, "the hold kept the key's other job from starting")
			require.Equal(t, 0, waiting.Attempt)
			startExecWorker(t, s.url(), command...)
			for _, id := range []string{first, second} {
				_, err := q.ResultValue(ctx, id, nil)
				require.NoError(t, err, "job %s", id)
				inv, err := q.Get(ctx, id)
				require.NoError(t, err)
				require.Equal(t, 1, inv.Attempt, "job %s ran in its one attempt", id)
				require.False(t, inv.StartedAt.Before(held.AvailableAt),
					"job %s started at %v, before the hold ended at %v", id, inv.StartedAt, held.AvailableAt)
			}
			runs := readJobLog(t, dir)
			require.Len(t, runs, 2, "each job ran to its end once: %v", runs)
			require.Empty(t, recountKeys(t, ctx, q))
		})
	}
}

// TestDedupServerKilled: the dedup windows hold across a SIGKILL of `lakeshore serve` and
// its restart on the same file or database. A unique_for (throttle) key answers its first
// id after the restart, and submits of one key racing the kill (each retried until it is
// answered) all get one id; a window that passed while the server was down lets the key be
// taken over; a debounced key folds the submit after the restart into the job before it
// (the last payload, due a window after the last submit). Every job runs once.
func TestDedupServerKilled(t *testing.T) {
	for name, target := range keyedTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			s := startKillable(t, target(t))
			q, err := s.open(ctx).Queue("dedup", nil)
			require.NoError(t, err)
			submit := func(payload string, o lakeshore.SubmitOptions) lakeshore.SubmitResult {
				t.Helper()
				res, err := q.SubmitManyResults(ctx, []lakeshore.Submission{{Payload: payload, SubmitOptions: o}})
				require.NoError(t, err)
				return res[0]
			}
			unique := submit("u-0", lakeshore.SubmitOptions{Key: "u", UniqueFor: time.Hour})
			short := submit("w-0", lakeshore.SubmitOptions{Key: "w", UniqueFor: time.Second})
			shortInv, err := q.Get(ctx, short.ID)
			require.NoError(t, err)
			debounced := submit("d-0", lakeshore.SubmitOptions{Key: "d", Debounce: time.Hour})

			// Submits of key r race the kill, each retried until it is answered.
			const racers = 8
			ids := make(chan string, racers)
			for i := range racers {
				go func() {
					for ctx.Err() == nil {
						res, err := q.SubmitManyResults(ctx, []lakeshore.Submission{{Payload: fmt.Sprintf("r-%d", i),
							SubmitOptions: lakeshore.SubmitOptions{Key: "r", UniqueFor: time.Hour}}})
						if err == nil {
							ids <- res[0].ID
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
					ids <- ""
				}()
			}
			s.kill()
			for time.Now().Before(shortInv.CreatedAt.Add(1100 * time.Millisecond)) {
				time.Sleep(10 * time.Millisecond) // waits out w's window on the clock, not another process
			}
			s.restart()

			again := submit("u-1", lakeshore.SubmitOptions{Key: "u", UniqueFor: time.Hour})
			require.Equal(t, lakeshore.SubmitResult{ID: unique.ID, Existing: true}, again, "the window holds after the restart")
			taken := submit("w-1", lakeshore.SubmitOptions{Key: "w", UniqueFor: time.Second})
			require.False(t, taken.Existing, "the window that passed while the server was down lets the key go")
			require.NotEqual(t, short.ID, taken.ID)
			foldedAt := time.Now()
			folded := submit("d-1", lakeshore.SubmitOptions{Key: "d", Debounce: time.Hour})
			require.Equal(t, lakeshore.SubmitResult{ID: debounced.ID, Existing: true}, folded, "the debounce folds after the restart")
			d, err := q.Get(ctx, debounced.ID)
			require.NoError(t, err)
			payload, err := wire.Decode(d.Payload)
			require.NoError(t, err)
			require.Equal(t, "d-1", payload, "the fold's payload is the last submit's")
			require.Equal(t, lakeshore.StateQueued, d.State)
			require.False(t, d.AvailableAt.Before(foldedAt.Add(time.Hour-time.Second)),
				"due a window after the last submit (%v), not the first (%v)", d.AvailableAt, debounced)
			ds, err := q.List(ctx, &lakeshore.ListOptions{KeyPrefix: "d", Limit: 1000})
			require.NoError(t, err)
			require.Len(t, ds.Invocations, 1, "one invocation of key d")
			var raced []string
			for range racers {
				raced = append(raced, <-ids)
			}
			require.Len(t, slices.Compact(raced), 1, "every submit of r got one id: %v", raced)
			require.NotEmpty(t, raced[0])
			rs, err := q.List(ctx, &lakeshore.ListOptions{KeyPrefix: "r", Limit: 1000})
			require.NoError(t, err)
			require.Len(t, rs.Invocations, 1, "one invocation of key r")

			dir := t.TempDir()
			startExecWorker(t, s.url(), "dedup", "--",
				"sh", "-c", `echo "end $1 $LAKESHORE_JOB_ID $LAKESHORE_ATTEMPT" >> "$0/log"`, dir, "{}")
			want := []string{unique.ID, short.ID, taken.ID, raced[0]}
			for _, id := range want {
				_, err := q.ResultValue(ctx, id, nil)
				require.NoError(t, err, "job %s", id)
			}
			byPayload := map[string]string{}
			for _, r := range readJobLog(t, dir) {
				require.NotContains(t, byPayload, r.payload, "payload %s ran once", r.payload)
				byPayload[r.payload] = r.id
			}
			require.Len(t, byPayload, len(want))
			n, err := q.Count(ctx, lakeshore.StateSucceeded)
			require.NoError(t, err)
			require.EqualValues(t, len(want), n, "nothing else was enqueued")
		})
	}
}

// fire is one invocation a schedule submitted: its tick and when the plane created it.
type fire struct {
	tick, created time.Time
	id            string
}

// scheduleFires lists the fires of schedule name in q, by tick. It fails t if two
// invocations name one tick.
func scheduleFires(t *testing.T, ctx context.Context, q *lakeshore.Queue, name string) []fire {
	t.Helper()
	var fires []fire
	seen := map[int64]bool{}
	for inv, err := range q.All(ctx, &lakeshore.ListOptions{KeyPrefix: "schedule/" + name + "/", Oldest: true}) {
		require.NoError(t, err)
		tick, err := time.Parse("2006-01-02T15:04:05.000Z", strings.TrimPrefix(inv.Key, "schedule/"+name+"/"))
		require.NoError(t, err, "key %s", inv.Key)
		require.False(t, seen[tick.UnixMilli()], "tick %v fired twice", tick)
		seen[tick.UnixMilli()] = true
		fires = append(fires, fire{tick, inv.CreatedAt, inv.ID})
	}
	slices.SortFunc(fires, func(a, b fire) int { return a.tick.Compare(b.tick) })
	return fires
}

// waitFires waits until schedule name has fired a tick at or after at.
func waitFires(t *testing.T, ctx context.Context, q *lakeshore.Queue, name string, at time.Time) {
	t.Helper()
	require.Eventually(t, func() bool {
		f := scheduleFires(t, ctx, q, name)
		return len(f) > 0 && !f[len(f)-1].tick.Before(at)
	}, 60*time.Second, 20*time.Millisecond, "schedule %s fires a tick at or after %v", name, at)
}

// atNextSecond waits for the next whole second of the clock (an interval schedule's tick of
// every second) and returns it.
func atNextSecond() time.Time {
	tick := time.Now().Truncate(time.Second).Add(time.Second)
	for time.Now().Before(tick) {
		time.Sleep(time.Until(tick))
	}
	return tick
}

// checkCatchUp checks the fires of a one-second schedule across a time when no process
// fired it: killed after the kill of its firing process, resumed when another took over.
// Every tick after the kill and before resumed-1s is one no pass could fire before resumed.
// CatchUpAll fires every tick with none missing; CatchUpOnce and CatchUpSkip (downtime
// under plane.ScheduleGrace) fire only the latest tick at each pass, so each fire's tick is
// less than the interval before the fire, and none of those ticks.
func checkCatchUp(t *testing.T, policy lakeshore.CatchUp, fires []fire, killed, resumed time.Time) {
	t.Helper()
	var missed int
	fired := map[int64]bool{}
	for _, f := range fires {
		fired[f.tick.UnixMilli()] = true
	}
	for tick := killed.Truncate(time.Second).Add(time.Second); tick.Before(resumed.Add(-time.Second)); tick = tick.Add(time.Second) {
		missed++
		if policy == lakeshore.CatchUpAll {
			require.True(t, fired[tick.UnixMilli()], "%s: the tick %v missed while down fired", policy, tick)
		} else {
			require.False(t, fired[tick.UnixMilli()], "%s: the tick %v missed while down did not fire", policy, tick)
		}
	}
	require.GreaterOrEqual(t, missed, 2, "the test kept the schedule unfired over two ticks")
	for i, f := range fires {
		if policy == lakeshore.CatchUpAll {
			if i > 0 {
				require.Equal(t, fires[i-1].tick.Add(time.Second), f.tick, "%s: no tick missing", policy)
			}
			continue
		}
		require.Less(t, f.created.Sub(f.tick), time.Second, "%s: the tick %v fired at %v is the latest due", policy, f.tick, f.created)
	}
}

// TestScheduleServerKilled: `lakeshore serve` (SQLite), its maintenance firing schedules
// of a tick a second under each catch-up policy, is SIGKILLed at a tick and kept down over
// three more, then started again on the same file. No tick fires twice; the ticks missed
// while down fire by the policy (all: each, once and skip: the latest only, at the first
// pass after the restart), and the ticks after it fire.
func TestScheduleServerKilled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := startKillable(t, filepath.Join(t.TempDir(), "plane.db"))
	q, err := s.open(ctx).Queue("sched", nil)
	require.NoError(t, err)
	policies := []lakeshore.CatchUp{lakeshore.CatchUpAll, lakeshore.CatchUpOnce, lakeshore.CatchUpSkip}
	for _, p := range policies {
		_, err := q.Schedule(ctx, string(p), "tick", &lakeshore.ScheduleOptions{Every: time.Second, CatchUp: p})
		require.NoError(t, err)
	}
	started := time.Now()
	for _, p := range policies {
		waitFires(t, ctx, q, string(p), started.Add(time.Second))
	}
	killed := atNextSecond()
	s.kill()
	for time.Now().Before(killed.Add(3500 * time.Millisecond)) {
		time.Sleep(10 * time.Millisecond) // keeps the server down over three ticks of the clock
	}
	resumed := time.Now()
	s.restart()
	after := time.Now().Add(time.Second)
	for _, p := range policies {
		waitFires(t, ctx, q, string(p), after)
		checkCatchUp(t, p, scheduleFires(t, ctx, q, string(p)), killed, resumed)
	}
}

// TestScheduleLeaderKilled: two `lakeshore serve` replicas on one PostgreSQL database; the
// maintenance leader, firing schedules of a tick a second (catch-up all and once), is
// SIGKILLed at a tick. The other replica takes the lease once the dead one's ends, and
// fires: no tick twice, every tick missed meanwhile under all, only the latest under once.
func TestScheduleLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a leader lease (~20 s)")
	}
	t.Parallel()
	db := pgtest.Database(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	defer pool.Close()
	leader := func() string {
		var holder string
		if pool.QueryRow(ctx, `SELECT holder FROM lakeshore.leases WHERE name = 'maintenance' AND expires_at > now()`).Scan(&holder) != nil {
			return ""
		}
		return holder
	}
	first := startKillable(t, db)
	require.Eventually(t, func() bool { return leader() != "" }, 30*time.Second, 20*time.Millisecond)
	dead := leader()
	second := startKillable(t, db)
	q, err := second.open(ctx).Queue("sched", nil)
	require.NoError(t, err)
	policies := []lakeshore.CatchUp{lakeshore.CatchUpAll, lakeshore.CatchUpOnce}
	for _, p := range policies {
		_, err := q.Schedule(ctx, string(p), "tick", &lakeshore.ScheduleOptions{Every: time.Second, CatchUp: p})
		require.NoError(t, err)
	}
	started := time.Now()
	for _, p := range policies {
		waitFires(t, ctx, q, string(p), started.Add(time.Second))
	}
	require.Equal(t, dead, leader(), "the first replica still leads")
	killed := atNextSecond()
	first.kill()
	// No pass fires before the dead leader's lease ends (the other replica takes it then).
	var resumed time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT expires_at FROM lakeshore.leases WHERE name = 'maintenance' AND holder = $1`, dead).Scan(&resumed))
	require.Eventually(t, func() bool { l := leader(); return l != "" && l != dead }, 2*pgplane.LeaderTTLDefault+10*time.Second,
		20*time.Millisecond, "the other replica takes the maintenance lease")
	after := time.Now().Add(time.Second)
	for _, p := range policies {
		waitFires(t, ctx, q, string(p), after)
		checkCatchUp(t, p, scheduleFires(t, ctx, q, string(p)), killed, resumed)
	}
}

// TestKeyRateServerKilled: a key's start rate (key_rate_limit 2 a second, key_burst 1)
// holds across a SIGKILL of `lakeshore serve` and its restart: the bucket lives in the
// plane, so the restarted server starts the key's jobs no faster than before the kill.
// Every two starts of the key are at least half a second apart on the plane's clock, and
// every job succeeds once.
func TestKeyRateServerKilled(t *testing.T) {
	for name, target := range keyedTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			s := startKillable(t, target(t))
			q, err := s.open(ctx).Queue("rate", nil)
			require.NoError(t, err)
			require.NoError(t, q.SetAdmission(ctx, lakeshore.Admission{KeyRateLimit: 2, KeyBurst: 1}))
			var ids []string
			for i := range 8 {
				id, err := q.Submit(ctx, fmt.Sprintf("k-%d", i), &lakeshore.SubmitOptions{ConcurrencyKey: "k", MaxAttempts: 10})
				require.NoError(t, err)
				ids = append(ids, id)
			}
			dir := t.TempDir()
			startExecWorker(t, s.url(), "rate", "--concurrency", "4", "--",
				"sh", "-c", `echo "end $1 $LAKESHORE_JOB_ID $LAKESHORE_ATTEMPT" >> "$0/log"`, dir, "{}")
			require.Eventually(t, func() bool { return len(readJobLog(t, dir)) >= 3 }, 30*time.Second, 5*time.Millisecond)
			s.kill()
			s.restart()
			require.Eventually(t, func() bool {
				n, err := q.Count(ctx, lakeshore.StateSucceeded)
				return err == nil && n == int64(len(ids))
			}, 60*time.Second, 20*time.Millisecond)
			checkOnceEach(t, ctx, q, ids, readJobLog(t, dir))
			var starts []time.Time
			for _, id := range ids {
				inv, err := q.Get(ctx, id)
				require.NoError(t, err)
				starts = append(starts, inv.StartedAt)
			}
			slices.SortFunc(starts, time.Time.Compare)
			for i := 1; i < len(starts); i++ {
				require.GreaterOrEqual(t, starts[i].Sub(starts[i-1]), 500*time.Millisecond-time.Millisecond,
					"start %d of the key came %v after the one before", i, starts[i].Sub(starts[i-1]))
			}
		})
	}
}

// TestScheduleEmbeddedWorkersKilled: with no server, two `lakeshore worker` processes on
// one SQLite file each run the plane's maintenance and so fire the schedules (a tick a
// second, catch-up all and once) and run the fires. One is SIGKILLed at a tick, the other
// goes on firing; then it is SIGKILLed at a tick too, nothing runs over three ticks, and a
// third worker starts. No tick fires twice, none is missed while a worker lives, the ticks
// missed while none did fire by the policy, and every fire runs to success once per
// attempt (those the killed workers held after their leases).
func TestScheduleEmbeddedWorkersKilled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	target, dir := filepath.Join(t.TempDir(), "plane.db"), t.TempDir()
	// The test's own plane runs maintenance too while it is open (as any process holding
	// lakeshore.Open does), so it is closed while no worker may fire.
	open := func() (*lakeshore.Dispatch, *lakeshore.Queue) {
		d, err := lakeshore.Open(ctx, target, nil)
		require.NoError(t, err)
		q, err := d.Queue("sched", nil)
		require.NoError(t, err)
		return d, q
	}
	d, q := open()
	policies := []lakeshore.CatchUp{lakeshore.CatchUpAll, lakeshore.CatchUpOnce}
	for _, p := range policies {
		_, err := q.Schedule(ctx, string(p), string(p), &lakeshore.ScheduleOptions{Every: time.Second, CatchUp: p, MaxAttempts: 10})
		require.NoError(t, err)
	}
	worker := func() *execWorker {
		return startExecWorker(t, target, "sched", "--concurrency", "4", "--lease", "1s", "--",
			"sh", "-c", `echo "end $1 $LAKESHORE_JOB_ID $LAKESHORE_ATTEMPT" >> "$0/log"`, dir, "{}")
	}
	waitAll := func(at time.Time) {
		t.Helper()
		for _, p := range policies {
			waitFires(t, ctx, q, string(p), at)
		}
	}
	a, b := worker(), worker()
	waitAll(time.Now().Add(time.Second))
	atNextSecond()
	a.kill(t)
	waitAll(time.Now().Add(2 * time.Second))
	require.NoError(t, d.Close())
	killed := atNextSecond()
	b.kill(t)
	for time.Now().Before(killed.Add(3500 * time.Millisecond)) {
		time.Sleep(10 * time.Millisecond) // keeps every worker down over three ticks of the clock
	}
	resumed := time.Now()
	worker()
	d, q = open()
	defer d.Close()
	waitAll(time.Now().Add(time.Second))
	var ids []string
	for _, p := range policies {
		fires := scheduleFires(t, ctx, q, string(p))
		checkCatchUp(t, p, fires, killed, resumed)
		for _, f := range fires {
			ids = append(ids, f.id)
		}
	}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if inv, err := q.Get(ctx, id); err != nil || inv.State != lakeshore.StateSucceeded {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every fire runs")
	checkOnceEach(t, ctx, q, ids, readJobLog(t, dir))
}
