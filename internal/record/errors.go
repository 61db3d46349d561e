package record

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Sentinel errors, shared in shape and codes with package plane: each is a
// *plane.Error with a stable code that survives HTTP ({code, message}), and any error
// with the same code matches it through errors.Is (so an error decoded from the wire
// matches the in-process sentinel). ErrInvalid is plane.ErrInvalid itself, and
// *InvalidError is plane's. Match them with errors.Is; the detailed error types below
// match their sentinel too. Code and ErrorFromCode map errors to codes and back.
var (
	// ErrClosed is returned by every call on a Queue (or a Reader, KV or Stream of it)
	// after Close has started. Code "closed", as plane.ErrClosed.
	ErrClosed = &plane.Error{Code: "closed", Message: "persist: queue is closed"}
	// ErrInvalid reports an argument or option outside what is allowed; see
	// *InvalidError. It is plane.ErrInvalid (code "invalid").
	ErrInvalid = plane.ErrInvalid
	// ErrSchema reports a value whose type is incompatible with the field's column type;
	// see *SchemaError. Code "incompatible_type".
	ErrSchema = &plane.Error{Code: "incompatible_type", Message: "persist: incompatible field type"}
	// ErrUnsupportedValue reports a value of a Go type that cannot be stored; see
	// *UnsupportedValueError. Code "unsupported_value".
	ErrUnsupportedValue = &plane.Error{Code: "unsupported_value", Message: "persist: unsupported value type"}
	// ErrNotFound reports an index or key that does not exist (never put, or cleared).
	// Code "not_found", as plane.ErrNotFound.
	ErrNotFound = &plane.Error{Code: "not_found", Message: "persist: not found"}
	// ErrTimeout reports a wait (GetMeta in wait mode) that ended before it was
	// satisfied. Code "timeout", as plane.ErrTimeout.
	ErrTimeout = &plane.Error{Code: "timeout", Message: "persist: wait timed out"}
	// ErrCorrupt reports on-disk state that does not match the manifest (a missing or
	// unreadable fragment named by the manifest). Code "corrupt".
	ErrCorrupt = &plane.Error{Code: "corrupt", Message: "persist: corrupt queue state"}
	// ErrPutIDReused reports a put whose idempotency id (PutOpts.ID) names an earlier put
	// of another batch: another partition or another number of records. Nothing was
	// written; the earlier put's records stand. See *PutIDReusedError, which matches it
	// and ErrInvalid. Code "put_id_reused" (HTTP 409).
	ErrPutIDReused = &plane.Error{Code: "put_id_reused", Message: "persist: put id names another batch"}
)

// sentinels lists persist's sentinels, for Code and ErrorFromCode.
// ErrPutIDReused before ErrInvalid: its error matches both, and its code is its own.
var sentinels = []*plane.Error{ErrClosed, ErrPutIDReused, ErrInvalid, ErrSchema, ErrUnsupportedValue, ErrNotFound, ErrTimeout, ErrCorrupt}

// Code returns the stable code of err: the code of the first persist sentinel it
// matches, else "corrupt" for a storage engine's own error of damaged data (a test
// registered by RegisterCorrupt says so), else plane.Code(err) ("internal" for an error
// without one).
func Code(err error) string {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s.Code
		}
	}
	if IsCorrupt(err) {
		return ErrCorrupt.Code
	}
	return plane.Code(err)
}

// corruptTests are the tests RegisterCorrupt took.
var corruptTests struct {
	sync.RWMutex
	fns []func(error) bool
}

// RegisterCorrupt adds test, which recognises the error of a store's storage engine for
// damaged data (the file store's SQLite answering SQLITE_CORRUPT or SQLITE_NOTADB), to
// what IsCorrupt and Code read: a store package registers its engine's test once (in
// init), and the damage met by any of its queries, at open or long after, has the code
// "corrupt" in this one place rather than at each query (where it had "internal", the
// server's 500 "internal error", saying nothing of what was wrong).
func RegisterCorrupt(test func(error) bool) {
	corruptTests.Lock()
	defer corruptTests.Unlock()
	corruptTests.fns = append(corruptTests.fns, test)
}

// IsCorrupt reports whether err matches ErrCorrupt or is an error of damaged data by a
// test RegisterCorrupt took.
func IsCorrupt(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrCorrupt) {
		return true
	}
	corruptTests.RLock()
	defer corruptTests.RUnlock()
	for _, test := range corruptTests.fns {
		if test(err) {
			return true
		}
	}
	return false
}

// ErrorFromCode rebuilds an error that errors.Is-matches the persist sentinel with
// code (else the plane sentinel), keeping message as its text.
func ErrorFromCode(code, message string) error {
	for _, s := range sentinels {
		if s.Code == code {
			return &plane.Error{Code: code, Message: message}
		}
	}
	return plane.ErrorFromCode(code, message)
}

// InvalidError says which argument or option was wrong, the value given and what is
// allowed. It is plane.InvalidError, and matches ErrInvalid.
type InvalidError = plane.InvalidError

// isCode reports whether target is a *plane.Error with code.
func isCode(target error, code string) bool {
	t, ok := target.(*plane.Error)
	return ok && t.Code == code
}

// PutIDReusedError reports a put refused because its idempotency id names an earlier put
// of another batch (another partition or another number of records): nothing was
// written, and the earlier put's records stand. It matches ErrPutIDReused and, as a bad
// argument, ErrInvalid. Every store returns it (putid.Repeat); a client of HTTP rebuilds
// it from the code put_id_reused, with ID and the server's Message.
type PutIDReusedError struct {
	ID string // the put id
	// The put the id named (StoredPartition, StoredRecords) and the refused one
	// (Partition, Records). Zero in an error rebuilt from HTTP, whose Message says them.
	StoredPartition string
	StoredRecords   int64
	Partition       string
	Records         int
	// Message, when set, is the whole error text (the server's, in a rebuilt error).
	Message string
}

// Error says which batch the id named and which it was given for.
func (e *PutIDReusedError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("invalid put_id %q: an id not used by another batch: it named a put of %d records into partition %s, this put has %d into %s",
		plane.Truncate(e.ID), e.StoredRecords, e.StoredPartition, e.Records, e.Partition)
}

// Is reports whether target is ErrPutIDReused or ErrInvalid.
func (e *PutIDReusedError) Is(target error) bool {
	return isCode(target, ErrPutIDReused.Code) || isCode(target, ErrInvalid.Code)
}

// SchemaError reports a put whose value for Field has a type (Got) that the field's
// column type (Have) cannot absorb. The put that caused it wrote nothing. It matches
// ErrSchema.
type SchemaError struct {
	Field string // the record field
	Have  Kind   // the column type the queue already holds
	Got   Kind   // the type of the rejected value
	// Reason, when set, says why two types that usually widen cannot here: an int64
	// beyond ±2^53 that a float64 column would round.
	Reason string
}

// Error describes what was wrong and what is allowed.
func (e *SchemaError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("persist: field %q cannot hold both %s and %s values: %s",
			e.Field, e.Have, e.Got, e.Reason)
	}
	return fmt.Sprintf("persist: field %q has type %s in the queue schema, cannot store a %s value (allowed: %s)",
		e.Field, e.Have, e.Got, e.Have.accepts())
}

// Is reports whether target is ErrSchema.
func (e *SchemaError) Is(target error) bool { return isCode(target, ErrSchema.Code) }

// UnsupportedValueError reports a value whose Go type cannot be stored. It matches
// ErrUnsupportedValue.
type UnsupportedValueError struct {
	Field  string // the record field
	GoType string // the Go type of the value, e.g. "chan int"
	Reason string // why, when more than "unsupported type"
}

// Error describes what was wrong and what is allowed.
func (e *UnsupportedValueError) Error() string {
	msg := fmt.Sprintf("persist: field %q: cannot store a value of Go type %s", e.Field, e.GoType)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg + " (allowed: bool, integers, floats, string, []byte, lists of numbers, Tensor, and values the wire codec encodes)"
}

// Is reports whether target is ErrUnsupportedValue.
func (e *UnsupportedValueError) Is(target error) bool {
	return isCode(target, ErrUnsupportedValue.Code)
}

// NotFoundError lists the indexes or keys that were asked for but do not exist, or
// names the queue that does not exist (Queue: opened with Config.Existing, or read over
// HTTP before any put created it). It matches ErrNotFound.
type NotFoundError struct {
	Queue     string   // the queue that does not exist, when that is what is missing
	Partition string   // the partition searched, "" for all
	Keys      []string // missing KV keys, if the lookup was by key
	Indexes   []int64  // missing global indexes, if the lookup was by index
}

// IndexesNotFound returns the *NotFoundError of the indexes of partition a call named
// that do not exist (or were cleared), naming the first 16 of them, or nil when missing
// is empty. Every store reports missing indexes with it.
func IndexesNotFound(partition string, missing IndexSet) error {
	if len(missing) == 0 {
		return nil
	}
	return &NotFoundError{Partition: partition, Indexes: missing.First(16)}
}

// Error describes what was wrong and what is allowed.
func (e *NotFoundError) Error() string {
	if e.Queue != "" && e.Keys == nil && e.Indexes == nil {
		return fmt.Sprintf("persist: data queue %q does not exist (its first put creates it)", e.Queue)
	}
	var what []string
	for _, k := range e.Keys {
		what = append(what, fmt.Sprintf("key %q", plane.Truncate(k)))
	}
	for _, i := range e.Indexes {
		what = append(what, fmt.Sprintf("index %d", i))
	}
	if len(what) > 8 {
		what = append(what[:8], fmt.Sprintf("and %d more", len(what)-8))
	}
	where := ""
	if e.Partition != "" {
		where = fmt.Sprintf(" in partition %q", e.Partition)
	}
	return "persist: not found" + where + ": " + strings.Join(what, ", ")
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return isCode(target, ErrNotFound.Code) }
