package api

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/tinylib/msgp/msgp"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// The tags of JSON objects that stand for wire values JSON has no form of (see
// docs/http-api.md, "JSON ↔ wire value mapping"). A JSON object with exactly one member
// whose name starts with "$" is a tagged value; objects of two or more members are plain
// maps.
const (
	TagBytes     = "$bytes"     // bin: standard base64
	TagFloat     = "$float"     // NaN, Infinity, -Infinity
	TagTimestamp = "$timestamp" // ext -1: RFC 3339
	TagNDArray   = "$ndarray"   // ext 1: {dtype, shape, data}
	TagTensor    = "$tensor"    // ext 2: {dtype, shape, data}
	TagImage     = "$image"     // ext 3: {format, data}
	TagTuple     = "$tuple"     // ext 5 (4 in wire version 1): [values…]
	TagThunk     = "$thunk"     // ext 64 (5 in wire version 1): {language, data}
	TagMap       = "$map"       // a plain map, e.g. one whose only key starts with "$"
	TagMsgpack   = "$msgpack"   // one value as its raw wire bytes, base64
)

// ValueError is a JSON value that does not map to a wire value, or wire bytes the codec
// refuses. Path locates the problem inside the value in JSON Pointer form ("" for the
// value itself); Reason says what is wrong and what is allowed.
type ValueError struct {
	Path   string
	Reason string
}

func (e *ValueError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return "at " + e.Path + ": " + e.Reason
}

// CheckWire reports whether b is one value the wire codec accepts (wire.Decode's rules:
// nesting, UTF-8, str map keys, unique keys, known extensions, array data lengths, exactly
// one value). Errors: *ValueError.
func CheckWire(b []byte) error {
	if len(b) == 0 {
		return &ValueError{Reason: "empty; send one msgpack value (nil is 0xc0)"}
	}
	if _, err := wire.Decode(b); err != nil {
		return &ValueError{Reason: strings.TrimPrefix(err.Error(), "wire: ")}
	}
	return nil
}

// WireToJSON appends the JSON form of the wire-encoded value b to dst, by the mapping of
// docs/http-api.md. Bytes that do not decode become {"$msgpack": "<base64>"}.
func WireToJSON(dst, b []byte) []byte {
	v, err := wire.Decode(b)
	if err != nil {
		return appendTagString(dst, TagMsgpack, base64.StdEncoding.EncodeToString(b))
	}
	return appendJSON(dst, v)
}

func appendTagString(dst []byte, tag, s string) []byte {
	dst = append(dst, '{')
	dst, _ = jsontext.AppendQuote(dst, tag)
	dst = append(dst, ':')
	dst, _ = jsontext.AppendQuote(dst, s)
	return append(dst, '}')
}

func appendTagOpen(dst []byte, tag string) []byte {
	dst = append(dst, '{')
	dst, _ = jsontext.AppendQuote(dst, tag)
	return append(dst, ':')
}

func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return appendTagString(dst, TagFloat, "NaN")
	case math.IsInf(f, 1):
		return appendTagString(dst, TagFloat, "Infinity")
	case math.IsInf(f, -1):
		return appendTagString(dst, TagFloat, "-Infinity")
	}
	s := strconv.FormatFloat(f, 'g', -1, bits)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0" // a float stays a float on the way back
	}
	return append(dst, s...)
}

func appendArrayTag(dst []byte, tag, dtype string, shape []int, data []byte) []byte {
	dst = appendTagOpen(dst, tag)
	dst = append(dst, `{"dtype":`...)
	dst, _ = jsontext.AppendQuote(dst, dtype)
	dst = append(dst, `,"shape":[`...)
	for i, n := range shape {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(n), 10)
	}
	dst = append(dst, `],"data":`...)
	dst, _ = jsontext.AppendQuote(dst, base64.StdEncoding.EncodeToString(data))
	return append(dst, "}}"...)
}

func appendPairTag(dst []byte, tag, name, value string, data []byte) []byte {
	dst = appendTagOpen(dst, tag)
	dst = append(dst, '{')
	dst, _ = jsontext.AppendQuote(dst, name)
	dst = append(dst, ':')
	dst, _ = jsontext.AppendQuote(dst, value)
	dst = append(dst, `,"data":`...)
	dst, _ = jsontext.AppendQuote(dst, base64.StdEncoding.EncodeToString(data))
	return append(dst, "}}"...)
}

// appendJSON appends the JSON form of a value in wire.Decode's generic form.
func appendJSON(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case uint64:
		return strconv.AppendUint(dst, x, 10)
	case float32:
		return appendFloat(dst, float64(x), 32)
	case float64:
		return appendFloat(dst, x, 64)
	case string:
		dst, _ = jsontext.AppendQuote(dst, x)
		return dst
	case []byte:
		return appendTagString(dst, TagBytes, base64.StdEncoding.EncodeToString(x))
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		// An object whose first member starts with "$" reads as a tag: such maps go
		// inside {"$map": …}.
		wrap := len(keys) > 0 && strings.HasPrefix(keys[0], "$")
		if wrap {
			dst = appendTagOpen(dst, TagMap)
		}
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst, _ = jsontext.AppendQuote(dst, k)
			dst = append(dst, ':')
			dst = appendJSON(dst, x[k])
		}
		dst = append(dst, '}')
		if wrap {
			dst = append(dst, '}')
		}
		return dst
	case time.Time:
		return appendTagString(dst, TagTimestamp, x.UTC().Format(time.RFC3339Nano))
	case wire.NDArray:
		return appendArrayTag(dst, TagNDArray, x.DType, x.Shape, x.Data)
	case wire.Tensor:
		return appendArrayTag(dst, TagTensor, x.DType, x.Shape, x.Data)
	case wire.Image:
		return appendPairTag(dst, TagImage, "format", x.Format, x.Data)
	case wire.Thunk:
		return appendPairTag(dst, TagThunk, "language", x.Language, x.Data)
	case wire.Tuple:
		dst = appendTagOpen(dst, TagTuple)
		dst = appendJSON(dst, []any(x))
		return append(dst, '}')
	}
	// wire.Decode returns only the types above.
	return append(dst, "null"...)
}

// JSONToWire converts one JSON value (the text of a payload, result or frame value) to its
// wire encoding, by the mapping of docs/http-api.md, and checks the result with the wire
// codec. Errors: *ValueError naming where in the value and what is wrong.
func JSONToWire(text []byte) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(text))
	p := &jsonParser{dec: dec}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, &ValueError{Reason: "more than one JSON value"}
	}
	if raw, ok := v.(rawWire); ok {
		if err := CheckWire(raw); err != nil {
			return nil, err
		}
		// Stored in canonical form (what WireToJSON's text maps back to), so a value read as
		// JSON and written again keeps its bytes: d0 0d (13 as an int8) is stored as 0d.
		if v, err = wire.Decode(raw); err != nil {
			return nil, &ValueError{Reason: strings.TrimPrefix(err.Error(), "wire: ")}
		}
	}
	b, err := wire.Marshal(v)
	if err != nil {
		var ee *wire.EncodeError
		if errors.As(err, &ee) {
			return nil, &ValueError{Path: shortPointer(pointer(ee.Path)), Reason: ee.Reason}
		}
		return nil, &ValueError{Reason: err.Error()}
	}
	if err := CheckWire(b); err != nil {
		return nil, err
	}
	return b, nil
}

// pointer turns a wire path (`$.a[2]`) into a rough JSON Pointer for messages.
func pointer(p string) string {
	p = strings.TrimPrefix(p, "$")
	r := strings.NewReplacer(".", "/", "[", "/", "]", "")
	return r.Replace(p)
}

// quoteKey quotes a member name that the error's path also shows: whole when short, else
// by its length only, so that a long name is not quoted twice.
func quoteKey(k string) string {
	if len(k) > plane.MaxQuotedBytes {
		return fmt.Sprintf("(a name of %d bytes)", len(k))
	}
	return strconv.Quote(k)
}

// rawWire is a {"$msgpack": …} value: bytes checked, then stored in canonical form.
type rawWire []byte

type jsonParser struct {
	dec *jsontext.Decoder
}

func (p *jsonParser) fail(reason string) error {
	return &ValueError{Path: shortPointer(string(p.dec.StackPointer())), Reason: reason}
}

// shortPointer shortens a JSON Pointer for messages: each name longer than 32 bytes is
// cut and ends in "…" (a long map key is quoted once, in part), and a pointer still longer
// than 2·plane.MaxQuotedBytes (deep nesting) loses its middle.
func shortPointer(p string) string {
	if len(p) <= 32 {
		return p
	}
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		if len(seg) > 32 {
			n := 32
			for n > 0 && !utf8.RuneStart(seg[n]) {
				n--
			}
			segs[i] = seg[:n] + "…"
		}
	}
	p = strings.Join(segs, "/")
	if len(p) <= 2*plane.MaxQuotedBytes {
		return p
	}
	head, tail := plane.MaxQuotedBytes, len(p)-plane.MaxQuotedBytes
	for head > 0 && !utf8.RuneStart(p[head]) {
		head--
	}
	for tail < len(p) && !utf8.RuneStart(p[tail]) {
		tail++
	}
	return p[:head] + "…" + p[tail:]
}

func (p *jsonParser) syntax(err error) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		return &ValueError{Path: shortPointer(string(se.JSONPointer)), Reason: plane.Truncate(strings.TrimPrefix(se.Err.Error(), "jsontext: "))}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &ValueError{Reason: "the JSON value is truncated"}
	}
	return &ValueError{Reason: strings.TrimPrefix(err.Error(), "jsontext: ")}
}

// value reads one JSON value at nesting depth.
func (p *jsonParser) value(depth int) (any, error) {
	if depth >= wire.MaxDepth {
		return nil, p.fail(fmt.Sprintf("nesting is deeper than %d", wire.MaxDepth))
	}
	tok, err := p.dec.ReadToken()
	if err != nil {
		return nil, p.syntax(err)
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return p.number(tok.String())
	case '[':
		list := []any{}
		for p.dec.PeekKind() != ']' {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, p.syntax(err)
		}
		return list, nil
	case '{':
		return p.object(depth)
	}
	return nil, p.fail("unexpected JSON token")
}

func (p *jsonParser) number(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u, nil
		}
		if !strings.HasPrefix(s, "-") {
			return nil, p.fail(fmt.Sprintf("integer %s is above 2^64-1; send it as a float (ending in .0) or a string", plane.Truncate(s)))
		}
		return nil, p.fail(fmt.Sprintf("integer %s is below -2^63; send it as a float (ending in .0) or a string", plane.Truncate(s)))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, p.fail(fmt.Sprintf("number %s is out of the float64 range; use {\"$float\": \"Infinity\"}", plane.Truncate(s)))
	}
	return f, nil
}

// object reads the members of an object whose '{' was read. An object with exactly one
// member whose name starts with "$" is a tagged value; any other object is a plain map,
// whatever the order of its members.
func (p *jsonParser) object(depth int) (any, error) {
	m := map[string]any{}
	first := true
	for p.dec.PeekKind() != '}' {
		tok, err := p.dec.ReadToken()
		if err != nil {
			return nil, p.syntax(err)
		}
		k := tok.String()
		if first && strings.HasPrefix(k, "$") {
			at := string(p.dec.StackPointer())
			raw, err := p.dec.ReadValue()
			if err != nil {
				return nil, p.syntax(err)
			}
			raw = bytes.Clone(raw)
			sub := &jsonParser{dec: jsontext.NewDecoder(bytes.NewReader(raw))}
			if p.dec.PeekKind() == '}' {
				// The only member: a tagged value.
				if _, err := p.dec.ReadToken(); err != nil {
					return nil, p.syntax(err)
				}
				v, err := sub.tagged(k, depth)
				return v, within(at, err)
			}
			v, err := sub.value(depth + 1)
			if err != nil {
				return nil, within(at, err)
			}
			m[k] = v
			first = false
			continue
		}
		first = false
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	if _, err := p.dec.ReadToken(); err != nil {
		return nil, p.syntax(err)
	}
	return m, nil
}

// within places the path of a *ValueError found in a member's value read on its own under
// the member's path at.
func within(at string, err error) error {
	var ve *ValueError
	if errors.As(err, &ve) {
		c := *ve
		c.Path = shortPointer(at + ve.Path)
		return &c
	}
	return err
}

// tagged reads the value of tag (its name was read).
func (p *jsonParser) tagged(tag string, depth int) (any, error) {
	switch tag {
	case TagMap:
		if p.dec.PeekKind() != '{' {
			return nil, p.fail(`$map takes an object: {"$map": {"$key": value}}`)
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, p.syntax(err)
		}
		m := map[string]any{}
		for p.dec.PeekKind() != '}' {
			tok, err := p.dec.ReadToken()
			if err != nil {
				return nil, p.syntax(err)
			}
			k := tok.String()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, p.syntax(err)
		}
		return m, nil
	case TagTuple:
		if p.dec.PeekKind() != '[' {
			return nil, p.fail(`$tuple takes an array: {"$tuple": [1, "a"]}`)
		}
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		return wire.Tuple(v.([]any)), nil
	case TagBytes, TagMsgpack:
		b, err := p.base64String(tag)
		if err != nil {
			return nil, err
		}
		if tag == TagMsgpack {
			if depth > 0 {
				return nil, p.fail("$msgpack is allowed only as the whole value")
			}
			return rawWire(b), nil
		}
		return b, nil
	case TagFloat:
		s, err := p.stringOf(tag, `"NaN", "Infinity" or "-Infinity"`)
		if err != nil {
			return nil, err
		}
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return nil, p.fail(fmt.Sprintf(`$float is %q; use "NaN", "Infinity" or "-Infinity" (finite floats are plain numbers)`, plane.Truncate(s)))
	case TagTimestamp:
		s, err := p.stringOf(tag, "an RFC 3339 time")
		if err != nil {
			return nil, err
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, p.fail(fmt.Sprintf("$timestamp %q is not an RFC 3339 time, e.g. 2026-12-01T05:00:00.5Z", plane.Truncate(s)))
		}
		return t, nil
	case TagNDArray, TagTensor:
		f, err := p.fields(tag, []string{"dtype", "shape", "data"})
		if err != nil {
			return nil, err
		}
		dtype, _ := f["dtype"].(string)
		data, _ := f["data"].([]byte)
		shape, _ := f["shape"].([]int)
		if _, ok := wire.ItemSize(dtype); !ok {
			return nil, p.fail(fmt.Sprintf("%s dtype %q is unknown; use bool, int8…int64, uint8…uint64, float16, bfloat16, float32, float64, complex64 or complex128", tag, plane.Truncate(dtype)))
		}
		a := wire.NDArray{DType: dtype, Shape: shape, Data: data}
		if err := a.Validate(); err != nil {
			var ee *wire.EncodeError
			if errors.As(err, &ee) {
				return nil, p.fail(tag + ": " + ee.Reason)
			}
			return nil, p.fail(tag + ": " + err.Error())
		}
		if tag == TagTensor {
			return wire.Tensor(a), nil
		}
		return a, nil
	case TagImage, TagThunk:
		name := "format"
		if tag == TagThunk {
			name = "language"
		}
		f, err := p.fields(tag, []string{name, "data"})
		if err != nil {
			return nil, err
		}
		s, _ := f[name].(string)
		if s == "" {
			return nil, p.fail(fmt.Sprintf("%s needs a non-empty %q", tag, name))
		}
		data, _ := f["data"].([]byte)
		if tag == TagThunk {
			return wire.Thunk{Language: s, Data: data}, nil
		}
		return wire.Image{Format: s, Data: data}, nil
	}
	return nil, p.fail(fmt.Sprintf("unknown tag %s; use $bytes, $float, $timestamp, $ndarray, $tensor, $image, $tuple, $thunk, $map or $msgpack (wrap a plain map with one $-key in $map)", quoteKey(tag)))
}

func (p *jsonParser) stringOf(tag, want string) (string, error) {
	tok, err := p.dec.ReadToken()
	if err != nil {
		return "", p.syntax(err)
	}
	if tok.Kind() != '"' {
		return "", p.fail(fmt.Sprintf("%s takes a string: %s", tag, want))
	}
	return tok.String(), nil
}

func (p *jsonParser) base64String(tag string) ([]byte, error) {
	s, err := p.stringOf(tag, "standard base64")
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, p.fail(fmt.Sprintf("%s is not standard base64 (with padding): %v", tag, err))
	}
	return b, nil
}

// fields reads the object of an extension tag: members named in names, each required;
// "data" is base64, "shape" an array of integers, the others strings.
func (p *jsonParser) fields(tag string, names []string) (map[string]any, error) {
	tok, err := p.dec.ReadToken()
	if err != nil {
		return nil, p.syntax(err)
	}
	if tok.Kind() != '{' {
		return nil, p.fail(fmt.Sprintf("%s takes an object with %s", tag, strings.Join(names, ", ")))
	}
	out := map[string]any{}
	for p.dec.PeekKind() != '}' {
		kt, err := p.dec.ReadToken()
		if err != nil {
			return nil, p.syntax(err)
		}
		k := kt.String()
		switch {
		case k == "data":
			if out[k], err = p.base64String(tag + ".data"); err != nil {
				return nil, err
			}
		case k == "shape" && contains(names, k):
			if p.dec.PeekKind() != '[' {
				return nil, p.fail(tag + ".shape takes an array of integers ≥ 0")
			}
			p.dec.ReadToken() //nolint:errcheck // peeked
			shape := []int{}
			for p.dec.PeekKind() != ']' {
				t, err := p.dec.ReadToken()
				if err != nil {
					return nil, p.syntax(err)
				}
				n, err := strconv.Atoi(t.String())
				if t.Kind() != '0' || err != nil || n < 0 {
					return nil, p.fail(tag + ".shape takes an array of integers ≥ 0")
				}
				shape = append(shape, n)
			}
			p.dec.ReadToken() //nolint:errcheck // peeked
			out[k] = shape
		case contains(names, k):
			if out[k], err = p.stringOf(tag+"."+k, "a string"); err != nil {
				return nil, err
			}
		default:
			return nil, p.fail(fmt.Sprintf("%s has no member %s; it takes %s", tag, quoteKey(k), strings.Join(names, ", ")))
		}
	}
	p.dec.ReadToken() //nolint:errcheck // peeked
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, p.fail(fmt.Sprintf("%s lacks %q; it takes %s", tag, n, strings.Join(names, ", ")))
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Value is a payload, result or frame value inside a body: the wire-encoded bytes of one
// value (docs/wire.md), nil when absent.
//
// In msgpack bodies it is a bin holding those bytes, byte-exact, or nil when absent. In
// JSON bodies it is a plain JSON value mapped to and from the wire codec (JSONToWire,
// WireToJSON); JSON null is the wire nil. Decoding a JSON value checks it with the wire
// codec; decoding msgpack does not (the server checks with CheckWire, naming the field).
type Value struct {
	// Wire holds the wire-encoded value; nil when absent.
	Wire []byte

	checked bool // Wire came from JSONToWire, which checked it with the wire codec
}

// Checked reports whether the value was decoded from JSON, and so already checked with
// the wire codec (CheckWire need not run again).
func (v Value) Checked() bool { return v.checked }

// IsZero reports whether the value is absent.
func (v Value) IsZero() bool { return v.Wire == nil }

// MarshalJSON writes the JSON form of the value (null when absent).
func (v Value) MarshalJSON() ([]byte, error) {
	if v.Wire == nil {
		return []byte("null"), nil
	}
	return WireToJSON(nil, v.Wire), nil
}

// UnmarshalJSON maps a JSON value to wire bytes. Errors: *ValueError.
func (v *Value) UnmarshalJSON(b []byte) error {
	w, err := JSONToWire(b)
	if err != nil {
		return err
	}
	v.Wire, v.checked = w, true
	return nil
}

// MarshalMsg appends the msgpack form of the value: bin, or nil when absent.
func (v Value) MarshalMsg(b []byte) ([]byte, error) {
	if v.Wire == nil {
		return msgp.AppendNil(b), nil
	}
	return msgp.AppendBytes(b, v.Wire), nil
}

// UnmarshalMsg reads a bin (or nil) into the value, copying it.
func (v *Value) UnmarshalMsg(b []byte) ([]byte, error) {
	if msgp.IsNil(b) {
		v.Wire = nil
		return msgp.ReadNilBytes(b)
	}
	var err error
	v.Wire, b, err = msgp.ReadBytesBytes(b, nil)
	if v.Wire == nil && err == nil {
		v.Wire = []byte{}
	}
	return b, err
}

// Msgsize is an upper bound of the encoded size.
func (v Value) Msgsize() int { return msgp.BytesPrefixSize + len(v.Wire) }
