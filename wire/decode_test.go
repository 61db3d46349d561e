package wire

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeNonCanonical checks that forms our encoder never writes still decode: msgpack
// allows any width that fits.
func TestDecodeNonCanonical(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		data []byte
		want any
	}{
		{name: "Int64Form", data: []byte{0xd3, 0, 0, 0, 0, 0, 0, 0, 1}, want: int64(1)},
		{name: "Uint64FormSmall", data: []byte{0xcf, 0, 0, 0, 0, 0, 0, 0, 2}, want: int64(2)},
		{name: "Int8Positive", data: []byte{0xd0, 0x05}, want: int64(5)},
		{name: "Uint8", data: []byte{0xcc, 0xff}, want: int64(255)},
		{name: "Str32", data: []byte{0xdb, 0, 0, 0, 1, 'a'}, want: "a"},
		{name: "Array32", data: []byte{0xdd, 0, 0, 0, 1, 0xc3}, want: []any{true}},
		{name: "Map16", data: []byte{0xde, 0, 1, 0xa1, 'k', 0xc2}, want: map[string]any{"k": false}},
		{name: "Bin32", data: []byte{0xc6, 0, 0, 0, 2, 9, 8}, want: []byte{9, 8}},
		{name: "TupleExt32", data: []byte{0xc9, 0, 0, 0, 2, 0x04, 0x91, 0x07}, want: Tuple{int64(7)}},
		{name: "TimestampExt8Form", data: []byte{0xc7, 4, 0xff, 0, 0, 0, 1}, want: mustTime(t, "1970-01-01T00:00:01Z")},
		{name: "Timestamp64WholeSeconds", data: []byte{0xd7, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}, want: mustTime(t, "1970-01-01T00:00:01Z")},
		{name: "NDArrayShapeAsInt8", data: extBytes(ExtNDArray, 0x93, 0xa4, 'i', 'n', 't', '8', 0x91, 0xd0, 0x01, 0xc4, 0x01, 0x05),
			want: NDArray{DType: "int8", Shape: []int{1}, Data: []byte{5}}},
		{name: "Float32", data: []byte{0xca, 0x3f, 0x80, 0, 0}, want: float32(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decode(tc.data)
			require.NoError(t, err)
			requireSameValue(t, tc.want, got)
		})
	}
}

func TestDecodeErrorLocation(t *testing.T) {
	t.Parallel()
	// {"a": [1, <0xc1>]}
	data := []byte{0x81, 0xa1, 'a', 0x92, 0x01, 0xc1}
	_, err := Decode(data)
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	require.Equal(t, ".a[1]", de.Path)
	require.Equal(t, 5, de.Offset)
	require.EqualError(t, err, "wire: malformed input at $.a[1] (byte 5): byte 0xc1 is never used in msgpack")

	_, err = Decode([]byte{0x81, 0xa3, 'a', ' ', 'b', 0xa2, 'x'})
	require.ErrorAs(t, err, &de)
	require.Equal(t, `["a b"]`, de.Path)
}

// TestDecodeTruncated decodes every proper prefix of every golden vector: msgpack is
// self-delimiting, so each must fail cleanly.
func TestDecodeTruncated(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.msgpack"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for i := range data {
			_, err := Decode(data[:i])
			require.ErrorIs(t, err, ErrMalformed, "%s cut to %d bytes", f, i)
		}
	}
}

// TestDecodeHugeDeclaredLengths checks that declared lengths beyond the input fail before
// allocating, and that memory stays proportional to the input when they overlap. Not parallel: it measures the bytes allocated, and parallel tests only
// start once the sequential ones are done.
func TestDecodeHugeDeclaredLengths(t *testing.T) { //nolint:paralleltest // measures allocation
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{name: "Map32", data: []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa0, 0xc0}},
		{name: "Str32", data: []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}},
		{name: "Ext32", data: []byte{0xc9, 0xff, 0xff, 0xff, 0xff, 0x01, 0x93}},
		{name: "NDArrayShape", data: extBytes(ExtNDArray, 0x93, 0xa4, 'i', 'n', 't', '8', 0xdd, 0xff, 0xff, 0xff, 0xff)},
		{name: "NDArrayData", data: extBytes(ExtNDArray, 0x93, 0xa4, 'i', 'n', 't', '8', 0x90, 0xc6, 0xff, 0xff, 0xff, 0xff)},
		{name: "NDArrayHugeShape", data: extBytes(ExtNDArray, 0x93, 0xa4, 'i', 'n', 't', '8', 0x92,
			0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xc4, 0x00)},
		{name: "TupleArray", data: extBytes(ExtTuple, 0xdd, 0xff, 0xff, 0xff, 0xff)},
		{name: "ArrayInMap", data: []byte{0x81, 0xa1, 'a', 0xdd, 0x0f, 0xff, 0xff, 0xff, 0x00}},
		{name: "NestedArraysEachDeclaringAllTheInput", data: nestedClaims(0xdc)},
		{name: "NestedMapsEachDeclaringAllTheInput", data: nestedClaims(0xde)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Decode(tc.data)
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, err, ErrMalformed)
			t.Log(err)
			// Bound: 64 KiB plus 128 bytes per input byte. TotalAlloc counts garbage too: 16
			// bytes per preallocated slot (at most one slot per input byte), and for elements
			// past the budget 16 bytes each plus up to twice that in outgrown slices.
			limit := uint64(64<<10 + 128*len(tc.data))
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d input bytes, %d bytes allocated", len(tc.data), allocated)
			require.Less(t, allocated, limit, "bytes allocated")
		})
	}
}

func TestDecodeDoesNotAlias(t *testing.T) {
	t.Parallel()
	a := mustArray(t, []int{2}, []uint8{1, 2})
	data := mustMarshal(t, map[string]any{"arr": a, "bin": []byte{3, 4}, "str": "xy"})
	got, err := Decode(data)
	require.NoError(t, err)
	for i := range data {
		data[i] = 0
	}
	m := got.(map[string]any)
	require.Equal(t, []byte{1, 2}, m["arr"].(NDArray).Data)
	require.Equal(t, []byte{3, 4}, m["bin"])
	require.Equal(t, "xy", m["str"])
}

func TestDecodeGenericTypes(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"small": uint8(3), "neg": int32(-4), "big": uint64(math.MaxInt64), "huge": uint64(math.MaxUint64),
		"f32": float32(0.1), "f64": 0.1, "bytes": []byte("b"), "str": "s",
	}
	got, err := Decode(mustMarshal(t, in))
	require.NoError(t, err)
	requireSameValue(t, map[string]any{
		"small": int64(3), "neg": int64(-4), "big": int64(math.MaxInt64), "huge": uint64(math.MaxUint64),
		"f32": float32(0.1), "f64": 0.1, "bytes": []byte("b"), "str": "s",
	}, got)
}

func TestDecodeEmptyContainersAreNotNil(t *testing.T) {
	t.Parallel()
	for _, data := range [][]byte{{0x90}, {0x80}, {0xc4, 0x00}} {
		got, err := Decode(data)
		require.NoError(t, err)
		require.NotNil(t, got)
		// Re-encoding gives the same bytes, not msgpack nil.
		require.True(t, bytes.Equal(data, mustMarshal(t, got)))
	}
}

// nestedClaims returns MaxDepth-1 nested arrays (lead 0xdc) or maps (0xde), each declaring
// 32767 elements, which the ~64 KiB input could hold at any one level but not at all of
// them: a decoder that allocates what each level declares needs ~16 × 64 KiB × 511.
func nestedClaims(lead byte) []byte {
	var b []byte
	for range MaxDepth - 1 {
		if lead == 0xde {
			b = append(b, lead, 0x7f, 0xff, 0xa0) // map 16 of 32767 entries, first key ""
		} else {
			b = append(b, lead, 0x7f, 0xff) // array 16 of 32767 elements
		}
	}
	return append(b, bytes.Repeat([]byte{0xc0}, 1<<16)...)
}
