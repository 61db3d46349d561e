package wire

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// Decode decodes data, which must hold exactly one msgpack value, into its generic form:
//
//	nil                 nil
//	bool                bool
//	int, uint           int64; uint64 only for values above math.MaxInt64
//	float 32 / float 64 float32 / float64 (a float32 stays float32, so it re-encodes exactly)
//	str                 string
//	bin                 []byte
//	array               []any
//	map                 map[string]any
//	ext -1, 1, 2, 3     time.Time (UTC), NDArray, Tensor, Image
//	ext 5 (and 4), 64   Tuple, Thunk
//
// An NDArray or Tensor written with a byte-order dtype name (">i4", big-endian data) decodes
// to its plain name and little-endian data. Ext 4, the tuple of wire version 1, still decodes
// as a Tuple; ext 5 is always a Tuple here (version 1's thunks need DecodeWith and
// DecodeOptions.Version 1).
//
// Decode never panics and never aliases data. Declared lengths are checked against the
// remaining input before anything is allocated, and preallocation is budgeted across the whole
// input, so memory stays proportional to len(data): the generic form takes at most a few
// dozen bytes per input byte (16 per element of an array of small ints, a little more for
// maps). Bound the input size before calling it.
//
// Errors: *DecodeError (Is ErrMalformed) for empty or truncated input, trailing bytes, the
// never-used byte 0xc1, a map key that is not a str, a duplicate map key, a str that is not
// valid UTF-8, nesting deeper than MaxDepth, an unknown extension code, or an extension
// payload that breaks its layout (see NDArray.Validate for arrays).
func Decode(data []byte) (any, error) {
	return DecodeWith(data, DecodeOptions{})
}

// DecodeOptions choose how DecodeWith reads; the zero value is Decode's behaviour.
type DecodeOptions struct {
	// Verbatim keeps what the writer chose where Decode normalises: maps decode to Map in
	// their wire order, and arrays keep a byte-order dtype name and its data as written. So
	// Marshal of the result gives back the input exactly whenever the input is in canonical
	// form (smallest headers), whatever its key order: e.g. every value dreamlake-lakeshore
	// writes.
	Verbatim bool
	// Version is the wire version the bytes were written in: 0 or 2 for the current one, 1
	// for bytes Lakeshore wrote before version 2, whose ext 5 is a Thunk (see ExtThunkV1).
	// Version 1 reads ext 4 as a Tuple, as every version does, and ext 64 as a Thunk too.
	Version int
}

// DecodeWith is Decode with options. Errors: those of Decode, and *DecodeError (Is
// ErrMalformed) for a Version other than 0, 1 or 2.
func DecodeWith(data []byte, opts DecodeOptions) (any, error) {
	d := decoder{total: len(data), slots: len(data), opts: opts}
	if opts.Version < 0 || opts.Version > Version {
		return nil, d.fail(data, fmt.Sprintf("wire version %d is not known; want 1 or %d", opts.Version, Version))
	}
	if len(data) == 0 {
		return nil, d.fail(data, "input is empty; want one msgpack value")
	}
	v, rest, err := d.value(data, 0)
	if err != nil {
		return nil, finishPath(err)
	}
	if len(rest) != 0 {
		return nil, d.fail(rest, fmt.Sprintf("%d bytes follow the value; want exactly one msgpack value", len(rest)))
	}
	return v, nil
}

// decoder holds the state of one Decode call.
type decoder struct {
	// total is the length of the whole input, to turn a remaining slice into an offset.
	total int
	// slots is what remains of the budget for preallocating array elements and map entries
	// (two slots each). It starts at the input length: every value takes at least one byte, so
	// an honest input never runs out and gets exact preallocation, while declared counts that
	// overlap (nested arrays each claiming the rest of the input) cannot make the decoder
	// reserve more than one slot per input byte in all. Past the budget, containers grow as
	// their elements are actually read.
	slots int
	// opts are the caller's options.
	opts DecodeOptions
}

// reserve takes up to n slots from the budget and returns how many it took.
func (d *decoder) reserve(n uint64) int {
	c := int(min(n, uint64(d.slots)))
	d.slots -= c
	return c
}

// fail returns a *DecodeError for the value starting at at.
func (d *decoder) fail(at []byte, reason string) error {
	return &DecodeError{Offset: d.total - len(at), Reason: reason}
}

// failErr returns a *DecodeError wrapping an error of the msgp runtime.
func (d *decoder) failErr(at []byte, what string, err error) error {
	reason := what + ": " + err.Error()
	if errors.Is(err, msgp.ErrShortBytes) {
		reason = what + " is truncated"
	}
	return &DecodeError{Offset: d.total - len(at), Reason: reason, Err: err}
}

// value decodes the value at the start of b (len(b) > 0 is not required) at nesting depth
// depth and returns it with the bytes after it.
func (d *decoder) value(b []byte, depth int) (any, []byte, error) {
	if len(b) == 0 {
		return nil, b, d.fail(b, "input ends where a value should start (truncated)")
	}
	lead := b[0]
	switch {
	case lead <= 0x7f: // positive fixint
		return int64(lead), b[1:], nil
	case lead >= 0xe0: // negative fixint
		return int64(int8(lead)), b[1:], nil
	case lead <= 0x8f, lead == 0xde, lead == 0xdf:
		return d.mapValue(b, depth)
	case lead <= 0x9f, lead == 0xdc, lead == 0xdd:
		return d.list(b, depth)
	case lead <= 0xbf, lead >= 0xd9 && lead <= 0xdb:
		return d.str(b, "str")
	}
	switch lead {
	case 0xc0:
		return nil, b[1:], nil
	case 0xc2:
		return false, b[1:], nil
	case 0xc3:
		return true, b[1:], nil
	case 0xc4, 0xc5, 0xc6:
		v, rest, err := msgp.ReadBytesZC(b)
		if err != nil {
			return nil, b, d.failErr(b, "bin", err)
		}
		return append(make([]byte, 0, len(v)), v...), rest, nil
	case 0xca:
		v, rest, err := msgp.ReadFloat32Bytes(b)
		if err != nil {
			return nil, b, d.failErr(b, "float 32", err)
		}
		return v, rest, nil
	case 0xcb:
		v, rest, err := msgp.ReadFloat64Bytes(b)
		if err != nil {
			return nil, b, d.failErr(b, "float 64", err)
		}
		return v, rest, nil
	case 0xcf:
		v, rest, err := msgp.ReadUint64Bytes(b)
		if err != nil {
			return nil, b, d.failErr(b, "uint 64", err)
		}
		if v <= math.MaxInt64 {
			return int64(v), rest, nil
		}
		return v, rest, nil
	case 0xcc, 0xcd, 0xce, 0xd0, 0xd1, 0xd2, 0xd3:
		v, rest, err := msgp.ReadInt64Bytes(b)
		if err != nil {
			return nil, b, d.failErr(b, "int", err)
		}
		return v, rest, nil
	case 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return d.ext(b, depth)
	}
	return nil, b, d.fail(b, "byte 0xc1 is never used in msgpack")
}

// str decodes a str, checking it is UTF-8; what names it in errors.
func (d *decoder) str(b []byte, what string) (string, []byte, error) {
	v, rest, err := msgp.ReadStringZC(b)
	if err != nil {
		return "", b, d.failErr(b, what, err)
	}
	if !utf8.Valid(v) {
		return "", b, d.fail(b, what+" is not valid UTF-8; binary data must be sent as bin")
	}
	return string(v), rest, nil
}

func (d *decoder) list(b []byte, depth int) (any, []byte, error) {
	if depth >= MaxDepth {
		return nil, b, d.fail(b, fmt.Sprintf("nesting is deeper than %d", MaxDepth))
	}
	n, rest, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, b, d.failErr(b, "array header", err)
	}
	if uint64(n) > uint64(len(rest)) { // every element takes at least one byte
		return nil, b, d.fail(b, fmt.Sprintf("array declares %d elements but only %d bytes follow", n, len(rest)))
	}
	out := make([]any, 0, d.reserve(uint64(n)))
	for i := range int(n) {
		var v any
		if v, rest, err = d.value(rest, depth+1); err != nil {
			return nil, b, withPath(err, indexSeg(i))
		}
		out = append(out, v)
	}
	return out, rest, nil
}

func (d *decoder) mapValue(b []byte, depth int) (any, []byte, error) {
	if depth >= MaxDepth {
		return nil, b, d.fail(b, fmt.Sprintf("nesting is deeper than %d", MaxDepth))
	}
	n, rest, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return nil, b, d.failErr(b, "map header", err)
	}
	if 2*uint64(n) > uint64(len(rest)) { // every key and value takes at least one byte
		return nil, b, d.fail(b, fmt.Sprintf("map declares %d entries but only %d bytes follow", n, len(rest)))
	}
	if d.opts.Verbatim {
		return d.orderedMap(b, rest, n, depth)
	}
	out := make(map[string]any, d.reserve(2*uint64(n))/2)
	for range n {
		at := rest
		var k string
		if k, rest, err = d.mapKey(at); err != nil {
			return nil, b, err
		}
		if _, dup := out[k]; dup {
			return nil, b, d.fail(at, fmt.Sprintf("duplicate map key %q", quotable(k)))
		}
		var v any
		if v, rest, err = d.value(rest, depth+1); err != nil {
			return nil, b, withPath(err, keySeg(k))
		}
		out[k] = v
	}
	return out, rest, nil
}

// orderedMap decodes the n entries of a map starting at rest (b is the map's header) into a
// Map in wire order, with the checks of mapValue.
func (d *decoder) orderedMap(b, rest []byte, n uint32, depth int) (any, []byte, error) {
	out := make(Map, 0, d.reserve(2*uint64(n))/2)
	seen := make(map[string]struct{}, cap(out))
	for range n {
		at := rest
		k, next, err := d.mapKey(at)
		if err != nil {
			return nil, b, err
		}
		if _, dup := seen[k]; dup {
			return nil, b, d.fail(at, fmt.Sprintf("duplicate map key %q", quotable(k)))
		}
		seen[k] = struct{}{}
		var v any
		if v, rest, err = d.value(next, depth+1); err != nil {
			return nil, b, withPath(err, keySeg(k))
		}
		out = append(out, MapEntry{Key: k, Value: v})
	}
	return out, rest, nil
}

// mapKey decodes the str key at the start of at.
func (d *decoder) mapKey(at []byte) (string, []byte, error) {
	if len(at) == 0 {
		return "", at, d.fail(at, "input ends where a map key should start (truncated)")
	}
	if t := at[0]; !(t >= 0xa0 && t <= 0xbf || t >= 0xd9 && t <= 0xdb) {
		return "", at, d.fail(at, fmt.Sprintf("map key is %s; Lakeshore maps have str keys only", leadKind(t)))
	}
	return d.str(at, "map key")
}

// leadKind names the msgpack family of a lead byte, for error messages.
func leadKind(t byte) string {
	switch {
	case t <= 0x7f, t >= 0xe0, t >= 0xcc && t <= 0xd3:
		return "an int"
	case t <= 0x8f, t == 0xde, t == 0xdf:
		return "a map"
	case t <= 0x9f, t == 0xdc, t == 0xdd:
		return "an array"
	case t <= 0xbf, t >= 0xd9 && t <= 0xdb:
		return "a str"
	}
	switch t {
	case 0xc0:
		return "nil"
	case 0xc2, 0xc3:
		return "a bool"
	case 0xc4, 0xc5, 0xc6:
		return "a bin"
	case 0xca, 0xcb:
		return "a float"
	case 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return "an ext"
	}
	return "the never-used byte 0xc1"
}
