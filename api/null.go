package api

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// One rule decides a null in a request body — JSON null, msgpack nil — in both encodings
// (docs/http-api.md, "Bodies"):
//
//   - a field that takes null itself (a payload, result or value; an object field such as
//     requirement or error; a per-key override of an admission block) reads it as it always
//     has;
//   - an optional field (its tags leave it out when zero: omitzero/omitempty) reads null as
//     absent, its default — so a client that sends None for an option it does not set
//     (the dreamlake-lakeshore client does) means what it would by leaving the key out;
//   - any other field (token, outcome, invocations, …: those the answers always carry and
//     /v1/openapi.json lists as required in answers) refuses null as invalid, naming the
//     field, rather than read it as 0 or "";
//   - an element of an array, or a value of a map, that does not take null refuses it.
//
// Before, JSON read every null as the field's zero value while msgpack refused nil for any
// field but the first kind.
//
// A refusal says "null" in both codecs ("want a string, got null"): JSON's null, msgpack's
// nil and Python's None are one value, and the word "nil" read to a user of the Python SDK
// (which speaks msgpack) as Go's own leaking out.

// takesNull reports whether a value of shape s may be null: a pointer, a payload, a field
// of type any.
func (s *shape) takesNull() bool {
	return s.nullable || s.kind == shapeAny || s.kind == shapeValue
}

// nullMember decides a null as the value of object field f at path, in codec c: nil when
// it is taken (f takes null, or f is optional and null is absent), else the
// *plane.InvalidError naming the field.
func (f field) nullMember(path string, c Codec) error {
	if f.shape.takesNull() || f.optional {
		return nil
	}
	return &plane.InvalidError{Field: cmpOr(path, "request body"),
		Rule: fmt.Sprintf("want %s, got null: the field is required (null means absent only for an optional field)", f.shape.describeIn(c))}
}

// nullElement decides a null as an element of an array or a value of a map of shape s (the
// element's shape) at path, in codec c: nil when s takes null, else the refusal.
func (s *shape) nullElement(path string, c Codec) error {
	if s.takesNull() {
		return nil
	}
	return &plane.InvalidError{Field: cmpOr(path, "request body"), Rule: fmt.Sprintf("want %s, got null", s.describeIn(c))}
}

// jsonNulls applies the rule above to a JSON request body that encoding/json/v2 decoded
// into v without error (it reads every null as a zero value, which is right for the
// nulls the rule takes): it walks data against v's shape and returns the refusal of the
// first null the rule refuses, in document order. A body without the bytes "null" is not
// walked.
func jsonNulls(data []byte, v any) error {
	if !bytes.Contains(data, []byte("null")) {
		return nil
	}
	s := shapeOfValue(v)
	if s == nil {
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if err := s.walkJSON(dec, ""); err != nil {
		if _, ok := err.(*plane.InvalidError); ok {
			return err
		}
		return jsonError(err) // not reached: the body decoded already
	}
	return nil
}

// walkJSON reads the next value of dec, of shape s, at path, refusing a null inside it that
// the rule refuses. The kinds match s: the body decoded already.
func (s *shape) walkJSON(dec *jsontext.Decoder, path string) error {
	if s.kind != shapeObject && s.kind != shapeMap && s.kind != shapeArray {
		return dec.SkipValue()
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case '{':
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return err
			}
			key := name.String()
			var elem *shape
			if s.kind == shapeObject {
				f, ok := s.fields[key]
				if !ok { // refused by the decoder already; not reached
					if err := dec.SkipValue(); err != nil {
						return err
					}
					continue
				}
				if dec.PeekKind() == 'n' {
					if err := f.nullMember(join(path, key), JSON); err != nil {
						return err
					}
				}
				elem = f.shape
			} else {
				elem = s.elem
				if dec.PeekKind() == 'n' {
					if err := elem.nullElement(join(path, key), JSON); err != nil {
						return err
					}
				}
			}
			if err := elem.walkJSON(dec, join(path, key)); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.PeekKind() != ']'; i++ {
			at := path + "[" + strconv.Itoa(i) + "]"
			if dec.PeekKind() == 'n' {
				if err := s.elem.nullElement(at, JSON); err != nil {
					return err
				}
			}
			if err := s.elem.walkJSON(dec, at); err != nil {
				return err
			}
		}
	default: // null (taken: the walk refuses before reading a refused one), or a scalar
		return nil
	}
	_, err = dec.ReadToken() // '}' or ']'
	return err
}

// shapeOfValue is the shape of what v, a pointer to a body, points to; nil for anything else.
func shapeOfValue(v any) *shape {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil
	}
	return shapeOf(rv.Type().Elem())
}
