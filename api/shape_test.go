package api_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tinylib/msgp/msgp"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// msgpackMap encodes fields (in order) as one msgpack map, a body a client could send.
func msgpackMap(fields ...any) []byte {
	b := msgp.AppendMapHeader(nil, uint32(len(fields)/2))
	for i := 0; i < len(fields); i += 2 {
		b = msgp.AppendString(b, fields[i].(string))
		switch v := fields[i+1].(type) {
		case []byte: // an already encoded value
			b = append(b, v...)
		default:
			var err error
			if b, err = msgp.AppendIntf(b, v); err != nil {
				panic(err)
			}
		}
	}
	return b
}

// TestMsgpackRequestLikeJSON: a msgpack request body is refused where the JSON one is, with
// the same field name, and no message names a Go type or the decoder.
func TestMsgpackRequestLikeJSON(t *testing.T) {
	t.Parallel()
	inv := func(fields ...any) []byte { return msgpackMap(fields...) }
	arr := func(items ...[]byte) []byte {
		b := msgp.AppendArrayHeader(nil, uint32(len(items)))
		for _, it := range items {
			b = append(b, it...)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		body    any
		msgpack []byte
		json    string
		field   string // the InvalidError's Field
		value   any    // its Value, when it names the unknown field
		ruleHas string
	}{
		{name: "UnknownTop", body: new(api.SubmitRequest), msgpack: msgpackMap("prority", 1.5), json: `{"prority":1.5}`,
			field: "request body field", value: "prority", ruleHas: "unknown field"},
		{name: "UnknownNested", body: new(api.SubmitBatchRequest),
			msgpack: msgpackMap("invocations", arr(inv("key", "a"), inv("max_attempt", 2))), json: `{"invocations":[{"key":"a"},{"max_attempt":2}]}`,
			field: "request body field", value: "invocations[1].max_attempt", ruleHas: "unknown field"},
		{name: "CaseSensitive", body: new(api.ClaimRequest), msgpack: msgpackMap("Max", 3), json: `{"Max":3}`,
			field: "request body field", value: "Max", ruleHas: "unknown field"},
		{name: "WrongKind", body: new(api.SubmitBatchRequest),
			msgpack: msgpackMap("invocations", arr(inv("priority", "high"))), json: `{"invocations":[{"priority":"high"}]}`,
			field: "invocations[0].priority", ruleHas: "got a string"},
		{name: "WrongKindTop", body: new(api.ClaimRequest), msgpack: msgpackMap("max", "eight"), json: `{"max":"eight"}`,
			field: "max", ruleHas: "want an integer"},
		// A number of the right kind out of the field's range names the field and the range,
		// in both codecs (before, msgpack said only "send one msgpack map of the route's
		// fields, each of the kind /v1/openapi.json gives").
		{name: "OutOfRange", body: new(api.SubmitRequest), msgpack: msgpackMap("max_attempts", uint64(1)<<63),
			json: `{"max_attempts":9223372036854775808}`, field: "max_attempts", ruleHas: "the number is out of range: use an integer from"},
		{name: "OutOfRangeNested", body: new(api.SubmitBatchRequest),
			msgpack: msgpackMap("invocations", arr(inv("max_attempts", uint64(1)<<63))), json: `{"invocations":[{"max_attempts":9223372036854775808}]}`,
			field: "invocations[0].max_attempts", ruleHas: "the number is out of range"},
		{name: "NotAMap", body: new(api.ClaimRequest), msgpack: msgp.AppendInt(nil, 3), json: `3`,
			field: "request body", ruleHas: "map"},
		{name: "SettleUnknown", body: new(api.SettlesRequest),
			msgpack: msgpackMap("settles", arr(inv("id", "x", "token", "t", "outcome", "succeeded", "reslt", 1))),
			json:    `{"settles":[{"id":"x","token":"t","outcome":"succeeded","reslt":1}]}`,
			field:   "request body field", value: "settles[0].reslt", ruleHas: "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []api.Codec{api.Msgpack, api.JSON} {
				data := tc.msgpack
				if c == api.JSON {
					data = []byte(tc.json)
				}
				err := c.UnmarshalRequest(data, tc.body)
				require.ErrorIs(t, err, plane.ErrInvalid, "codec %v", c)
				var ie *plane.InvalidError
				require.ErrorAs(t, err, &ie)
				if c == api.Msgpack || tc.name != "NotAMap" {
					require.Equal(t, tc.field, ie.Field, "codec %v: %v", c, err)
				}
				if tc.value != nil {
					require.Equal(t, tc.value, ie.Value, "codec %v", c)
				}
				if c == api.Msgpack {
					require.Contains(t, ie.Rule, tc.ruleHas)
				}
				for _, bad := range []string{"msgp", "float64", "int64", "Submit", "Claim", "Settle", "[]", "uint"} {
					require.NotContains(t, err.Error(), bad, "codec %v", c)
				}
			}
		})
	}
}

// TestMsgpackRequestStillDecodes: the check lets every body the client itself encodes through.
func TestMsgpackRequestStillDecodes(t *testing.T) {
	t.Parallel()
	for _, body := range []api.Body{
		&api.SubmitBatchRequest{Invocations: []api.SubmitInvocation{{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Payload: api.Value{Wire: []byte{1}},
			Key: "k", Priority: 2, MaxAttempts: 3, Metadata: map[string]string{"a": "b"}}}, MaxWait: 1},
		&api.SettleAndClaimRequest{Settles: []api.Settle{{ID: "x", Token: "t", Outcome: "succeeded"}}, Claim: api.ClaimRequest{Kind: "fifo", Max: 2}},
		&api.TokenCreateRequest{Namespace: "*", Queue: "*", Permissions: []string{"submit"}, TTL: 60},
	} {
		data, err := api.Msgpack.Marshal(body)
		require.NoError(t, err)
		require.NoError(t, api.Msgpack.UnmarshalRequest(data, body), "%s", strings.TrimSpace(string(data)))
	}
}
