package lakestore

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// PostgreSQL's own errors for damaged data met by a query of the catalog — SQLSTATE XX001
// (data_corrupted) and XX002 (index_corrupted) — have the code "corrupt" (persist.Code,
// persist.IsCorrupt), as the file store's SQLite damage has: record.RegisterCorrupt, one
// place for every query instead of a wrap at each.
func init() { record.RegisterCorrupt(pgCorrupt) }

// pgCorrupt reports whether err is PostgreSQL's error of damaged data.
func pgCorrupt(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "XX001" || pe.Code == "XX002")
}
