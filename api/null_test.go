package api_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestNullOneRule: in every route's request body, in both codecs, a null (JSON null,
// msgpack nil) member is read by one rule (api/null.go): a member that takes null (a
// pointer, a value) or an optional one (omitzero) reads it as absent — the body decodes
// as if the member were left out —, any other member refuses it as invalid naming the
// member, and the two codecs refuse the same members with the same field. Before, JSON read
// every null as the zero value and msgpack refused nil for any member but the first kind.
func TestNullOneRule(t *testing.T) {
	t.Parallel()
	valueType := reflect.TypeFor[api.Value]()
	seen := map[reflect.Type]bool{}
	refused := 0
	for _, route := range api.Routes() {
		if route.Request == nil || seen[reflect.TypeOf(route.Request)] {
			continue
		}
		typ := reflect.TypeOf(route.Request).Elem()
		seen[reflect.TypeOf(route.Request)] = true
		var absent []any // name, nil, … of the members read as absent
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Type == valueType {
				continue // a value's null is the value nil (Value's own rule, unchanged)
			}
			takesNull := f.Type.Kind() == reflect.Pointer || f.Type.Kind() == reflect.Interface
			if takesNull || strings.Contains(opts, "omitzero") {
				absent = append(absent, name, nil)
				continue
			}
			refused++
			for _, c := range []api.Codec{api.JSON, api.Msgpack} {
				data := []byte(`{"` + name + `":null}`)
				if c == api.Msgpack {
					data = msgpackMap(name, nil)
				}
				err := c.UnmarshalRequest(data, reflect.New(typ).Interface())
				var ie *plane.InvalidError
				require.True(t, errors.As(err, &ie), "%s %s: null for required %s: %v", route.Operation, c.ContentType(), name, err)
				require.ErrorIs(t, err, plane.ErrInvalid)
				require.Equal(t, name, ie.Field, "%s %s: %v", route.Operation, c.ContentType(), err)
				require.Contains(t, ie.Rule, "the field is required", "%s %s", route.Operation, c.ContentType())
			}
		}
		if len(absent) == 0 {
			continue
		}
		zero := reflect.New(typ).Interface()
		require.NoError(t, api.JSON.UnmarshalRequest([]byte(`{}`), zero))
		var js strings.Builder
		js.WriteString("{")
		for i := 0; i < len(absent); i += 2 {
			if i > 0 {
				js.WriteString(",")
			}
			js.WriteString(`"` + absent[i].(string) + `":null`)
		}
		js.WriteString("}")
		for c, data := range map[api.Codec][]byte{api.JSON: []byte(js.String()), api.Msgpack: msgpackMap(absent...)} {
			got := reflect.New(typ).Interface()
			require.NoError(t, c.UnmarshalRequest(data, got), "%s %s: nulls for optional members", route.Operation, c.ContentType())
			require.Equal(t, zero, got, "%s %s: every null optional member is absent", route.Operation, c.ContentType())
		}
	}
	require.Positive(t, refused, "some members are required")
}

// TestNullNested: the rule holds inside lists, maps and nested objects, with the same
// field in both codecs: an element or map value that takes no null refuses it, an optional
// member of a nested object reads it as absent.
func TestNullNested(t *testing.T) {
	t.Parallel()
	arr := func(items ...[]byte) []byte {
		b := []byte{0x90 | byte(len(items))}
		for _, it := range items {
			b = append(b, it...)
		}
		return b
	}
	nilByte := []byte{0xc0}
	for _, tc := range []struct {
		name    string
		body    func() any
		json    string
		msgpack []byte
		field   string // "": decodes, as want
		want    any
	}{
		{name: "OptionalInList", body: func() any { return new(api.SubmitBatchRequest) },
			json:    `{"invocations":[{"priority":null,"max_attempts":null,"metadata":null}]}`,
			msgpack: msgpackMap("invocations", arr(msgpackMap("priority", nil, "max_attempts", nil, "metadata", nil))),
			want:    &api.SubmitBatchRequest{Invocations: []api.SubmitInvocation{{}}}},
		{name: "OptionalInNestedObject", body: func() any { return new(api.SettleAndClaimRequest) },
			json:    `{"claim":{"kind":null,"max":null,"queues":null}}`,
			msgpack: msgpackMap("claim", msgpackMap("kind", nil, "max", nil, "queues", nil)),
			want:    &api.SettleAndClaimRequest{}},
		{name: "ListElement", body: func() any { return new(api.SubmitBatchRequest) },
			json: `{"invocations":[{},null]}`, msgpack: msgpackMap("invocations", arr(msgpackMap(), nilByte)), field: "invocations[1]"},
		{name: "MapValue", body: func() any { return new(api.SubmitRequest) },
			json: `{"metadata":{"a":"b","c":null}}`, msgpack: msgpackMap("metadata", msgpackMap("a", "b", "c", nil)), field: "metadata.c"},
		{name: "RequiredInList", body: func() any { return new(api.SettlesRequest) },
			json:    `{"settles":[{"id":"x","token":null,"outcome":"succeeded"}]}`,
			msgpack: msgpackMap("settles", arr(msgpackMap("id", "x", "token", nil, "outcome", "succeeded"))), field: "settles[0].token"},
		{name: "StringListElement", body: func() any { return new(api.ClaimRequest) },
			json: `{"queues":["a",null]}`, msgpack: msgpackMap("queues", arr([]byte{0xa1, 'a'}, nilByte)), field: "queues[1]"},
		{name: "OverrideMapValueTakesNull", body: func() any { return new(api.Admission) },
			json: `{"key_weights":{"a":null}}`, msgpack: msgpackMap("key_weights", msgpackMap("a", nil)),
			want: &api.Admission{KeyWeights: map[string]*float64{"a": nil}}},
		{name: "PayloadTakesNull", body: func() any { return new(api.SubmitRequest) },
			json: `{"payload":{"x":null}}`, msgpack: msgpackMap("payload", []byte{0xc4, 0x04, 0x81, 0xa1, 'x', 0xc0}),
			field: "-"}, // decodes: a null inside a payload is a value of it
	} {
		t.Run(tc.name, func(t *testing.T) {
			for c, data := range map[api.Codec][]byte{api.JSON: []byte(tc.json), api.Msgpack: tc.msgpack} {
				got := tc.body()
				err := c.UnmarshalRequest(data, got)
				switch tc.field {
				case "":
					require.NoError(t, err, c.ContentType())
					require.Equal(t, tc.want, got, c.ContentType())
				case "-":
					require.NoError(t, err, c.ContentType())
				default:
					var ie *plane.InvalidError
					require.ErrorAs(t, err, &ie, c.ContentType())
					require.Equal(t, tc.field, ie.Field, "%s: %v", c.ContentType(), err)
					// "null" in both codecs: "nil" reads to a Python SDK user (msgpack) as Go's.
					require.Contains(t, ie.Rule, "got null", c.ContentType())
					require.NotContains(t, ie.Error(), "nil", c.ContentType())
				}
			}
		})
	}
}
