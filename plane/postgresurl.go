package plane

import "strings"

// PostgresURLRule is the rule an *InvalidError states when a target is refused for its
// PostgreSQL scheme written in another case ("POSTGRES://…"; see IsPostgresURL).
const PostgresURLRule = "write the scheme in lower case, postgres:// or postgresql://: libpq and pgx read a URL only with these prefixes (any other string is a keyword/value connection string)"

// IsPostgresURL reports whether target is a PostgreSQL connection URL: it begins with
// postgres:// or postgresql://, the scheme in lower case, the two prefixes libpq and pgx
// read as a URL (both take any other string for a keyword/value connection string, so
// "POSTGRES://…" fails there as one). It is the one answer to "is this target a
// PostgreSQL database" of the PostgreSQL plane (lakeshore.Open, pgplane), the
// distributed data store (persist/lakestore) and the lakeshore command; it lives here,
// beside RedactURL, so that packages without pgx (persist, the default CLI's) ask it
// without importing pgplane. A target whose scheme is postgres or postgresql in another
// case is refused with PostgresURLRule (IsMiscasedPostgresURL), never taken for a file.
func IsPostgresURL(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// IsMiscasedPostgresURL reports whether target has the scheme postgres or postgresql
// written in another case than lower ("Postgres://…"): not a PostgreSQL URL to libpq and
// pgx (IsPostgresURL), and refused with PostgresURLRule where a target is classified.
func IsMiscasedPostgresURL(target string) bool {
	scheme, _, ok := strings.Cut(target, "://")
	return ok && !IsPostgresURL(target) && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}
