package api

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"mime"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/tinylib/msgp/msgp"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The content types of request and response bodies.
const (
	// ContentTypeMsgpack is the SDKs' default.
	ContentTypeMsgpack = "application/msgpack"
	// ContentTypeJSON is for curl, browsers and scripts.
	ContentTypeJSON = "application/json"
	// ContentTypeEventStream is the SSE live stream of frames.
	ContentTypeEventStream = "text/event-stream"
)

// AnswerDecodeError is the error of a client (the HTTP plane, the HTTP data store) whose
// successful answer did not decode (err): an answer whose Content-Type is neither msgpack,
// JSON nor Arrow is said to be no Lakeshore answer at all (another web service at the URL,
// a captive portal, a proxy's page) instead of quoting the decoder on it; any other is
// "decode answer: " and err.
func AnswerDecodeError(contentType string, err error) error {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case ContentTypeMsgpack, ContentTypeJSON, ContentTypeArrow:
		return fmt.Errorf("decode answer: %w", err)
	}
	return fmt.Errorf("not a Lakeshore answer (Content-Type %s): is this a Lakeshore server's URL (check LAKESHORE_URL)?", cmp.Or(contentType, "none"))
}

// Codec is one body encoding.
type Codec int

// The codecs.
const (
	// JSON bodies: encoding/json/v2 semantics (github.com/go-json-experiment/json), values
	// mapped by JSONToWire and WireToJSON.
	JSON Codec = iota
	// Msgpack bodies: the msgp-generated code of types_gen.go, values as bin.
	Msgpack
)

// Body is a type with msgp-generated methods: every body type of this package.
type Body interface {
	msgp.Marshaler
	msgp.Unmarshaler
}

// ContentType returns the media type c writes.
func (c Codec) ContentType() string {
	if c == Msgpack {
		return ContentTypeMsgpack
	}
	return ContentTypeJSON
}

// CodecFor returns the codec of a Content-Type header value. Errors: ErrUnsupportedMediaType
// (wrapped, naming what is accepted) for anything but msgpack (also application/x-msgpack,
// application/vnd.msgpack) and JSON.
func CodecFor(contentType string) (Codec, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, fmt.Errorf("%w: Content-Type %q: use %s or %s", ErrUnsupportedMediaType, contentType, ContentTypeJSON, ContentTypeMsgpack)
	}
	switch mt {
	case ContentTypeMsgpack, "application/x-msgpack", "application/vnd.msgpack":
		return Msgpack, nil
	case ContentTypeJSON:
		return JSON, nil
	}
	return 0, fmt.Errorf("%w: Content-Type %q: use %s or %s", ErrUnsupportedMediaType, mt, ContentTypeJSON, ContentTypeMsgpack)
}

// Marshal encodes v, a body of this package (a pointer or a value).
func (c Codec) Marshal(v any) ([]byte, error) {
	if c == Msgpack {
		m, ok := v.(msgp.Marshaler)
		if !ok {
			return nil, fmt.Errorf("api: %T is not a body", v)
		}
		return m.MarshalMsg(nil)
	}
	return json.Marshal(v, json.Deterministic(true))
}

// Unmarshal decodes one body from data into v (a pointer to a body), rejecting trailing
// bytes and ignoring members v does not have (answers from a newer server). Errors:
// *plane.InvalidError saying what is wrong.
func (c Codec) Unmarshal(data []byte, v any) error {
	return c.unmarshal(data, v, false)
}

// UnmarshalRequest is Unmarshal for a request body. In JSON it refuses members v does not
// have (a misspelt "prority" is refused, not dropped) and matches names case-sensitively;
// errors name the field in JSON terms ("invocations[1].priority"), never a Go type. A null
// (JSON null, msgpack nil) is read by one rule in both codecs (null.go): absent for an
// optional field, refused for a required one or a list element that takes none.
// Errors: *plane.InvalidError.
func (c Codec) UnmarshalRequest(data []byte, v any) error {
	return c.unmarshal(data, v, true)
}

func (c Codec) unmarshal(data []byte, v any, strict bool) error {
	if c == Msgpack {
		u, ok := v.(msgp.Unmarshaler)
		if !ok {
			return fmt.Errorf("api: %T is not a body", v)
		}
		// A request body is read by the wire codec and checked against the route's
		// fields and their kinds while filling v, in one walk (see shape.go). Answers come
		// from the server the client chose and take the generated decoder.
		if strict {
			if len(data) == 1 && data[0] == 0xc0 {
				return &plane.InvalidError{Field: "request body", Rule: "send one msgpack map (nil is not one; send an empty map, 0x80)"}
			}
			return decodeRequest(data, v)
		}
		rest, err := u.UnmarshalMsg(data)
		if err == nil && len(rest) > 0 {
			return &plane.InvalidError{Field: "request body", Rule: fmt.Sprintf("send one msgpack map of the route's fields: %d bytes follow it", len(rest))}
		}
		if err != nil {
			// The decoder's words name Go types and fields: say only what is wrong.
			return &plane.InvalidError{Field: "request body", Rule: "the answer is not a msgpack map of the route's fields"}
		}
		return nil
	}
	if len(data) == 0 {
		return &plane.InvalidError{Field: "request body", Rule: "send one JSON object (an empty body is not one; send {})"}
	}
	if strict && string(bytes.TrimSpace(data)) == "null" {
		return &plane.InvalidError{Field: "request body", Rule: "send one JSON object (null is not one; send {})"}
	}
	err := json.Unmarshal(data, v, json.RejectUnknownMembers(strict))
	if err != nil {
		return jsonError(err)
	}
	if strict {
		// encoding/json/v2 reads every null as a zero value; a request body holds to the
		// one null rule of both encodings (null.go).
		return jsonNulls(data, v)
	}
	return nil
}

// FieldName turns a JSON Pointer ("/invocations/1/payload") into the field name errors use
// ("invocations[1].payload").
func FieldName(ptr string) string {
	return shortPointer(fieldName(ptr))
}

func fieldName(ptr string) string {
	var sb strings.Builder
	for tok := range jsontext.Pointer(ptr).Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && sb.Len() > 0 {
			sb.WriteString("[" + tok + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(tok)
	}
	return sb.String()
}

// jsonError turns an error of encoding/json/v2 into a *plane.InvalidError in JSON terms.
func jsonError(err error) error {
	var ve *ValueError
	var se *json.SemanticError
	var sy *jsontext.SyntacticError
	switch {
	case errors.As(err, &se) && errors.As(err, &ve):
		field := FieldName(string(se.JSONPointer))
		if ve.Path != "" { // a path in the value, elided by shortPointer when long
			field += " at " + ve.Path
		}
		return &plane.InvalidError{Field: cmpOr(field, "value"), Rule: ve.Reason}
	case errors.As(err, &se) && errors.Is(se.Err, json.ErrUnknownName):
		ptr := se.JSONPointer
		return &plane.InvalidError{Field: "request body field", Value: FieldName(string(ptr)),
			Rule: "unknown field (names are case-sensitive); check it against /v1/openapi.json"}
	case errors.As(err, &se):
		field := cmpOr(FieldName(string(se.JSONPointer)), "request body")
		want := jsonKindOf(se.GoType)
		got := kindName(se.JSONKind)
		if se.JSONKind == '0' && se.Err != nil && strings.Contains(se.Err.Error(), "out of range") {
			return &plane.InvalidError{Field: field, Rule: "the number is out of range: " + numberRange(se.GoType)}
		}
		if se.JSONKind == '0' && want == "an integer" {
			return &plane.InvalidError{Field: field, Rule: "want an integer (digits, no fraction or exponent), got a number that is not one"}
		}
		if got != "" && want != "" {
			return &plane.InvalidError{Field: field, Rule: fmt.Sprintf("want %s, got %s", want, got)}
		}
		if want != "" {
			return &plane.InvalidError{Field: field, Rule: "want " + want}
		}
		return &plane.InvalidError{Field: field, Rule: "send a valid value"}
	case errors.As(err, &sy):
		return &plane.InvalidError{Field: "request body", Rule: fmt.Sprintf("malformed JSON at byte %d: %v", sy.ByteOffset,
			strings.TrimPrefix(sy.Err.Error(), "jsontext: "))}
	}
	return &plane.InvalidError{Field: "request body", Rule: "send one JSON object: malformed or truncated JSON"}
}

// numberRange says which numbers a Go number type t holds, for a value out of its range.
func numberRange(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Float32:
		return "use a finite number within ±3.4e38"
	case reflect.Float64:
		return "use a finite number within ±1.8e308"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		return fmt.Sprintf("use an integer from %d to %d", int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("use an integer from 0 to %d", uint64(1)<<t.Bits()-1)
	}
	return "use a number the field holds"
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// kindName names a JSON kind for messages.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return ""
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	valueType = reflect.TypeFor[Value]()
)

// jsonKindOf names what JSON a Go type takes, in JSON terms.
func jsonKindOf(t reflect.Type) string {
	if t == nil {
		return ""
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "an RFC 3339 time string"
	case t == valueType:
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return ""
}

// NilValue returns msgpack nil, stored for an absent payload, result or frame value: a new
// slice each call, so no caller can change another's.
func NilValue() []byte { return []byte{0xc0} }
