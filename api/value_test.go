package api_test

import (
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// TestJSONMapping: every wire value has a JSON form that maps back to the same wire bytes,
// as docs/http-api.md documents it.
func TestJSONMapping(t *testing.T) {
	t.Parallel()
	arr, err := wire.NewNDArray([]int{2}, []float32{1, 2})
	require.NoError(t, err)
	ts := time.Date(2026, 12, 1, 5, 0, 0, 123456789, time.UTC)
	for _, tc := range []struct {
		name string
		v    any
		json string
	}{
		{"Nil", nil, `null`},
		{"Bool", true, `true`},
		{"Int", int64(-7), `-7`},
		{"BigUint", uint64(math.MaxUint64), `18446744073709551615`},
		{"Float", 1.0, `1.0`},
		{"FloatExp", 2.5e-30, `2.5e-30`},
		{"NaN", math.NaN(), `{"$float":"NaN"}`},
		{"Inf", math.Inf(-1), `{"$float":"-Infinity"}`},
		{"String", "héllo", `"héllo"`},
		{"Bytes", []byte{0, 1, 2}, `{"$bytes":"AAEC"}`},
		{"List", []any{int64(1), "a"}, `[1,"a"]`},
		{"Map", map[string]any{"x": int64(1), "y": []any{}}, `{"x":1,"y":[]}`},
		{"DollarMap", map[string]any{"$bytes": "not a tag"}, `{"$map":{"$bytes":"not a tag"}}`},
		{"DollarFirstKey", map[string]any{"$a": int64(1), "b": int64(2)}, `{"$map":{"$a":1,"b":2}}`},
		{"DollarLaterKey", map[string]any{"#a": int64(1), "$b": int64(2)}, `{"#a":1,"$b":2}`},
		{"Timestamp", ts, `{"$timestamp":"2026-12-01T05:00:00.123456789Z"}`},
		{"NDArray", arr, `{"$ndarray":{"dtype":"float32","shape":[2],"data":"AACAPwAAAEA="}}`},
		{"Tensor", wire.Tensor(arr), `{"$tensor":{"dtype":"float32","shape":[2],"data":"AACAPwAAAEA="}}`},
		{"Image", wire.Image{Format: "png", Data: []byte{1}}, `{"$image":{"format":"png","data":"AQ=="}}`},
		{"Tuple", wire.Tuple{int64(1), "a"}, `{"$tuple":[1,"a"]}`},
		{"Thunk", wire.Thunk{Language: "python-cloudpickle", Data: []byte{9}}, `{"$thunk":{"language":"python-cloudpickle","data":"CQ=="}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := wire.Marshal(tc.v)
			require.NoError(t, err)
			require.Equal(t, tc.json, string(api.WireToJSON(nil, b)))
			back, err := api.JSONToWire([]byte(tc.json))
			require.NoError(t, err)
			require.Equal(t, b, back, "JSON maps back to the same wire bytes")
		})
	}
	// An independent decoder reads what JSON maps to.
	b, err := api.JSONToWire([]byte(`{"x": 1, "y": [true, null, "s", 2.5]}`))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, msgpack.Unmarshal(b, &got))
	require.Equal(t, map[string]any{"x": int8(1), "y": []any{true, nil, "s", 2.5}}, got)
}

// TestHostileBodyLengths: a tiny msgpack body declaring a huge array is refused before any
// allocation for it.
func TestHostileBodyLengths(t *testing.T) {
	body := append([]byte{0x81, 0xab}, "invocations"...)
	body = append(body, 0xdd, 0x00, 0x0f, 0x42, 0x40) // an array of 1,000,000 elements, none sent
	var req api.SubmitBatchRequest
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := api.Msgpack.UnmarshalRequest(body, &req)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, plane.ErrInvalid)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "no allocation for the declared million elements")
}

// TestJSONTagOnlyWithOneMember: only a one-member object whose name starts with "$" is a
// tag; an object of more members is a plain map whatever the order of its members.
func TestJSONTagOnlyWithOneMember(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json string
		want any
	}{
		{`{"$x": 1, "y": 2}`, map[string]any{"$x": int64(1), "y": int64(2)}},
		{`{"y": 2, "$x": 1}`, map[string]any{"$x": int64(1), "y": int64(2)}},
		{`{"$set": {"a": 1}, "$inc": {"n": 1}}`, map[string]any{"$set": map[string]any{"a": int64(1)}, "$inc": map[string]any{"n": int64(1)}}},
		{`{"$bytes": "AAEC", "b": {"$bytes": "AAEC"}}`, map[string]any{"$bytes": "AAEC", "b": []byte{0, 1, 2}}},
	} {
		got, err := api.JSONToWire([]byte(tc.json))
		require.NoError(t, err, tc.json)
		want, err := wire.Marshal(tc.want)
		require.NoError(t, err)
		require.Equal(t, want, got, tc.json)
		// What the server writes back reads as the same value.
		again, err := api.JSONToWire(api.WireToJSON(nil, got))
		require.NoError(t, err)
		require.Equal(t, got, again, tc.json)
	}
	// A single $-member is still a tag, and errors inside still say where.
	_, err := api.JSONToWire([]byte(`{"a": {"$x": 1}}`))
	var ve *api.ValueError
	require.ErrorAs(t, err, &ve)
	require.Contains(t, ve.Reason, `unknown tag "$x"`)
	_, err = api.JSONToWire([]byte(`{"$x": {"k": {"$float": "nope"}}, "y": 1}`))
	require.ErrorAs(t, err, &ve)
	require.Contains(t, ve.Path, "/$x/k")
}
