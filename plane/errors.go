package plane

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Error is a Lakeshore error with a stable code. The sentinels below are *Error values, and
// any *Error matches the sentinel with the same Code through errors.Is, so an error decoded
// from the HTTP wire ({code, message}) is errors.Is-equal to the in-process sentinel (the
// shape of NATS JetStream's APIError).
type Error struct {
	// Code is the stable, wire-visible identity, e.g. "not_found".
	Code string
	// Message is the human-readable text.
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// The sentinels every plane returns. Compare with errors.Is, never with err.Error().
var (
	// ErrNotFound: an unknown or trimmed invocation id.
	ErrNotFound = &Error{Code: "not_found", Message: "not found"}
	// ErrTimeout: the caller's wait ended before the awaited event. Nothing changed.
	ErrTimeout = &Error{Code: "timeout", Message: "wait timed out"}
	// ErrFailed: the invocation ended as failed; a *TerminalError carries its error.
	ErrFailed = &Error{Code: "failed", Message: "invocation failed"}
	// ErrCancelled: the invocation ended as cancelled or killed.
	ErrCancelled = &Error{Code: "cancelled", Message: "invocation cancelled"}
	// ErrTimedOut: the invocation itself ended in state timeout (lease expired with no
	// attempts left, per-attempt timeout, or deadline passed before it ran).
	ErrTimedOut = &Error{Code: "timed_out", Message: "invocation timed out"}
	// ErrLeaseLost: the caller does not hold the invocation's current lease (wrong or stale
	// fencing token, lease expired, or the invocation was killed). Nothing changed.
	ErrLeaseLost = &Error{Code: "lease_lost", Message: "lease lost"}
	// ErrJournalClosed: a frame was posted after the journal's END or ERROR frame.
	ErrJournalClosed = &Error{Code: "journal_closed", Message: "journal closed"}
	// ErrQueueFull: the queue's admission limit (max depth) refused the submit.
	ErrQueueFull = &Error{Code: "queue_full", Message: "queue full"}
	// ErrRateLimited: the queue's rate limit refused the submit.
	ErrRateLimited = &Error{Code: "rate_limited", Message: "rate limited"}
	// ErrInvalid: a bad argument; the *InvalidError says which and what is allowed.
	ErrInvalid = &Error{Code: "invalid", Message: "invalid argument"}
	// ErrClosed: the plane was closed.
	ErrClosed = &Error{Code: "closed", Message: "plane closed"}
	// ErrNotImplemented: the plane does not support the operation.
	ErrNotImplemented = &Error{Code: "not_implemented", Message: "not implemented"}
	// ErrUnavailable: the plane could not be reached (a remote plane's server is down or
	// unreachable) within the call's time. Whether the call took effect is unknown for
	// calls that are not safe to repeat; submits with a key or client id can be retried.
	ErrUnavailable = &Error{Code: "unavailable", Message: "plane unavailable"}
	// ErrUnauthorized: a remote plane refused the caller's credentials (no token, or one
	// that is unknown, expired or revoked). Retrying does not help.
	ErrUnauthorized = &Error{Code: "unauthorized", Message: "unauthorized"}
	// ErrForbidden: the caller's token does not grant this permission on this queue.
	// Retrying does not help.
	ErrForbidden = &Error{Code: "forbidden", Message: "forbidden"}
	// ErrChanged: a conditional call (AdmissionParams.IfMatch) found the state it was
	// conditional on changed since the caller read it. Nothing changed: read again, redo
	// the change, and retry.
	ErrChanged = &Error{Code: "changed", Message: "changed since it was read"}
	// ErrLimitExceeded: the call would take a namespace past one of its caps: the plane's
	// (its number of schedules, SchedulesPerNamespaceDefault) or the server's (its data
	// queues, bytes of code archives and admission blocks: server.Config's
	// MaxDataQueuesPerNamespace, MaxCodeBytesPerNamespace, MaxAdmissionBlocksPerNamespace).
	// Also a write refused for a full disk (DiskFull). Nothing changed; retrying does not
	// help until something is removed, the cap raised or space freed.
	ErrLimitExceeded = &Error{Code: "limit_exceeded", Message: "limit exceeded"}
)

// Sentinels lists every sentinel, for mapping wire codes back to errors.
var sentinels = []*Error{
	ErrNotFound, ErrTimeout, ErrFailed, ErrCancelled, ErrTimedOut, ErrLeaseLost,
	ErrJournalClosed, ErrQueueFull, ErrRateLimited, ErrInvalid, ErrClosed, ErrNotImplemented,
	ErrUnavailable, ErrUnauthorized, ErrForbidden, ErrChanged, ErrLimitExceeded,
}

// Code returns the stable code of err: the Code of the first *Error, *InvalidError or
// *TerminalError in its chain, or "internal" when it has none.
func Code(err error) string {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s.Code
		}
	}
	return "internal"
}

// ErrorFromCode rebuilds an error that errors.Is-matches the sentinel with code, keeping
// message as its text. An unknown code gives a plain error with message.
func ErrorFromCode(code, message string) error {
	for _, s := range sentinels {
		if s.Code == code {
			return &Error{Code: code, Message: message}
		}
	}
	return errors.New(message)
}

// InvalidError is a bad argument: which field, the value given, and the rule that says what
// is allowed. It matches ErrInvalid.
type InvalidError struct {
	// Field names the argument, e.g. "queue name".
	Field string
	// Value is what was given (quoted in the message, cut to MaxQuotedBytes).
	Value any
	// Rule says what is allowed, e.g. "1–128 bytes of [A-Za-z0-9._-]".
	Rule string
	// Message, when set, is the whole error text instead of one built from the fields.
	Message string
}

func (e *InvalidError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if e.Value == nil {
		return fmt.Sprintf("invalid %s: %s", e.Field, e.Rule)
	}
	var v string
	if s, ok := e.Value.(string); ok {
		v = fmt.Sprintf("%q", Truncate(s))
	} else {
		v = Truncate(fmt.Sprintf("%v", e.Value))
	}
	return fmt.Sprintf("invalid %s %s: %s", e.Field, v, e.Rule)
}

// MaxQuotedBytes bounds a value of the caller's quoted in an error message or detail:
// a longer one is cut and ends in "…", so a bad value is never answered (or logged) at
// its own size.
const MaxQuotedBytes = 100

// Truncate returns s when it has at most MaxQuotedBytes bytes, else its first bytes up to
// MaxQuotedBytes (cut at a rune boundary) followed by "…".
func Truncate(s string) string {
	if len(s) <= MaxQuotedBytes {
		return s
	}
	n := MaxQuotedBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Is makes every *InvalidError match ErrInvalid.
func (e *InvalidError) Is(target error) bool {
	return isCode(target, ErrInvalid.Code)
}

func isCode(target error, code string) bool {
	t, ok := target.(*Error)
	return ok && t.Code == code
}

// Invalid returns an *InvalidError.
func Invalid(field string, value any, rule string) error {
	return &InvalidError{Field: field, Value: value, Rule: rule}
}

// ErrorInfo is the error an invocation ended with, as carried in its ERROR frame and by
// Get: {type, message, attempt}.
type ErrorInfo struct {
	// Type classifies the error, e.g. "error", "panic", "lease_expired", "killed".
	Type string `msgpack:"type" json:"type"`
	// Message is the error text.
	Message string `msgpack:"message" json:"message"`
	// Attempt is the attempt (1-based) that ended with this error.
	Attempt int `msgpack:"attempt" json:"attempt"`
}

// TerminalError reports that an invocation ended without success. It matches ErrFailed
// (state failed), ErrCancelled (cancelled or killed) or ErrTimedOut (timeout).
type TerminalError struct {
	// ID is the invocation id.
	ID string
	// State is the terminal state.
	State State
	// Info is the error the invocation ended with (zero for a cancel).
	Info ErrorInfo
}

func (e *TerminalError) Error() string {
	msg := fmt.Sprintf("invocation %s %s", e.ID, e.State)
	if e.Info.Message != "" {
		msg += fmt.Sprintf(" (attempt %d): %s", e.Info.Attempt, e.Info.Message)
	}
	return msg
}

// Is matches the sentinel of the terminal state.
func (e *TerminalError) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	switch e.State {
	case StateFailed:
		return t.Code == ErrFailed.Code
	case StateCancelled, StateKilled:
		return t.Code == ErrCancelled.Code
	case StateTimeout:
		return t.Code == ErrTimedOut.Code
	}
	return false
}
