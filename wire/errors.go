package wire

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Every error returned by this package matches exactly one of them through
// errors.Is; the concrete types (*DecodeError, *EncodeError, *MismatchError) carry the details.
var (
	// ErrMalformed means the input bytes are not one valid Lakeshore wire value: not msgpack,
	// truncated, trailing bytes, nested deeper than MaxDepth, a map key that is not a str, a
	// duplicate map key, invalid UTF-8 in a str, an unknown extension code or a bad extension
	// payload. Returned by Decode and Unmarshal as a *DecodeError.
	ErrMalformed = errors.New("wire: malformed input")

	// ErrUnsupported means a Go value cannot be encoded: channels, funcs, complex numbers
	// outside an NDArray, maps whose keys are not strings, strings that are not valid UTF-8,
	// invalid NDArray/Tensor/Image/Thunk values, or nesting deeper than MaxDepth. Returned by
	// Marshal, Append and the Validate methods as an *EncodeError, and by Unmarshal when v is
	// not a non-nil pointer.
	ErrUnsupported = errors.New("wire: unsupported value")

	// ErrMismatch means the input is well formed but does not fit the Go type Unmarshal was
	// asked to fill (a str into an int, 300 into an int8, a map into a slice). Returned as a
	// *MismatchError.
	ErrMismatch = errors.New("wire: value does not fit the Go type")
)

// DecodeError describes malformed input. It matches ErrMalformed.
type DecodeError struct {
	// Offset is the byte offset in the input where the offending value starts.
	Offset int
	// Path locates the value, e.g. `$.inputs[2]` ("$" is the top-level value).
	Path string
	// Reason says what was wrong and what is allowed.
	Reason string
	// Err is the underlying msgp runtime error, if any.
	Err error

	segs []string // path segments innermost first, joined into Path by finishPath
}

// Error returns "wire: malformed input at PATH (byte N): REASON".
func (e *DecodeError) Error() string {
	return fmt.Sprintf("wire: malformed input at $%s (byte %d): %s", shortPath(e.Path), e.Offset, e.Reason)
}

// shortPath elides the middle of paths longer than 120 bytes (deep nesting) in messages.
func shortPath(p string) string {
	if len(p) <= 120 {
		return p
	}
	return p[:60] + "…" + p[len(p)-60:]
}

// Is reports whether target is ErrMalformed.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

// Unwrap returns the underlying msgp runtime error, or nil.
func (e *DecodeError) Unwrap() error { return e.Err }

// EncodeError describes a Go value that cannot be encoded. It matches ErrUnsupported.
type EncodeError struct {
	// Path locates the value inside the argument, e.g. `$.Inputs[2]`.
	Path string
	// Type is the Go type of the offending value, e.g. "chan int".
	Type string
	// Reason says what was wrong and what is allowed.
	Reason string

	segs []string // path segments innermost first, joined into Path by finishPath
}

// Error returns "wire: cannot encode TYPE at PATH: REASON".
func (e *EncodeError) Error() string {
	return fmt.Sprintf("wire: cannot encode %s at $%s: %s", e.Type, shortPath(e.Path), e.Reason)
}

// Is reports whether target is ErrUnsupported.
func (e *EncodeError) Is(target error) bool { return target == ErrUnsupported }

// MismatchError describes a well-formed value that does not fit the Go type Unmarshal was
// asked to fill. It matches ErrMismatch.
type MismatchError struct {
	// Path locates the value, e.g. `$.seed`.
	Path string
	// Wire is the kind found in the input: "nil", "bool", "int", "float32", "float64", "str",
	// "bin", "array", "map", "ndarray", "tensor", "image", "tuple", "thunk" or "timestamp".
	Wire string
	// Type is the Go type that was to be filled.
	Type string
	// Reason adds detail (e.g. "300 overflows int8"); it may be empty.
	Reason string

	segs []string // path segments innermost first, joined into Path by finishPath
}

// Error returns "wire: cannot put WIRE into TYPE at PATH[: REASON]".
func (e *MismatchError) Error() string {
	s := fmt.Sprintf("wire: cannot put %s into %s at $%s", e.Wire, e.Type, shortPath(e.Path))
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is reports whether target is ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// withPath records seg as the parent of the current path of a package error as the call
// stack unwinds (appending, so a deep path costs linear time); other errors pass through.
// Paths are only built on failure, so success costs nothing.
func withPath(err error, seg string) error {
	switch e := err.(type) {
	case *DecodeError:
		e.segs = append(e.segs, seg)
	case *EncodeError:
		e.segs = append(e.segs, seg)
	case *MismatchError:
		e.segs = append(e.segs, seg)
	}
	return err
}

// finishPath sets Path from the recorded segments; the exported functions call it on the
// errors they return.
func finishPath(err error) error {
	join := func(path string, segs []string) string {
		var b strings.Builder
		for i := len(segs) - 1; i >= 0; i-- {
			b.WriteString(segs[i])
		}
		return b.String() + path
	}
	switch e := err.(type) {
	case *DecodeError:
		e.Path, e.segs = join(e.Path, e.segs), nil
	case *EncodeError:
		e.Path, e.segs = join(e.Path, e.segs), nil
	case *MismatchError:
		e.Path, e.segs = join(e.Path, e.segs), nil
	}
	return err
}

// keySeg renders a map key as a path segment: ".name" for identifier-like keys, `["a b"]`
// otherwise.
func keySeg(k string) string {
	if k == "" {
		return `[""]`
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Sprintf("[%q]", quotable(k))
		}
	}
	return "." + quotable(k)
}

// maxQuoted bounds a key or value quoted in an error: longer ones are cut and end in
// "…" (plane.MaxQuotedBytes, which this package cannot import).
const maxQuoted = 100

// quotable returns s cut to maxQuoted bytes at a rune boundary, with "…" when cut.
func quotable(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// indexSeg renders an array index as a path segment: "[3]".
func indexSeg(i int) string { return fmt.Sprintf("[%d]", i) }
