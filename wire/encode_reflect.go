package wire

import (
	"math"
	"reflect"
	"slices"

	"github.com/tinylib/msgp/msgp"
)

// appendReflect appends values the fast path of appendValue does not know: pointers, named
// types, typed slices, arrays and maps, and structs.
func appendReflect(b []byte, rv reflect.Value, depth int) ([]byte, error) {
	switch rv.Kind() {
	case reflect.Invalid:
		return msgp.AppendNil(b), nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return msgp.AppendNil(b), nil
		}
		// Pointers count toward MaxDepth so that a cycle ends in an error, not a stack overflow.
		if err := checkDepth(depth, rv.Type().String()); err != nil {
			return b, err
		}
		return appendElem(b, rv.Elem(), depth+1)
	case reflect.Bool:
		return msgp.AppendBool(b, rv.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return appendInt(b, rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return msgp.AppendUint64(b, rv.Uint()), nil
	case reflect.Float32:
		return msgp.AppendFloat32(b, float32(rv.Float())), nil
	case reflect.Float64:
		return msgp.AppendFloat64(b, rv.Float()), nil
	case reflect.String:
		b, err := appendString(b, rv.String())
		if err != nil {
			err.(*EncodeError).Type = rv.Type().String()
		}
		return b, err
	case reflect.Slice:
		if rv.IsNil() {
			return msgp.AppendNil(b), nil
		}
		if rv.Type() == tupleType {
			return appendTuple(b, rv.Interface().(Tuple), depth)
		}
		return appendSeq(b, rv, depth)
	case reflect.Array:
		return appendSeq(b, rv, depth)
	case reflect.Map:
		if rv.IsNil() {
			return msgp.AppendNil(b), nil
		}
		return appendReflectMap(b, rv, depth)
	case reflect.Struct:
		if isWireType(rv.Type()) {
			if !rv.CanInterface() {
				return b, &EncodeError{Type: rv.Type().String(), Reason: "value is not accessible (unexported)"}
			}
			return appendValue(b, rv.Interface(), depth)
		}
		return appendStruct(b, rv, depth)
	}
	reason := "only nil, bools, numbers, strings, bytes, slices, arrays, maps with string keys, structs, " +
		"pointers to these and the wire types can be encoded"
	switch rv.Kind() {
	case reflect.Complex64, reflect.Complex128:
		reason = "complex numbers are not wire values; use an NDArray with dtype complex64 or complex128"
	case reflect.Uintptr, reflect.UnsafePointer:
		reason = "pointers as numbers are not wire values"
	}
	return b, &EncodeError{Type: rv.Type().String(), Reason: reason}
}

// appendElem appends a value reached through reflection, through the fast path when the
// value is accessible.
func appendElem(b []byte, rv reflect.Value, depth int) ([]byte, error) {
	if rv.CanInterface() {
		return appendValue(b, rv.Interface(), depth)
	}
	return appendReflect(b, rv, depth)
}

// appendSeq appends a slice or array: bin for a byte element kind, else an array.
func appendSeq(b []byte, rv reflect.Value, depth int) ([]byte, error) {
	typ := rv.Type().String()
	n := rv.Len()
	if n > math.MaxUint32 {
		return b, &EncodeError{Type: typ, Reason: "more than 2^32-1 elements"}
	}
	if rv.Type().Elem().Kind() == reflect.Uint8 {
		if rv.Kind() == reflect.Slice {
			return msgp.AppendBytes(b, rv.Bytes()), nil
		}
		b = msgp.AppendBytesHeader(b, uint32(n))
		for i := range n {
			b = append(b, byte(rv.Index(i).Uint()))
		}
		return b, nil
	}
	if err := checkDepth(depth, typ); err != nil {
		return b, err
	}
	b = msgp.AppendArrayHeader(b, uint32(n))
	var err error
	for i := range n {
		if b, err = appendElem(b, rv.Index(i), depth+1); err != nil {
			return b, withPath(err, indexSeg(i))
		}
	}
	return b, nil
}

func appendReflectMap(b []byte, rv reflect.Value, depth int) ([]byte, error) {
	typ := rv.Type().String()
	if rv.Type().Key().Kind() != reflect.String {
		return b, &EncodeError{Type: typ, Reason: "map keys must be strings (the wire has string-keyed maps only)"}
	}
	if err := checkDepth(depth, typ); err != nil {
		return b, err
	}
	keys := rv.MapKeys()
	if len(keys) > math.MaxUint32 {
		return b, &EncodeError{Type: typ, Reason: "more than 2^32-1 entries"}
	}
	slices.SortFunc(keys, func(x, y reflect.Value) int {
		switch xs, ys := x.String(), y.String(); {
		case xs < ys:
			return -1
		case xs > ys:
			return 1
		}
		return 0
	})
	b = msgp.AppendMapHeader(b, uint32(len(keys)))
	var err error
	for _, k := range keys {
		seg := keySeg(k.String())
		if b, err = appendString(b, k.String()); err != nil {
			return b, withPath(err, seg)
		}
		if b, err = appendElem(b, rv.MapIndex(k), depth+1); err != nil {
			return b, withPath(err, seg)
		}
	}
	return b, nil
}

// appendStruct appends a struct as a map of its fields (see Marshal for the rules).
func appendStruct(b []byte, rv reflect.Value, depth int) ([]byte, error) {
	if err := checkDepth(depth, rv.Type().String()); err != nil {
		return b, err
	}
	fields := structFields(rv.Type())
	values := make([]reflect.Value, 0, len(fields))
	names := make([]string, 0, len(fields))
	for _, f := range fields {
		fv, ok := fieldByIndex(rv, f.index)
		if !ok || f.omitEmpty && fv.IsZero() {
			continue
		}
		values = append(values, fv)
		names = append(names, f.name)
	}
	b = msgp.AppendMapHeader(b, uint32(len(values)))
	var err error
	for i, fv := range values {
		if b, err = appendString(b, names[i]); err != nil {
			return b, withPath(err, keySeg(names[i]))
		}
		if b, err = appendElem(b, fv, depth+1); err != nil {
			return b, withPath(err, keySeg(names[i]))
		}
	}
	return b, nil
}

// fieldByIndex is reflect.Value.FieldByIndex that reports false instead of panicking when
// the path crosses a nil embedded pointer.
func fieldByIndex(rv reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				return reflect.Value{}, false
			}
			rv = rv.Elem()
		}
		rv = rv.Field(x)
	}
	return rv, true
}
