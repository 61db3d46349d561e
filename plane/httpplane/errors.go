package httpplane

import "github.com/lakeshore-dev/lakeshore/api"

// The server's own errors, beside the plane's sentinels. Match them with errors.Is.
var (
	// ErrUnauthorized: no token, or an unknown, expired or revoked one (HTTP 401).
	ErrUnauthorized = api.ErrUnauthorized
	// ErrForbidden: the token does not grant the call on that queue (HTTP 403).
	ErrForbidden = api.ErrForbidden
	// ErrTooManyLongPolls: the server holds its maximum of waiting requests (HTTP 503);
	// retried automatically, returned when the retries run out.
	ErrTooManyLongPolls = api.ErrTooManyLongPolls
	// ErrShuttingDown: the server is stopping (HTTP 503); retried automatically.
	ErrShuttingDown = api.ErrShuttingDown
)
