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

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The parts the no-deadlock tests share: planes in several processes on one database,
// PostgreSQL's deadlock count before and after, the workers' rounds of batches, and the
// drain.

// deadlockPlanes sets the database at url's deadlock_timeout to 100 ms (1 s by default: a
// failing run stays short and counts the same deadlocks), then opens n planes on it (n
// processes), each running maintenance every interval. It returns a connection of the
// test's own, the planes, and how many deadlocks PostgreSQL had broken in the database.
func deadlockPlanes(t *testing.T, url string, n int, interval time.Duration) (*pgx.Conn, []*Driver, int64) {
	t.Helper()
	conn := mustConn(t, url)
	_, err := conn.Exec(t.Context(), `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = ''100ms''', current_database()); END $$`)
	require.NoError(t, err)
	planes := make([]*Driver, n)
	for i := range planes {
		planes[i] = open(t, url, &Config{MaintenanceInterval: interval})
	}
	return conn, planes, deadlocks(t, conn)
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

// deadlocks is how many deadlocks PostgreSQL has broken in conn's database.
func deadlocks(t *testing.T, conn *pgx.Conn) int64 {
	t.Helper()
	var n int64
	_, err := conn.Exec(t.Context(), `SELECT pg_stat_clear_snapshot()`)
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(t.Context(),
		`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n))
	return n
}

// batchRounds runs the workers of a no-deadlock test: twelve, four per plane, each for 15
// rounds submitting a batch of two jobs per label (job(l)) in its own label order (orders,
// one per worker in turn; in every fifth round delayed 5 ms, so that claims and
// maintenance promote them), claiming them (with offers) and settling them in that order
// (settleInOrder): settle groups in even rounds, settle-and-claim of up to four more in odd
// ones. It returns how many jobs the workers submitted.
func batchRounds[L comparable](t *testing.T, planes []*Driver, orders [][]L, job func(L) plane.SubmitParams,
	label func(*plane.Job) L, offers *plane.Offers,
) int64 {
	t.Helper()
	const (
		workers = 12
		rounds  = 15
	)
	var submitted atomic.Int64
	var released sync.Map // ids handed back once (released), so they do not bounce forever
	var wg sync.WaitGroup
	ctx := t.Context()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := planes[w%len(planes)]
			order := orders[w%len(orders)]
			for round := range rounds {
				// Grouped with the submits of this plane's other workers into one INSERT.
				batch := make([]plane.SubmitParams, 0, 2*len(order))
				for range 2 {
					for _, l := range order {
						batch = append(batch, job(l))
					}
				}
				if round%5 == 4 {
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
					settles := settleInOrder(jobs, order, label, round, &released)
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
	return submitted.Load()
}

// settleInOrder settles jobs in the label order order (label gives a job's): most are
// acked; in rounds divisible by 3 a job of every other label is handed back (released,
// once per job) or retried after a short backoff on its first attempt, so settle batches
// end, re-queue and delay jobs of several labels in one transaction.
func settleInOrder[L comparable](jobs []*plane.Job, order []L, label func(*plane.Job) L, round int, released *sync.Map) []plane.SettleParams {
	rank := func(j *plane.Job) int { return slices.Index(order, label(j)) }
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

// drainAcked claims (with offers) and acks what is left in d's queue "q" (re-queued,
// retried, delayed) until it holds want succeeded jobs and nothing else, within 30 s.
func drainAcked(t *testing.T, d *Driver, want int64, offers *plane.Offers) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(30 * time.Second)
	for {
		stats, err := d.QueueStatsList(ctx, "default")
		require.NoError(t, err)
		require.Len(t, stats, 1)
		if stats[0].Counts[plane.StateSucceeded] == want {
			require.Equal(t, map[plane.State]int64{plane.StateSucceeded: want}, stats[0].Counts)
			return
		}
		require.True(t, time.Now().Before(deadline), "drained in time: %v of %d", stats[0].Counts, want)
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 100, Wait: 20 * time.Millisecond, Offers: offers})
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
}

func requireSettled(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Error(fmt.Errorf("settle: %w", err))
		}
	}
}
