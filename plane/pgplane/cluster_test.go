package pgplane

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// open opens a plane on url for a test and closes it at the end.
func open(t *testing.T, url string, cfg *Config) *Driver {
	t.Helper()
	d, err := Open(t.Context(), url, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func submitOne(t *testing.T, d *Driver, p plane.SubmitParams) string {
	t.Helper()
	if p.Payload == nil {
		p.Payload = []byte{0xc0}
	}
	res, err := d.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: []plane.SubmitParams{p}})
	require.NoError(t, err)
	return res[0].ID
}

func claimOne(t *testing.T, d *Driver, wait time.Duration) *plane.Job {
	t.Helper()
	jobs, err := d.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: wait})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0]
}

// TestWakeAcrossPlanes checks that a waiter on one plane is woken by another plane's commit
// through LISTEN/NOTIFY, long before the polling fallback would have seen it; and that in
// poll-only mode (PgBouncer) it is seen within the poll interval.
func TestWakeAcrossPlanes(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  Config
	}{
		{"Notify", Config{PollInterval: time.Minute}},
		{"PollOnly", Config{PollOnly: true, PollInterval: 200 * time.Millisecond}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			url := pgtest.Database(t)
			waiterCfg := mode.cfg
			waiter := open(t, url, &waiterCfg)
			worker := open(t, url, &Config{})
			if !mode.cfg.PollOnly {
				require.Eventually(t, waiter.notifier.listening, 5*time.Second, 10*time.Millisecond, "the listener connects")
			}

			// An idle claim on the waiter's plane is woken by a submit on the other.
			claimed := make(chan *plane.Job, 1)
			go func() {
				jobs, err := waiter.InvocationClaimMany(context.Background(), &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: 20 * time.Second})
				if err == nil && len(jobs) == 1 {
					claimed <- jobs[0]
				}
				close(claimed)
			}()
			time.Sleep(100 * time.Millisecond)
			start := time.Now()
			id := submitOne(t, worker, plane.SubmitParams{})
			j := <-claimed
			require.NotNil(t, j)
			require.Equal(t, id, j.ID)
			took := time.Since(start)

			// A result wait on the waiter's plane is woken by the other's ack.
			waited := make(chan time.Duration, 1)
			go func() {
				start := time.Now()
				_, err := waiter.InvocationWait(context.Background(), &plane.WaitParams{ID: id, Timeout: 20 * time.Second})
				if err != nil {
					waited <- -1
					return
				}
				waited <- time.Since(start)
			}()
			time.Sleep(100 * time.Millisecond)
			errs, err := worker.InvocationSettleMany(t.Context(), []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
			w := <-waited
			require.Positive(t, w)
			// Woken, not answered at the end of its 20 s wait: with LISTEN on and a one-minute
			// poll interval only a notification can do that; poll-only, the 200 ms poll. Half
			// the wait tells the two apart on a loaded machine, where a bound near the
			// expected latency (a commit, a NOTIFY and a claim) would measure the load.
			const limit = 10 * time.Second
			require.Less(t, took, limit, "claim woken")
			require.Less(t, w, limit, "wait woken")
			t.Logf("claim woken after %s, wait after %s", took, w)
		})
	}
}

// TestListenerReconnects kills the listening connection: waiters poll meanwhile, and the
// listener comes back.
func TestListenerReconnects(t *testing.T) {
	url := pgtest.Database(t)
	waiter := open(t, url, &Config{PollInterval: 300 * time.Millisecond})
	worker := open(t, url, &Config{})
	require.Eventually(t, waiter.notifier.listening, 5*time.Second, 10*time.Millisecond)
	admin, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`)
	require.NoError(t, err)
	id := submitOne(t, worker, plane.SubmitParams{})
	j := claimOne(t, waiter, 5*time.Second)
	require.Equal(t, id, j.ID)
	require.Eventually(t, waiter.notifier.listening, 5*time.Second, 10*time.Millisecond, "the listener reconnects")
}

// TestIdempotentKeyAcrossPlanes submits one key from many goroutines on several planes at
// once: one invocation, every caller told its id.
func TestIdempotentKeyAcrossPlanes(t *testing.T) {
	url := pgtest.Database(t)
	planes := []*Driver{open(t, url, nil), open(t, url, nil), open(t, url, nil)}
	var wg sync.WaitGroup
	ids := make([]string, 30)
	errs := make([]error, len(ids))
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := planes[i%len(planes)].InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
				Invocations: []plane.SubmitParams{{Key: "same", Payload: []byte{0xc0}}}})
			errs[i] = err
			if err == nil {
				ids[i] = res[0].ID
			}
		}()
	}
	wg.Wait()
	for i := range ids {
		require.NoError(t, errs[i])
		require.Equal(t, ids[0], ids[i])
	}
	n, err := planes[0].InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// TestConcurrentClaimsAndSettles runs claimers and settlers on three planes over one queue:
// every job claimed once, settled once, the counters exact.
func TestConcurrentClaimsAndSettles(t *testing.T) {
	url := pgtest.Database(t)
	planes := []*Driver{open(t, url, nil), open(t, url, nil), open(t, url, nil)}
	const jobs = 600
	batch := make([]plane.SubmitParams, 100)
	for i := range batch {
		batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, Priority: float64(i % 3)}
	}
	for range jobs / len(batch) {
		_, err := planes[0].InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
		require.NoError(t, err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	kinds := []plane.Kind{plane.KindFIFO, plane.KindFILO, plane.KindPriority, plane.KindBoltzmann}
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := planes[w%len(planes)]
			for {
				got, err := d.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q",
					Kind: kinds[w%len(kinds)], Temperature: 1, Max: 7})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				var settles []plane.SettleParams
				for _, j := range got {
					settles = append(settles, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded})
				}
				errs, err := d.InvocationSettleMany(t.Context(), settles)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for i, j := range got {
					seen[j.ID]++
					if errs[i] != nil {
						t.Errorf("settle %s: %v", j.ID, errs[i])
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, seen, jobs)
	for id, n := range seen {
		require.Equal(t, 1, n, "job %s claimed once", id)
	}
	stats, err := planes[1].QueueStatsList(t.Context(), "default")
	require.NoError(t, err)
	require.Len(t, stats, 1)
	require.Equal(t, map[plane.State]int64{plane.StateSucceeded: jobs}, stats[0].Counts)
}

// abandon stops d as a crashed process would: its goroutines end, its connections close,
// and it gives nothing up (the maintenance lease stays until it expires).
func abandon(d *Driver) {
	d.closeOnce.Do(func() {
		close(d.stop)
		d.wg.Wait()
		d.hub.NotifyAll()
		d.pool.Close()
	})
}

func leaseHolder(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var holder string
	err := conn.QueryRow(t.Context(), `SELECT holder FROM lakeshore.leases WHERE name = 'maintenance' AND expires_at > now()`).Scan(&holder)
	if err == pgx.ErrNoRows {
		return ""
	}
	require.NoError(t, err)
	return holder
}

// TestLeaderHandover checks that one plane at a time runs maintenance, and that when the
// leader dies another takes over within a lease and ends the jobs whose leases expired.
// The leader's lease is 3 s: a live leader renews it every third, so only one not run
// for ~2 s loses it (a 1 s lease was lost by a leader that a loaded machine ran 700 ms
// late, and the second plane held it when the test asserted the first does).
func TestLeaderHandover(t *testing.T) {
	url := pgtest.Database(t)
	const ttl = 3 * time.Second
	cfg := Config{MaintenanceInterval: 50 * time.Millisecond, LeaderTTL: ttl}
	first := open(t, url, &cfg)
	require.Eventually(t, func() bool { return leaseHolder(t, mustConn(t, url)) == first.node }, 5*time.Second, 20*time.Millisecond)
	second := open(t, url, &cfg)
	conn := mustConn(t, url)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, first.node, leaseHolder(t, conn), "the first keeps the lease while it lives")

	// A job whose lease expires after the leader dies is requeued by the new leader.
	id := submitOne(t, second, plane.SubmitParams{})
	_, err := second.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", LeaseTTL: 200 * time.Millisecond})
	require.NoError(t, err)
	abandon(first)
	// Measured on the database's clock from the moment the dead leader's last lease ends
	// (its last renewal may have been in flight while it stopped): the other takes the
	// lease then, not before, and within a few of its 50 ms beats.
	var ended time.Time
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT expires_at FROM lakeshore.leases WHERE name = 'maintenance'`).Scan(&ended))
	var taken time.Time
	require.Eventually(t, func() bool {
		if leaseHolder(t, conn) != second.node {
			return false
		}
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT now()`).Scan(&taken))
		return true
	}, 3*ttl, 20*time.Millisecond)
	took := taken.Sub(ended)
	require.GreaterOrEqual(t, took, time.Duration(0), "not before the dead leader's lease ended")
	// A few 50 ms beats as a rule; the bound tells that from a lease later, not how fast a
	// loaded machine runs them.
	require.Less(t, took, ttl/2, "hand-over within a few beats of the lease's end")
	require.Eventually(t, func() bool {
		inv, err := second.InvocationGet(t.Context(), id)
		return err == nil && inv.State == plane.StateQueued && inv.Error != nil && inv.Error.Type == "lease_expired"
	}, 5*time.Second, 20*time.Millisecond, "the new leader expired the lease")
	t.Logf("hand-over after %s", took)

	// A clean Close gives the lease up at once.
	third := open(t, url, &cfg)
	second.Close()
	require.Eventually(t, func() bool { return leaseHolder(t, conn) == third.node }, 5*time.Second/2, 20*time.Millisecond)
}

func mustConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestClaimIgnoresDelayed checks that delayed jobs stay out of the claim path: with many
// delayed rows, the claim reads the claimable index only, and the due ones are promoted
// through the index of waiting rows.
func TestClaimIgnoresDelayed(t *testing.T) {
	url := pgtest.Database(t)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// The plane's maintenance goroutine reads the clock while the test moves it.
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	d := open(t, url, &Config{Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }})
	batch := make([]plane.SubmitParams, 1000)
	for i := range batch {
		batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, Delay: time.Hour + time.Duration(i)*time.Second}
	}
	for range 20 {
		_, err := d.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
		require.NoError(t, err)
	}
	ready := submitOne(t, d, plane.SubmitParams{})
	conn := mustConn(t, url)
	_, err := conn.Exec(t.Context(), `ANALYZE lakeshore.invocations`)
	require.NoError(t, err)
	for name, sql := range map[string]string{"fifo": d.sql.claimFIFO, "priority": d.sql.claimPriority, "promote": d.sql.promote} {
		args := []any{"default", "q", 10}
		if name == "promote" {
			args = []any{"default", "q", now.UnixMilli()}
		}
		plan := explain(t, conn, sql, args...)
		require.NotContains(t, plan, "Seq Scan", "%s plan:\n%s", name, plan)
		if name == "fifo" && strings.Contains(plan, "invocations_list") {
			// The (queue, state, waiting, id) index: its range of claimable rows only.
			require.Contains(t, plan, "(waiting = false)", "%s plan:\n%s", name, plan)
			require.NotContains(t, plan, "Filter", "%s plan:\n%s", name, plan)
			continue
		}
		// The fifo claim may also read the partial index of claimable rows by priority
		// (sorting the few claimable rows there are).
		want := map[string]string{"fifo": "invocations_priority", "priority": "invocations_priority", "promote": "invocations_waiting"}[name]
		require.Contains(t, plan, want, "%s plan:\n%s", name, plan)
	}
	j := claimOne(t, d, 0)
	require.Equal(t, ready, j.ID)
	n, err := d.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.EqualValues(t, 20000, n, "delayed jobs count as queued")
	clock.Store(now.Add(time.Hour + 500*time.Millisecond).UnixNano())
	jobs, err := d.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 5})
	require.NoError(t, err)
	require.Len(t, jobs, 5, "the jobs due by now are claimable (one per batch offset)")
}

func explain(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(t.Context(), "EXPLAIN "+sql, args...)
	require.NoError(t, err)
	var lines []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(t, rows.Err())
	return strings.Join(lines, "\n")
}

// TestWorkersByNamespace checks that workers are keyed by (namespace, id).
func TestWorkersByNamespace(t *testing.T) {
	d := open(t, pgtest.Database(t), nil)
	for _, ns := range []string{"a", "b"} {
		require.NoError(t, d.WorkerRegister(t.Context(), &plane.WorkerInfo{ID: "w1", Namespace: ns, Host: "h", PID: 1, Queues: []string{"q"}}))
	}
	require.NoError(t, d.WorkerRemove(t.Context(), "a", "w1"))
	ws, err := d.WorkerList(t.Context(), &plane.WorkerListParams{})
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, "b", ws[0].Namespace)
	require.Equal(t, []string{"q"}, ws[0].Queues)
}

// TestList pages through a queue newest and oldest first, by state and key prefix.
func TestList(t *testing.T) {
	// The plane's maintenance goroutine reads the clock while the test moves it.
	var clock atomic.Int64
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	d := open(t, pgtest.Database(t), &Config{Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }})
	var ids []string
	for i := range 5 {
		ids = append(ids, submitOne(t, d, plane.SubmitParams{Key: fmt.Sprintf("k%d_%d", i%2, i)}))
		clock.Add(int64(time.Millisecond))
	}
	j := claimOne(t, d, 0) // ids[0] is running
	require.Equal(t, ids[0], j.ID)
	list := func(p plane.ListParams) []string {
		p.Namespace, p.Queue = "default", "q"
		var out []string
		for {
			page, err := d.InvocationList(t.Context(), &p)
			require.NoError(t, err)
			for _, inv := range page.Invocations {
				out = append(out, inv.ID)
			}
			if page.Next == "" {
				return out
			}
			p.After = page.Next
		}
	}
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, list(plane.ListParams{Limit: 2}))
	require.Equal(t, ids, list(plane.ListParams{Limit: 2, Oldest: true}))
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1]}, list(plane.ListParams{State: plane.StateQueued, Limit: 3}))
	require.Equal(t, []string{ids[4], ids[2], ids[0]}, list(plane.ListParams{KeyPrefix: "k0_"}))
	require.Empty(t, list(plane.ListParams{KeyPrefix: "k%"}), "LIKE wildcards in the prefix are literal")
	_, err := d.InvocationList(t.Context(), &plane.ListParams{Namespace: "default", Queue: "q", Limit: plane.ListLimitMax + 1})
	require.ErrorIs(t, err, plane.ErrInvalid)
}
