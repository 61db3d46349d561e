package pgplane

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// roundTrips counts the round trips of every connection it dials: data read after a write
// is one (pgx writes a request, or a whole pipeline, then reads its answers).
type roundTrips struct {
	n atomic.Int64
}

// tripConn is a connection whose round trips roundTrips counts.
type tripConn struct {
	net.Conn
	trips *roundTrips
	mu    sync.Mutex
	wrote bool // written since the last read
}

func (c *tripConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.wrote = true
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// Read counts a round trip when it returns the first data after a write, not when it
// starts: a read may already be waiting when the request is written (pgx starts a
// background reader when a write takes over 15 ms, as one does on a loaded machine, and
// that reader's read can begin before the write does). Counting at the start missed the
// round trip whose answer such a read returned (TestRoundTripsPerTransaction read 1 where
// 2 were made, at load 27); the server answers only what was written, so data returned
// after a write always belongs to a request made after the last answer was read.
func (c *tripConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.mu.Lock()
		if c.wrote {
			c.wrote = false
			c.trips.n.Add(1)
		}
		c.mu.Unlock()
	}
	return n, err
}

// take answers the round trips since the last take.
func (r *roundTrips) take() int { return int(r.n.Swap(0)) }

// trippedDriver opens a driver on a new database whose round trips trips counts: polling
// only (no listening connection) and no maintenance beat, so that the calls of the test are
// all it counts.
func trippedDriver(t testing.TB) (*Driver, *roundTrips) {
	t.Helper()
	pc, _, err := ParseURL(pgtest.Database(t), nil)
	require.NoError(t, err)
	trips := &roundTrips{}
	dial := pc.ConnConfig.DialFunc
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &tripConn{Conn: c, trips: trips}, nil
	}
	d, _ := poolDriver(t, pc)
	return d, trips
}

// poolDriver opens a driver on a pool of pc, both closed when t ends: polling only (no
// listening connection) and no maintenance beat, so that the test's calls are all the
// pool's connections carry.
func poolDriver(t testing.TB, pc *pgxpool.Config) (*Driver, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(t.Context(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d, err := New(pool, &Config{MaintenanceInterval: time.Hour, PollOnly: true})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d, pool
}

// TestRoundTripsPerTransaction counts the round trips of a plane's transactions, their
// statements' plans cached (each call is made once before it is counted): BEGIN goes out
// with the transaction's first statements and COMMIT with its last writes.
func TestRoundTripsPerTransaction(t *testing.T) {
	d, trips := trippedDriver(t)
	ctx := t.Context()
	submit := func(n int) {
		ps := make([]plane.SubmitParams, n)
		for i := range ps {
			ps[i].Payload = []byte{0xc0}
		}
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: ps})
		require.NoError(t, err)
	}
	claim := &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 4}
	acks := func(jobs []*plane.Job) []plane.SettleParams {
		s := make([]plane.SettleParams, len(jobs))
		for i, j := range jobs {
			s[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: []byte{0xc0}}
		}
		return s
	}
	counted := map[string]int{}
	var jobs []*plane.Job
	for round := range 2 { // the first round prepares the statements
		trips.take()
		submit(4)
		counted["submit of 4"] = trips.take()

		var err error
		jobs, err = d.InvocationClaimMany(ctx, claim)
		require.NoError(t, err)
		require.Len(t, jobs, 4)
		counted["claim of 4"] = trips.take()

		submit(4)
		trips.take()
		errs, next, err := d.InvocationSettleAndClaim(ctx, acks(jobs), claim)
		require.NoError(t, err)
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, next, 4)
		counted["settle 4 and claim 4"] = trips.take()

		errs, err = d.InvocationSettleMany(ctx, acks(next))
		require.NoError(t, err)
		for _, err := range errs {
			require.NoError(t, err)
		}
		counted["settle of 4"] = trips.take()

		none, err := d.InvocationClaimMany(ctx, claim)
		require.NoError(t, err)
		require.Empty(t, none)
		counted["empty claim"] = trips.take()

		_, err = d.InvocationGet(ctx, jobs[0].ID)
		require.NoError(t, err)
		counted["get"] = trips.take()
		t.Logf("round %d: %v", round, counted)
	}
	// BEGIN and the rows locked; the settles' writes with the promote, admission and claim
	// statements; the claim's writes, the counters and COMMIT (it was 6: BEGIN, COMMIT and
	// the settles' writes each alone).
	require.Equal(t, 3, counted["settle 4 and claim 4"])
	// BEGIN with the promote, admission and claim statements; the claim's writes, the
	// counters and COMMIT (it was 4).
	require.Equal(t, 2, counted["claim of 4"])
	// BEGIN and the rows locked; the writes, the counters and COMMIT (it was 4).
	require.Equal(t, 2, counted["settle of 4"])
}

// BenchmarkSettleAndClaim4 is one worker's settle-and-claim of 4 jobs at a time (a group of
// one: 4 acks and a claim of 4), on a queue holding every job it claims; trips/op are its
// round trips. BenchmarkRoundTrip is one round trip alone (SELECT 1 on the pool), its unit.
func BenchmarkSettleAndClaim4(b *testing.B) {
	d, trips := trippedDriver(b)
	ctx := b.Context()
	const per = 4
	for left := (b.N + 1) * per; left > 0; left -= 1000 {
		ps := make([]plane.SubmitParams, min(left, 1000))
		for i := range ps {
			ps[i].Payload = []byte{0xc0}
		}
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: ps})
		require.NoError(b, err)
	}
	claim := &plane.ClaimParams{Namespace: "default", Queue: "q", Max: per}
	jobs, err := d.InvocationClaimMany(ctx, claim)
	require.NoError(b, err)
	trips.take()
	b.ResetTimer()
	for range b.N {
		settle := make([]plane.SettleParams, len(jobs))
		for i, j := range jobs {
			settle[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: []byte{0xc0}}
		}
		_, jobs, err = d.InvocationSettleAndClaim(ctx, settle, claim)
		if err != nil || len(jobs) != per {
			b.Fatal(err, len(jobs))
		}
	}
	b.ReportMetric(float64(trips.take())/float64(b.N), "trips/op")
}

func BenchmarkRoundTrip(b *testing.B) {
	d, _ := trippedDriver(b)
	var one int
	for range b.N {
		require.NoError(b, d.pool.QueryRow(b.Context(), "SELECT 1").Scan(&one))
	}
}

// TestByIDStatementsPlannedOnce checks that the statements that reach their rows only by
// primary key through arrays (statements.generic: the settles' and starts' reads and
// writes, the counters) run their connection's one generic plan, never a plan of their own
// each time: the server's default (plan_cache_mode auto) planned each anew on every
// execution (0.1 ms each, a third of a settle-and-claim's server time), for a custom plan
// of a few ids looks cheaper than the generic plan's guess. And that the others keep the
// default: the claim, whose plan the default chose generic here, is not forced.
func TestByIDStatementsPlannedOnce(t *testing.T) {
	d, pool := oneConnDriver(t)
	ctx := t.Context()
	// Past the 5 custom plans auto makes before it compares, behind enough rows for its
	// generic plan's guess to look costlier than a custom plan of 4 ids.
	const rounds, per, depth = 12, 4, 5000
	submitN(t, d, depth)
	claim := &plane.ClaimParams{Namespace: "default", Queue: "q", Max: per}
	jobs, err := d.InvocationClaimMany(ctx, claim)
	require.NoError(t, err)
	for range rounds {
		jobs = settleAndClaim(t, d, jobs, claim)
		require.Len(t, jobs, per)
	}

	plans := map[string][2]int64{} // statement text: generic, custom plans
	rows, err := pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	require.NoError(t, err)
	for rows.Next() {
		var sql string
		var generic, custom int64
		require.NoError(t, rows.Scan(&sql, &generic, &custom))
		plans[sql] = [2]int64{generic, custom}
	}
	require.NoError(t, rows.Err())
	for name, sql := range map[string]string{"headMany": d.sql.headMany, "setTerminalMany": d.sql.setTerminalMany,
		"setRunning": d.sql.setRunning, "countsAdd": d.sql.countsAdd} {
		p, ok := plans[sql]
		require.True(t, ok, "%s not prepared", name)
		require.Zero(t, p[1], "%s: custom plans (generic %d)", name, p[0])
		require.NotZero(t, p[0], "%s: generic plans", name)
	}
	// The claim statement is not among them: the default mode decides its plans.
	require.False(t, d.sql.generic[d.sql.claimFIFOFrom])
	require.False(t, d.sql.generic[d.sql.promoteHolding])
}

// TestByIDPlansProbeKeys checks that the one plan a connection keeps for a by-id
// statement, made while the table was empty, probes the primary key: with
// plan_cache_mode = force_generic_plan alone, PostgreSQL planned headMany on an empty
// table (guessed at 10 pages) as a sequential scan and kept that plan while the table
// grew, until its next analyze (autovacuum looks every minute): every settle then read the
// whole table. The by-id mode turns enable_seqscan off too (byIDPlans).
func TestByIDPlansProbeKeys(t *testing.T) {
	d, pool := oneConnDriver(t)
	ctx := t.Context()
	claim := &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 4}
	submitN(t, d, 8)
	jobs, err := d.InvocationClaimMany(ctx, claim)
	require.NoError(t, err)
	jobs = settleAndClaim(t, d, jobs, claim) // the plans made: the table holds 8 rows
	require.Len(t, jobs, 4)
	submitN(t, d, 5000)

	// The cached generic plan of each statement, read on the connection that made it (the
	// session's plan_cache_mode set for EXPLAIN EXECUTE to take the generic plan).
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "set plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(context.Background(), "reset plan_cache_mode") }()
	for name, c := range map[string]struct{ sql, args string }{
		"headMany":        {d.sql.headMany, `('{a,b}')`},
		"setRunning":      {d.sql.setRunning, `(1, '{a,b}', '{a,b}', '{1,2}', '{a,b}')`},
		"setTerminalMany": {d.sql.setTerminalMany, `(1, '{a,b}', '{2,2}', '{NULL,NULL}', '{NULL,NULL}')`},
	} {
		var stmt string
		require.NoError(t, conn.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE statement = $1`, c.sql).Scan(&stmt), name)
		rows, err := conn.Query(ctx, "EXPLAIN EXECUTE "+stmt+c.args, pgx.QueryExecModeSimpleProtocol)
		require.NoError(t, err, name)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, name)
		plan := strings.Join(lines, "\n")
		require.NotContains(t, plan, "Seq Scan on invocations", "%s:\n%s", name, plan)
		require.NotContains(t, plan, "Hash Join", "%s:\n%s", name, plan)
		require.Contains(t, plan, "invocations_pkey", "%s:\n%s", name, plan)
	}
}

// oneConnDriver opens a driver on a new database whose pool holds one connection, so
// that every call runs on it and its prepared statements can be read; polling only, no
// maintenance beat.
func oneConnDriver(t *testing.T) (*Driver, *pgxpool.Pool) {
	t.Helper()
	pc, _, err := ParseURL(pgtest.Database(t), nil)
	require.NoError(t, err)
	pc.MaxConns = 1
	return poolDriver(t, pc)
}

// submitN submits n jobs to default/q.
func submitN(t *testing.T, d *Driver, n int) {
	t.Helper()
	ps := make([]plane.SubmitParams, n)
	for i := range ps {
		ps[i].Payload = []byte{0xc0}
	}
	_, err := d.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: ps})
	require.NoError(t, err)
}

// settleAndClaim acks jobs and claims with claim in one call, and returns the jobs claimed.
func settleAndClaim(t *testing.T, d *Driver, jobs []*plane.Job, claim *plane.ClaimParams) []*plane.Job {
	t.Helper()
	settle := make([]plane.SettleParams, len(jobs))
	for i, j := range jobs {
		settle[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: []byte{0xc0}}
	}
	errs, next, err := d.InvocationSettleAndClaim(t.Context(), settle, claim)
	require.NoError(t, err)
	for _, err := range errs {
		require.NoError(t, err)
	}
	return next
}

// TestByIDModeStaysWithItsStatements attacks the by-id plan mode (tx.planModes): a
// statement that is not a by-id one, sent after a by-id write queued in the same
// pipeline, after a by-id read, or straight on the connection (the path of query with
// nothing pending), and the next transaction on the same connection (a deadlock retry's
// or any later call's) all run with the server's defaults, never force_generic_plan or
// enable_seqscan off.
func TestByIDModeStaysWithItsStatements(t *testing.T) {
	d, _ := oneConnDriver(t)
	ctx := t.Context()
	const settings = `SELECT current_setting('plan_cache_mode') || ' ' || current_setting('enable_seqscan')`
	defaults := "auto on"
	mode := func(tx *tx) string {
		var s string
		require.NoError(t, tx.queryRow(settings).Scan(&s))
		return s
	}
	none := []string{}
	require.NoError(t, d.do(ctx, func(tx *tx) error {
		require.Equal(t, defaults, mode(tx), "first statement")
		tx.exec(d.sql.setTerminalMany, tx.ms, none, []int16{}, [][]byte{}, [][]byte{}) // by id, queued
		require.Equal(t, defaults, mode(tx), "after a by-id write in the same pipeline")
		rows, err := tx.query(d.sql.headMany, none) // by id, read
		require.NoError(t, err)
		rows.Close()
		require.NoError(t, rows.Err())
		require.Equal(t, defaults, mode(tx), "after a by-id read")
		require.Equal(t, defaults, mode(tx), "straight on the connection")
		rows, err = tx.query(d.sql.headMany, none)
		require.NoError(t, err)
		rows.Close()
		return rows.Err() // the transaction ends in the by-id mode
	}))
	require.NoError(t, d.do(ctx, func(tx *tx) error {
		require.Equal(t, defaults, mode(tx), "the next transaction on the connection")
		var s string
		require.NoError(t, tx.conn.QueryRow(ctx, settings).Scan(&s))
		require.Equal(t, defaults, s)
		return nil
	}))
}
