package lakestore

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
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

	pq, err := persist.Open(ctx, "rollouts", &persist.Config{Dir: u.String()})
	require.NoError(t, err)
	_, ok := pq.Store().(*Store)
	require.True(t, ok, "a postgres:// target opens the distributed store")
	_, err = pq.PutBatch(ctx, []persist.Record{{"x": 1}, {"x": 2}})
	require.NoError(t, err)
	require.NoError(t, pq.Close(ctx))

	pq, err = persist.Open(ctx, "rollouts", &persist.Config{Dir: u.String()})
	require.NoError(t, err)
	defer pq.Close(ctx)
	n, err := pq.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	_, err = persist.Open(ctx, "rollouts", &persist.Config{Dir: target})
	require.ErrorIs(t, err, persist.ErrInvalid, "a target without a bucket")
}

func TestParseTarget(t *testing.T) {
	c, b, err := ParseTarget("postgres://u:p@h:5432/db?sslmode=disable&blob=s3%3A%2F%2Fbkt%3Fregion%3Deu-west-1")
	require.NoError(t, err)
	require.Equal(t, "postgres://u:p@h:5432/db?sslmode=disable", c)
	require.Equal(t, "s3://bkt?region=eu-west-1", b)
	_, _, err = ParseTarget("mysql://x")
	require.ErrorIs(t, err, persist.ErrInvalid)
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
