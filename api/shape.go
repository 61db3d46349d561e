package api

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// A msgpack request body is decoded once: wire.Decode reads the bytes into their generic
// form (checking nesting, declared lengths against the bytes that follow, UTF-8, str keys,
// so a hostile 6-byte body cannot make anything allocate for the element count it
// declares), and one walk of that form against the route's shape both checks it and fills
// the typed body. So msgpack bodies behave like JSON ones (Codec.UnmarshalRequest): a field
// the route does not have is refused, not skipped, and a value of the wrong kind is refused
// with the field's name in the API's terms ("invocations[1].priority") and what it takes,
// never a Go type or a decoder's wording. The shape of each body type is derived once from
// its msg tags (reflection once per type, not per request). The walk stores what the
// msgp-generated decoder (which reads answers, Codec.Unmarshal) would: times in the local
// zone, an empty array into an absent list as nil, the same element limits (the
// //msgp:limit directives); a field of type any takes the generic form itself. A nil is
// decided by the null rule both codecs share (null.go).

// shapeKind is what one field takes.
type shapeKind int

const (
	shapeAny    shapeKind = iota // anything (a field of type any, or a type decoding itself)
	shapeString                  // str
	shapeInt                     // int or uint that fits
	shapeFloat                   // float 32 or 64
	shapeBool                    // bool
	shapeBytes                   // bin
	shapeTime                    // timestamp (ext -1)
	shapeValue                   // a payload: bin holding wire-encoded bytes, or nil
	shapeObject                  // map of named fields
	shapeMap                     // map of str to elem
	shapeArray                   // array of elem
)

// shape is the expected form of one value.
type shape struct {
	kind     shapeKind
	nullable bool // nil is taken (a pointer, a payload)
	fields   map[string]field
	elem     *shape
	limit    int // the most elements of an array or map the generated decoder takes; 0: any
}

// field is one named field of an object: its index in the struct, its shape, and whether
// it is optional (its tags omit it when zero: a null there is absent, see nullMember).
type field struct {
	index    int
	shape    *shape
	optional bool
}

// The element limits of the //msgp:limit directives: data.go's, and types.go's and
// providers.go's. A request body is held to what the generated decoder of its type takes.
const (
	limitArrays     = 1_000_000
	limitMaps       = 100_000
	dataLimitArrays = 10_000_000
)

// limits returns the element limits of struct type t's generated decoder: the data-queue
// bodies (data.go, named Data…) take longer arrays.
func limits(t reflect.Type) (arrays, maps int) {
	if strings.HasPrefix(t.Name(), "Data") {
		return dataLimitArrays, limitMaps
	}
	return limitArrays, limitMaps
}

var (
	shapes        sync.Map // reflect.Type → *shape
	rawMessageTyp = reflect.TypeFor[[]byte]()
)

// shapeOf returns the shape of t, made once.
func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	arrays, maps := limits(t)
	s := buildShape(t, map[reflect.Type]*shape{}, arrays, maps)
	shapes.Store(t, s)
	return s
}

// buildShape makes the shape of t; arrays and maps are the element limits of the struct
// type whose field t is.
func buildShape(t reflect.Type, seen map[reflect.Type]*shape, arrays, maps int) *shape {
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	switch {
	case t == valueType:
		return &shape{kind: shapeValue, nullable: true}
	case t == timeType:
		return &shape{kind: shapeTime, nullable: nullable}
	case t == rawMessageTyp:
		return &shape{kind: shapeBytes, nullable: nullable}
	}
	if s, ok := seen[t]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.String:
		return &shape{kind: shapeString, nullable: nullable}
	case reflect.Bool:
		return &shape{kind: shapeBool, nullable: nullable}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &shape{kind: shapeInt, nullable: nullable}
	case reflect.Float32, reflect.Float64:
		return &shape{kind: shapeFloat, nullable: nullable}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &shape{kind: shapeBytes, nullable: nullable}
		}
		// A list or a map is not nullable: nil for one is decided by the null rule of
		// null.go (absent for an optional member, refused elsewhere).
		s := &shape{kind: shapeArray, nullable: nullable, limit: arrays}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen, arrays, maps)
		return s
	case reflect.Map:
		s := &shape{kind: shapeMap, nullable: nullable, limit: maps}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen, arrays, maps)
		return s
	case reflect.Struct:
		s := &shape{kind: shapeObject, nullable: nullable, fields: map[string]field{}}
		seen[t] = s
		arrays, maps := limits(t)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("msg"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			_, jsonOpts, _ := strings.Cut(f.Tag.Get("json"), ",")
			s.fields[name] = field{index: i, shape: buildShape(f.Type, seen, arrays, maps),
				optional: strings.Contains(opts, "omit") || strings.Contains(jsonOpts, "omit")}
		}
		return s
	}
	return &shape{kind: shapeAny, nullable: true}
}

// decodeRequest decodes a msgpack request body into v, a pointer to a body, checking it
// against v's shape on the way. Errors: *plane.InvalidError naming the field and what it
// takes.
func decodeRequest(data []byte, v any) error {
	generic, err := wire.Decode(data)
	if err != nil {
		return &plane.InvalidError{Field: "request body", Rule: "send one msgpack map of the route's fields: " + strings.TrimPrefix(err.Error(), "wire: ")}
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &plane.InvalidError{Field: "request body", Rule: "send one msgpack map of the route's fields"}
	}
	s := shapeOf(rv.Type().Elem())
	if s.kind == shapeObject && generic == nil {
		return &plane.InvalidError{Field: "request body", Rule: "send one msgpack map of the route's fields (nil is not one; send an empty map)"}
	}
	var late error
	if err := s.decode("", generic, rv.Elem(), &late); err != nil {
		return err
	}
	return late
}

// decode checks v, in wire.Decode's generic form, against s and stores it in dst. A value
// of the right kind that dst cannot hold (a number out of its range, more elements than the
// generated decoder takes) sets *late, if unset, and the walk goes on: a value of the wrong
// kind anywhere in the body is the error reported, as when the check ran before the
// generated decoder.
func (s *shape) decode(path string, v any, dst reflect.Value, late *error) error {
	if v == nil {
		if s.nullable || s.kind == shapeAny {
			dst.SetZero()
			return nil
		}
		return s.mismatch(path, v)
	}
	for dst.Kind() == reflect.Pointer {
		if dst.IsNil() {
			dst.Set(reflect.New(dst.Type().Elem()))
		}
		dst = dst.Elem()
	}
	switch s.kind {
	case shapeAny:
		if g := reflect.ValueOf(v); g.Type().AssignableTo(dst.Type()) {
			dst.Set(g)
		} else {
			setLate(late)
		}
		return nil
	case shapeString:
		if x, ok := v.(string); ok {
			dst.SetString(x)
			return nil
		}
	case shapeInt:
		switch x := v.(type) {
		case int64:
			storeInt(path, dst, x, late)
			return nil
		case uint64: // above every int64
			if dst.CanUint() && !dst.OverflowUint(x) {
				dst.SetUint(x)
			} else {
				setLateError(late, outOfRange(path, dst))
			}
			return nil
		}
	case shapeFloat:
		switch x := v.(type) {
		case float32:
			dst.SetFloat(float64(x))
			return nil
		case float64:
			if dst.Kind() == reflect.Float32 {
				setLate(late) // the generated decoder reads only a float 32 into one
			} else {
				dst.SetFloat(x)
			}
			return nil
		}
	case shapeBool:
		if x, ok := v.(bool); ok {
			dst.SetBool(x)
			return nil
		}
	case shapeBytes:
		if x, ok := v.([]byte); ok {
			dst.SetBytes(x)
			return nil
		}
	case shapeValue:
		if x, ok := v.([]byte); ok {
			dst.Set(reflect.ValueOf(Value{Wire: x}))
			return nil
		}
	case shapeTime:
		if x, ok := v.(time.Time); ok {
			dst.Set(reflect.ValueOf(x.Local()))
			return nil
		}
	case shapeArray:
		if a, ok := v.([]any); ok {
			if s.limit > 0 && len(a) > s.limit {
				setLateError(late, tooMany(path, s.limit))
			}
			if dst.Cap() >= len(a) {
				dst.SetLen(len(a))
			} else {
				dst.Set(reflect.MakeSlice(dst.Type(), len(a), len(a)))
			}
			for i, e := range a {
				if err := s.elem.decode(path+"["+strconv.Itoa(i)+"]", e, dst.Index(i), late); err != nil {
					return err
				}
			}
			return nil
		}
	case shapeMap:
		if m, ok := v.(map[string]any); ok {
			if s.limit > 0 && len(m) > s.limit {
				setLateError(late, tooMany(path, s.limit))
			}
			if dst.IsNil() {
				dst.Set(reflect.MakeMapWithSize(dst.Type(), len(m)))
			} else {
				dst.Clear()
			}
			for _, k := range sortedKeys(m) {
				e := reflect.New(dst.Type().Elem()).Elem()
				if err := s.elem.decode(join(path, k), m[k], e, late); err != nil {
					return err
				}
				dst.SetMapIndex(reflect.ValueOf(k).Convert(dst.Type().Key()), e)
			}
			return nil
		}
	case shapeObject:
		if m, ok := v.(map[string]any); ok {
			for _, k := range sortedKeys(m) {
				f, ok := s.fields[k]
				if !ok {
					return &plane.InvalidError{Field: "request body field", Value: join(path, k),
						Rule: "unknown field (names are case-sensitive); check it against /v1/openapi.json"}
				}
				if m[k] == nil {
					if err := f.nullMember(join(path, k), Msgpack); err != nil {
						return err
					}
					dst.Field(f.index).SetZero()
					continue
				}
				if err := f.shape.decode(join(path, k), m[k], dst.Field(f.index), late); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return s.mismatch(path, v)
}

// storeInt stores i in dst, an int or uint, or sets *late when dst cannot hold it.
func storeInt(path string, dst reflect.Value, i int64, late *error) {
	switch {
	case dst.CanInt() && !dst.OverflowInt(i):
		dst.SetInt(i)
	case dst.CanUint() && i >= 0 && !dst.OverflowUint(uint64(i)):
		dst.SetUint(uint64(i))
	default:
		setLateError(late, outOfRange(path, dst))
	}
}

// setLate records that a value of the right kind does not fit its field, unless something
// was recorded already. The words are the generated decoder's rule: the value is of the
// kind the document gives, but out of what the field holds.
func setLate(late *error) {
	setLateError(late, &plane.InvalidError{Field: "request body", Rule: "send one msgpack map of the route's fields, each of the kind /v1/openapi.json gives"})
}

// setLateError is setLate with the error to record: one naming the field and what it
// holds, as the JSON decoder's (jsonError) for the same value.
func setLateError(late *error, err *plane.InvalidError) {
	if *late == nil {
		*late = err
	}
}

// outOfRange is the late error of a number of the right kind that dst cannot hold, in the
// words JSON bodies get: the field and the range (`max_attempts: the number is out of
// range: use an integer from …`).
func outOfRange(path string, dst reflect.Value) *plane.InvalidError {
	return &plane.InvalidError{Field: cmpOr(path, "request body"), Rule: "the number is out of range: " + numberRange(dst.Type())}
}

// tooMany is the late error of an array or map with more elements than the field takes.
func tooMany(path string, limit int) *plane.InvalidError {
	return &plane.InvalidError{Field: cmpOr(path, "request body"), Rule: fmt.Sprintf("send at most %d elements", limit)}
}

func (s *shape) mismatch(path string, v any) error {
	field := cmpOr(path, "request body")
	rule := fmt.Sprintf("want %s, got %s", s.describe(), describeWire(v))
	if s.kind == shapeFloat {
		switch x := v.(type) {
		case int64:
			if math.Abs(float64(x)) < 1<<53 {
				rule += " (send numbers of this field as msgpack floats)"
			}
		case uint64:
			rule += " (send numbers of this field as msgpack floats)"
		}
	}
	return &plane.InvalidError{Field: field, Rule: rule}
}

// describe names what s takes, in msgpack terms.
func (s *shape) describe() string { return s.describeIn(Msgpack) }

// describeIn names what s takes in codec c's terms: msgpack's, or JSON's for any other.
func (s *shape) describeIn(c Codec) string {
	pick := func(msgpack, json string) string {
		if c == Msgpack {
			return msgpack
		}
		return json
	}
	var d string
	switch s.kind {
	case shapeString:
		d = "a string"
	case shapeInt:
		d = "an integer"
	case shapeFloat:
		d = pick("a float", "a number")
	case shapeBool:
		d = "true or false"
	case shapeBytes:
		d = pick("a bin", "a base64 string")
	case shapeTime:
		d = pick("a timestamp", "an RFC 3339 time string")
	case shapeValue:
		return pick("a bin holding a msgpack value, or null", "a JSON value")
	case shapeObject, shapeMap:
		d = pick("a map", "an object")
	case shapeArray:
		d = "an array"
	default:
		d = "a value"
	}
	if s.nullable {
		d += " or null"
	}
	return d
}

// describeWire names the kind of a value of wire.Decode's generic form.
func describeWire(v any) string {
	switch v.(type) {
	case nil:
		return "null" // msgpack's nil, Python's None: one word in every codec's messages
	case bool:
		return "a boolean"
	case int64, uint64:
		return "an integer"
	case float32, float64:
		return "a float"
	case string:
		return "a string"
	case []byte:
		return "a bin"
	case []any:
		return "an array"
	case map[string]any:
		return "a map"
	case time.Time:
		return "a timestamp"
	}
	return "an extension value"
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
