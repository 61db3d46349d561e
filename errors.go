package lakeshore

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The sentinel errors, re-exported from package plane so that a program imports one package.
// Every error a Lakeshore call returns matches one of them through errors.Is (never compare
// err.Error()). They keep their identity across the HTTP wire by a stable code.
var (
	// ErrNotFound: an unknown or trimmed invocation id.
	ErrNotFound = plane.ErrNotFound
	// ErrTimeout: the caller's wait (Result, Stream, Topic.Stream) ended before the awaited
	// event. Nothing changed; wait again with the same id or cursor.
	ErrTimeout = plane.ErrTimeout
	// ErrFailed: the invocation ended as failed; a *TerminalError carries its error.
	ErrFailed = plane.ErrFailed
	// ErrCancelled: the invocation ended as cancelled or killed.
	ErrCancelled = plane.ErrCancelled
	// ErrTimedOut: the invocation itself ended in state timeout (lease expired with no
	// attempts left, per-attempt timeout, or deadline passed before it ran).
	ErrTimedOut = plane.ErrTimedOut
	// ErrLeaseLost: the worker does not hold the job's current lease (its lease expired and
	// the job was claimed again, or the job was killed). Nothing changed.
	ErrLeaseLost = plane.ErrLeaseLost
	// ErrJournalClosed: a frame was posted after the journal's END or ERROR frame, or a
	// topic was read past its END.
	ErrJournalClosed = plane.ErrJournalClosed
	// ErrQueueFull: the queue's admission limit refused the submit.
	ErrQueueFull = plane.ErrQueueFull
	// ErrRateLimited: the queue's rate limit refused the submit.
	ErrRateLimited = plane.ErrRateLimited
	// ErrInvalid: a bad argument; the *InvalidError in the chain says which and what is
	// allowed. Nothing was written.
	ErrInvalid = plane.ErrInvalid
	// ErrClosed: the Dispatch (its plane) was closed.
	ErrClosed = plane.ErrClosed
	// ErrNotImplemented: the plane does not support the operation.
	ErrNotImplemented = plane.ErrNotImplemented
	// ErrUnavailable: a remote plane (an http(s):// server, or a postgres:// target's
	// database) could not be reached within the call's time; the error keeps the connection
	// failure as its cause. Over HTTP, reads, waits and submits were retried until then; for
	// other calls whether they took effect is unknown.
	ErrUnavailable = plane.ErrUnavailable
	// ErrUnauthorized: a remote plane refused the credentials (LAKESHORE_TOKEN missing,
	// unknown, expired or revoked).
	ErrUnauthorized = plane.ErrUnauthorized
	// ErrForbidden: the token does not grant this permission on this queue.
	ErrForbidden = plane.ErrForbidden
	// ErrChanged: Queue.UpdateAdmission found the block changed by another writer at each
	// of its tries. Nothing was written.
	ErrChanged = plane.ErrChanged
	// ErrLimitExceeded: the call would take the namespace past a cap of the plane (its
	// number of schedules: Queue.Schedule) or of the server it reaches (its admission
	// blocks: Queue.SetAdmission; data queues and code archives: docs/http-api.md,
	// "Per-namespace caps"). Nothing was written.
	ErrLimitExceeded = plane.ErrLimitExceeded
)

type (
	// Error is a Lakeshore error with a stable code; the sentinels above are *Error values.
	// An alias of plane.Error.
	Error = plane.Error

	// InvalidError is a bad argument: which field, the value given and the rule that says
	// what is allowed. It matches ErrInvalid. An alias of plane.InvalidError, so
	// errors.As(err, new(*lakeshore.InvalidError)) finds it whichever layer made it.
	InvalidError = plane.InvalidError

	// TerminalError reports that an invocation ended without success: its id, terminal
	// state and ErrorInfo. It matches ErrFailed (failed), ErrCancelled (cancelled, killed)
	// or ErrTimedOut (timeout). An alias of plane.TerminalError.
	TerminalError = plane.TerminalError

	// ErrorInfo is the error an invocation ended with, {Type, Message, Attempt}, as carried
	// by its ERROR frame, a TerminalError and Invocation.Error. An alias of plane.ErrorInfo.
	ErrorInfo = plane.ErrorInfo
)

// ErrorTypePanic is the ErrorInfo.Type of an attempt whose handler panicked.
const ErrorTypePanic = "panic"

// ErrorTypeDefault is the ErrorInfo.Type of a nack whose cause names no type of its own.
const ErrorTypeDefault = "error"

// PanicError is a panic recovered from a handler run by Queue.Working or RunWorker. Its
// ErrorInfo type is "panic" (ErrorTypePanic); its ErrorInfo message is the panic value and
// the panicking frame, never the whole stack, which goes to the configured logger.
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Frame names where the panic happened: "function (file.go:line)", or "" when unknown.
	Frame string
	// Stack is the goroutine's stack at the panic (runtime/debug.Stack).
	Stack []byte
}

// Error returns "panic: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// ErrorType returns "panic"; Queue.Nack records it as the ErrorInfo type.
func (e *PanicError) ErrorType() string { return ErrorTypePanic }

// Unwrap returns the panic value when it is an error (panic(err)), else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// newPanicError records a recovered panic; it must be called from the deferred function
// that recovered it.
func newPanicError(v any) *PanicError {
	return &PanicError{Value: v, Frame: panicFrame(), Stack: debug.Stack()}
}

// panicFrame returns the frame that panicked, "function (file.go:line)": the first frame
// outside package runtime below runtime.gopanic on the recovering goroutine's stack.
func panicFrame() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	seenPanic := false
	for {
		f, more := frames.Next()
		if seenPanic && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s (%s:%d)", f.Function, filepath.Base(f.File), f.Line)
		}
		if f.Function == "runtime.gopanic" {
			seenPanic = true
		}
		if !more {
			return ""
		}
	}
}

// Permanent marks err as not worth retrying: when a Queue.Working handler returns it, the job
// is nacked without retry and ends as failed at once. Permanent(nil) is nil. The mark is
// found through errors.As, so it survives wrapping with %w.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// errorInfo turns a nack's cause into the ErrorInfo the plane stores: Type is the cause's
// ErrorType() when some error in its chain has one that keeps plane.ErrorTypeRule, else
// "error"; Message is its text (a
// panic's adds the panicking frame, not the stack).
func errorInfo(cause error) *ErrorInfo {
	info := &ErrorInfo{Type: ErrorTypeDefault, Message: "nack"}
	if cause == nil {
		return info
	}
	info.Message = cause.Error()
	var typed interface{ ErrorType() string }
	if errors.As(cause, &typed) {
		if t := typed.ErrorType(); t != "" && plane.ValidErrorType(t) {
			info.Type = t
		}
	}
	var p *PanicError
	if errors.As(cause, &p) && p.Frame != "" {
		info.Message += " [at " + p.Frame + "]"
	}
	return info
}

// encodeError reports a value the wire codec cannot encode: it is an *InvalidError (so it
// matches ErrInvalid) joined with the codec's own error (so errors.Is(err,
// wire.ErrUnsupported) holds too).
func encodeError(field string, v any, err error) error {
	return fmt.Errorf("%w (%w)", &InvalidError{
		Field: field,
		Rule: fmt.Sprintf("a %T does not encode; use a value the wire codec encodes (nil, bools, numbers, "+
			"UTF-8 strings, []byte, time.Time, slices, string-keyed maps, structs, wire.NDArray, wire.Tensor, "+
			"wire.Image, wire.Tuple, wire.Thunk; no channels, funcs or complex numbers)", v),
	}, err)
}
