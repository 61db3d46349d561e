package persist

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Match them with errors.Is; the detailed error types below match their
// sentinel through an Is method.
var (
	// ErrClosed is returned by every call on a Queue (or a Reader, KV or Stream of it)
	// after Close has started.
	ErrClosed = errors.New("persist: queue is closed")
	// ErrInvalid reports an argument or option outside what is allowed; see *InvalidError.
	ErrInvalid = errors.New("persist: invalid argument")
	// ErrSchema reports a value whose type is incompatible with the field's column type;
	// see *SchemaError.
	ErrSchema = errors.New("persist: incompatible field type")
	// ErrUnsupportedValue reports a value of a Go type that cannot be stored; see
	// *UnsupportedValueError.
	ErrUnsupportedValue = errors.New("persist: unsupported value type")
	// ErrNotFound reports an index or key that does not exist (never put, or cleared).
	ErrNotFound = errors.New("persist: not found")
	// ErrTimeout reports a wait (GetMeta in wait mode) that ended before it was satisfied.
	ErrTimeout = errors.New("persist: wait timed out")
	// ErrCorrupt reports on-disk state that does not match the manifest (a missing or
	// unreadable fragment named by the manifest).
	ErrCorrupt = errors.New("persist: corrupt queue state")
)

// InvalidError says which argument or option was wrong, the value given and what is
// allowed. It matches ErrInvalid.
type InvalidError struct {
	Field string // the option or argument, e.g. "Config.FlushRows" or "batchSize"
	Rule  string // what is allowed, e.g. "a positive multiple of 4"
	Value any    // the value given
}

// Error describes what was wrong and what is allowed.
func (e *InvalidError) Error() string {
	return fmt.Sprintf("persist: invalid %s %v: must be %s", e.Field, e.Value, e.Rule)
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

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
func (e *SchemaError) Is(target error) bool { return target == ErrSchema }

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
func (e *UnsupportedValueError) Is(target error) bool { return target == ErrUnsupportedValue }

// NotFoundError lists the indexes or keys that were asked for but do not exist. It
// matches ErrNotFound.
type NotFoundError struct {
	Partition string   // the partition searched, "" for all
	Keys      []string // missing KV keys, if the lookup was by key
	Indexes   []int64  // missing global indexes, if the lookup was by index
}

// Error describes what was wrong and what is allowed.
func (e *NotFoundError) Error() string {
	var what []string
	for _, k := range e.Keys {
		what = append(what, fmt.Sprintf("key %q", k))
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
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }
