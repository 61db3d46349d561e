package wire

import (
	"fmt"
	"reflect"
	"slices"
	"time"
)

// Unmarshal decodes data (one msgpack value) into the value v points to. With *any it stores
// the generic form of Decode. Otherwise the generic form is fitted to the Go type:
//
//   - bool ← bool; integer kinds ← int within range; float kinds ← int or float (a float64
//     into a float32 rounds); string kinds ← str; []byte kinds ← bin
//   - slices ← array or tuple; arrays ← array or bin of exactly their length
//   - maps with string-kind keys ← map (merged into a non-nil map)
//   - structs ← map, keys matched exactly against the names Marshal writes; unknown keys
//     are ignored and absent fields keep their value
//   - pointers ← the value for their target (allocated if nil); interfaces ← the generic form
//     if it implements them
//   - time.Time, NDArray, Tensor, Image, Tuple, Thunk ← their own extension only
//   - nil sets any target to its zero value
//
// Errors: *DecodeError (Is ErrMalformed) as from Decode; *MismatchError (Is ErrMismatch) when
// a value does not fit, with the path; *EncodeError (Is ErrUnsupported) when v is not a
// non-nil pointer. After a mismatch, v may have been partly filled.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &EncodeError{Type: fmt.Sprintf("%T", v), Reason: "Unmarshal needs a non-nil pointer"}
	}
	val, err := Decode(data)
	if err != nil {
		return err
	}
	switch p := v.(type) {
	case *any:
		*p = val
		return nil
	case *map[string]any:
		if m, ok := val.(map[string]any); ok {
			*p = m
			return nil
		}
	}
	return finishPath(assign(rv.Elem(), val))
}

// wireKind names the wire kind of a generic value, for MismatchError.Wire.
func wireKind(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "bool"
	case int64, uint64:
		return "int"
	case float32:
		return "float32"
	case float64:
		return "float64"
	case string:
		return "str"
	case []byte:
		return "bin"
	case []any:
		return "array"
	case map[string]any:
		return "map"
	case NDArray:
		return "ndarray"
	case Tensor:
		return "tensor"
	case Image:
		return "image"
	case Tuple:
		return "tuple"
	case Thunk:
		return "thunk"
	case time.Time:
		return "timestamp"
	}
	return fmt.Sprintf("%T", v)
}

func mismatch(dst reflect.Value, src any, reason string) error {
	return &MismatchError{Wire: wireKind(src), Type: dst.Type().String(), Reason: reason}
}

// assign stores the generic value src into the settable dst.
func assign(dst reflect.Value, src any) error {
	t := dst.Type()
	if src == nil {
		dst.SetZero()
		return nil
	}
	if isWireType(t) {
		sv := reflect.ValueOf(src)
		if sv.Type() != t {
			return mismatch(dst, src, "")
		}
		dst.Set(sv)
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		sv := reflect.ValueOf(src)
		if !sv.Type().AssignableTo(t) {
			return mismatch(dst, src, "")
		}
		dst.Set(sv)
		return nil
	case reflect.Pointer:
		if dst.IsNil() {
			dst.Set(reflect.New(t.Elem()))
		}
		return assign(dst.Elem(), src)
	case reflect.Bool:
		x, ok := src.(bool)
		if !ok {
			return mismatch(dst, src, "")
		}
		dst.SetBool(x)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, ok := src.(int64)
		if !ok {
			if _, big := src.(uint64); big {
				return mismatch(dst, src, fmt.Sprintf("%d overflows %s", src, t))
			}
			return mismatch(dst, src, "")
		}
		if dst.OverflowInt(x) {
			return mismatch(dst, src, fmt.Sprintf("%d overflows %s", x, t))
		}
		dst.SetInt(x)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var x uint64
		switch s := src.(type) {
		case int64:
			if s < 0 {
				return mismatch(dst, src, fmt.Sprintf("%d is negative", s))
			}
			x = uint64(s)
		case uint64:
			x = s
		default:
			return mismatch(dst, src, "")
		}
		if dst.OverflowUint(x) {
			return mismatch(dst, src, fmt.Sprintf("%d overflows %s", x, t))
		}
		dst.SetUint(x)
		return nil
	case reflect.Float32, reflect.Float64:
		switch s := src.(type) {
		case float64:
			dst.SetFloat(s)
		case float32:
			dst.SetFloat(float64(s))
		case int64:
			dst.SetFloat(float64(s))
		case uint64:
			dst.SetFloat(float64(s))
		default:
			return mismatch(dst, src, "")
		}
		return nil
	case reflect.String:
		s, ok := src.(string)
		if !ok {
			return mismatch(dst, src, "")
		}
		dst.SetString(s)
		return nil
	case reflect.Slice:
		return assignSlice(dst, src)
	case reflect.Array:
		return assignArray(dst, src)
	case reflect.Map:
		return assignMap(dst, src)
	case reflect.Struct:
		return assignStruct(dst, src)
	}
	return mismatch(dst, src, "the Go type cannot hold wire values")
}

// elements returns the elements of an array or tuple value.
func elements(src any) ([]any, bool) {
	switch s := src.(type) {
	case []any:
		return s, true
	case Tuple:
		return s, true
	}
	return nil, false
}

func assignSlice(dst reflect.Value, src any) error {
	t := dst.Type()
	if t.Elem().Kind() == reflect.Uint8 {
		s, ok := src.([]byte)
		if !ok {
			return mismatch(dst, src, "")
		}
		dst.Set(reflect.ValueOf(s).Convert(t))
		return nil
	}
	list, ok := elements(src)
	if !ok {
		return mismatch(dst, src, "")
	}
	out := reflect.MakeSlice(t, len(list), len(list))
	for i, e := range list {
		if err := assign(out.Index(i), e); err != nil {
			return withPath(err, indexSeg(i))
		}
	}
	dst.Set(out)
	return nil
}

func assignArray(dst reflect.Value, src any) error {
	n := dst.Len()
	if s, ok := src.([]byte); ok && dst.Type().Elem().Kind() == reflect.Uint8 {
		if len(s) != n {
			return mismatch(dst, src, fmt.Sprintf("%d bytes; want %d", len(s), n))
		}
		for i, c := range s {
			dst.Index(i).SetUint(uint64(c))
		}
		return nil
	}
	list, ok := elements(src)
	if !ok {
		return mismatch(dst, src, "")
	}
	if len(list) != n {
		return mismatch(dst, src, fmt.Sprintf("%d elements; want %d", len(list), n))
	}
	for i, e := range list {
		if err := assign(dst.Index(i), e); err != nil {
			return withPath(err, indexSeg(i))
		}
	}
	return nil
}

func assignMap(dst reflect.Value, src any) error {
	t := dst.Type()
	m, ok := src.(map[string]any)
	if !ok {
		return mismatch(dst, src, "")
	}
	if t.Key().Kind() != reflect.String {
		return mismatch(dst, src, "map keys must be strings")
	}
	if dst.IsNil() {
		dst.Set(reflect.MakeMapWithSize(t, len(m)))
	}
	// Sorted so that, of several bad entries, the same one is reported every time.
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	elem := reflect.New(t.Elem()).Elem()
	for _, k := range keys {
		elem.SetZero()
		if err := assign(elem, m[k]); err != nil {
			return withPath(err, keySeg(k))
		}
		dst.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), elem)
	}
	return nil
}

func assignStruct(dst reflect.Value, src any) error {
	m, ok := src.(map[string]any)
	if !ok {
		return mismatch(dst, src, "")
	}
	for _, f := range structFields(dst.Type()) {
		v, present := m[f.name]
		if !present {
			continue
		}
		fv, err := settableField(dst, f.index)
		if err != nil {
			return withPath(err, keySeg(f.name))
		}
		if err := assign(fv, v); err != nil {
			return withPath(err, keySeg(f.name))
		}
	}
	return nil
}

// settableField walks index from the struct dst, allocating nil embedded pointers.
func settableField(dst reflect.Value, index []int) (reflect.Value, error) {
	for i, x := range index {
		if i > 0 && dst.Kind() == reflect.Pointer {
			if dst.IsNil() {
				if !dst.CanSet() {
					return reflect.Value{}, &MismatchError{Wire: "map", Type: dst.Type().String(),
						Reason: "cannot allocate a nil pointer to an unexported embedded struct"}
				}
				dst.Set(reflect.New(dst.Type().Elem()))
			}
			dst = dst.Elem()
		}
		dst = dst.Field(x)
	}
	return dst, nil
}
