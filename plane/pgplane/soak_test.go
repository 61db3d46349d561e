package pgplane

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestLongTransactionSoak holds an old snapshot open (a long REPEATABLE READ transaction)
// while producers and workers run, and checks that the claim path stays fast while vacuum
// cannot remove what the snapshot may still see; it reports the dead tuples left behind.
// It runs for LAKESHORE_SOAK (a duration, e.g. 1m) and is skipped without it.
func TestLongTransactionSoak(t *testing.T) {
	soak, err := time.ParseDuration(os.Getenv("LAKESHORE_SOAK"))
	if err != nil || soak <= 0 {
		t.Skip("set LAKESHORE_SOAK=1m to run the long-transaction soak")
	}
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: 200 * time.Millisecond})
	holder := mustConn(t, url)
	snapshot, err := holder.BeginTx(t.Context(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer snapshot.Rollback(context.Background())
	var n int64
	require.NoError(t, snapshot.QueryRow(t.Context(), `SELECT count(*) FROM lakeshore.invocations`).Scan(&n)) // takes the snapshot

	ctx, cancel := context.WithTimeout(t.Context(), soak)
	defer cancel()
	var mu sync.Mutex
	var first, last []time.Duration // claim latencies of the first and last tenth
	start := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]plane.SubmitParams, 50)
			for i := range batch {
				batch[i] = plane.SubmitParams{Payload: []byte{0xc0}}
			}
			for ctx.Err() == nil {
				// Keep a backlog of about 1,000 jobs: the workers, not the producers, set the pace.
				queued, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
				if err == nil && queued < 1000 {
					d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				began := time.Now()
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 10})
				took := time.Since(began)
				if err != nil || len(jobs) == 0 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				switch elapsed := time.Since(start); {
				case elapsed < soak/10:
					first = append(first, took)
				case elapsed > soak*9/10:
					last = append(last, took)
				}
				mu.Unlock()
				var settles []plane.SettleParams
				for _, j := range jobs {
					settles = append(settles, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded})
				}
				d.InvocationSettleMany(ctx, settles)
			}
		}()
	}
	wg.Wait()
	p := func(xs []time.Duration, q float64) time.Duration {
		if len(xs) == 0 {
			return 0
		}
		slices.Sort(xs)
		return xs[int(q*float64(len(xs)-1))]
	}
	var live, dead int64
	conn := mustConn(t, url)
	_, _ = conn.Exec(t.Context(), `SELECT pg_stat_force_next_flush()`)
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT COALESCE(sum(n_live_tup), 0)::bigint, COALESCE(sum(n_dead_tup), 0)::bigint
		FROM pg_stat_user_tables WHERE schemaname = 'lakeshore'`).Scan(&live, &dead))
	succeeded, err := d.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateSucceeded})
	require.NoError(t, err)
	t.Logf("soak %s with a snapshot held: %d jobs done; claim p50/p99 first tenth %s/%s, last tenth %s/%s; %d live and %d dead tuples",
		soak, succeeded, p(first, .5), p(first, .99), p(last, .5), p(last, .99), live, dead)
	for name, q := range map[string][]any{
		"fifo from the start": {d.sql.claimFIFO, "default", "q", 10},
		"promote":             {d.sql.promote, "default", "q", time.Now().UnixMilli()},
		"count":               {d.sql.count, "default", "q", int16(0)},
	} {
		t.Logf("%s under the snapshot:\n%s", name, explain(t, conn, "(ANALYZE, BUFFERS) "+q[0].(string), q[1:]...))
	}
	require.NotEmpty(t, last)
	require.Less(t, p(last, .99), time.Second, "the claim path stays usable under an old snapshot")
}
