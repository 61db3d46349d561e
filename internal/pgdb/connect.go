package pgdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Errors of connecting to PostgreSQL, as Classify names them. pgplane exports them under
// the same names (pgplane.ErrConnectionRefused, …: the same values).
var (
	// ErrConnectionRefused: nothing accepts connections at the URL's host and port. It also
	// matches plane.ErrUnavailable.
	ErrConnectionRefused = errors.New("connection refused")
	// ErrCredentials: the server refused the URL's user or password. It also matches
	// plane.ErrUnauthorized.
	ErrCredentials = errors.New("credentials refused")
	// ErrHostNotFound: the URL's host name does not resolve (no such host in DNS or
	// /etc/hosts). It also matches plane.ErrUnavailable.
	ErrHostNotFound = errors.New("host not found")
	// ErrDatabaseMissing: the URL names a database that does not exist.
	ErrDatabaseMissing = errors.New("database does not exist")
)

// ParseConfig parses url (a postgres:// or postgresql:// URL, or a key=value connection
// string, with the PG* environment variables as defaults) as pgxpool does. A url that does
// not parse is a *plane.InvalidError of field, showing the URL and pgx's reason without
// the password or a secret parameter (plane.RedactURL); so is a URL whose authority ended
// inside a password holding '/', '?' or '#' unescaped (plane.URLAuthorityCut: an "@" in
// its database name, a parameter name or a fragment, which a PostgreSQL URL never has
// unescaped, or in a parameter's value that reads as the end of such a password:
// "postgres://u:12?a=b@h/db"), which pgx would otherwise parse with part of the password
// as host and port.
func ParseConfig(field, url string) (*pgxpool.Config, error) {
	if cut := plane.URLAuthorityCut(url); cut != "" && cut != "query value" {
		// pgx would take the host and port from inside the password ("u:12#x@h/db": host
		// u, port 12), which its errors would name, or refuse what follows for another
		// reason than the password: refused, first, the URL shown redacted. A
		// database name holding an "@" ("u:pw@h:5432/team@prod") reads the same way and
		// is refused too: it is written escaped (team%40prod), the one reading that
		// cannot be a password cut short (decision in docs/operations.md).
		return nil, &plane.InvalidError{Field: field, Value: plane.RedactURL(url),
			Rule: "use postgres://user:password@host:port/database?sslmode=…, with a '/', '?', '#' or '@' in the password, and an '@' in the database name or a parameter's value, percent-escaped (%2F, %3F, %23, %40): " +
				"this URL has an '@' in its " + cut + " after what reads as its host and port, so part of it may be a password"}
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		reason, _, _ := strings.Cut(err.Error(), "\n")
		// pgx repeats the URL in its reason ("cannot parse `URL`: why"), its password
		// masked by its own best effort, which shows part of a password holding an "@":
		// the reason keeps only why (Value shows the URL, redacted).
		if _, why, ok := strings.Cut(reason, "`: "); ok && strings.HasPrefix(reason, "cannot parse `") {
			reason = why
		}
		return nil, &plane.InvalidError{Field: field, Value: plane.RedactURL(url),
			Rule: "use postgres://user:password@host:port/database?sslmode=… (" + plane.RedactURLIn(reason, url) + ")"}
	}
	return pc, nil
}

// Connect makes the pool of pc and checks that it reaches the server (pgxpool connects
// lazily, so a pool made without a check fails only at its first statement). Its errors
// are classified (Classify).
func Connect(ctx context.Context, pc *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, Classify(pc.ConnConfig, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, Classify(pc.ConnConfig, err)
	}
	return pool, nil
}

// Classify turns a failure to connect with cc into an error naming which: the host name
// does not resolve (ErrHostNotFound), nothing listens (ErrConnectionRefused), the user or
// password was refused (ErrCredentials), the database is missing (ErrDatabaseMissing), or
// the server's own words (also matching plane.ErrUnavailable when the server is starting
// up, shutting down or ended the session: SQLSTATE class 08 or 57). The message names the
// host, port, user and database, never the password; the caller prefixes its own name.
func Classify(cc *pgx.ConnConfig, err error) error {
	where := net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28P01", "28000":
			return fmt.Errorf("PostgreSQL at %s refused user %q (wrong password, or no pg_hba.conf entry): %w: %w",
				where, cc.User, ErrCredentials, &plane.Error{Code: plane.ErrUnauthorized.Code, Message: pgErr.Message})
		case "3D000":
			return fmt.Errorf("PostgreSQL at %s has no database %q (create it with `createdb %s`): %w",
				where, cc.Database, cc.Database, ErrDatabaseMissing)
		}
		if serverEnded(pgErr) { // starting up, shutting down, or ended by an operator
			return fmt.Errorf("PostgreSQL at %s: %s (SQLSTATE %s): %w", where, pgErr.Message, pgErr.Code, plane.ErrUnavailable)
		}
		return fmt.Errorf("PostgreSQL at %s: %s (SQLSTATE %s)", where, pgErr.Message, pgErr.Code)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return fmt.Errorf("the host name %q of the database URL does not resolve (check the URL's host): %w: %w",
			cc.Host, ErrHostNotFound, plane.ErrUnavailable)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("nothing accepts connections at %s (is PostgreSQL running there?): %w: %w",
			where, ErrConnectionRefused, plane.ErrUnavailable)
	}
	return fmt.Errorf("cannot connect to PostgreSQL at %s: %v: %w", where, err, plane.ErrUnavailable)
}
