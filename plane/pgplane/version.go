package pgplane

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
)

// OpenPool connects to the database at url as Open does (same URL forms, same errors:
// *plane.InvalidError for a bad URL, ErrHostNotFound, ErrConnectionRefused, ErrCredentials or
// ErrDatabaseMissing naming what the server said) without starting a plane or touching the
// schema: for tools such as `lakeshore migrate`. The plane's URL parameters (ParseURL) are
// checked and removed; read them with ParseURL. The caller closes the pool.
func OpenPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pc, _, err := ParseURL(url, nil)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(url, "pool_max_conns") {
		pc.MaxConns = 2
	}
	return connect(ctx, pc)
}

// CurrentVersion returns the version of the plane's schema named schema in the pool's
// database: 0 when it was never migrated, SchemaVersion when it is up to date, more than
// SchemaVersion when a newer build migrated it (Open and Migrate then refuse it with
// ErrSchemaNewer). It writes nothing.
func CurrentVersion(ctx context.Context, pool *pgxpool.Pool, schema string) (int, error) {
	if err := validateSchema("schema", schema); err != nil {
		return 0, err
	}
	version, err := pgdb.Version(ctx, pool, schema)
	if err != nil {
		return 0, fmt.Errorf("pgplane: %w", err)
	}
	return version, nil
}
