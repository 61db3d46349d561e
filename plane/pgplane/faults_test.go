package pgplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/porttest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestOpenFaults checks that each way of failing to reach the database is a clear error
// naming which, before anything is written.
func TestOpenFaults(t *testing.T) {
	good := pgtest.Database(t)
	u, err := url.Parse(good)
	require.NoError(t, err)

	t.Run("BadURL", func(t *testing.T) {
		_, err := Open(t.Context(), "postgres://user:secret@host:notaport/db", nil)
		require.ErrorIs(t, err, plane.ErrInvalid)
		require.Contains(t, err.Error(), "database URL")
		require.NotContains(t, err.Error(), "secret", "the password never shows in a message")
	})
	t.Run("WrongScheme", func(t *testing.T) {
		for _, bad := range []string{"mysql://user:secret@127.0.0.1/db", "http://user:secret@127.0.0.1:5432/db"} {
			_, err := Open(t.Context(), bad, nil)
			require.ErrorIs(t, err, plane.ErrInvalid, bad)
			require.Contains(t, err.Error(), "postgres://", "the message says what is allowed")
			require.Contains(t, err.Error(), strings.SplitN(bad, ":", 2)[0], "and names the scheme given")
			require.NotContains(t, err.Error(), "secret")
		}
	})
	t.Run("UnknownHost", func(t *testing.T) {
		const host = "no-such-host.invalid" // RFC 2606: never resolves
		bad := *u
		bad.Host = host + ":5432"
		_, err := Open(t.Context(), bad.String(), nil)
		require.ErrorIs(t, err, plane.ErrUnavailable)
		require.Contains(t, err.Error(), host)
		require.NotContains(t, err.Error(), pgtest.Password)
		var dnsErr *net.DNSError
		if _, lookup := net.DefaultResolver.LookupHost(t.Context(), host); errors.As(lookup, &dnsErr) && dnsErr.IsNotFound {
			require.ErrorIs(t, err, ErrHostNotFound, "the resolver says no such host: so does the error")
			require.Contains(t, err.Error(), "does not resolve")
		}
	})
	t.Run("ConnectionRefused", func(t *testing.T) {
		bad := *u
		bad.Host = porttest.Refused(t) // nothing listens there
		_, err = Open(t.Context(), bad.String(), nil)
		require.ErrorIs(t, err, ErrConnectionRefused)
		require.ErrorIs(t, err, plane.ErrUnavailable)
		require.Contains(t, err.Error(), bad.Host)
	})
	t.Run("WrongCredentials", func(t *testing.T) {
		bad := *u
		bad.User = url.UserPassword(pgtest.Superuser, "wrong-password")
		_, err := Open(t.Context(), bad.String(), nil)
		require.ErrorIs(t, err, ErrCredentials)
		require.ErrorIs(t, err, plane.ErrUnauthorized)
		require.Contains(t, err.Error(), pgtest.Superuser)
		require.NotContains(t, err.Error(), "wrong-password")
	})
	t.Run("MissingDatabase", func(t *testing.T) {
		bad := *u
		bad.Path = "/no_such_database"
		_, err := Open(t.Context(), bad.String(), nil)
		require.ErrorIs(t, err, ErrDatabaseMissing)
		require.Contains(t, err.Error(), "no_such_database")
	})
	t.Run("BadSchemaName", func(t *testing.T) {
		_, err := Open(t.Context(), good, &Config{Schema: "Robert'); DROP TABLE students;--"})
		require.ErrorIs(t, err, plane.ErrInvalid)
	})
	t.Run("NewerSchema", func(t *testing.T) {
		d, err := Open(t.Context(), good, &Config{Schema: "newer"})
		require.NoError(t, err)
		require.NoError(t, d.Close())
		conn, err := pgx.Connect(t.Context(), good)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(t.Context(), `INSERT INTO newer.schema_migrations (version) VALUES ($1)`, SchemaVersion()+1)
		require.NoError(t, err)
		before := tablesOf(t, conn, "newer")

		_, err = Open(t.Context(), good, &Config{Schema: "newer"})
		require.ErrorIs(t, err, ErrSchemaNewer)
		require.Contains(t, err.Error(), fmt.Sprintf("version %d", SchemaVersion()+1))
		require.Equal(t, before, tablesOf(t, conn, "newer"), "nothing written")
	})
}

func tablesOf(t *testing.T, conn *pgx.Conn, schema string) string {
	t.Helper()
	var names string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT COALESCE(string_agg(table_name, ',' ORDER BY table_name), '')
		FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&names))
	var versions string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT string_agg(version::text, ',' ORDER BY version) FROM `+
		pgx.Identifier{schema}.Sanitize()+`.schema_migrations`).Scan(&versions))
	return names + " | " + versions
}

// TestSchemasCoexist checks that two planes under two schema names of one database share
// nothing.
func TestSchemasCoexist(t *testing.T) {
	url := pgtest.Database(t)
	a, err := Open(t.Context(), url, &Config{Schema: "plane_a"})
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(t.Context(), url, &Config{Schema: "plane_b"})
	require.NoError(t, err)
	defer b.Close()
	res, err := a.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
		Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
	require.NoError(t, err)
	_, err = b.InvocationGet(t.Context(), res[0].ID)
	require.ErrorIs(t, err, plane.ErrNotFound)
	n, err := b.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestConnectionsDropped kills every connection of the plane while it works: calls fail
// with an error matching plane.ErrUnavailable or succeed, never half-write, and a retried
// submit with a key makes one job.
func TestConnectionsDropped(t *testing.T) {
	url := pgtest.Database(t)
	d, err := Open(t.Context(), url, &Config{PollInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	defer d.Close()
	admin, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer admin.Close(context.Background())

	submit := func() ([]plane.SubmitResult, error) {
		return d.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
			Invocations: []plane.SubmitParams{{Key: "once", Payload: []byte{0xc0}}, {Payload: []byte{0xc0}}}})
	}
	_, err = submit()
	require.NoError(t, err)
	var ids []string
	dropped := 0
	for range 5 {
		_, err := admin.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`)
		require.NoError(t, err)
		for try := 0; ; try++ {
			res, err := submit()
			if err == nil {
				ids = append(ids, res[0].ID)
				require.True(t, res[0].Existing, "the key names the first job")
				break
			}
			require.ErrorIs(t, err, plane.ErrUnavailable, "a dropped connection is retryable: %v", err)
			dropped++
			require.Less(t, try, 10, "the pool reconnects")
		}
	}
	t.Logf("%d submits met a dropped connection", dropped)
	var keyed, all int64
	require.NoError(t, admin.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE key = 'once'), count(*) FROM lakeshore.invocations`).Scan(&keyed, &all))
	require.EqualValues(t, 1, keyed, "one job for the key however often it was retried")
	n, err := d.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.Equal(t, all, n, "the counters match the rows: nothing half-written")
	for _, id := range ids[1:] {
		require.Equal(t, ids[0], id)
	}
}

// TestDropInTransaction breaks the connection of a transaction at two exact points, through
// a proxy that reads the wire protocol: the backend terminated after the transaction's
// statements ran and before its COMMIT, and the COMMIT done but its answer lost. Both give
// the caller an error matching plane.ErrUnavailable. The first leaves nothing written; a
// submit retried with the same client id (or key) after either makes exactly one job, and
// a settle retried after either settles once.
func TestDropInTransaction(t *testing.T) {
	url := pgtest.Database(t)
	proxy, via := pgtest.NewFaultProxy(t, url)
	// No maintenance pass (an hour apart) commits in the middle of the test.
	d := open(t, via, &Config{MaintenanceInterval: time.Hour})
	admin := mustConn(t, url)
	ids := plane.NewIDGenerator()
	rows := func(where string, args ...any) int {
		var n int
		require.NoError(t, admin.QueryRow(t.Context(), `SELECT count(*) FROM lakeshore.invocations WHERE `+where, args...).Scan(&n))
		return n
	}
	countersMatchRows := func() {
		t.Helper()
		var all int64
		require.NoError(t, admin.QueryRow(t.Context(), `SELECT count(*) FROM lakeshore.invocations`).Scan(&all))
		stats, err := d.QueueStatsList(t.Context(), "default")
		require.NoError(t, err)
		var counted int64
		for _, s := range stats {
			for _, n := range s.Counts {
				counted += n
			}
		}
		require.Equal(t, all, counted, "the counters match the rows: nothing half-written")
	}
	submit := func(id, key string) ([]plane.SubmitResult, error) {
		return d.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
			Invocations: []plane.SubmitParams{{ID: id, Payload: []byte{0xc0}}, {Key: key, Payload: []byte{0xc0}}}})
	}
	submitOne(t, d, plane.SubmitParams{}) // the pool's connections are up

	t.Run("SubmitTerminatedBeforeCommit", func(t *testing.T) {
		id := ids.New(time.Now())
		proxy.Arm(pgtest.FaultTerminateBeforeCommit)
		_, err := submit(id, "before")
		require.Equal(t, pgtest.FaultTerminateBeforeCommit, proxy.Await())
		require.ErrorIs(t, err, plane.ErrUnavailable, "a dropped connection is retryable: %v", err)
		require.Zero(t, rows(`id = $1 OR key = 'before'`, id), "nothing of the transaction was written")
		countersMatchRows()

		res, err := submit(id, "before")
		require.NoError(t, err, "the pool replaces the connection")
		require.Equal(t, id, res[0].ID)
		require.False(t, res[0].Existing, "the first submit made nothing: the retry makes the job")
		res, err = submit(id, "before")
		require.NoError(t, err)
		require.True(t, res[0].Existing)
		require.True(t, res[1].Existing)
		require.Equal(t, 1, rows(`id = $1`, id))
		require.Equal(t, 1, rows(`key = 'before'`))
		countersMatchRows()
	})
	t.Run("SubmitCommitAnswerLost", func(t *testing.T) {
		id := ids.New(time.Now())
		proxy.Arm(pgtest.FaultLoseCommitAnswer)
		_, err := submit(id, "lost")
		require.Equal(t, pgtest.FaultLoseCommitAnswer, proxy.Await())
		require.ErrorIs(t, err, plane.ErrUnavailable, "a lost answer is retryable: %v", err)
		require.Equal(t, 1, rows(`id = $1`, id), "the commit was done")

		res, err := submit(id, "lost")
		require.NoError(t, err)
		require.Equal(t, id, res[0].ID)
		require.True(t, res[0].Existing, "the retry finds the job the lost commit made")
		require.True(t, res[1].Existing, "and the keyed one")
		require.Equal(t, 1, rows(`id = $1`, id), "never a second job")
		require.Equal(t, 1, rows(`key = 'lost'`))
		countersMatchRows()
	})
	claim := func() *plane.Job {
		t.Helper()
		jobs, err := d.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		return jobs[0]
	}
	ack := func(j *plane.Job) (error, error) {
		errs, err := d.InvocationSettleMany(t.Context(), []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: []byte{0xc3}}})
		if err != nil {
			return nil, err
		}
		return errs[0], nil
	}
	t.Run("SettleTerminatedBeforeCommit", func(t *testing.T) {
		j := claim()
		proxy.Arm(pgtest.FaultTerminateBeforeCommit)
		_, err := ack(j)
		require.Equal(t, pgtest.FaultTerminateBeforeCommit, proxy.Await())
		require.ErrorIs(t, err, plane.ErrUnavailable, "%v", err)
		inv, err := d.InvocationGet(t.Context(), j.ID)
		require.NoError(t, err)
		require.Equal(t, plane.StateRunning, inv.State, "the settle was not written")
		countersMatchRows()
		settled, err := ack(j)
		require.NoError(t, err)
		require.NoError(t, settled, "the lease still holds: the retry settles")
		inv, err = d.InvocationGet(t.Context(), j.ID)
		require.NoError(t, err)
		require.Equal(t, plane.StateSucceeded, inv.State)
		countersMatchRows()
	})
	t.Run("SettleCommitAnswerLost", func(t *testing.T) {
		j := claim()
		proxy.Arm(pgtest.FaultLoseCommitAnswer)
		_, err := ack(j)
		require.Equal(t, pgtest.FaultLoseCommitAnswer, proxy.Await())
		require.ErrorIs(t, err, plane.ErrUnavailable, "%v", err)
		inv, err := d.InvocationGet(t.Context(), j.ID)
		require.NoError(t, err)
		require.Equal(t, plane.StateSucceeded, inv.State, "the settle was committed")
		settled, err := ack(j)
		require.NoError(t, err)
		require.ErrorIs(t, settled, plane.ErrLeaseLost, "the retry is fenced: the job settles once")
		countersMatchRows()
	})
}

// TestCallersContextEnd ends the caller's context while its statement waits on a lock that
// another session holds: pgx then closes the statement's connection, which must still read
// as the caller's own deadline or cancel (ctx's error), never as plane.ErrUnavailable (a
// 502 over HTTP, where a client's deadline ended a long wait). A caller whose statement
// runs on its own context (a group's) is not covered here. The pool works again after.
func TestCallersContextEnd(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	admin := mustConn(t, url)
	// watch reads pg_stat_activity outside admin's transaction, which would read one
	// snapshot of it.
	watch := mustConn(t, url)
	id := submitOne(t, d, plane.SubmitParams{})

	// locked runs call with ctx while the tables the calls read or write are locked by
	// another session, and returns its error. end ends ctx once call waits on the lock.
	locked := func(name string, ctx context.Context, end func(), call func(context.Context) error) error {
		t.Helper()
		tx, err := admin.Begin(t.Context())
		require.NoError(t, err)
		defer tx.Rollback(context.Background())
		_, err = tx.Exec(t.Context(), `LOCK TABLE lakeshore.invocations, lakeshore.counts, lakeshore.queues IN ACCESS EXCLUSIVE MODE`)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		// The call waits on the lock (the event), then its context ends.
		require.Eventually(t, func() bool {
			select {
			case err := <-done:
				t.Fatalf("%s returned before its context ended: %v", name, err)
			default:
			}
			var n int
			require.NoError(t, watch.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
			return n > 0
		}, time.Minute, 5*time.Millisecond, "%s waits on the lock", name)
		end()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("the call did not return when its context ended")
			return nil
		}
	}
	calls := map[string]func(context.Context) error{
		"count": func(ctx context.Context) error {
			_, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
			return err
		},
		"get": func(ctx context.Context) error {
			_, err := d.InvocationGet(ctx, id)
			return err
		},
		"wait": func(ctx context.Context) error {
			_, err := d.InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: time.Hour})
			return err
		},
		"read frames": func(ctx context.Context) error {
			_, err := d.FrameRead(ctx, &plane.FrameReadParams{Journal: plane.Journal{InvocationID: id}, Since: -1, Wait: time.Hour})
			return err
		},
		"set admission": func(ctx context.Context) error {
			_, err := d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "q", Admission: plane.Admission{MaxDepth: 5}})
			return err
		},
		"queue stats": func(ctx context.Context) error {
			_, err := d.QueueStatsList(ctx, "default")
			return err
		},
	}
	for name, call := range calls {
		for _, ending := range []error{context.Canceled, context.DeadlineExceeded} {
			ctx := newEndable(t.Context(), ending)
			err := locked(name, ctx, ctx.end, call)
			require.ErrorIs(t, err, ending, "%s ended by its caller's context", name)
			require.NotErrorIs(t, err, plane.ErrUnavailable, "%s ended by its caller's context (%v) is not a lost connection: %v", name, ending, err)
		}
	}
	// The connections pgx closed are replaced: the plane answers again.
	n, err := d.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// endable is a context that ends when end is called, with err as its error: a cancel, or a
// deadline that passes at the moment the test chooses rather than after a guessed delay.
type endable struct {
	context.Context
	err  error
	done chan struct{}
	once sync.Once
}

func newEndable(parent context.Context, err error) *endable {
	return &endable{Context: parent, err: err, done: make(chan struct{})}
}

func (c *endable) end() { c.once.Do(func() { close(c.done) }) }

func (c *endable) Done() <-chan struct{} { return c.done }

func (c *endable) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// TestSubmitDecidedPastCallersContext ends a submit's context while its transaction waits
// on the admission row (held by another session): the transaction goes on to its answer,
// so a blocked submit on a full queue answers queue_full with its context's end as the
// cause (what the conformance case BlockEndsWithCallersDeadline asks, on a machine too
// loaded to decide within the deadline), and a submit with room answers its ids, committed,
// rather than an error for a submit that was written.
func TestSubmitDecidedPastCallersContext(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{MaintenanceInterval: time.Hour})
	admin := mustConn(t, url)
	watch := mustConn(t, url)
	for _, c := range []struct {
		name     string
		maxDepth int64
		want     error // nil: submitted
	}{{"full", 1, plane.ErrQueueFull}, {"room", 5, nil}} {
		q := "q-" + c.name
		_, err := d.QueueAdmissionSet(t.Context(), &plane.AdmissionParams{Namespace: "default", Queue: q,
			Admission: plane.Admission{MaxDepth: c.maxDepth, OnFull: plane.OnFullBlock}})
		require.NoError(t, err)
		_, err = d.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: q,
			Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
		require.NoError(t, err)
		tx, err := admin.Begin(t.Context())
		require.NoError(t, err)
		_, err = tx.Exec(t.Context(), `SELECT 1 FROM lakeshore.queues WHERE namespace = 'default' AND queue = $1 FOR UPDATE`, q)
		require.NoError(t, err)
		ctx := newEndable(t.Context(), context.DeadlineExceeded)
		type answer struct {
			res []plane.SubmitResult
			err error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: q,
				Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
			done <- answer{res, err}
		}()
		require.Eventually(t, func() bool {
			var n int
			require.NoError(t, watch.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
			return n > 0
		}, time.Minute, 5*time.Millisecond, "%s: the submit waits on the admission row", c.name)
		ctx.end()
		require.NoError(t, tx.Rollback(t.Context()))
		var a answer
		select {
		case a = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the submit did not return", c.name)
		}
		n, err := d.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: q, State: plane.StateQueued})
		require.NoError(t, err)
		if c.want == nil {
			require.NoError(t, a.err, "%s: the submit committed", c.name)
			require.Len(t, a.res, 1)
			require.EqualValues(t, 2, n, "%s: the submit was written", c.name)
			continue
		}
		require.ErrorIs(t, a.err, c.want, c.name)
		require.ErrorIs(t, a.err, context.DeadlineExceeded, "%s: the cause is the caller's deadline", c.name)
		require.NotErrorIs(t, a.err, plane.ErrUnavailable, c.name)
		require.EqualValues(t, 1, n, "%s: nothing was written", c.name)
	}
}
