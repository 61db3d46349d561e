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

// A msgpack request body is checked against its route's shape before the generated decoder
// reads it, so that msgpack bodies behave like JSON ones (Codec.UnmarshalRequest): a field
// the route does not have is refused, not skipped, and a value of the wrong kind is refused
// with the field's name in the API's terms ("invocations[1].priority") and what it takes,
// never a Go type or a decoder's wording. The shape of each body type is derived once from
// its msg tags (reflection once per type, not per request); the check walks the generic
// form wire.Decode already made of the body.

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
	fields   map[string]*shape
	elem     *shape
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
	s := buildShape(t, map[reflect.Type]*shape{})
	shapes.Store(t, s)
	return s
}

func buildShape(t reflect.Type, seen map[reflect.Type]*shape) *shape {
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
		// The generated decoder takes nil only for pointers and payloads, not for a list
		// or a map: nor does the check.
		s := &shape{kind: shapeArray, nullable: nullable}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen)
		return s
	case reflect.Map:
		s := &shape{kind: shapeMap, nullable: nullable}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen)
		return s
	case reflect.Struct:
		s := &shape{kind: shapeObject, nullable: nullable, fields: map[string]*shape{}}
		seen[t] = s
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("msg"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			s.fields[name] = buildShape(f.Type, seen)
		}
		return s
	}
	return &shape{kind: shapeAny, nullable: true}
}

// checkShape checks a msgpack request body against v's shape. v is a pointer to a body.
// Errors: *plane.InvalidError naming the field and what it takes.
func checkShape(data []byte, v any) error {
	generic, err := wire.Decode(data)
	if err != nil {
		return &plane.InvalidError{Field: "request body", Rule: "send one msgpack map of the route's fields: " + strings.TrimPrefix(err.Error(), "wire: ")}
	}
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return &plane.InvalidError{Field: "request body", Rule: "send one msgpack map of the route's fields"}
	}
	s := shapeOf(t.Elem())
	if s.kind == shapeObject && generic == nil {
		return &plane.InvalidError{Field: "request body", Rule: "send one msgpack map of the route's fields (nil is not one; send an empty map)"}
	}
	return s.check("", generic)
}

func (s *shape) check(path string, v any) error {
	if v == nil {
		if s.nullable || s.kind == shapeAny {
			return nil
		}
		return s.mismatch(path, v)
	}
	switch s.kind {
	case shapeAny:
		return nil
	case shapeString:
		if _, ok := v.(string); ok {
			return nil
		}
	case shapeInt:
		switch v.(type) {
		case int64, uint64:
			return nil
		}
	case shapeFloat:
		switch v.(type) {
		case float32, float64:
			return nil
		}
	case shapeBool:
		if _, ok := v.(bool); ok {
			return nil
		}
	case shapeBytes, shapeValue:
		if _, ok := v.([]byte); ok {
			return nil
		}
	case shapeTime:
		if _, ok := v.(time.Time); ok {
			return nil
		}
	case shapeArray:
		if a, ok := v.([]any); ok {
			for i, e := range a {
				if err := s.elem.check(path+"["+strconv.Itoa(i)+"]", e); err != nil {
					return err
				}
			}
			return nil
		}
	case shapeMap:
		if m, ok := v.(map[string]any); ok {
			for _, k := range sortedKeys(m) {
				if err := s.elem.check(join(path, k), m[k]); err != nil {
					return err
				}
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
				if err := f.check(join(path, k), m[k]); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return s.mismatch(path, v)
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
func (s *shape) describe() string {
	var d string
	switch s.kind {
	case shapeString:
		d = "a string"
	case shapeInt:
		d = "an integer"
	case shapeFloat:
		d = "a float"
	case shapeBool:
		d = "true or false"
	case shapeBytes:
		d = "a bin"
	case shapeTime:
		d = "a timestamp"
	case shapeValue:
		return "a bin holding a msgpack value, or nil"
	case shapeObject, shapeMap:
		d = "a map"
	case shapeArray:
		d = "an array"
	default:
		d = "a value"
	}
	if s.nullable {
		d += " or nil"
	}
	return d
}

// describeWire names the kind of a value of wire.Decode's generic form.
func describeWire(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
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
