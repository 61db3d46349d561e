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
	queues []*lakeshore.Queue
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
		time.Sleep(20 * time.Millisecond)
	}
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
	jobs := 3000
	if v := os.Getenv("LAKESHORE_CLUSTER_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		jobs = n
	}
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

	var qs []*lakeshore.Queue
	var waited []*lakeshore.Queue
	for _, s := range servers {
		d, err := lakeshore.Open(ctx, s.url, &lakeshore.Config{HTTP: &httpplane.Config{Unreachable: time.Second, MaxRetries: 2}})
		require.NoError(t, err)
		defer d.Close()
		q, err := d.Queue("jobs", &lakeshore.QueueOptions{LeaseTTL: 3 * time.Second})
		require.NoError(t, err)
		qs = append(qs, q)
		w, err := d.Queue("waited", &lakeshore.QueueOptions{LeaseTTL: 3 * time.Second})
		require.NoError(t, err)
		waited = append(waited, w)
	}
	fo := &failover{queues: qs}
	wfo := &failover{queues: waited}

	// Jobs that waiters on the doomed replica (0) wait for; nobody claims them until it died.
	const waiters = 30
	waitIDs := make([]string, waiters)
	for i := range waitIDs {
		_, err := wfo.do(ctx, 1, func(q *lakeshore.Queue) error {
			var err error
			waitIDs[i], err = q.Submit(ctx, i, &lakeshore.SubmitOptions{Key: fmt.Sprintf("w-%d", i)})
			return err
		})
		require.NoError(t, err)
	}
	waitErrs := make(chan error, waiters)
	var failedOver atomic.Int64
	for i, id := range waitIDs {
		go func() {
			var got int
			at, err := wfo.do(ctx, 0, func(q *lakeshore.Queue) error {
				return q.Result(ctx, id, &got, &lakeshore.ResultOptions{Timeout: 2 * time.Minute})
			})
			if at != 0 {
				failedOver.Add(1)
			}
			if err == nil && got != i*10 {
				err = fmt.Errorf("waiter %d got %d", i, got)
			}
			waitErrs <- err
		}()
	}

	// CPU accounting: the replicas' and PostgreSQL's CPU seconds during the run.
	port := int(pool.Config().ConnConfig.Port)
	var serverCPU [3]float64
	for i, s := range servers {
		serverCPU[i] = -cpuSeconds(s.cmd.Process.Pid)
	}
	pgCPU := -postgresCPU(port)

	// Producers, two per replica, submit in keyed batches of 25.
	var (
		mu       sync.Mutex
		acked    = map[string]string{} // key → id, acknowledged submits
		settled  = map[string]int{}    // id → acks that returned nil
		ran      = map[string]int{}    // id → handler runs
		lost     atomic.Int64          // acks answered ErrLeaseLost
		nSettled atomic.Int64
	)
	const producers, batch = 6, 25
	var pwg sync.WaitGroup
	for p := range producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for start := p * batch; start < jobs; start += producers * batch {
				subs := make([]lakeshore.Submission, 0, batch)
				for n := start; n < min(start+batch, jobs); n++ {
					subs = append(subs, lakeshore.Submission{Payload: n, SubmitOptions: lakeshore.SubmitOptions{Key: fmt.Sprintf("k-%d", n)}})
				}
				var ids []string
				_, err := fo.do(ctx, p%len(qs), func(q *lakeshore.Queue) error {
					var err error
					ids, err = q.SubmitMany(ctx, subs)
					return err
				})
				if err != nil {
					t.Errorf("submit %d: %v", start, err)
					return
				}
				mu.Lock()
				for i, id := range ids {
					if prev, ok := acked[subs[i].Key]; ok && prev != id {
						t.Errorf("key %s acknowledged as %s and %s", subs[i].Key, prev, id)
					}
					acked[subs[i].Key] = id
				}
				mu.Unlock()
			}
		}()
	}

	// Workers, two per replica, claim up to 10 at a time and ack each job.
	const workers = 6
	var wwg sync.WaitGroup
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	for w := range workers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			home := w % len(qs)
			for workCtx.Err() == nil {
				var claimed []*lakeshore.Job
				at, err := fo.do(workCtx, home, func(q *lakeshore.Queue) error {
					var err error
					claimed, err = q.ClaimMany(workCtx, 10, &lakeshore.ClaimOptions{Wait: 500 * time.Millisecond})
					return err
				})
				home = at
				if err != nil {
					continue
				}
				for _, job := range claimed {
					mu.Lock()
					ran[job.ID]++
					mu.Unlock()
					var err error
					home, err = fo.do(workCtx, home, func(q *lakeshore.Queue) error { return q.Ack(workCtx, job, "ok") })
					switch {
					case err == nil:
						mu.Lock()
						settled[job.ID]++
						mu.Unlock()
						nSettled.Add(1)
					case errors.Is(err, lakeshore.ErrLeaseLost):
						lost.Add(1)
					}
				}
			}
		}()
	}

	// SIGKILL the leader replica a third of the way through.
	start := time.Now()
	require.Eventually(t, func() bool { return nSettled.Load() >= int64(jobs/3) }, 3*time.Minute, 5*time.Millisecond)
	serverCPU[0] += cpuSeconds(servers[0].cmd.Process.Pid)
	require.NoError(t, servers[0].cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	<-servers[0].done
	t.Logf("SIGKILLed replica 0 (the leader) after %d of %d jobs settled, %v in", nSettled.Load(), jobs, killed.Sub(start).Round(time.Millisecond))

	// Another replica takes the maintenance lease within one lease TTL (and a pass).
	require.Eventually(t, func() bool { l := leader(); return l != "" && l != first }, pgplane.LeaderTTLDefault+5*time.Second, 50*time.Millisecond)
	handover := time.Since(killed)
	t.Logf("leader hand-over %v after the kill (lease TTL %v)", handover.Round(time.Millisecond), pgplane.LeaderTTLDefault)
	require.Less(t, handover, pgplane.LeaderTTLDefault+pgplane.MaintenanceIntervalDefault+2*time.Second)

	// Now the waited jobs run, on replica 2; the waiters started on replica 0.
	wwg.Add(1)
	go func() {
		defer wwg.Done()
		for done := 0; done < waiters && workCtx.Err() == nil; {
			job, err := waited[2].Claim(workCtx, &lakeshore.ClaimOptions{Wait: time.Second})
			if err != nil || job == nil {
				continue
			}
			var n int
			if err := job.Decode(&n); err != nil {
				t.Errorf("decode: %v", err)
			}
			if err := waited[2].Ack(workCtx, job, n*10); err == nil {
				done++
			}
		}
	}()
	for range waiters {
		require.NoError(t, <-waitErrs)
	}
	require.EqualValues(t, waiters, failedOver.Load(), "every waiter re-issued its wait on another replica")

	pwg.Wait()
	require.False(t, t.Failed())
	require.Len(t, acked, jobs, "every submit acknowledged")
	// Every acknowledged job ends succeeded; jobs claimed through the dead replica whose
	// answer never came back are re-claimed once their 3 s lease expires.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM lakeshore.invocations WHERE queue = 'jobs' AND state = 2`).Scan(&n))
		return n == jobs
	}, 2*time.Minute, 100*time.Millisecond)
	elapsed := time.Since(start)
	for i := 1; i < len(servers); i++ {
		serverCPU[i] += cpuSeconds(servers[i].cmd.Process.Pid)
	}
	pgCPU += postgresCPU(port)
	t.Logf("CPU seconds per 1,000 jobs (submit in batches of 25, claim 10 at a time, ack one by one, all over HTTP): "+
		"replicas %.3f (replica 0 until killed %.2f s, replica 1 %.2f s, replica 2 %.2f s in all), PostgreSQL %.3f (%.2f s in all)",
		(serverCPU[0]+serverCPU[1]+serverCPU[2])/float64(jobs)*1000, serverCPU[0], serverCPU[1], serverCPU[2],
		pgCPU/float64(jobs)*1000, pgCPU)
	stopWork()
	wwg.Wait()

	var total, nonTerminal, multi int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state < 2), count(*) FILTER (WHERE attempt > 1)
		FROM lakeshore.invocations WHERE queue = 'jobs'`).Scan(&total, &nonTerminal, &multi))
	require.Equal(t, jobs, total, "one job per key: no acknowledged submit lost, none duplicated")
	require.Zero(t, nonTerminal)
	rows, err := pool.Query(ctx, `SELECT key, id FROM lakeshore.invocations WHERE queue = 'jobs'`)
	require.NoError(t, err)
	for rows.Next() {
		var key, id string
		require.NoError(t, rows.Scan(&key, &id))
		require.Equal(t, acked[key], id, "the acknowledged id of %s", key)
	}
	require.NoError(t, rows.Err())
	mu.Lock()
	defer mu.Unlock()
	twice, reran := 0, 0
	for id, n := range settled {
		if n > 1 {
			twice++
			t.Errorf("job %s acknowledged %d times", id, n)
		}
	}
	for _, n := range ran {
		if n > 1 {
			reran++
		}
	}
	t.Logf("%d jobs on 3 replicas in %v (%.0f jobs/s): 0 lost, %d settled twice, %d acks answered lease-lost, %d jobs handled more than once (claims whose answer died with the replica, re-run after their lease), %d with attempt > 1; %d waiters failed over",
		jobs, elapsed.Round(time.Millisecond), float64(jobs)/elapsed.Seconds(), twice, lost.Load(), reran, multi, failedOver.Load())
}
