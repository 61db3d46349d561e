package api

import (
	"encoding/json"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// OpenAPI returns the OpenAPI 3.1 document of the API, generated from Routes and the body
// types (their json tags: a member without omitzero is required). Request bodies refuse
// unknown members (additionalProperties: false), as the server does.
func OpenAPI() []byte {
	openAPIOnce.Do(func() { openAPIDoc = buildOpenAPI() })
	return append([]byte(nil), openAPIDoc...)
}

var (
	openAPIOnce sync.Once
	openAPIDoc  []byte
)

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

var pathParamDocs = map[string]string{
	"namespace": "namespace: 1–128 bytes of [A-Za-z0-9._-], not starting with '.' or '-'",
	"queue":     "queue name: 1–128 bytes of [A-Za-z0-9._-], not starting with '.' or '-'",
	"topic":     "topic name: 1–128 bytes of [A-Za-z0-9._-], not starting with '.' or '-'",
	"id":        "an invocation id (ULID), worker id or token id",
	"digest":    "a code digest: 64 lowercase hex digits (docs/fabric.md)",
}

type schemaSet struct {
	defs map[string]any
}

func buildOpenAPI() []byte {
	set := &schemaSet{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	for _, rt := range Routes() {
		op := map[string]any{"operationId": rt.Operation, "summary": rt.Summary}
		if rt.Permission != "" {
			op["description"] = "Permission: " + rt.Permission + "."
			op["security"] = []any{map[string]any{"bearer": []any{}}}
		} else {
			op["security"] = []any{}
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true,
				"description": pathParamDocs[m[1]], "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.Query {
			params = append(params, map[string]any{"name": q.Name, "in": "query", "description": q.Description,
				"schema": map[string]any{"type": q.Type}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.Request != nil {
			ref := set.ref(reflect.TypeOf(rt.Request).Elem(), true)
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				ContentTypeJSON:    map[string]any{"schema": ref},
				ContentTypeMsgpack: map[string]any{"schema": ref},
			}}
		} else if rt.RequestContentType != "" {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				rt.RequestContentType: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}},
			}}
		}
		okResp := map[string]any{"description": "success"}
		switch {
		case rt.Response != nil:
			ref := set.ref(reflect.TypeOf(rt.Response).Elem(), false)
			okResp["content"] = map[string]any{
				ContentTypeJSON:    map[string]any{"schema": ref},
				ContentTypeMsgpack: map[string]any{"schema": ref},
			}
			if rt.ContentType != "" { // the default answer, beside JSON and msgpack (Arrow reads)
				okResp["content"].(map[string]any)[rt.ContentType] = map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}
			}
		case rt.ContentType != "":
			okResp["content"] = map[string]any{rt.ContentType: map[string]any{"schema": map[string]any{"type": "string"}}}
		}
		errRef := set.ref(reflect.TypeFor[ErrorBody](), false)
		op["responses"] = map[string]any{
			"200": okResp,
			"default": map[string]any{"description": "an error: {code, message, details}; see docs/http-api.md for codes and statuses",
				"content": map[string]any{ContentTypeJSON: map[string]any{"schema": errRef}, ContentTypeMsgpack: map[string]any{"schema": errRef}}},
		}
		if paths[rt.Path] == nil {
			paths[rt.Path] = map[string]any{}
		}
		paths[rt.Path][strings.ToLower(rt.Method)] = op
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Lakeshore HTTP API", "version": "1",
			"description": "Durable job and data queues. Bodies are JSON or msgpack (same field names). In JSON, payloads, results and frame values are plain JSON values mapped to the wire codec (docs/http-api.md); in msgpack they are bin holding wire bytes. Durations are seconds; times RFC 3339 (JSON) or msgpack timestamps."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         set.defs,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // maps of strings: cannot fail
	}
	return b
}

// ref returns a $ref to the component schema of body type t, adding it first. A type used
// as a request gets its own component, named with "In" appended (it refuses unknown
// members).
func (s *schemaSet) ref(t reflect.Type, request bool) map[string]any {
	name := t.Name()
	if request {
		name += "In"
	}
	if _, ok := s.defs[name]; !ok {
		s.defs[name] = map[string]any{} // placeholder against recursion
		s.defs[name] = s.object(t, request)
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

func (s *schemaSet) object(t reflect.Type, request bool) map[string]any {
	props := map[string]any{}
	var required []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		props[name] = s.schema(f.Type, request)
		if !strings.Contains(opts, "omitzero") {
			required = append(required, name)
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	sort.Strings(required)
	if request {
		// Requests refuse unknown members. Every member may be left out (its zero value
		// is its default, and the server says which ones a route needs), so none is
		// listed as required.
		out["additionalProperties"] = false
	} else if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func (s *schemaSet) schema(t reflect.Type, request bool) any {
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case valueType:
		return map[string]any{"description": "a wire value: any JSON value by the mapping of docs/http-api.md (in msgpack: bin of wire bytes)"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		inner := s.schema(t.Elem(), request)
		return map[string]any{"oneOf": []any{inner, map[string]any{"type": "null"}}}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": s.schema(t.Elem(), request)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": s.schema(t.Elem(), request)}
	case reflect.Struct:
		return s.ref(t, request)
	case reflect.Interface:
		return map[string]any{"description": "a string, number, boolean or null"}
	}
	return map[string]any{}
}
