package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The server's own error codes, beside the plane's. They are *plane.Error values, so
// errors.Is matches them on the client like the plane's sentinels.
var (
	// ErrUnauthorized (401): no bearer token, or one that is unknown, expired or revoked.
	ErrUnauthorized = plane.ErrUnauthorized
	// ErrForbidden (403): the token does not grant this permission on this queue.
	ErrForbidden = plane.ErrForbidden
	// ErrUnsupportedMediaType (415): a body that is neither application/msgpack nor
	// application/json.
	ErrUnsupportedMediaType = &plane.Error{Code: "unsupported_media_type", Message: "unsupported media type"}
	// ErrRouteNotFound (404): no route has this path.
	ErrRouteNotFound = &plane.Error{Code: "route_not_found", Message: "no such route"}
	// ErrMethodNotAllowed (405): the path exists for other methods (see Allow).
	ErrMethodNotAllowed = &plane.Error{Code: "method_not_allowed", Message: "method not allowed"}
	// ErrTooManyLongPolls (503, Retry-After): the server holds its maximum of waiting
	// requests; retry later or use another server.
	ErrTooManyLongPolls = &plane.Error{Code: "too_many_long_polls", Message: "too many long-polls open"}
	// ErrShuttingDown (503, Retry-After): the server is stopping; retry (elsewhere).
	ErrShuttingDown = &plane.Error{Code: "shutting_down", Message: "server shutting down"}
	// ErrInternal (500): anything else; the message is the server's.
	ErrInternal = &plane.Error{Code: "internal", Message: "internal error"}
)

var serverErrors = []*plane.Error{ErrUnauthorized, ErrForbidden, ErrUnsupportedMediaType, ErrRouteNotFound,
	ErrMethodNotAllowed, ErrTooManyLongPolls, ErrShuttingDown, ErrInternal}

// statuses maps every code to its HTTP status.
var statuses = map[string]int{
	plane.ErrNotFound.Code:       http.StatusNotFound,
	plane.ErrTimeout.Code:        http.StatusRequestTimeout,
	plane.ErrFailed.Code:         http.StatusConflict,
	plane.ErrCancelled.Code:      http.StatusConflict,
	plane.ErrTimedOut.Code:       http.StatusConflict,
	plane.ErrLeaseLost.Code:      http.StatusConflict,
	plane.ErrJournalClosed.Code:  http.StatusConflict,
	plane.ErrQueueFull.Code:      http.StatusTooManyRequests,
	plane.ErrRateLimited.Code:    http.StatusTooManyRequests,
	plane.ErrInvalid.Code:        http.StatusBadRequest,
	plane.ErrClosed.Code:         http.StatusServiceUnavailable,
	plane.ErrNotImplemented.Code: http.StatusNotImplemented,
	plane.ErrUnavailable.Code:    http.StatusBadGateway,
	plane.ErrChanged.Code:        http.StatusPreconditionFailed,
	plane.ErrLimitExceeded.Code:  http.StatusConflict,
	ErrUnauthorized.Code:         http.StatusUnauthorized,
	ErrForbidden.Code:            http.StatusForbidden,
	ErrUnsupportedMediaType.Code: http.StatusUnsupportedMediaType,
	ErrRouteNotFound.Code:        http.StatusNotFound,
	ErrMethodNotAllowed.Code:     http.StatusMethodNotAllowed,
	ErrTooManyLongPolls.Code:     http.StatusServiceUnavailable,
	ErrShuttingDown.Code:         http.StatusServiceUnavailable,
	ErrInternal.Code:             http.StatusInternalServerError,
}

// Status returns the HTTP status of an error code (500 for an unknown one).
func Status(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Codes lists every error code with its status, for documentation and tests.
func Codes() map[string]int {
	out := make(map[string]int, len(statuses))
	for k, v := range statuses {
		out[k] = v
	}
	return out
}

// codeOf returns the code of err: a plane sentinel's, a server error's, or "internal".
func codeOf(err error) string {
	if c := plane.Code(err); c != "internal" {
		return c
	}
	for _, s := range serverErrors {
		if errors.Is(err, s) {
			return s.Code
		}
	}
	return ErrInternal.Code
}

// NewErrorBody returns the body and HTTP status for err, with the details of the typed
// plane errors.
func NewErrorBody(err error) (ErrorBody, int) {
	code := codeOf(err)
	b := ErrorBody{Code: code, Message: err.Error()}
	var (
		inv *plane.InvalidError
		te  *plane.TerminalError
		ae  *plane.AdmissionError
	)
	switch {
	case errors.As(err, &inv):
		b.Details = &ErrorDetails{Field: inv.Field, Value: wireValue(inv.Value), Rule: inv.Rule}
	case errors.As(err, &te):
		b.Details = &ErrorDetails{ID: te.ID, State: string(te.State), Info: NewErrorInfo(&te.Info)}
	case errors.As(err, &ae):
		b.Details = &ErrorDetails{Queue: ae.Queue, Fit: ae.Fit, RetryAfter: Seconds(ae.RetryAfter), Detail: ae.Detail}
		switch {
		case errors.Is(ae.Cause, context.DeadlineExceeded):
			b.Details.Cause = "deadline"
		case ae.Cause != nil:
			b.Details.Cause = "canceled"
		}
	}
	return b, Status(code)
}

// wireValue keeps the value of an InvalidError encodable: strings (cut to
// plane.MaxQuotedBytes), bools and numbers as they are, durations as seconds, anything
// else as its text (cut too).
func wireValue(v any) any {
	switch x := v.(type) {
	case string:
		return plane.Truncate(x)
	case nil, bool, int, int64, int32, uint, uint64, uint32:
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x) // JSON has no NaN or Inf
		}
		return x
	case float32:
		return wireValue(float64(x))
	case time.Duration:
		return x.String()
	}
	return plane.Truncate(fmt.Sprint(v))
}

// Err rebuilds the error a body describes: the typed plane error when it has details, the
// sentinel (or server error) of its code otherwise, so errors.Is and errors.As work on the
// client as in process.
func (b *ErrorBody) Err() error {
	d := b.Details
	switch b.Code {
	case plane.ErrInvalid.Code:
		if d != nil && (d.Field != "" || d.Rule != "") {
			e := &plane.InvalidError{Field: d.Field, Value: d.Value, Rule: d.Rule}
			if e.Error() != b.Message { // a custom text (InvalidError.Message) reads the same on both sides
				e.Message = b.Message
			}
			return e
		}
	case plane.ErrFailed.Code, plane.ErrCancelled.Code, plane.ErrTimedOut.Code:
		if d != nil && d.State != "" {
			te := &plane.TerminalError{ID: d.ID, State: plane.State(d.State)}
			if d.Info != nil {
				te.Info = *d.Info.Plane()
			}
			return te
		}
	case plane.ErrQueueFull.Code, plane.ErrRateLimited.Code:
		if d != nil {
			ae := &plane.AdmissionError{Sentinel: plane.ErrQueueFull, Queue: d.Queue, Fit: d.Fit,
				RetryAfter: Duration(d.RetryAfter), Detail: d.Detail}
			if b.Code == plane.ErrRateLimited.Code {
				ae.Sentinel = plane.ErrRateLimited
			}
			switch d.Cause {
			case "deadline":
				ae.Cause = context.DeadlineExceeded
			case "canceled":
				ae.Cause = context.Canceled
			}
			return ae
		}
	}
	for _, s := range serverErrors {
		if s.Code == b.Code {
			return &plane.Error{Code: b.Code, Message: b.Message}
		}
	}
	return plane.ErrorFromCode(b.Code, b.Message)
}
