package lakestore

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestPersistOpenTarget: persist.Open with a postgres:// target and a blob parameter
// opens the distributed store; the same program reads what it put after reopening.
func TestPersistOpenTarget(t *testing.T) {
	ctx := context.Background()
	target := pgtest.Database(t)
	u, err := url.Parse(target)
	require.NoError(t, err)
	q := u.Query()
	q.Set("blob", fileBucket(t))
	u.RawQuery = q.Encode()

	pq, err := persist.Open(ctx, "rollouts", &persist.Config{Dir: u.String()}, Driver())
	require.NoError(t, err)
	_, ok := pq.Store().(*Store)
	require.True(t, ok, "a postgres:// target opens the distributed store")
	_, err = pq.PutBatch(ctx, []persist.Record{{"x": 1}, {"x": 2}})
	require.NoError(t, err)
	require.NoError(t, pq.Close(ctx))

	pq, err = persist.Open(ctx, "rollouts", &persist.Config{Dir: u.String()}, Driver())
	require.NoError(t, err)
	defer pq.Close(ctx)
	n, err := pq.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	_, err = persist.Open(ctx, "rollouts", &persist.Config{Dir: target}, Driver())
	require.ErrorIs(t, err, persist.ErrInvalid, "a target without a bucket")

	// The same target in $LAKESHORE_URL (no Dir), or in Config.URL, opens the same queue.
	t.Setenv(persist.EnvURL, u.String())
	for _, cfg := range []*persist.Config{nil, {}, {URL: u.String()}} {
		pq, err := persist.Open(ctx, "rollouts", cfg, Driver())
		require.NoError(t, err)
		_, ok := pq.Store().(*Store)
		require.True(t, ok, "%+v with $LAKESHORE_URL=postgres://… opens the distributed store", cfg)
		n, err := pq.Len(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		require.NoError(t, pq.Close(ctx))
	}
}

// TestTargetOptions: the store's settings travel in the target URL (flush_interval,
// flush_timeout, …) and are removed before the catalog URL reaches PostgreSQL; a bad
// value is a typed error naming the parameter.
func TestTargetOptions(t *testing.T) {
	c, err := ParseTargetConfig("postgres://h/db?sslmode=disable&blob=mem%3A%2F%2F&flush_interval=200ms&flush_rows=-1&flush_timeout=30s&sweep_interval=-1&sweep_grace=2m&poll_interval=50ms")
	require.NoError(t, err)
	require.Equal(t, "postgres://h/db?sslmode=disable", c.Catalog)
	require.Equal(t, "mem://", c.Blob)
	require.Equal(t, 200*time.Millisecond, c.FlushInterval)
	require.Equal(t, -1, c.FlushRows)
	require.Equal(t, 30*time.Second, c.FlushTimeout)
	require.Equal(t, time.Duration(-1), c.SweepInterval)
	require.Equal(t, 2*time.Minute, c.SweepGrace)
	require.Equal(t, 50*time.Millisecond, c.PollInterval)
	for _, bad := range []string{"flush_interval=soon", "flush_rows=many", "flush_timeout=-5s", "sweep_grace=0"} {
		_, err := ParseTargetConfig("postgres://h/db?blob=mem%3A%2F%2F&" + bad)
		require.ErrorIs(t, err, persist.ErrInvalid, bad)
		require.Contains(t, err.Error(), "target parameter", bad)
	}
	st, err := NewStores("postgres://h/db?blob=mem%3A%2F%2F&flush_timeout=7s", &Config{FlushTimeout: time.Minute, FlushRows: 5})
	require.NoError(t, err)
	require.Equal(t, 7*time.Second, st.cfg.FlushTimeout, "the target's settings win")
	require.Equal(t, 5, st.cfg.FlushRows, "the others are the Config's")
}

func TestParseTarget(t *testing.T) {
	c, b, err := ParseTarget("postgres://u:p@h:5432/db?sslmode=disable&blob=s3%3A%2F%2Fbkt%3Fregion%3Deu-west-1")
	require.NoError(t, err)
	require.Equal(t, "postgres://u:p@h:5432/db?sslmode=disable", c)
	require.Equal(t, "s3://bkt?region=eu-west-1", b)
	_, _, err = ParseTarget("mysql://x")
	require.ErrorIs(t, err, persist.ErrInvalid)
	// The scheme in another case is not a PostgreSQL URL to pgx (plane.IsPostgresURL):
	// refused saying so, not with the form of a target it already has.
	_, _, err = ParseTarget("POSTGRES://h/db?blob=mem%3A%2F%2F")
	var inv *persist.InvalidError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, plane.PostgresURLRule, inv.Rule)
}

// TestRefusesNewerCatalog: a catalog migrated by a newer version is refused, untouched.
func TestRefusesNewerCatalog(t *testing.T) {
	ctx := context.Background()
	catalog := pgtest.Database(t)
	s := openTest(t, catalog, "mem://", "q", nil)
	_, err := s.pool.Exec(ctx, `INSERT INTO schema_migrations(version, name) VALUES (9999, 'future.sql')`)
	require.NoError(t, err)
	_, err = Open(ctx, "q", &Config{Catalog: catalog, Blob: "mem://"})
	require.ErrorIs(t, err, ErrSchemaTooNew)
}
