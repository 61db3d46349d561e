package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"

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

// Unmarshal decodes one value from data into v, rejecting trailing bytes. Errors:
// *plane.InvalidError (field "request body") saying what is wrong.
func (c Codec) Unmarshal(data []byte, v any) error {
	r := bytes.NewReader(data)
	var err error
	if c == Msgpack {
		dec := msgpack.NewDecoder(r)
		err = dec.Decode(v)
		if err == nil && r.Len() > 0 {
			err = fmt.Errorf("%d bytes after the value", r.Len())
		}
	} else {
		dec := json.NewDecoder(r)
		err = dec.Decode(v)
		if err == nil {
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
