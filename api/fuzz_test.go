package api_test

import (
	"testing"

	"github.com/lakeshore-dev/lakeshore/api"
)

// FuzzDecodeRequest feeds arbitrary bytes to the request decoders of every route body, in
// both codecs: they must return a value or an error, never panic or hang, and a decoded
// value must encode again. CI runs it briefly: go test ./api -run '^$' -fuzz FuzzDecodeRequest -fuzztime 30s
func FuzzDecodeRequest(f *testing.F) {
	seeds := []any{
		&api.SubmitRequest{Payload: api.Value{Wire: []byte{0x01}}, Key: "k"},
		&api.SubmitBatchRequest{Invocations: []api.SubmitInvocation{{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV"}}},
		&api.ClaimRequest{Kind: "fifo", Max: 8, Wait: 1},
		&api.SettlesRequest{Settles: []api.Settle{{ID: "x", Token: "t", Outcome: "succeeded", Result: api.Value{Wire: []byte{0xc0}}}}},
		&api.HeartbeatsRequest{Heartbeats: []api.Heartbeat{{ID: "x", Token: "t", LeaseTTL: 30}}},
		&api.PostRequest{Value: api.Value{Wire: []byte{1}}},
		&api.Admission{MaxDepth: 3, OnFull: "block"},
		&api.TokenCreateRequest{Namespace: "*", Queue: "*", TTL: 60},
	}
	for _, s := range seeds {
		b, err := api.Msgpack.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
		j, err := api.JSON.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j, false)
	}
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}, true) // a map claiming 4 G entries
	f.Add([]byte{0xc7, 0xff, 0xff}, true)             // a truncated ext
	f.Fuzz(func(t *testing.T, data []byte, useMsgpack bool) {
		c := api.JSON
		if useMsgpack {
			c = api.Msgpack
		}
		targets := []func() any{
			func() any { return new(api.SubmitRequest) }, func() any { return new(api.SubmitBatchRequest) },
			func() any { return new(api.ClaimRequest) }, func() any { return new(api.SettlesRequest) },
			func() any { return new(api.HeartbeatsRequest) }, func() any { return new(api.PostRequest) },
			func() any { return new(api.SettleRequest) }, func() any { return new(api.WaitResponse) },
			func() any { return new(api.Admission) }, func() any { return new(api.TokenCreateRequest) },
			func() any { return new(api.TrimRequest) }, func() any { return new(api.ErrorBody) },
		}
		for _, mk := range targets {
			v := mk()
			if err := c.UnmarshalRequest(data, v); err != nil {
				continue
			}
			if eb, ok := v.(*api.ErrorBody); ok {
				_ = eb.Err() // a client rebuilds any body without panicking
			}
			if _, err := c.Marshal(v); err != nil && !useMsgpack {
				// JSON cannot encode every value msgpack decodes (NaN); from JSON it must.
				t.Fatalf("re-encode %T: %v", v, err)
			}
		}
	})
}

// FuzzJSONToWire feeds arbitrary JSON to the value mapping: it returns wire bytes or an
// error, never panics, and what it returns maps to JSON and back to the same bytes.
func FuzzJSONToWire(f *testing.F) {
	for _, s := range []string{`null`, `{"x":1}`, `[1,2.5,"a",true]`, `{"$bytes":"AAEC"}`, `{"$map":{"$k":{"$tuple":[1]}}}`,
		`{"$ndarray":{"dtype":"float32","shape":[2],"data":"AACAPwAAAEA="}}`, `{"$timestamp":"2026-12-01T05:00:00Z"}`,
		`{"$float":"NaN"}`, `{"$image":{"format":"png","data":""}}`, `{"$msgpack":"wA=="}`, `{"a":{"$thunk":{"language":"py","data":"AA=="}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := api.JSONToWire(data)
		if err != nil {
			return
		}
		j := api.WireToJSON(nil, b)
		back, err := api.JSONToWire(j)
		if err != nil {
			t.Fatalf("%s → %x → %s: %v", data, b, j, err)
		}
		if string(back) != string(b) {
			t.Fatalf("%s → %x → %s → %x", data, b, j, back)
		}
	})
}
