package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/golden")

const goldenDir = "testdata/golden"

// goldenCase is one valid vector: Marshal(value) must equal the file byte for byte, and
// Decode of the file must give want (value itself when want is nil and wantSet is false).
type goldenCase struct {
	name  string // file name without extension
	about string // what the vector shows, for other clients
	value any    // the Go value encoded
	want  any    // Decode's result, when it differs from value
}

// decoded returns what Decode must give for the case.
func (c goldenCase) decoded() any {
	if c.want != nil {
		return c.want
	}
	return c.value
}

// badCase is one invalid vector: Decode must fail with ErrMalformed.
type badCase struct {
	name  string
	about string
	data  []byte
}

func goldenCases(t testing.TB) []goldenCase {
	ts := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return tm.UTC()
	}
	letters := func(n int) string { return strings.Repeat("abcdefghij", n/10+1)[:n] }
	bin := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	many := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = int64(i)
		}
		return out
	}
	manyKeys := map[string]any{}
	for i := range 16 {
		manyKeys["k"+strconv.Itoa(10+i)] = int64(i)
	}
	return []goldenCase{
		{name: "nil", about: "nil", value: nil},
		{name: "bool-false", about: "false", value: false},
		{name: "bool-true", about: "true", value: true},
		{name: "int-0", about: "0 as positive fixint", value: int64(0)},
		{name: "int-127", about: "largest positive fixint", value: int64(127)},
		{name: "int-128", about: "non-negative ints use the unsigned forms: uint 8", value: int64(128)},
		{name: "int-256", about: "uint 16", value: int64(256)},
		{name: "int-65536", about: "uint 32", value: int64(65536)},
		{name: "int-4294967296", about: "uint 64", value: int64(1 << 32)},
		{name: "int-max-int64", about: "math.MaxInt64, still int64 when decoded", value: int64(math.MaxInt64)},
		{name: "uint-max-uint64", about: "above MaxInt64: decodes to uint64", value: uint64(math.MaxUint64)},
		{name: "int-minus-1", about: "negative fixint", value: int64(-1)},
		{name: "int-minus-32", about: "smallest negative fixint", value: int64(-32)},
		{name: "int-minus-33", about: "int 8", value: int64(-33)},
		{name: "int-minus-129", about: "int 16", value: int64(-129)},
		{name: "int-minus-32769", about: "int 32", value: int64(-32769)},
		{name: "int-min-int64", about: "int 64", value: int64(math.MinInt64)},
		{name: "int-go-int", about: "a Go int (and every other integer type) decodes as int64", value: 42, want: int64(42)},
		{name: "float64", about: "float 64", value: 3.141592653589793},
		{name: "float64-negative-zero", about: "-0.0 keeps its sign", value: math.Copysign(0, -1)},
		{name: "float64-nan", about: "NaN is allowed (canonical quiet NaN bits 0x7ff8000000000001 from Go's math.NaN)", value: math.NaN()},
		{name: "float64-inf", about: "+Inf", value: math.Inf(1)},
		{name: "float32", about: "float 32 stays float32", value: float32(1.5)},
		{name: "str-empty", about: "empty str", value: ""},
		{name: "str-hello", about: "fixstr", value: "hello"},
		{name: "str-unicode", about: "UTF-8 str", value: "héllo, 世界 ✓"},
		{name: "str-31", about: "longest fixstr", value: letters(31)},
		{name: "str-32", about: "str 8", value: letters(32)},
		{name: "str-256", about: "str 16", value: letters(256)},
		{name: "bin-empty", about: "empty bin", value: []byte{}},
		{name: "bin-small", about: "bin 8", value: []byte{0, 1, 2, 0xff}},
		{name: "bin-256", about: "bin 16", value: bin(256)},
		{name: "array-empty", about: "empty array", value: []any{}},
		{name: "array-mixed", about: "array of mixed values", value: []any{int64(1), "two", nil, 3.5, true}},
		{name: "array-16", about: "array 16", value: many(16)},
		{name: "map-empty", about: "empty map", value: map[string]any{}},
		{name: "map-payload", about: "a typical payload; keys are written sorted",
			value: map[string]any{"prompt": "a lighthouse at dusk", "seed": int64(1234), "temperature": 0.7}},
		{name: "map-16", about: "map 16, keys sorted", value: manyKeys},
		{name: "map-nested", about: "maps and arrays nested",
			value: map[string]any{"a": map[string]any{"b": []any{int64(1), map[string]any{"c": []any{}}}}, "z": nil}},
		{name: "ndarray-float32-2x3", about: "ext 1: float32 array of shape [2, 3], C order, little endian",
			value: mustArray(t, []int{2, 3}, []float32{0, 1, 2, 3, 4, 5})},
		{name: "ndarray-int64", about: "ext 1: int64 vector", value: mustArray(t, []int{3}, []int64{-1, 0, 1 << 40})},
		{name: "ndarray-empty", about: "ext 1: empty float64 array, shape [0], data empty",
			value: NDArray{DType: "float64", Shape: []int{0}, Data: []byte{}}},
		{name: "ndarray-0d", about: "ext 1: 0-d float64 array (shape []), one element",
			value: mustArray(t, nil, []float64{2.5})},
		{name: "ndarray-bool", about: "ext 1: bool array, one byte per element (0 or 1)",
			value: mustArray(t, []int{4}, []bool{true, false, false, true})},
		{name: "ndarray-uint8-2x2x3", about: "ext 1: uint8 array of shape [2, 2, 3] (a tiny RGB image)",
			value: mustArray(t, []int{2, 2, 3}, []uint8{255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255})},
		{name: "ndarray-float16", about: "ext 1: float16 [1.0, -2.0] as raw little-endian halves",
			value: NDArray{DType: "float16", Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0xc0}}},
		{name: "ndarray-complex64", about: "ext 1: complex64 [1+2j]: real then imaginary float32",
			value: NDArray{DType: "complex64", Shape: []int{1}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}}},
		{name: "tensor-bfloat16", about: "ext 2: bfloat16 tensor [1.0, 2.0] of shape [1, 2]",
			value: Tensor{DType: "bfloat16", Shape: []int{1, 2}, Data: []byte{0x80, 0x3f, 0x00, 0x40}}},
		{name: "tensor-float32", about: "ext 2: same payload layout as ext 1",
			value: Tensor(mustArray(t, []int{2}, []float32{0.5, -0.5}))},
		{name: "image-png", about: "ext 3: a png image (the 8-byte PNG signature as stand-in data)",
			value: Image{Format: "png", Data: []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}}},
		{name: "tuple-empty", about: "ext 5: the empty tuple (payload is the empty array, so fixext 1)", value: Tuple{}},
		{name: "tuple-pair", about: "ext 5: the tuple (1, \"a\")", value: Tuple{int64(1), "a"}},
		{name: "tuple-in-map", about: "ext 5 inside a map: {\"pair\": (1, 2.5), \"list\": [1, 2.5]}",
			value: map[string]any{"pair": Tuple{int64(1), 2.5}, "list": []any{int64(1), 2.5}}},
		{name: "tuple-nested", about: "ext 5 inside ext 5: ((), (nil,))", value: Tuple{Tuple{}, Tuple{nil}}},
		{name: "thunk", about: "ext 64: opaque code for language \"python-cloudpickle\"",
			value: Thunk{Language: "python-cloudpickle", Data: []byte{0x80, 0x05, 0x95}}},
		{name: "timestamp-32", about: "ext -1, 32-bit form: 2024-01-02T03:04:05Z (whole seconds < 2^32)",
			value: ts("2024-01-02T03:04:05Z")},
		{name: "timestamp-32-epoch", about: "ext -1, 32-bit form: the Unix epoch", value: ts("1970-01-01T00:00:00Z")},
		{name: "timestamp-64", about: "ext -1, 64-bit form: 2024-01-02T03:04:05.123456789Z (nanoseconds << 34 | seconds)",
			value: ts("2024-01-02T03:04:05.123456789Z")},
		{name: "timestamp-96-negative", about: "ext -1, 96-bit form: 1969-07-20T20:17:40.5Z (negative seconds)",
			value: ts("1969-07-20T20:17:40.5Z")},
		{name: "timestamp-96-future", about: "ext -1, 96-bit form: 2600-01-01T00:00:00Z (seconds >= 2^34)",
			value: ts("2600-01-01T00:00:00Z")},
	}
}

func badCases() []badCase {
	deep := append(bytes.Repeat([]byte{0x91}, MaxDepth+1), 0xc0)
	return []badCase{
		{name: "empty", about: "no bytes at all", data: []byte{}},
		{name: "truncated-str", about: "fixstr of 5 bytes with 2 present", data: []byte{0xa5, 'h', 'i'}},
		{name: "trailing-bytes", about: "two values where one is expected", data: []byte{0x01, 0x02}},
		{name: "never-used-c1", about: "0xc1 is never used", data: []byte{0xc1}},
		{name: "map-int-key", about: "map {1: 2}: keys must be str", data: []byte{0x81, 0x01, 0x02}},
		{name: "map-bin-key", about: "map with a bin key: keys must be str", data: []byte{0x81, 0xc4, 0x01, 'a', 0x02}},
		{name: "map-duplicate-key", about: "map {\"a\": 1, \"a\": 2}", data: []byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02}},
		{name: "str-invalid-utf8", about: "str holding 0xff", data: []byte{0xa1, 0xff}},
		{name: "array-huge-count", about: "array 32 declaring 2^32-1 elements, none present",
			data: []byte{0xdd, 0xff, 0xff, 0xff, 0xff}},
		{name: "bin-huge-length", about: "bin 32 declaring 2^32-1 bytes, none present",
			data: []byte{0xc6, 0xff, 0xff, 0xff, 0xff}},
		{name: "too-deep", about: "513 nested one-element arrays (the limit is 512)", data: deep},
		{name: "ext-unknown", about: "ext type 9 is not defined", data: []byte{0xd4, 0x09, 0x00}},
		{name: "ndarray-short-data", about: "float32 shape [2] with 4 data bytes (needs 8)",
			data: extBytes(ExtNDArray, 0x93, 0xa7, 'f', 'l', 'o', 'a', 't', '3', '2', 0x91, 0x02, 0xc4, 0x04, 0, 0, 0, 0)},
		{name: "ndarray-unknown-dtype", about: "dtype \"float8\" is not defined",
			data: extBytes(ExtNDArray, 0x93, 0xa6, 'f', 'l', 'o', 'a', 't', '8', 0x90, 0xc4, 0x00)},
		{name: "ndarray-negative-dim", about: "shape [-1]",
			data: extBytes(ExtNDArray, 0x93, 0xa5, 'i', 'n', 't', '6', '4', 0x91, 0xff, 0xc4, 0x00)},
		{name: "image-empty-format", about: "image with format \"\"", data: []byte{0xd6, 0x03, 0x92, 0xa0, 0xc4, 0x00}},
		{name: "ndarray-trailing", about: "ndarray payload with a fourth element",
			data: extBytes(ExtNDArray, 0x94, 0xa4, 'b', 'o', 'o', 'l', 0x90, 0xc4, 0x01, 0x01, 0xc0)},
		{name: "tuple-not-array", about: "tuple whose payload is a map", data: []byte{0xd4, 0x04, 0x80}},
		{name: "timestamp-bad-nanos", about: "96-bit timestamp with nanoseconds 1e9",
			data: []byte{0xc7, 0x0c, 0xff, 0x3b, 0x9a, 0xca, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}},
		{name: "timestamp-bad-length", about: "timestamp payload of 2 bytes", data: []byte{0xd5, 0xff, 0, 0}},
	}
}

// extBytes returns an extension of type typ around payload, the header built independently
// of appendExtHeader (always ext 8, which decoders must accept even where fixext fits).
func extBytes(typ int8, payload ...byte) []byte {
	return append([]byte{0xc7, byte(len(payload)), byte(typ)}, payload...)
}

// indexEntry is one line of testdata/golden/index.json.
type indexEntry struct {
	File  string `json:"file"`
	About string `json:"about"`
	Hex   string `json:"hex"`
	Value any    `json:"value,omitempty"` // the decoded value, described by describe
	Error string `json:"error,omitempty"` // "malformed" for vectors every decoder must reject
}

// describe renders a generic value as typed JSON that any language can compare against:
// 64-bit integers and floats as strings, bytes as hex.
func describe(v any) any {
	switch x := v.(type) {
	case nil:
		return map[string]any{"type": "nil"}
	case bool:
		return map[string]any{"type": "bool", "value": x}
	case int64:
		return map[string]any{"type": "int", "value": strconv.FormatInt(x, 10)}
	case uint64:
		return map[string]any{"type": "int", "value": strconv.FormatUint(x, 10)}
	case float64:
		return map[string]any{"type": "float64", "value": strconv.FormatFloat(x, 'g', -1, 64),
			"bits": strconv.FormatUint(math.Float64bits(x), 16)}
	case float32:
		return map[string]any{"type": "float32", "value": strconv.FormatFloat(float64(x), 'g', -1, 32),
			"bits": strconv.FormatUint(uint64(math.Float32bits(x)), 16)}
	case string:
		return map[string]any{"type": "str", "value": x}
	case []byte:
		return map[string]any{"type": "bin", "hex": hex.EncodeToString(x)}
	case []any:
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = describe(e)
		}
		return map[string]any{"type": "array", "items": items}
	case Tuple:
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = describe(e)
		}
		return map[string]any{"type": "tuple", "items": items}
	case map[string]any:
		entries := map[string]any{}
		for k, e := range x {
			entries[k] = describe(e)
		}
		return map[string]any{"type": "map", "entries": entries}
	case NDArray:
		return map[string]any{"type": "ndarray", "dtype": x.DType, "shape": append([]int{}, x.Shape...),
			"hex": hex.EncodeToString(x.Data)}
	case Tensor:
		return map[string]any{"type": "tensor", "dtype": x.DType, "shape": append([]int{}, x.Shape...),
			"hex": hex.EncodeToString(x.Data)}
	case Image:
		return map[string]any{"type": "image", "format": x.Format, "hex": hex.EncodeToString(x.Data)}
	case Thunk:
		return map[string]any{"type": "thunk", "language": x.Language, "hex": hex.EncodeToString(x.Data)}
	case time.Time:
		return map[string]any{"type": "timestamp", "seconds": strconv.FormatInt(x.Unix(), 10),
			"nanoseconds": x.Nanosecond(), "rfc3339": x.UTC().Format(time.RFC3339Nano)}
	}
	panic("describe: unexpected type")
}

// TestGolden checks Marshal against every vector byte for byte, decodes each back, checks
// every invalid vector is rejected, and checks index.json; -update rewrites them all.
func TestGolden(t *testing.T) {
	cases := goldenCases(t)
	bad := badCases()
	var index []indexEntry
	for _, c := range cases {
		got := mustMarshal(t, c.value)
		index = append(index, indexEntry{File: c.name + ".msgpack", About: c.about,
			Hex: hex.EncodeToString(got), Value: describe(c.decoded())})
	}
	for _, c := range bad {
		index = append(index, indexEntry{File: "invalid/" + c.name + ".msgpack", About: c.about,
			Hex: hex.EncodeToString(c.data), Error: "malformed"})
	}
	indexJSON, err := json.MarshalIndent(index, "", "  ")
	require.NoError(t, err)
	indexJSON = append(indexJSON, '\n')

	if *update {
		require.NoError(t, os.RemoveAll(goldenDir))
		require.NoError(t, os.MkdirAll(filepath.Join(goldenDir, "invalid"), 0o755))
		for _, c := range cases {
			require.NoError(t, os.WriteFile(filepath.Join(goldenDir, c.name+".msgpack"), mustMarshal(t, c.value), 0o644))
		}
		for _, c := range bad {
			require.NoError(t, os.WriteFile(filepath.Join(goldenDir, "invalid", c.name+".msgpack"), c.data, 0o644))
		}
		require.NoError(t, os.WriteFile(filepath.Join(goldenDir, "index.json"), indexJSON, 0o644))
	}

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				want, err := os.ReadFile(filepath.Join(goldenDir, c.name+".msgpack"))
				require.NoError(t, err, "run go test ./wire -run TestGolden -update")
				require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(mustMarshal(t, c.value)))
				got, err := Decode(want)
				require.NoError(t, err)
				requireSameValue(t, c.decoded(), got)
			})
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		for _, c := range bad {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				data, err := os.ReadFile(filepath.Join(goldenDir, "invalid", c.name+".msgpack"))
				require.NoError(t, err)
				require.Equal(t, c.data, data)
				_, err = Decode(data)
				require.ErrorIs(t, err, ErrMalformed)
				var de *DecodeError
				require.ErrorAs(t, err, &de)
				t.Log(err)
			})
		}
	})
	t.Run("Index", func(t *testing.T) {
		t.Parallel()
		got, err := os.ReadFile(filepath.Join(goldenDir, "index.json"))
		require.NoError(t, err)
		require.Equal(t, string(indexJSON), string(got))
	})
	t.Run("NoStrayFiles", func(t *testing.T) {
		t.Parallel()
		var want []string
		for _, e := range index {
			want = append(want, e.File)
		}
		files, err := filepath.Glob(filepath.Join(goldenDir, "*.msgpack"))
		require.NoError(t, err)
		invalid, err := filepath.Glob(filepath.Join(goldenDir, "invalid", "*.msgpack"))
		require.NoError(t, err)
		var got []string
		for _, f := range append(files, invalid...) {
			rel, err := filepath.Rel(goldenDir, f)
			require.NoError(t, err)
			got = append(got, filepath.ToSlash(rel))
		}
		slices.Sort(want)
		slices.Sort(got)
		require.Equal(t, want, got)
	})
}
