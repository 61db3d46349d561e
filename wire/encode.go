package wire

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// MaxDepth is the deepest nesting of containers (arrays, maps, tuples, structs, and on
// encode also pointers) that Marshal writes and Decode accepts. A value at the top level is at
// depth 0; the elements of a top-level array are at depth 1.
const MaxDepth = 512

// Marshal encodes v as one msgpack value and returns the bytes.
//
// The generic values nil, bool, int64 (and every Go integer type), uint64, float64, float32,
// string, []byte, []any, map[string]any, Map, NDArray, Tensor, Image, Tuple, Thunk and
// time.Time take a fast path. Other values go through reflection: pointers encode their target (nil:
// msgpack nil), named scalar types their underlying kind, slices and arrays as arrays (of
// bytes: as bin), maps with string-kind keys as maps, structs as maps of their exported
// fields. Field names come from the `msgpack` tag, else the `json` tag, else the Go name;
// "-" skips a field, ",omitempty" skips its zero value; untagged embedded structs are
// inlined (the shallowest field of a name wins, then the first declared).
//
// The output is deterministic: integers take their smallest form (non-negative ones as
// fixint/uint 8–64, negative ones as negative fixint/int 8–64), floats keep their width,
// map[string]any keys are sorted by bytes (a Map keeps its order), nil slices and maps encode
// as nil. Tuples are written as ext 5 and thunks as ext 64 (wire Version 2).
//
// Errors: *EncodeError (Is ErrUnsupported) for channels, funcs, complex numbers (use an
// NDArray with dtype complex64/complex128), maps with non-string keys, strings that are not
// valid UTF-8 (use []byte), invalid NDArray/Tensor/Image/Thunk values, times outside int64
// Unix seconds, and nesting deeper than MaxDepth (e.g. a pointer cycle).
func Marshal(v any) ([]byte, error) {
	// Most payloads are small maps; starting at 128 bytes saves several regrowths.
	return Append(make([]byte, 0, marshalStartSize), v)
}

// marshalStartSize is the capacity Marshal starts its output with.
const marshalStartSize = 128

// Append is Marshal appending to b: it returns b extended by the encoding of v. On error it
// returns b with its original length (bytes past it in b's array may have been written).
func Append(b []byte, v any) ([]byte, error) {
	out, err := appendValue(b, v, 0)
	if err != nil {
		return b, finishPath(err)
	}
	return out, nil
}

// appendValue appends v at nesting depth depth; the type switch is the fast path, and
// appendReflect the rest.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return msgp.AppendNil(b), nil
	case bool:
		return msgp.AppendBool(b, x), nil
	case int:
		return appendInt(b, int64(x)), nil
	case int8:
		return appendInt(b, int64(x)), nil
	case int16:
		return appendInt(b, int64(x)), nil
	case int32:
		return appendInt(b, int64(x)), nil
	case int64:
		return appendInt(b, x), nil
	case uint:
		return msgp.AppendUint64(b, uint64(x)), nil
	case uint8:
		return msgp.AppendUint64(b, uint64(x)), nil
	case uint16:
		return msgp.AppendUint64(b, uint64(x)), nil
	case uint32:
		return msgp.AppendUint64(b, uint64(x)), nil
	case uint64:
		return msgp.AppendUint64(b, x), nil
	case float32:
		return msgp.AppendFloat32(b, x), nil
	case float64:
		return msgp.AppendFloat64(b, x), nil
	case string:
		return appendString(b, x)
	case []byte:
		if x == nil {
			return msgp.AppendNil(b), nil
		}
		return appendBin(b, x, "[]byte")
	case []any:
		if x == nil {
			return msgp.AppendNil(b), nil
		}
		return appendList(b, x, depth, "[]any")
	case map[string]any:
		if x == nil {
			return msgp.AppendNil(b), nil
		}
		return appendMap(b, x, depth)
	case Map:
		if x == nil {
			return msgp.AppendNil(b), nil
		}
		return appendOrderedMap(b, x, depth)
	case NDArray:
		return appendArrayExt(b, ExtNDArray, x.DType, x.Shape, x.Data, "wire.NDArray")
	case Tensor:
		return appendArrayExt(b, ExtTensor, x.DType, x.Shape, x.Data, "wire.Tensor")
	case Image:
		return appendPairExt(b, ExtImage, x.Format, x.Data, "wire.Image", "format")
	case Thunk:
		return appendPairExt(b, ExtThunk, x.Language, x.Data, "wire.Thunk", "language")
	case Tuple:
		return appendTuple(b, x, depth)
	case time.Time:
		return appendTimestamp(b, x)
	case complex64, complex128:
		return b, &EncodeError{Type: fmt.Sprintf("%T", v),
			Reason: "complex numbers are not wire values; use an NDArray with dtype complex64 or complex128"}
	}
	return appendReflect(b, reflect.ValueOf(v), depth)
}

// appendInt appends i in its smallest form; non-negative values use the unsigned forms, as
// msgpack-python and most other encoders do.
func appendInt(b []byte, i int64) []byte {
	if i >= 0 {
		return msgp.AppendUint64(b, uint64(i))
	}
	return msgp.AppendInt64(b, i)
}

func appendString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return b, &EncodeError{Type: "string", Reason: "string is not valid UTF-8; send bytes as []byte (msgpack bin)"}
	}
	if len(s) > math.MaxUint32 {
		return b, &EncodeError{Type: "string", Reason: "string is longer than 2^32-1 bytes"}
	}
	return msgp.AppendString(b, s), nil
}

func appendBin(b, data []byte, typ string) ([]byte, error) {
	if len(data) > math.MaxUint32 {
		return b, &EncodeError{Type: typ, Reason: "byte slice is longer than 2^32-1 bytes"}
	}
	return msgp.AppendBytes(b, data), nil
}

// checkDepth returns an error if a container at depth may not be written.
func checkDepth(depth int, typ string) error {
	if depth >= MaxDepth {
		return &EncodeError{Type: typ, Reason: fmt.Sprintf("nesting is deeper than %d (a pointer cycle?)", MaxDepth)}
	}
	return nil
}

func appendList(b []byte, list []any, depth int, typ string) ([]byte, error) {
	if err := checkDepth(depth, typ); err != nil {
		return b, err
	}
	if len(list) > math.MaxUint32 {
		return b, &EncodeError{Type: typ, Reason: "more than 2^32-1 elements"}
	}
	b = msgp.AppendArrayHeader(b, uint32(len(list)))
	var err error
	for i, e := range list {
		if b, err = appendValue(b, e, depth+1); err != nil {
			return b, withPath(err, indexSeg(i))
		}
	}
	return b, nil
}

func appendMap(b []byte, m map[string]any, depth int) ([]byte, error) {
	if err := checkDepth(depth, "map[string]any"); err != nil {
		return b, err
	}
	if len(m) > math.MaxUint32 {
		return b, &EncodeError{Type: "map[string]any", Reason: "more than 2^32-1 entries"}
	}
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = msgp.AppendMapHeader(b, uint32(len(keys)))
	var err error
	for _, k := range keys {
		if b, err = appendString(b, k); err != nil {
			return b, withPath(err, keySeg(k))
		}
		if b, err = appendValue(b, m[k], depth+1); err != nil {
			return b, withPath(err, keySeg(k))
		}
	}
	return b, nil
}

// appendOrderedMap appends m with its entries in order, refusing a key twice.
func appendOrderedMap(b []byte, m Map, depth int) ([]byte, error) {
	if err := checkDepth(depth, "wire.Map"); err != nil {
		return b, err
	}
	if len(m) > math.MaxUint32 {
		return b, &EncodeError{Type: "wire.Map", Reason: "more than 2^32-1 entries"}
	}
	seen := make(map[string]struct{}, len(m))
	b = msgp.AppendMapHeader(b, uint32(len(m)))
	var err error
	for _, e := range m {
		if _, dup := seen[e.Key]; dup {
			return b, withPath(&EncodeError{Type: "wire.Map", Reason: "the key is in the map twice"}, keySeg(e.Key))
		}
		seen[e.Key] = struct{}{}
		if b, err = appendString(b, e.Key); err != nil {
			return b, withPath(err, keySeg(e.Key))
		}
		if b, err = appendValue(b, e.Value, depth+1); err != nil {
			return b, withPath(err, keySeg(e.Key))
		}
	}
	return b, nil
}

// appendArrayExt appends an NDArray or Tensor extension: [dtype, shape, data].
func appendArrayExt(b []byte, typ int8, dtype string, shape []int, data []byte, goType string) ([]byte, error) {
	if reason := checkArray(dtype, shape, len(data)); reason != "" {
		return b, &EncodeError{Type: goType, Reason: reason}
	}
	n := 1 + strSize(len(dtype)) + arrayHeaderSize(len(shape)) + binSize(len(data))
	for _, d := range shape {
		n += uintSize(uint64(d))
	}
	if n > math.MaxUint32 {
		return b, &EncodeError{Type: goType, Reason: "payload is larger than 2^32-1 bytes"}
	}
	b = slices.Grow(b, 6+n)
	b = appendExtHeader(b, typ, n)
	b = msgp.AppendArrayHeader(b, 3)
	b = msgp.AppendString(b, dtype)
	b = msgp.AppendArrayHeader(b, uint32(len(shape)))
	for _, d := range shape {
		b = msgp.AppendUint64(b, uint64(d))
	}
	return msgp.AppendBytes(b, data), nil
}

// appendPairExt appends an Image or Thunk extension: [name, data], name non-empty UTF-8.
func appendPairExt(b []byte, typ int8, name string, data []byte, goType, field string) ([]byte, error) {
	if name == "" || !utf8.ValidString(name) {
		return b, &EncodeError{Type: goType, Reason: field + " must be a non-empty UTF-8 string"}
	}
	n := 1 + strSize(len(name)) + binSize(len(data))
	if n > math.MaxUint32 {
		return b, &EncodeError{Type: goType, Reason: "payload is larger than 2^32-1 bytes"}
	}
	b = slices.Grow(b, 6+n)
	b = appendExtHeader(b, typ, n)
	b = msgp.AppendArrayHeader(b, 2)
	b = msgp.AppendString(b, name)
	return msgp.AppendBytes(b, data), nil
}

// appendTuple appends a Tuple extension. The payload's size is known only once written, so
// it is written after room for the largest header and then moved down if the header is
// smaller.
func appendTuple(b []byte, t Tuple, depth int) ([]byte, error) {
	const room = 6
	start := len(b)
	b = append(b, make([]byte, room)...)
	b, err := appendList(b, t, depth, "wire.Tuple")
	if err != nil {
		return b, err
	}
	n := len(b) - start - room
	if n > math.MaxUint32 {
		return b, &EncodeError{Type: "wire.Tuple", Reason: "payload is larger than 2^32-1 bytes"}
	}
	var hdr [room]byte
	h := appendExtHeader(hdr[:0], ExtTuple, n)
	copy(b[start+len(h):], b[start+room:])
	copy(b[start:], h)
	return b[:start+len(h)+n], nil
}
