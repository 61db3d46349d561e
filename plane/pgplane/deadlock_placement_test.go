package pgplane

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// shortDeadlockTimeout sets the test database's deadlock_timeout to 100 ms (1 s by
// default): a failing run stays short and counts the same deadlocks.
func shortDeadlockTimeout(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	_, err := conn.Exec(t.Context(), `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = ''100ms''', current_database()); END $$`)
	require.NoError(t, err)
}

// requireNoNewDeadlocks closes planes (a backend's pending statistics are written when it
// exits), waits for their connections to end and compares PostgreSQL's deadlock count
// with before.
func requireNoNewDeadlocks(t *testing.T, conn *pgx.Conn, planes []*Driver, before int64) {
	t.Helper()
	for _, p := range planes {
		p.Close()
	}
	require.Eventually(t, func() bool {
		var others int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others)
		return err == nil && others == 0
	}, 10*time.Second, 20*time.Millisecond, "the planes' connections end")
	require.Equal(t, before, deadlocks(t, conn), "deadlocks PostgreSQL broke")
}

// TestShapedBatchesNoDeadlock runs three planes on one database (three processes) whose
// workers submit, claim (with offers satisfying every shape) and settle batches of jobs of
// several placement shapes, each worker in its own shape order: grouped submits, settle
// groups with acks, re-queues and backed-off retries, and settle-and-claim (settles of some
// shapes, then claims of others, in one transaction). The per-shape counters
// (placement_counts) are changed by a trigger for every row in the order the statement
// writes the rows; 0010's trigger waited for the transaction's shard row (one of 8), and
// deadlocked; since 0016 it takes a row of the shape no other transaction holds and never
// waits, new shapes are recorded in shape order, and a claim after a placed claim promotes
// without waiting, so PostgreSQL counts no deadlock, and the counters end exact: nothing
// queued or running in any shape once every job succeeded.
func TestShapedBatchesNoDeadlock(t *testing.T) {
	url := pgtest.Database(t)
	conn := mustConn(t, url)
	shortDeadlockTimeout(t, conn)
	planes := []*Driver{
		open(t, url, &Config{MaintenanceInterval: 20 * time.Millisecond}),
		open(t, url, &Config{MaintenanceInterval: 20 * time.Millisecond}),
		open(t, url, &Config{MaintenanceInterval: 20 * time.Millisecond}),
	}
	before := deadlocks(t, conn)

	orders := [][]int{ // each worker's shape order (shape i asks for (i+1) × 100 millicpus)
		{0, 1, 2, 3},
		{3, 2, 1, 0},
		{1, 3, 0, 2},
		{2, 0, 3, 1},
	}
	offers := &plane.Offers{MilliCPUs: 10_000} // every shape
	const (
		workers = 12 // four per plane
		rounds  = 15
	)
	var released sync.Map
	var submitted atomic.Int64
	var wg sync.WaitGroup
	ctx := t.Context()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := planes[w%len(planes)]
			order := orders[w%len(orders)]
			for round := range rounds {
				batch := make([]plane.SubmitParams, 0, 2*len(order))
				for range 2 {
					for _, s := range order {
						batch = append(batch, plane.SubmitParams{Payload: []byte{byte(s)}, // its shape (a msgpack integer)
							Requirement: &plane.Requirement{MilliCPUs: int64(s+1) * 100}})
					}
				}
				if round%5 == 4 { // delayed: promoted by claims and maintenance
					for i := range batch {
						batch[i].Delay = 5 * time.Millisecond
					}
				}
				if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch}); err != nil {
					t.Error(err)
					return
				}
				submitted.Add(int64(len(batch)))
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: len(batch), Offers: offers})
				if err != nil {
					t.Error(err)
					return
				}
				for len(jobs) > 0 {
					settles := settleInShapeOrder(jobs, order, round, &released)
					if round%2 == 0 {
						errs, err := d.InvocationSettleMany(ctx, settles)
						if err != nil {
							t.Error(err)
							return
						}
						requireSettled(t, errs)
						break
					}
					errs, next, err := d.InvocationSettleAndClaim(ctx, settles, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 4, Offers: offers})
					if err != nil {
						t.Error(err)
						return
					}
					requireSettled(t, errs)
					jobs = next
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Drain what is left, acking every job.
	d := planes[0]
	deadline := time.Now().Add(30 * time.Second)
	for {
		stats, err := d.QueueStatsList(ctx, "default")
		require.NoError(t, err)
		require.Len(t, stats, 1)
		if stats[0].Counts[plane.StateSucceeded] == submitted.Load() {
			require.Equal(t, map[plane.State]int64{plane.StateSucceeded: submitted.Load()}, stats[0].Counts)
			break
		}
		require.True(t, time.Now().Before(deadline), "drained in time: %v of %d", stats[0].Counts, submitted.Load())
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 100, Wait: 100 * time.Millisecond, Offers: offers})
		require.NoError(t, err)
		var settles []plane.SettleParams
		for _, j := range jobs {
			settles = append(settles, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded})
		}
		if len(settles) > 0 {
			errs, err := d.InvocationSettleMany(ctx, settles)
			require.NoError(t, err)
			requireSettled(t, errs)
		}
	}
	demand, err := d.DemandList(ctx, "default")
	require.NoError(t, err)
	shapes := 0
	for _, s := range demand {
		if s.Shape == "" {
			continue
		}
		shapes++
		require.Zero(t, s.Queued, "queued of shape %s", s.Shape)
		require.Zero(t, s.Running, "running of shape %s", s.Shape)
	}
	require.Equal(t, len(orders[0]), shapes, "one row per shape")
	var counterRows []int
	require.NoError(t, conn.QueryRow(ctx, `SELECT array_agg(n ORDER BY shape) FROM (SELECT shape, count(*) AS n FROM `+d.schema+
		`.placement_counts GROUP BY shape) AS c`).Scan(&counterRows))
	t.Logf("counter rows per shape: %v", counterRows) // about as many as transactions changed it at once (migration 0016)
	requireNoNewDeadlocks(t, conn, planes, before)
}

// settleInShapeOrder settles jobs in the shape order order, as settleInOrder settles them
// in key order: most acked, in rounds divisible by 3 a job of every other shape released
// once or retried after a short backoff.
func settleInShapeOrder(jobs []*plane.Job, order []int, round int, released *sync.Map) []plane.SettleParams {
	rank := func(j *plane.Job) int { return slices.Index(order, int(j.Payload[0])) }
	sorted := slices.Clone(jobs)
	slices.SortStableFunc(sorted, func(a, b *plane.Job) int { return rank(a) - rank(b) })
	settles := make([]plane.SettleParams, len(sorted))
	for i, j := range sorted {
		s := plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}
		if round%3 == 0 && rank(j)%2 == 1 {
			if _, again := released.LoadOrStore(j.ID, true); !again {
				s.Outcome = plane.OutcomeReleased
			} else if j.Attempt == 1 {
				s.Outcome, s.RetryDelay = plane.OutcomeRetry, 3*time.Millisecond
				s.Error = &plane.ErrorInfo{Type: "test", Message: "again"}
			}
		}
		settles[i] = s
	}
	return settles
}

// TestIdempotencyKeyUnderSeveralConcurrencyKeysNoDeadlock runs three planes on one
// database whose workers submit, each round, batches of the same idempotency keys, each
// plane giving every key a concurrency key of its own choosing, so that ordered by
// concurrency key the batches of the planes hold the idempotency keys in differing orders. An insert
// waits on an idempotency key another transaction inserted until that one ends; the insert
// takes its idempotency keys in key order and its concurrency keys' counter rows in key
// order after all of them, so PostgreSQL counts no deadlock. Each key ends with one
// invocation, which every batch of the round was answered with, and the counters exact.
func TestIdempotencyKeyUnderSeveralConcurrencyKeysNoDeadlock(t *testing.T) {
	url := pgtest.Database(t)
	conn := mustConn(t, url)
	shortDeadlockTimeout(t, conn)
	planes := []*Driver{
		open(t, url, &Config{MaintenanceInterval: 20 * time.Millisecond}),
		open(t, url, &Config{MaintenanceInterval: 20 * time.Millisecond}),
		open(t, url, &Config{MaintenanceInterval: 20 * time.Millisecond}),
	}
	before := deadlocks(t, conn)
	const (
		workers = 12 // four per plane
		rounds  = 20
		keys    = 30
	)
	var answers [rounds][keys]sync.Map // id → true, per round and key
	var wg sync.WaitGroup
	ctx := t.Context()
	var ready [rounds]sync.WaitGroup // every worker starts a round together
	for round := range rounds {
		ready[round].Add(workers)
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := planes[w%len(planes)]
			for round := range rounds {
				ready[round].Done()
				ready[round].Wait()
				batch := make([]plane.SubmitParams, keys)
				for i := range batch {
					// Plane p gives key i the concurrency key k(i+10p): ordered by concurrency
					// key, the batches of the planes hold the keys rotated, i0 first, i20
					// first, i10 first.
					batch[i] = plane.SubmitParams{Payload: []byte{0xc0}, Key: fmt.Sprintf("r%d-i%d", round, i),
						ConcurrencyKey: fmt.Sprintf("k%d", (i+keys/3*(w%len(planes)))%keys)}
				}
				res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
				if err != nil {
					t.Error(err)
					continue // on to the next round, which waits for this worker
				}
				for i, r := range res {
					answers[round][i].Store(r.ID, true)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for round := range rounds {
		for i := range keys {
			n := 0
			answers[round][i].Range(func(any, any) bool { n++; return true })
			require.Equal(t, 1, n, "one invocation answered for key r%d-i%d", round, i)
		}
	}
	// Every key holds one invocation; drain them, then no counter row is left.
	d := planes[0]
	done := 0
	deadline := time.Now().Add(30 * time.Second)
	for done < rounds*keys {
		require.True(t, time.Now().Before(deadline), "drained in time: %d of %d", done, rounds*keys)
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 100, Wait: 100 * time.Millisecond})
		require.NoError(t, err)
		var settles []plane.SettleParams
		for _, j := range jobs {
			settles = append(settles, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded})
		}
		if len(settles) > 0 {
			errs, err := d.InvocationSettleMany(ctx, settles)
			require.NoError(t, err)
			requireSettled(t, errs)
			done += len(settles)
		}
	}
	stats, err := d.QueueStatsList(ctx, "default")
	require.NoError(t, err)
	require.Equal(t, map[plane.State]int64{plane.StateSucceeded: rounds * keys}, stats[0].Counts)
	var counters int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+d.schema+`.concurrency_keys`).Scan(&counters))
	require.Zero(t, counters, "counter rows left")
	requireNoNewDeadlocks(t, conn, planes, before)
}
