package pgplane

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// eachConn acquires every connection the pool holds, all at once (so each is a different
// one), and returns what is prepared on each, by backend pid: statement text → name.
func eachConn(t *testing.T, d *Driver) map[uint32]map[string]string {
	t.Helper()
	n := int(d.pool.Stat().TotalConns())
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	out := map[uint32]map[string]string{}
	for range n {
		c, err := d.pool.Acquire(t.Context())
		require.NoError(t, err)
		conns = append(conns, c)
		rows, err := c.Query(t.Context(), `SELECT statement, name FROM pg_prepared_statements`)
		require.NoError(t, err)
		got := map[string]string{}
		for rows.Next() {
			var s, name string
			require.NoError(t, rows.Scan(&s, &name))
			got[s] = name
		}
		require.NoError(t, rows.Err())
		out[c.Conn().PgConn().PID()] = got
	}
	require.Len(t, out, n)
	return out
}

// requireHot fails unless every hot statement is prepared on every connection of d's pool.
func requireHot(t *testing.T, d *Driver, what string) {
	t.Helper()
	for _, got := range eachConn(t, d) {
		for _, sql := range d.hot() {
			if sql != "" {
				_, ok := got[sql]
				require.True(t, ok, "%s: a connection of the pool has not prepared %q", what, sql)
			}
		}
	}
}

// TestOpenWarmsThePool: Open returns with the pool's connections open (pool_min_conns, 8
// by default) and the statements every job runs prepared on each; a job's first submit,
// registration, claim and settles on them prepare nothing of their own; a connection the
// pool opens later is prepared as it opens; the URL's pool_min_conns is kept.
func TestOpenWarmsThePool(t *testing.T) {
	url := pgtest.Database(t)
	ctx := t.Context()
	d := open(t, url, nil)
	require.EqualValues(t, 8, d.pool.Stat().TotalConns(), "Open opened the pool's connections")
	requireHot(t, d, "after Open")
	before := eachConn(t, d)

	id := submitOne(t, d, plane.SubmitParams{})
	require.NoError(t, d.WorkerRegister(ctx, &plane.WorkerInfo{ID: "01JABCDEFGHJKMNPQRSTVWXYZ0", Host: "h", PID: 1, Queues: []string{"q"}}))
	job := claimOne(t, d, 0)
	require.Equal(t, id, job.ID)
	submitOne(t, d, plane.SubmitParams{})
	_, next, err := d.InvocationSettleAndClaim(ctx, []plane.SettleParams{{ID: job.ID, Token: job.Token, Outcome: plane.OutcomeSucceeded}},
		&plane.ClaimParams{Namespace: "default", Queue: "q"})
	require.NoError(t, err)
	require.Len(t, next, 1)
	_, err = d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: next[0].ID, Token: next[0].Token, Outcome: plane.OutcomeSucceeded}})
	require.NoError(t, err)
	for pid, got := range eachConn(t, d) {
		require.Contains(t, before, pid, "the same connections")
		for sql := range got {
			// A statement prepared since is one a transaction prepared on first use
			// (pgx's statement cache); the clock's read (maintenance, on no job's path) is
			// the one allowed.
			if _, ok := before[pid][sql]; !ok && sql != clockSQL {
				t.Errorf("a job's transaction prepared %q on first use", sql)
			}
		}
	}

	// The pool's connections closed (as past their lifetime): the next are prepared as
	// they open.
	d.pool.Reset()
	c, err := d.pool.Acquire(ctx)
	require.NoError(t, err)
	c.Release()
	requireHot(t, d, "a connection opened after Open")

	t.Run("pool_min_conns", func(t *testing.T) {
		d := open(t, url+"&pool_min_conns=2", nil)
		require.EqualValues(t, 2, d.pool.Config().MinConns)
		require.EqualValues(t, 8, d.pool.Config().MaxConns)
		require.GreaterOrEqual(t, d.pool.Stat().TotalConns(), int32(2)) // and the first, opened to ping, may be a third
		requireHot(t, d, "pool_min_conns=2")
		d = open(t, url+"&pool_max_conns=3", nil)
		require.EqualValues(t, 3, d.pool.Config().MinConns, "never more than the pool's size")
		require.EqualValues(t, 3, d.pool.Stat().TotalConns())
		requireHot(t, d, "pool_max_conns=3")
	})

	// A one-shot program's plane (Config.OnDemand, the CLI's verbs) opens what it uses and
	// prepares nothing ahead; a URL's pool_min_conns still keeps that many.
	t.Run("OnDemand", func(t *testing.T) {
		d := open(t, url, &Config{OnDemand: true})
		require.Zero(t, d.pool.Config().MinConns)
		// Only what Open and the plane's start used (the warm pool opens 8): the
		// statements on them are prepared as pgx prepares any, on first use.
		require.Less(t, d.pool.Stat().TotalConns(), int32(8))
		d = open(t, url+"&pool_min_conns=2", &Config{OnDemand: true})
		require.EqualValues(t, 2, d.pool.Config().MinConns)
		requireHot(t, d, "OnDemand with pool_min_conns=2")
	})

	// Where pgx prepares nothing (PgBouncer without prepared statements), neither does
	// the warm-up: the connections are opened only.
	t.Run("default_query_exec_mode=exec", func(t *testing.T) {
		d := open(t, url+"&default_query_exec_mode=exec", nil)
		require.EqualValues(t, 8, d.pool.Stat().TotalConns())
		submitOne(t, d, plane.SubmitParams{})
		for _, got := range eachConn(t, d) {
			require.Empty(t, got, "nothing prepared")
		}
	})
}

// TestDeadConnectionsFailOnce: with the pool's connections kept open, a server that ends
// them all (pg_terminate_backend, as a restart does) fails at most one transaction of the
// process: once one found its connection closed, the idle connections from before are
// pinged before use and the dead ones replaced, rather than each failing a transaction in
// turn.
func TestDeadConnectionsFailOnce(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{PollOnly: true})
	admin := mustConn(t, url)
	require.EqualValues(t, 8, d.pool.Stat().TotalConns())
	for round := range 5 {
		_, err := admin.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`)
		require.NoError(t, err)
		failed := 0
		for {
			_, err := d.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
				Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
			if err == nil {
				break
			}
			require.ErrorIs(t, err, plane.ErrUnavailable)
			failed++
			require.LessOrEqual(t, failed, 1, "round %d: a second transaction met a dead connection", round)
		}
		// And the calls after it succeed.
		for range d.pool.Stat().TotalConns() {
			_, err := d.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
			require.NoError(t, err, "round %d", round)
		}
	}
}
