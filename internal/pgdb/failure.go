package pgdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Lost reports whether err is a failure of the connection rather than of the statement:
// the server ended the session (SQLSTATE class 08, connection exception, or 57, operator
// intervention: pg_terminate_backend, a shutdown, a restart), the network dropped or reset
// it, it was closed under the call, or the pool could not open a new one. The statement's
// transaction did not commit, or, for a COMMIT whose answer was lost, may have.
func Lost(err error) bool {
	if err == nil {
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) { // whatever refused it, even the server's words
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return serverEnded(pgErr)
	}
	var netErr net.Error
	// pgconn.ErrConnClosed is what a call reads when the server's side of the connection
	// went away under it, e.g. between a COMMIT and its answer.
	return errors.As(err, &netErr) || pgconn.SafeToRetry(err) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded)
}

// serverEnded reports a server error that ends the session rather than the statement
// (SQLSTATE class 08 or 57: the connection failed, or an operator or a shutdown ended it;
// a server starting up or shutting down refuses new sessions with 57P03).
func serverEnded(pgErr *pgconn.PgError) bool {
	return len(pgErr.Code) >= 2 && (pgErr.Code[:2] == "08" || pgErr.Code[:2] == "57")
}

// Failure returns err, the failure of a statement or transaction run with ctx on a
// connection to the server of cc, as its caller is to see it:
//   - ctx's error when ctx has ended and err is a lost connection (Lost) or ctx's end
//     itself: pgx ends a statement whose context ends by closing its connection, which
//     reads as a lost connection; it is not one, and the caller is told why it stopped;
//   - for a lost connection, an error matching plane.ErrUnavailable that names the
//     server (host and port) and what happened, in its own words (never pgx's message);
//     a new connection the pool could not open is named as Classify names it, and is
//     unavailable even when Classify's error is not (credentials refused mid-run);
//   - a write the server refused for a full disk (SQLSTATE 53100): plane.DiskFull
//     (limit_exceeded) naming the server's host and port, as a full SQLite file is;
//   - anything else (a statement's own error, the caller's errors): err itself.
//
// The caller prefixes its own name.
func Failure(ctx context.Context, cc *pgx.ConnConfig, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (Lost(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctx.Err()
	}
	if !Lost(err) {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "53100" { // disk_full: the statement's write failed, its transaction rolled back
			return plane.DiskFull("the PostgreSQL database", net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
		}
		return err
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return Unreachable(Classify(cc, err))
	}
	where := net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Errorf("PostgreSQL at %s ended the connection: %s (SQLSTATE %s): %w", where, pgErr.Message, pgErr.Code, plane.ErrUnavailable)
	}
	return fmt.Errorf("the connection to PostgreSQL at %s was lost (%s): %w", where, lostHow(err), plane.ErrUnavailable)
}

// Unreachable returns err, a failure to connect as Classify names it, as the caller of a
// server that was serving when it failed sees it: with its message, matching
// plane.ErrUnavailable and no other code of the plane. The credentials or the database
// refused mid-run are the server's problem, not its caller's (no plane.ErrUnauthorized:
// over HTTP that reads as the caller's token refused, and a client would not move to
// another replica): the call could not reach its storage.
func Unreachable(err error) error {
	if errors.Is(err, plane.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%s: %w", err.Error(), plane.ErrUnavailable)
}

// lostHow says in a few words how a connection was lost (err: Lost, not a server error).
func lostHow(err error) string {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno.Error() // "connection reset by peer", "broken pipe", …
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "the server closed it"
	case pgconn.Timeout(err):
		return "timed out"
	default:
		return "it was closed"
	}
}
