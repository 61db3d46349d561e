package pgplane

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestParseURL checks that the plane's URL parameters set their Config fields, are removed
// before pgx sees them, agree with the Config given, and are refused with a clear error
// when their value does not parse.
func TestParseURL(t *testing.T) {
	const base = "postgres://u:secret@db.internal:5432/jobs?sslmode=disable"
	t.Run("URL", func(t *testing.T) {
		pc, c, err := ParseURL(base+"&schema=jobs_a&poll_only=true&poll_interval=250ms&retention=6h&application_name=x", nil)
		require.NoError(t, err)
		require.Equal(t, Config{Schema: "jobs_a", PollOnly: true, PollInterval: 250 * time.Millisecond, Retention: 6 * time.Hour}, *c)
		require.Equal(t, map[string]string{"application_name": "x"}, pc.ConnConfig.RuntimeParams,
			"the plane's parameters are not sent to the server; the others are")
		require.Equal(t, "jobs", pc.ConnConfig.Database)
	})
	t.Run("KeyValue", func(t *testing.T) {
		pc, c, err := ParseURL("host=db.internal user=u dbname=jobs schema=kv poll_only=1", nil)
		require.NoError(t, err)
		require.Equal(t, Config{Schema: "kv", PollOnly: true}, *c)
		require.Empty(t, pc.ConnConfig.RuntimeParams)
	})
	t.Run("NoParameters", func(t *testing.T) {
		cfg := &Config{Schema: "mine", PollOnly: true}
		_, c, err := ParseURL(base, cfg)
		require.NoError(t, err)
		require.Equal(t, *cfg, *c, "cfg as given")
		require.NotSame(t, cfg, c, "a copy")
	})
	t.Run("Agreeing", func(t *testing.T) {
		_, c, err := ParseURL(base+"&schema=mine&poll_only=true&retention=-1s", &Config{Schema: "mine", PollOnly: true})
		require.NoError(t, err)
		require.Equal(t, Config{Schema: "mine", PollOnly: true, Retention: -time.Second}, *c)
		_, c, err = ParseURL(base+"&poll_only=false", nil)
		require.NoError(t, err)
		require.False(t, c.PollOnly)
	})
	for _, tc := range []struct {
		name, query string
		cfg         *Config
		field       string
	}{
		{"BadSchema", "schema=Bad-Name", nil, "schema"},
		{"BadPollOnly", "poll_only=sometimes", nil, "poll_only"},
		{"BadPollInterval", "poll_interval=soon", nil, "poll_interval"},
		{"ZeroPollInterval", "poll_interval=0s", nil, "poll_interval"},
		{"BadRetention", "retention=7d", nil, "retention"},
		{"ConflictingSchema", "schema=a", &Config{Schema: "b"}, "schema"},
		{"ConflictingPollOnly", "poll_only=false", &Config{PollOnly: true}, "poll_only"},
		{"ConflictingRetention", "retention=1h", &Config{Retention: 2 * time.Hour}, "retention"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseURL(base+"&"+tc.query, tc.cfg)
			require.ErrorIs(t, err, plane.ErrInvalid)
			var inv *plane.InvalidError
			require.ErrorAs(t, err, &inv)
			require.Equal(t, "database URL parameter "+tc.field, inv.Field)
			require.NotContains(t, err.Error(), "secret")
		})
	}
}

// TestParseURLRefusalHidesSecrets: a database URL that is refused is named in the error
// through plane.RedactURL, so no form of its password shows: the URL's own, a password=
// query parameter, or a key=value connection string's password=.
func TestParseURLRefusalHidesSecrets(t *testing.T) {
	for _, url := range []string{
		"mysql://u:hunter2@db.internal/jobs",
		"mysql://u@db.internal/jobs?password=hunter2",
		"host=db.internal password=hunter2 port=notaport",
		"postgres://u:hunter2@db.internal:notaport/jobs",
	} {
		_, _, err := ParseURL(url, nil)
		require.ErrorIs(t, err, plane.ErrInvalid, url)
		require.NotContains(t, err.Error(), "hunter2", url)
		require.Contains(t, err.Error(), "db.internal", "the rest of the URL is shown: %s", url)
	}
}

// TestParseURLMiscasedScheme: pgx reads a URL only behind postgres:// or postgresql://
// in lower case; "POSTGRES://…" reached it as a keyword/value string and was refused in its
// words, the URL shown lower-cased (so the error named a URL that would have worked).
func TestParseURLMiscasedScheme(t *testing.T) {
	for _, url := range []string{"POSTGRES://u@db.internal/jobs", "Postgresql://u@db.internal/jobs"} {
		_, _, err := ParseURL(url, nil)
		var inv *plane.InvalidError
		require.ErrorAs(t, err, &inv, url)
		require.Equal(t, plane.PostgresURLRule, inv.Rule, url)
	}
}

// TestOpenURLParameters opens a plane with its schema and poll-only mode named in the URL:
// the tables are made under that schema, no LISTEN connection is held, and a plain pgx
// connection given the same URL is refused by the server — which is why the plane removes
// its parameters before connecting.
func TestOpenURLParameters(t *testing.T) {
	url := pgtest.Database(t)
	withParams := url + "&schema=from_url&poll_only=true&poll_interval=100ms"
	_, err := pgx.Connect(t.Context(), withParams)
	require.Error(t, err, "PostgreSQL refuses startup parameters it does not know")
	require.Contains(t, err.Error(), "unrecognized configuration parameter")

	d := open(t, withParams, nil)
	require.Equal(t, "from_url", d.cfg.Schema)
	require.True(t, d.cfg.PollOnly)
	require.Equal(t, 100*time.Millisecond, d.cfg.PollInterval)
	id := submitOne(t, d, plane.SubmitParams{})

	admin := mustConn(t, url)
	var n int
	require.NoError(t, admin.QueryRow(t.Context(), `SELECT count(*) FROM from_url.invocations WHERE id = $1`, id).Scan(&n))
	require.Equal(t, 1, n, "the job is in the URL's schema")
	var lakeshore bool
	require.NoError(t, admin.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'lakeshore')`).Scan(&lakeshore))
	require.False(t, lakeshore, "nothing under the default schema")
	var listeners int
	require.NoError(t, admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query ILIKE 'LISTEN%'`).Scan(&listeners))
	require.Zero(t, listeners, "poll-only: no LISTEN connection")

	// A waiter in poll-only mode sees another process's commit within the poll interval.
	other := open(t, url+"&schema=from_url", nil)
	done := make(chan error, 1)
	go func() {
		_, err := d.InvocationClaimMany(context.WithoutCancel(t.Context()), &plane.ClaimParams{Namespace: "default", Queue: "later",
			Wait: 10 * time.Second})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	began := time.Now()
	_, err = other.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "later",
		Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Less(t, time.Since(began), 5*time.Second, "seen by polling, well before the claim's 10 s wait ran out")

	// OpenPool (the migrate verb's) removes them too.
	pool, err := OpenPool(t.Context(), withParams)
	require.NoError(t, err)
	pool.Close()
	_, err = Open(t.Context(), url+"&schema=a", &Config{Schema: "b"})
	require.ErrorIs(t, err, plane.ErrInvalid)
	require.True(t, strings.Contains(err.Error(), "schema"), err.Error())
}
