package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/tinylib/msgp/msgp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The content types of request and response bodies.
const (
	// ContentTypeMsgpack is the SDKs' default.
	ContentTypeMsgpack = "application/msgpack"
	// ContentTypeJSON is for curl and browsers.
	ContentTypeJSON = "application/json"
	// ContentTypeEventStream is the SSE live stream of frames.
	ContentTypeEventStream = "text/event-stream"
)

// Codec is one body encoding.
type Codec int

// The codecs.
const (
	JSON Codec = iota
	Msgpack
)

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
		return 0, fmt.Errorf("%w: Content-Type %q: use %s or %s", ErrUnsupportedMediaType, contentType, ContentTypeMsgpack, ContentTypeJSON)
	}
	switch mt {
	case ContentTypeMsgpack, "application/x-msgpack", "application/vnd.msgpack":
		return Msgpack, nil
	case ContentTypeJSON:
		return JSON, nil
	}
	return 0, fmt.Errorf("%w: Content-Type %q: use %s or %s", ErrUnsupportedMediaType, mt, ContentTypeMsgpack, ContentTypeJSON)
}

// Marshal encodes v.
func (c Codec) Marshal(v any) ([]byte, error) {
	if c == Msgpack {
		return msgpack.Marshal(v)
	}
	return json.Marshal(v)
}

// Unmarshal decodes one value from data into v, rejecting trailing bytes and ignoring
// fields v does not have (answers from a newer server). Errors: *plane.InvalidError
// (field "request body") saying what is wrong.
func (c Codec) Unmarshal(data []byte, v any) error {
	return c.unmarshal(data, v, false)
}

// UnmarshalRequest is Unmarshal for a request body, which must name only fields v has when
// it is JSON (a misspelt "prority" is refused, not dropped). Errors: *plane.InvalidError;
// an unknown field is named as the "request body field".
func (c Codec) UnmarshalRequest(data []byte, v any) error {
	return c.unmarshal(data, v, true)
}

func (c Codec) unmarshal(data []byte, v any, strict bool) (err error) {
	defer func() {
		// The reflective msgpack decoder panics on some shapes (a nil where a struct goes);
		// a body is refused, never allowed to panic its handler.
		if r := recover(); r != nil {
			err = &plane.InvalidError{Field: "request body", Rule: fmt.Sprintf("send a well-formed body (the decoder refused it: %v)", r)}
		}
	}()
	r := bytes.NewReader(data)
	if c == Msgpack {
		if _, err := checkShape(data, 0); err != nil {
			return &plane.InvalidError{Field: "request body", Rule: "send one well-formed msgpack value: " + err.Error()}
		}
		dec := msgpack.NewDecoder(r)
		err = dec.Decode(v)
		if err == nil && r.Len() > 0 {
			err = fmt.Errorf("%d bytes after the value", r.Len())
		}
	} else {
		dec := json.NewDecoder(r)
		if strict {
			dec.DisallowUnknownFields()
		}
		err = dec.Decode(v)
		if err != nil {
			if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
				return &plane.InvalidError{Field: "request body field", Value: strings.Trim(name, `"`),
					Rule: "unknown field; check its spelling against /v1/openapi.json"}
			}
		} else {
			if _, e := dec.Token(); e != io.EOF {
				err = fmt.Errorf("data after the value")
			}
		}
	}
	if err != nil {
		kind := "JSON"
		if c == Msgpack {
			kind = "msgpack"
		}
		return &plane.InvalidError{Field: "request body", Rule: fmt.Sprintf("send one %s %T: %v", kind, v, err)}
	}
	return nil
}

// NilValue is msgpack nil, stored for an absent payload, result or frame value.
var NilValue = []byte{0xc0}

// CheckValue reports whether b, the payload, result or frame value named field, is exactly
// one well-formed msgpack value (a structural check: type prefixes, lengths, nesting; not
// string encodings). Errors: *plane.InvalidError naming field.
func CheckValue(field string, b []byte) error {
	if len(b) == 0 {
		return plane.Invalid(field, nil, "send one msgpack value (nil is 0xc0)")
	}
	rest, err := msgp.Skip(b)
	if err != nil {
		return plane.Invalid(field, nil, "send exactly one well-formed msgpack value: "+strings.TrimPrefix(err.Error(), "msgp: "))
	}
	if len(rest) > 0 {
		return plane.Invalid(field, nil, fmt.Sprintf("send exactly one msgpack value, not several (%d bytes follow the first)", len(rest)))
	}
	return nil
}

// maxShapeDepth bounds the nesting of a msgpack body.
const maxShapeDepth = 512

// checkShape walks one msgpack value and refuses an array or map that declares more elements
// than the bytes left could hold (every element takes at least one byte), and nesting deeper
// than maxShapeDepth. It runs before the reflective decoder, which would otherwise allocate
// for whatever length a hostile body declares (a 20-byte body claiming 2^31 elements).
func checkShape(b []byte, depth int) ([]byte, error) {
	if depth > maxShapeDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxShapeDepth)
	}
	if len(b) == 0 {
		return nil, msgp.ErrShortBytes
	}
	var n uint32
	var err error
	elements := uint64(1)
	switch msgp.NextType(b) {
	case msgp.ArrayType:
		n, b, err = msgp.ReadArrayHeaderBytes(b)
	case msgp.MapType:
		n, b, err = msgp.ReadMapHeaderBytes(b)
		elements = 2
	default:
		return msgp.Skip(b)
	}
	if err != nil {
		return nil, err
	}
	count := uint64(n) * elements
	if count > uint64(len(b)) {
		return nil, fmt.Errorf("a container declares %d elements but only %d bytes follow", count, len(b))
	}
	for range count {
		if b, err = checkShape(b, depth+1); err != nil {
			return nil, err
		}
	}
	return b, nil
}
