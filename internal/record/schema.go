package record

import (
	"github.com/lakeshore-dev/lakeshore/wire"
	"math"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// Kind is the stored type of a field (a column). The schema of a queue maps each field
// name to one Kind; it is inferred from the first value put and evolves only by widening.
type Kind string

// The kinds a field can have.
const (
	KindBool        Kind = "bool"          // Go bool
	KindInt64       Kind = "int64"         // any Go integer that fits in int64
	KindFloat64     Kind = "float64"       // float32, float64; absorbs int64 (widening)
	KindString      Kind = "string"        // Go string
	KindBytes       Kind = "bytes"         // []byte
	KindInt64List   Kind = "list<int64>"   // []int, []int32, []int64, ... as a Parquet list
	KindFloat64List Kind = "list<float64>" // []float32, []float64; absorbs list<int64>
	KindTensor      Kind = "tensor"        // Tensor (= wire.NDArray): dtype, shape, raw bytes
	KindNDArray     Kind = "ndarray"       // wire.NDArray in queues written before Tensor was wire.NDArray; same as KindTensor
	KindWireTensor  Kind = "wire.tensor"   // wire.Tensor, stored like KindTensor
	KindCodec       Kind = "codec"         // any other value the wire codec encodes, stored as codec bytes
)

// accepts describes which value kinds a column of kind k takes, for error messages.
func (k Kind) accepts() string {
	switch k {
	case KindFloat64:
		return "float64 or int64 values"
	case KindInt64:
		return "int64 values, or float64 values which widen the column to float64"
	case KindFloat64List:
		return "lists of float64 or int64"
	case KindInt64List:
		return "lists of int64, or lists of float64 which widen the column to list<float64>"
	default:
		return string(k) + " values"
	}
}

// maxExactInt is 2^53: every integer of at most this magnitude is exact as a float64.
const maxExactInt = 1 << 53

// InexactInt reports whether fv is an integer (or a list holding one) of magnitude
// beyond 2^53, which float64 would round, and returns that integer.
func InexactInt(fv FieldValue) (int64, bool) {
	switch fv.Kind {
	case KindInt64:
		if v := fv.Val.(int64); v > maxExactInt || v < -maxExactInt {
			return v, true
		}
	case KindInt64List:
		for _, v := range fv.Val.([]int64) {
			if v > maxExactInt || v < -maxExactInt {
				return v, true
			}
		}
	}
	return 0, false
}

// IntKindOf returns the integer kind that widens to the float kind k.
func IntKindOf(k Kind) Kind {
	if k == KindFloat64List {
		return KindInt64List
	}
	return KindInt64
}

// OtherKind returns the kind that k widens with.
func OtherKind(k Kind) Kind {
	switch k {
	case KindInt64:
		return KindFloat64
	case KindFloat64:
		return KindInt64
	case KindInt64List:
		return KindFloat64List
	case KindFloat64List:
		return KindInt64List
	}
	return k
}

// Widen returns the column kind that holds both have and got, or ok=false if none does.
func Widen(have, got Kind) (Kind, bool) {
	switch {
	case have == got:
		return have, true
	case (have == KindTensor || have == KindNDArray) && (got == KindTensor || got == KindNDArray):
		return have, true // one type (wire.NDArray) under two names: the column keeps its own
	case (have == KindInt64 && got == KindFloat64) || (have == KindFloat64 && got == KindInt64):
		return KindFloat64, true
	case (have == KindInt64List && got == KindFloat64List) || (have == KindFloat64List && got == KindInt64List):
		return KindFloat64List, true
	}
	return "", false
}

// Valid reports whether k is one of the kinds a field may have.
func (k Kind) Valid() bool { return ValidKind(k) }

func ValidKind(k Kind) bool {
	switch k {
	case KindBool, KindInt64, KindFloat64, KindString, KindBytes, KindInt64List, KindFloat64List, KindTensor, KindNDArray, KindWireTensor, KindCodec:
		return true
	}
	return false
}

// IsTensor reports whether k is one of the tensor kinds (all stored as dtype, shape,
// data).
func IsTensor(k Kind) bool { return k == KindTensor || k == KindNDArray || k == KindWireTensor }

// Tensor is the wire codec's n-dimensional array, wire.NDArray: the one tensor type of
// Lakeshore. It is stored as its element type, its shape and its raw row-major bytes.
// DType names the element type in NumPy style ("float32", "int64", "uint8", ...);
// len(Data) must be the product of Shape times the element size (a put of an invalid
// tensor fails with *UnsupportedValueError). Values of wire.Tensor (the codec's
// extension for runtimes with their own tensor type) are stored the same way and read
// back as wire.Tensor.
type Tensor = wire.NDArray

// Field is one column of a queue's schema.
type Field struct {
	Name string
	Kind Kind
}

// Schema is a queue's ordered list of fields, oldest first.
type Schema struct {
	Fields []Field
}

// Kind returns the kind of field name and whether the schema has it.
func (s Schema) Kind(name string) (Kind, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f.Kind, true
		}
	}
	return "", false
}

// Reserved column names used inside fragments; records cannot use them.
const (
	ColIndex     = "_index"
	ColPartition = "_partition"
	ColSeq       = "_seq"
)

// fieldSep joins field names in meta.db (fieldsets, fragment field lists), so no field
// name may contain it.
const fieldSep = "\x1f"

// CheckFieldName checks a record's field name, the one rule of every store: 1–256 bytes
// of valid UTF-8 without the bytes \x1f (fieldSep) and \x00 (PostgreSQL's text holds
// none, and a C string ends at it), not a reserved column name. Errors: *InvalidError
// naming "record field name".
func CheckFieldName(name string) error {
	if name == "" || name == ColIndex || name == ColPartition || name == ColSeq || len(name) > 256 ||
		strings.ContainsAny(name, fieldSep+"\x00") || !utf8.ValidString(name) {
		return &InvalidError{Field: "record field name", Value: name,
			Rule: `1–256 bytes of valid UTF-8 without the bytes \x1f and \x00, and not one of the reserved names _index, _partition, _seq`}
	}
	return nil
}

// FieldValue is one normalized field of a record: the value is one of bool, int64,
// float64, string, []byte, []int64, []float64, Tensor, codecValue.
type FieldValue struct {
	Name string
	Kind Kind
	Val  any
}

// CodecValue is a value stored as wire-codec bytes (kind codec), or a tensor flavour tag.
type CodecValue struct {
	Bytes []byte
}

// NormRecord is a record with its fields normalized and sorted by name.
type NormRecord []FieldValue

// NormalizeRecord converts a user record into its normalized form. Nil values are
// dropped: a nil value means "no value", so the field is not produced for that sample.
func NormalizeRecord(rec Record) (NormRecord, error) {
	out := make(NormRecord, 0, len(rec))
	for name, v := range rec {
		if v == nil {
			continue
		}
		if err := CheckFieldName(name); err != nil {
			return nil, err
		}
		kind, val, err := normalizeValue(name, v)
		if err != nil {
			return nil, err
		}
		out = append(out, FieldValue{Name: name, Kind: kind, Val: val})
	}
	// An insertion sort: records have a few fields, and sort.Slice's reflection costs
	// more than the sort itself (it showed in PutBatch profiles).
	if len(out) > 16 {
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Name < out[j-1].Name; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// normalizeValue maps a Go value to its kind and normalized representation.
func normalizeValue(field string, v any) (Kind, any, error) {
	switch x := v.(type) {
	case bool:
		return KindBool, x, nil
	case int:
		return KindInt64, int64(x), nil
	case int8:
		return KindInt64, int64(x), nil
	case int16:
		return KindInt64, int64(x), nil
	case int32:
		return KindInt64, int64(x), nil
	case int64:
		return KindInt64, x, nil
	case uint8:
		return KindInt64, int64(x), nil
	case uint16:
		return KindInt64, int64(x), nil
	case uint32:
		return KindInt64, int64(x), nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return "", nil, &UnsupportedValueError{Field: field, GoType: "uint", Reason: "value exceeds the int64 range"}
		}
		return KindInt64, int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return "", nil, &UnsupportedValueError{Field: field, GoType: "uint64", Reason: "value exceeds the int64 range"}
		}
		return KindInt64, int64(x), nil
	case float32:
		return KindFloat64, float64(x), nil
	case float64:
		return KindFloat64, x, nil
	case string:
		return KindString, x, nil
	case []byte:
		return KindBytes, x, nil
	case []int64:
		return KindInt64List, x, nil
	case []int:
		return KindInt64List, convertInts(x), nil
	case []int32:
		return KindInt64List, convertInts(x), nil
	case []int16:
		return KindInt64List, convertInts(x), nil
	case []int8:
		return KindInt64List, convertInts(x), nil
	case []uint16:
		return KindInt64List, convertInts(x), nil
	case []uint32:
		return KindInt64List, convertInts(x), nil
	case []float64:
		return KindFloat64List, x, nil
	case []float32:
		out := make([]float64, len(x))
		for i, f := range x {
			out[i] = float64(f)
		}
		return KindFloat64List, out, nil
	case Tensor:
		return KindTensor, x, checkTensor(field, x)
	case *Tensor:
		if x == nil {
			return "", nil, &UnsupportedValueError{Field: field, GoType: "*Tensor", Reason: "nil pointer"}
		}
		return KindTensor, *x, checkTensor(field, *x)
	}
	if k, t, ok, err := WireTensor(field, v); ok {
		return k, t, err
	}
	b, err := WireMarshal(v)
	if err != nil {
		return "", nil, &UnsupportedValueError{Field: field, GoType: reflect.TypeOf(v).String(), Reason: err.Error()}
	}
	return KindCodec, CodecValue{Bytes: b}, nil
}

func convertInts[T int | int8 | int16 | int32 | uint16 | uint32](x []T) []int64 {
	out := make([]int64, len(x))
	for i, v := range x {
		out[i] = int64(v)
	}
	return out
}

// ConvertValue converts a normalized value of kind from to the (wider or equal) kind to.
func ConvertValue(v any, from, to Kind) any {
	if from == to {
		return v
	}
	switch {
	case from == KindInt64 && to == KindFloat64:
		return float64(v.(int64))
	case from == KindInt64List && to == KindFloat64List:
		x := v.([]int64)
		out := make([]float64, len(x))
		for i, f := range x {
			out[i] = float64(f)
		}
		return out
	}
	return v
}

// ArrowType returns the Arrow data type that stores kind k.
func ArrowType(k Kind) arrow.DataType {
	switch k {
	case KindBool:
		return arrow.FixedWidthTypes.Boolean
	case KindInt64:
		return arrow.PrimitiveTypes.Int64
	case KindFloat64:
		return arrow.PrimitiveTypes.Float64
	case KindString:
		return arrow.BinaryTypes.String
	case KindBytes, KindCodec:
		return arrow.BinaryTypes.Binary
	case KindInt64List:
		return arrow.ListOf(arrow.PrimitiveTypes.Int64)
	case KindFloat64List:
		return arrow.ListOf(arrow.PrimitiveTypes.Float64)
	case KindTensor, KindNDArray, KindWireTensor:
		return tensorType
	}
	panic("persist: unknown kind " + string(k))
}

// TensorArrowType returns the Arrow type of a tensor value (KindTensor, KindNDArray,
// KindWireTensor) in batches and Arrow bodies: struct<dtype: string, shape:
// list<int64>, data: binary>.
func TensorArrowType() *arrow.StructType { return tensorType }

var tensorType = arrow.StructOf(
	arrow.Field{Name: "dtype", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "shape", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	arrow.Field{Name: "data", Type: arrow.BinaryTypes.Binary, Nullable: true},
)

// Metadata keys written into fragments so that other readers (and ours) know how to
// decode a column back to what was put.
const (
	MetaKind        = "lakeshore.kind"        // field metadata: the Kind of the column
	MetaTensorWire  = "lakeshore.tensor_type" // field metadata on tensor columns: Go type put
	MetaFragmentKey = "lakeshore.fragment"    // schema metadata: "rows" or "fields"
)

// ArrowField returns the Arrow field for a schema field, with its kind in the metadata.
func ArrowField(f Field) arrow.Field {
	return arrow.Field{Name: f.Name, Type: ArrowType(f.Kind), Nullable: true,
		Metadata: arrow.NewMetadata([]string{MetaKind}, []string{string(f.Kind)})}
}

// Evolve checks the fields of recs against schema s and returns the evolved schema
// (new fields appended, widened kinds changed) and whether it changed. On an
// incompatible value it returns a *SchemaError and s unchanged.
func Evolve(s Schema, recs []NormRecord) (Schema, bool, error) {
	changed := false
	var out Schema
	pos := make(map[string]int, len(s.Fields))
	for i, f := range s.Fields {
		pos[f.Name] = i
	}
	for _, rec := range recs {
		for _, fv := range rec {
			i, ok := pos[fv.Name]
			if !ok {
				if !changed {
					out = Schema{Fields: append([]Field(nil), s.Fields...)}
					changed = true
				}
				pos[fv.Name] = len(out.Fields)
				out.Fields = append(out.Fields, Field{Name: fv.Name, Kind: fv.Kind})
				continue
			}
			cur := s.Fields
			if changed {
				cur = out.Fields
			}
			have := cur[i].Kind
			if have == fv.Kind {
				continue
			}
			w, ok := Widen(have, fv.Kind)
			if !ok {
				return s, false, &SchemaError{Field: fv.Name, Have: have, Got: fv.Kind}
			}
			if w != have {
				if !changed {
					out = Schema{Fields: append([]Field(nil), s.Fields...)}
					changed = true
				}
				out.Fields[i].Kind = w
			}
		}
	}
	if !changed {
		return s, false, nil
	}
	return out, true, nil
}

// String returns "name:kind, ..." for logs and errors.
func (s Schema) String() string {
	parts := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		parts[i] = f.Name + ":" + string(f.Kind)
	}
	return strings.Join(parts, ", ")
}
