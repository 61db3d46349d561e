package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
)

// servedProcess is one `lakeshore serve` child process.
type servedProcess struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

// startServe starts `lakeshore serve --target target --addr 127.0.0.1:0 [args…]` as a child
// process and returns once it listens.
func startServe(t *testing.T, target string, args ...string) *servedProcess {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--target", target, "--addr", "127.0.0.1:0"}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvAdminToken+"=") && !strings.HasPrefix(kv, lakeshore.EnvURL+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &servedProcess{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`url=(http://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case p.url = <-urls:
	case <-p.done:
		t.Fatalf("lakeshore serve exited at start")
	case <-time.After(30 * time.Second):
		t.Fatalf("lakeshore serve did not start within 30 s")
	}
	return p
}

// failover is how a client of several `lakeshore serve` replicas survives one dying: each
// Dispatch is bound to one replica with a short Unreachable bound, and a call that fails
// for any reason but its own outcome (the replica refuses connections, or the connection
// broke mid-call) is re-issued on the next replica. Re-issuing is safe because every call
// is: submits carry idempotency keys (the same key yields the same id), settles are fenced
// by the lease token (the plane settles once; a lost answer then reads ErrLeaseLost or the
// job is already terminal), and waits read state kept in PostgreSQL.
type failover struct {
	queues   []*lakeshore.Queue
	reissued atomic.Int64 // calls that failed on one replica and were re-issued
}

// do runs call on replica start, then on the next ones while it fails with anything but
// ErrLeaseLost, for up to a minute.
func (f *failover) do(ctx context.Context, start int, call func(q *lakeshore.Queue) error) (int, error) {
	deadline := time.Now().Add(time.Minute)
	i := start
	for {
		err := call(f.queues[i%len(f.queues)])
		if err == nil || errors.Is(err, lakeshore.ErrLeaseLost) || ctx.Err() != nil || time.Now().After(deadline) {
			return i % len(f.queues), err
		}
		i++
		f.reissued.Add(1)
		time.Sleep(20 * time.Millisecond)
	}
}

// clusterJobs is the number of jobs of a cluster test: $LAKESHORE_CLUSTER_JOBS, else
// fallback (a few thousand, for CI).
func clusterJobs(t *testing.T, fallback int) int {
	t.Helper()
	if v := os.Getenv("LAKESHORE_CLUSTER_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	return fallback
}

// clusterClients opens one Dispatch per replica, with a short Unreachable bound, and
// returns the failover clients of queues "jobs" and "waited".
func clusterClients(t *testing.T, ctx context.Context, servers []*servedProcess) (jobs, waited *failover) {
	t.Helper()
	jobs, waited = &failover{}, &failover{}
	for _, s := range servers {
		d, err := lakeshore.Open(ctx, s.url, &lakeshore.Config{HTTP: &httpplane.Config{Unreachable: time.Second, MaxRetries: 2}})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		q, err := d.Queue("jobs", &lakeshore.QueueOptions{LeaseTTL: 3 * time.Second})
		require.NoError(t, err)
		jobs.queues = append(jobs.queues, q)
		w, err := d.Queue("waited", &lakeshore.QueueOptions{LeaseTTL: 3 * time.Second})
		require.NoError(t, err)
		waited.queues = append(waited.queues, w)
	}
	return jobs, waited
}

// clusterWaiters submits n jobs of queue "waited" that nobody claims until serveWaited, and
// starts a waiter for each on replica home(i) (re-issued on the next replica on failure).
type clusterWaiters struct {
	fo         *failover
	ids        []string
	errs       chan error
	failedOver atomic.Int64 // waiters that got their result from another replica
}

func startWaiters(t *testing.T, ctx context.Context, fo *failover, n int, home func(i int) int) *clusterWaiters {
	t.Helper()
	w := &clusterWaiters{fo: fo, ids: make([]string, n), errs: make(chan error, n)}
	for i := range w.ids {
		_, err := fo.do(ctx, 1, func(q *lakeshore.Queue) error {
			var err error
			w.ids[i], err = q.Submit(ctx, i, &lakeshore.SubmitOptions{Key: fmt.Sprintf("w-%d", i)})
			return err
		})
		require.NoError(t, err)
	}
	for i, id := range w.ids {
		go func() {
			var got int
			at, err := fo.do(ctx, home(i), func(q *lakeshore.Queue) error {
				return q.Result(ctx, id, &got, &lakeshore.ResultOptions{Timeout: 2 * time.Minute})
			})
			if at != home(i) {
				w.failedOver.Add(1)
			}
			if err == nil && got != i*10 {
				err = fmt.Errorf("waiter %d got %d", i, got)
			}
			w.errs <- err
		}()
	}
	return w
}

// serve runs the waited jobs on the replicas (from replica from on), answering n*10.
func (w *clusterWaiters) serve(t *testing.T, l *clusterLoad, from int) {
	l.wwg.Add(1)
	go func() {
		defer l.wwg.Done()
		home := from
		for done := 0; done < len(w.ids) && l.workCtx.Err() == nil; {
			var job *lakeshore.Job
			at, err := w.fo.do(l.workCtx, home, func(q *lakeshore.Queue) error {
				var err error
				job, err = q.Claim(l.workCtx, &lakeshore.ClaimOptions{Wait: time.Second})
				return err
			})
			home = at
			if err != nil || job == nil {
				continue
			}
			var n int
			if err := job.Decode(&n); err != nil {
				t.Errorf("decode: %v", err)
			}
			if _, err := w.fo.do(l.workCtx, home, func(q *lakeshore.Queue) error { return q.Ack(l.workCtx, job, n*10) }); err == nil {
				done++
			}
		}
	}()
}

// wait waits for every waiter's result.
func (w *clusterWaiters) wait(t *testing.T) {
	t.Helper()
	for range w.ids {
		require.NoError(t, <-w.errs)
	}
}

// clusterLoad is the workload of the cluster tests on queue "jobs": producers submitting
// keyed batches and workers claiming and acking, spread over the replicas through
// failover, with what each of them saw.
type clusterLoad struct {
	t        *testing.T
	jobs     int
	fo       *failover
	mu       sync.Mutex
	acked    map[string]string // key → id, acknowledged submits
	settled  map[string]int    // id → acks that returned nil
	ran      map[string]int    // id → handler runs
	lost     atomic.Int64      // acks answered ErrLeaseLost
	nSettled atomic.Int64
	pwg, wwg sync.WaitGroup
	workCtx  context.Context
	stopWork context.CancelFunc
}

func newClusterLoad(t *testing.T, ctx context.Context, jobs int, fo *failover) *clusterLoad {
	l := &clusterLoad{t: t, jobs: jobs, fo: fo, acked: map[string]string{}, settled: map[string]int{}, ran: map[string]int{}}
	l.workCtx, l.stopWork = context.WithCancel(ctx)
	t.Cleanup(l.stopWork)
	return l
}

// produce starts producers (spread over the replicas) submitting the jobs in keyed batches.
func (l *clusterLoad) produce(ctx context.Context, producers, batch int) {
	for p := range producers {
		l.pwg.Add(1)
		go func() {
			defer l.pwg.Done()
			for start := p * batch; start < l.jobs; start += producers * batch {
				subs := make([]lakeshore.Submission, 0, batch)
				for n := start; n < min(start+batch, l.jobs); n++ {
					subs = append(subs, lakeshore.Submission{Payload: n, SubmitOptions: lakeshore.SubmitOptions{Key: fmt.Sprintf("k-%d", n)}})
				}
				var ids []string
				_, err := l.fo.do(ctx, p%len(l.fo.queues), func(q *lakeshore.Queue) error {
					var err error
					ids, err = q.SubmitMany(ctx, subs)
					return err
				})
				if err != nil {
					l.t.Errorf("submit %d: %v", start, err)
					return
				}
				l.mu.Lock()
				for i, id := range ids {
					if prev, ok := l.acked[subs[i].Key]; ok && prev != id {
						l.t.Errorf("key %s acknowledged as %s and %s", subs[i].Key, prev, id)
					}
					l.acked[subs[i].Key] = id
				}
				l.mu.Unlock()
			}
		}()
	}
}

// work starts workers (spread over the replicas) claiming up to 10 at a time and acking
// each job, until stopWork.
func (l *clusterLoad) work(workers int) {
	for w := range workers {
		l.wwg.Add(1)
		go func() {
			defer l.wwg.Done()
			home := w % len(l.fo.queues)
			for l.workCtx.Err() == nil {
				var claimed []*lakeshore.Job
				at, err := l.fo.do(l.workCtx, home, func(q *lakeshore.Queue) error {
					var err error
					claimed, err = q.ClaimMany(l.workCtx, 10, &lakeshore.ClaimOptions{Wait: 500 * time.Millisecond})
					return err
				})
				home = at
				if err != nil {
					continue
				}
				for _, job := range claimed {
					l.mu.Lock()
					l.ran[job.ID]++
					l.mu.Unlock()
					var err error
					home, err = l.fo.do(l.workCtx, home, func(q *lakeshore.Queue) error { return q.Ack(l.workCtx, job, "ok") })
					switch {
					case err == nil:
						l.mu.Lock()
						l.settled[job.ID]++
						l.mu.Unlock()
						l.nSettled.Add(1)
					case errors.Is(err, lakeshore.ErrLeaseLost):
						l.lost.Add(1)
					}
				}
			}
		}()
	}
}

// finish waits for the producers and for every acknowledged job to end succeeded, stops the
// workers and checks the outcome: one job per key with its acknowledged id, none left
// non-terminal, none acknowledged twice. It returns how many jobs ran more than once and
// how many had more than one attempt.
func (l *clusterLoad) finish(ctx context.Context, pool *pgxpool.Pool) (reran, multi int) {
	t := l.t
	t.Helper()
	l.pwg.Wait()
	require.False(t, t.Failed())
	require.Len(t, l.acked, l.jobs, "every submit acknowledged")
	// Every acknowledged job ends succeeded; jobs claimed through a broken replica or
	// connection whose answer never came back are re-claimed once their 3 s lease expires.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakeshore.invocations WHERE queue = 'jobs' AND state = 2`).Scan(&n))
		return n == l.jobs
	}, 2*time.Minute, 100*time.Millisecond)
	l.stopWork()
	l.wwg.Wait()

	var total, nonTerminal int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state < 2), count(*) FILTER (WHERE attempt > 1)
		FROM lakeshore.invocations WHERE queue = 'jobs'`).Scan(&total, &nonTerminal, &multi))
	require.Equal(t, l.jobs, total, "one job per key: no acknowledged submit lost, none duplicated")
	require.Zero(t, nonTerminal)
	rows, err := pool.Query(ctx, `SELECT key, id FROM lakeshore.invocations WHERE queue = 'jobs'`)
	require.NoError(t, err)
	for rows.Next() {
		var key, id string
		require.NoError(t, rows.Scan(&key, &id))
		require.Equal(t, l.acked[key], id, "the acknowledged id of %s", key)
	}
	require.NoError(t, rows.Err())
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, n := range l.settled {
		if n > 1 {
			t.Errorf("job %s acknowledged %d times", id, n)
		}
	}
	for _, n := range l.ran {
		if n > 1 {
			reran++
		}
	}
	return reran, multi
}

// TestServeReplicaKilled runs three `lakeshore serve --target postgres://…` processes on one
// PostgreSQL, producers and workers spread over them, and SIGKILLs the maintenance leader in
// the middle of the jobs ($LAKESHORE_CLUSTER_JOBS, default 3,000). Every acknowledged
// submit exists and ends succeeded, no job is acknowledged twice, another replica takes the
// maintenance lease within its TTL, and waiters on the killed replica re-issue their wait on
// another one and get their results.
func TestServeReplicaKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and waits out a leader lease (~30 s)")
	}
	jobs := clusterJobs(t, 3000)
	db := pgtest.Database(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	defer pool.Close()
	leader := func() string {
		var holder string
		err := pool.QueryRow(ctx, `SELECT holder FROM lakeshore.leases WHERE name = 'maintenance' AND expires_at > now()`).Scan(&holder)
		if err != nil {
			return ""
		}
		return holder
	}

	// The first replica becomes the maintenance leader before the others start.
	servers := []*servedProcess{startServe(t, db)}
	require.Eventually(t, func() bool { return leader() != "" }, 30*time.Second, 50*time.Millisecond)
	first := leader()
	servers = append(servers, startServe(t, db), startServe(t, db))
	fo, wfo := clusterClients(t, ctx, servers)

	// Waiters on the doomed replica (0) for jobs nobody claims until it died.
	const waiters = 30
	w := startWaiters(t, ctx, wfo, waiters, func(int) int { return 0 })

	// CPU accounting: the replicas' and PostgreSQL's CPU seconds during the run.
	port := int(pool.Config().ConnConfig.Port)
	var serverCPU [3]float64
	for i, s := range servers {
		serverCPU[i] = -cpuSeconds(s.cmd.Process.Pid)
	}
	pgCPU := -postgresCPU(port)

	// Producers, two per replica, submit in keyed batches of 25; workers, two per replica,
	// claim up to 10 at a time and ack each job.
	l := newClusterLoad(t, ctx, jobs, fo)
	l.produce(ctx, 6, 25)
	l.work(6)

	// SIGKILL the leader replica a third of the way through.
	start := time.Now()
	require.Eventually(t, func() bool { return l.nSettled.Load() >= int64(jobs/3) }, 3*time.Minute, 5*time.Millisecond)
	serverCPU[0] += cpuSeconds(servers[0].cmd.Process.Pid)
	require.NoError(t, servers[0].cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	<-servers[0].done
	t.Logf("SIGKILLed replica 0 (the leader) after %d of %d jobs settled, %v in", l.nSettled.Load(), jobs, killed.Sub(start).Round(time.Millisecond))

	// Another replica takes the maintenance lease when the dead leader's lease ends, within
	// a maintenance interval (its next try) and some slack, timed on PostgreSQL's clock
	// from the lease's end: a renewal in flight at the kill may have moved that end to a
	// whole TTL after it.
	var ended time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT expires_at FROM lakeshore.leases WHERE name = 'maintenance' AND holder = $1`, first).Scan(&ended))
	var taken time.Time
	require.Eventually(t, func() bool {
		if l := leader(); l == "" || l == first {
			return false
		}
		require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&taken))
		return true
	}, 2*pgplane.LeaderTTLDefault+10*time.Second, 50*time.Millisecond)
	handover := taken.Sub(ended)
	t.Logf("leader hand-over %v after the dead leader's lease ended, %v after the kill (lease TTL %v)",
		handover.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), pgplane.LeaderTTLDefault)
	require.GreaterOrEqual(t, handover, time.Duration(0), "not before the dead leader's lease ended")
	require.Less(t, handover, pgplane.MaintenanceIntervalDefault+2*time.Second)

	// Now the waited jobs run, on replica 2; the waiters started on replica 0.
	w.serve(t, l, 2)
	w.wait(t)
	require.EqualValues(t, waiters, w.failedOver.Load(), "every waiter re-issued its wait on another replica")

	reran, multi := l.finish(ctx, pool)
	elapsed := time.Since(start)
	for i := 1; i < len(servers); i++ {
		serverCPU[i] += cpuSeconds(servers[i].cmd.Process.Pid)
	}
	pgCPU += postgresCPU(port)
	t.Logf("CPU seconds per 1,000 jobs (submit in batches of 25, claim 10 at a time, ack one by one, all over HTTP): "+
		"replicas %.3f (replica 0 until killed %.2f s, replica 1 %.2f s, replica 2 %.2f s in all), PostgreSQL %.3f (%.2f s in all)",
		(serverCPU[0]+serverCPU[1]+serverCPU[2])/float64(jobs)*1000, serverCPU[0], serverCPU[1], serverCPU[2],
		pgCPU/float64(jobs)*1000, pgCPU)
	t.Logf("%d jobs on 3 replicas in %v (%.0f jobs/s): 0 lost, 0 settled twice, %d acks answered lease-lost, %d jobs handled more than once (claims whose answer died with the replica, re-run after their lease), %d with attempt > 1; %d waiters failed over",
		jobs, elapsed.Round(time.Millisecond), float64(jobs)/elapsed.Seconds(), l.lost.Load(), reran, multi, w.failedOver.Load())
}

// TestServePostgresRestarted runs three `lakeshore serve --target postgres://…` processes
// on one PostgreSQL, producers, workers and waiters spread over them, and restarts
// PostgreSQL itself (pg_ctl restart, fast shutdown) a third of the way through the jobs
// ($LAKESHORE_CLUSTER_JOBS, default 2,000). Every replica survives; callers meet only
// errors their clients retry or re-issue on another replica; every acknowledged submit
// exists once and ends succeeded, no job is acknowledged twice, and every waiter, waiting
// across the restart, gets its result. It restarts the test binary's shared server, so it
// never runs in parallel with other tests.
func TestServePostgresRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and restarts PostgreSQL (~15 s)")
	}
	jobs := clusterJobs(t, 2000)
	db := pgtest.Database(t)
	srv := pgtest.Shared(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, db)
	require.NoError(t, err)
	defer pool.Close()

	servers := []*servedProcess{startServe(t, db), startServe(t, db), startServe(t, db)}
	fo, wfo := clusterClients(t, ctx, servers)
	const waiters = 30
	w := startWaiters(t, ctx, wfo, waiters, func(i int) int { return i % len(servers) })
	l := newClusterLoad(t, ctx, jobs, fo)
	l.produce(ctx, 6, 25)
	l.work(6)

	start := time.Now()
	require.Eventually(t, func() bool { return l.nSettled.Load() >= int64(jobs/3) }, 3*time.Minute, 5*time.Millisecond)
	before := l.nSettled.Load()
	var started, restarted time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_postmaster_start_time()`).Scan(&started))
	restartBegan := time.Now()
	require.NoError(t, srv.Restart())
	pool.Reset() // this test's own connections died with the server
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_postmaster_start_time()`).Scan(&restarted))
	require.True(t, restarted.After(started), "PostgreSQL restarted")
	t.Logf("restarted PostgreSQL after %d of %d jobs settled, %v in; the restart took %v",
		before, jobs, restartBegan.Sub(start).Round(time.Millisecond), time.Since(restartBegan).Round(time.Millisecond))

	// The waited jobs run after the restart: the waiters waited across it.
	w.serve(t, l, 0)
	w.wait(t)
	reran, multi := l.finish(ctx, pool)
	for i, s := range servers {
		select {
		case <-s.done:
			t.Fatalf("replica %d exited when PostgreSQL restarted", i)
		default:
		}
	}
	var handled int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakeshore.invocations WHERE queue = 'waited' AND state = 2`).Scan(&handled))
	require.Equal(t, waiters, handled)
	t.Logf("%d jobs on 3 replicas across a PostgreSQL restart in %v: 0 lost, 0 settled twice, all terminal, %d acks answered lease-lost, "+
		"%d jobs handled more than once, %d with attempt > 1; %d waiters (on all three replicas) got their results, %d of them from another replica; "+
		"%d calls re-issued on another replica",
		jobs, time.Since(start).Round(time.Millisecond), l.lost.Load(), reran, multi, waiters, w.failedOver.Load(), fo.reissued.Load()+wfo.reissued.Load())
}
