package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// MaxDims is the largest number of dimensions an NDArray or Tensor may have (numpy's limit).
const MaxDims = 64

// NDArray is an n-dimensional array of fixed-size numbers (wire extension 1), the shape numpy
// gives it. Build one with NewNDArray, or fill the fields and call Validate. The zero value
// has no dtype and does not encode: make optional fields *NDArray or tag them omitempty.
// NDArray and Tensor have identical fields, so Tensor(a) converts.
type NDArray struct {
	// DType is a numpy dtype name: "bool", "int8", "int16", "int32", "int64", "uint8",
	// "uint16", "uint32", "uint64", "float16", "bfloat16", "float32", "float64", "complex64"
	// or "complex128"; or a numpy byte-order name for one of them (">i4", "<f8", "|u1", …:
	// "<" little endian, ">" big endian, "|" one-byte), which is what numpy's str(dtype) gives
	// a big-endian array and what dreamlake-lakeshore writes for one. Decode normalises a
	// byte-order name to the plain name and little-endian data (unless Verbatim); Normalized
	// does the same. ItemSize gives its width.
	DType string
	// Shape lists the dimensions, outermost first; each is >= 0. Empty (nil) means a 0-d
	// array holding one element. At most MaxDims entries.
	Shape []int
	// Data holds product(Shape) × ItemSize(DType) bytes: the elements in C (row-major) order,
	// each little endian (big endian under a ">" name). Decoding never aliases the input
	// buffer.
	Data []byte
}

// Validate reports whether a can be encoded: a known dtype, at most MaxDims non-negative
// dimensions, and len(Data) == product(Shape) × ItemSize(DType). Errors: *EncodeError
// (Is ErrUnsupported) whose Reason names the rule.
func (a NDArray) Validate() error {
	if reason := checkArray(a.DType, a.Shape, len(a.Data)); reason != "" {
		return &EncodeError{Type: "wire.NDArray", Reason: reason}
	}
	return nil
}

// Tensor is an n-dimensional array for runtimes with their own tensor type (wire extension
// 2, e.g. torch.Tensor in Python). It is NDArray under another extension code: the same
// fields (DType, Shape, Data) and rules, so NDArray(t) and Tensor(a) convert.
type Tensor NDArray

// Validate reports whether t can be encoded; the rules are NDArray.Validate's. Errors:
// *EncodeError (Is ErrUnsupported).
func (t Tensor) Validate() error {
	if reason := checkArray(t.DType, t.Shape, len(t.Data)); reason != "" {
		return &EncodeError{Type: "wire.Tensor", Reason: reason}
	}
	return nil
}

// ItemSize returns the width in bytes of one element of the numpy dtype name (plain or
// byte-order, see NDArray.DType), and false for a name this package does not know.
func ItemSize(dtype string) (int, bool) {
	if plain, _, ok := plainDType(dtype); ok {
		dtype = plain
	}
	switch dtype {
	case "bool", "int8", "uint8":
		return 1, true
	case "int16", "uint16", "float16", "bfloat16":
		return 2, true
	case "int32", "uint32", "float32":
		return 4, true
	case "int64", "uint64", "float64", "complex64":
		return 8, true
	case "complex128":
		return 16, true
	}
	return 0, false
}

// dtypeList is the error hint for an unknown dtype.
const dtypeList = "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, " +
	"float16, bfloat16, float32, float64, complex64, complex128, or a byte-order name such as \">i4\""

// byteOrderCodes maps numpy's type codes (the part after the byte-order character) to the
// plain dtype names.
var byteOrderCodes = map[string]string{
	"b1": "bool", "i1": "int8", "u1": "uint8",
	"i2": "int16", "u2": "uint16", "f2": "float16",
	"i4": "int32", "u4": "uint32", "f4": "float32",
	"i8": "int64", "u8": "uint64", "f8": "float64", "c8": "complex64",
	"c16": "complex128",
}

// plainDType returns the plain name of a byte-order dtype name (">i4" → "int32") and
// whether its data is big endian; ok is false for any other string (plain names included).
// "|" (not applicable) is accepted for one-byte types only; numpy's "=" (native) is not,
// as the wire never depends on the writer's machine.
func plainDType(dtype string) (plain string, bigEndian, ok bool) {
	if len(dtype) < 3 {
		return "", false, false
	}
	plain, ok = byteOrderCodes[dtype[1:]]
	if !ok {
		return "", false, false
	}
	switch dtype[0] {
	case '<':
		return plain, false, true
	case '>':
		return plain, true, true
	case '|':
		if dtype[2] == '1' {
			return plain, false, true
		}
	}
	return "", false, false
}

// Normalized returns a with a plain dtype name and little-endian data: a byte-order name
// (">i4") becomes its plain name ("int32") and big-endian data is swapped into a new slice.
// Any other array is returned as is.
func (a NDArray) Normalized() NDArray {
	a.DType, a.Data = normalizeDType(a.DType, a.Data)
	return a
}

// normalizeDType returns the plain name of dtype and data in little-endian order (a copy when
// bytes are swapped); other names come back unchanged.
func normalizeDType(dtype string, data []byte) (string, []byte) {
	plain, bigEndian, ok := plainDType(dtype)
	if !ok {
		return dtype, data
	}
	if !bigEndian {
		return plain, data
	}
	width, _ := ItemSize(plain)
	if plain == "complex64" || plain == "complex128" {
		width /= 2 // each of the real and imaginary parts is swapped on its own
	}
	out := make([]byte, len(data))
	for i := 0; i+width <= len(data); i += width {
		for j := range width {
			out[i+j] = data[i+width-1-j]
		}
	}
	return plain, out
}

// checkArray returns "" if dtype, shape and a data length of n bytes form a valid array, and
// otherwise the reason they do not.
func checkArray(dtype string, shape []int, n int) string {
	size, ok := ItemSize(dtype)
	if !ok {
		return fmt.Sprintf("unknown dtype %q; want one of %s", dtype, dtypeList)
	}
	if len(shape) > MaxDims {
		return fmt.Sprintf("shape has %d dimensions; at most %d are allowed", len(shape), MaxDims)
	}
	count, ok := elementCount(shape)
	if !ok {
		return fmt.Sprintf("shape %v has a negative dimension or more elements than fit in memory", shape)
	}
	hi, want := bits.Mul64(count, uint64(size))
	if hi != 0 || want > math.MaxInt {
		return fmt.Sprintf("shape %v of %s needs more bytes than fit in memory", shape, dtype)
	}
	if uint64(n) != want {
		return fmt.Sprintf("data is %d bytes; shape %v of %s needs %d (%d elements × %d bytes)",
			n, shape, dtype, want, count, size)
	}
	return ""
}

// elementCount returns product(shape) (1 for an empty shape), and false if a dimension is
// negative or the product overflows uint64. A zero dimension makes the product 0 whatever the
// others are.
func elementCount(shape []int) (uint64, bool) {
	count := uint64(1)
	overflow := false
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			return 0, true
		}
		hi, lo := bits.Mul64(count, uint64(d))
		overflow = overflow || hi != 0
		count = lo
	}
	return count, !overflow
}

// Element is the set of Go types NewNDArray and NDArrayValues convert, each mapped to the
// numpy dtype of the same name ("bool", "int8", …, "float64").
type Element interface {
	bool | int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 | float32 | float64
}

// DTypeOf returns the numpy dtype name of the Element type T, e.g. "float32".
func DTypeOf[T Element]() string {
	var zero T
	switch any(zero).(type) {
	case bool:
		return "bool"
	case int8:
		return "int8"
	case int16:
		return "int16"
	case int32:
		return "int32"
	case int64:
		return "int64"
	case uint8:
		return "uint8"
	case uint16:
		return "uint16"
	case uint32:
		return "uint32"
	case uint64:
		return "uint64"
	case float32:
		return "float32"
	default:
		return "float64"
	}
}

// NewNDArray returns an NDArray of dtype DTypeOf[T]() holding values (C order) with the given
// shape; nil or empty shape makes a 0-d array of one value. Shape and values are copied.
// Errors: *EncodeError (Is ErrUnsupported) when len(values) != product(shape), a dimension is
// negative, or there are more than MaxDims dimensions.
func NewNDArray[T Element](shape []int, values []T) (NDArray, error) {
	var zero T
	size := binary.Size(zero)
	dtype := DTypeOf[T]()
	count, ok := elementCount(shape)
	if len(shape) > MaxDims || !ok || count != uint64(len(values)) {
		reason := checkArray(dtype, shape, len(values)*size)
		if reason == "" {
			reason = fmt.Sprintf("%d values do not fill shape %v", len(values), shape)
		}
		return NDArray{}, &EncodeError{Type: "wire.NDArray", Reason: reason}
	}
	data := make([]byte, len(values)*size)
	if _, err := binary.Encode(data, binary.LittleEndian, values); err != nil {
		return NDArray{}, &EncodeError{Type: "wire.NDArray", Reason: err.Error()}
	}
	return NDArray{DType: dtype, Shape: append([]int(nil), shape...), Data: data}, nil
}

// NDArrayValues returns a copy of a's elements as a flat []T in C order (use a.Shape to
// index); a byte-order name counts as its plain name (">i4" as "int32"). Errors:
// *MismatchError (Is ErrMismatch) when a.DType is not DTypeOf[T](), and *EncodeError (Is
// ErrUnsupported) when a is invalid (see NDArray.Validate).
func NDArrayValues[T Element](a NDArray) ([]T, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	a = a.Normalized()
	if want := DTypeOf[T](); a.DType != want {
		return nil, &MismatchError{Wire: "ndarray", Type: "[]" + want,
			Reason: fmt.Sprintf("dtype is %s, want %s", a.DType, want)}
	}
	var zero T
	out := make([]T, len(a.Data)/binary.Size(zero))
	if _, err := binary.Decode(a.Data, binary.LittleEndian, out); err != nil {
		return nil, &MismatchError{Wire: "ndarray", Type: "[]" + a.DType, Reason: err.Error()}
	}
	return out, nil
}
