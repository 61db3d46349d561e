package lakestore_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	_ "github.com/lakeshore-dev/lakeshore/persist/lakestore"
)

// TestPostgresDamageIsCorrupt: PostgreSQL's errors of damaged data (SQLSTATE XX001
// data_corrupted, XX002 index_corrupted) met by a catalog query have the code "corrupt",
// as the file store's SQLite damage; any other PostgreSQL error keeps its own. Damage
// cannot be made in a running PostgreSQL from a test, so the error is built as pgx
// returns it. Before, both were "internal".
func TestPostgresDamageIsCorrupt(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]string{"XX001": "corrupt", "XX002": "corrupt", "23505": "internal", "57P01": "internal"} {
		err := fmt.Errorf("lakestore: read manifest: %w", &pgconn.PgError{Code: code, Message: "m"})
		require.Equal(t, want, persist.Code(err), code)
		require.Equal(t, want == "corrupt", persist.IsCorrupt(err), code)
	}
}
