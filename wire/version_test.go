package wire

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bytes wire version 1 wrote (the golden vectors before version 2): a thunk as ext 5, and
// tuples as ext 4.
const (
	v1Thunk       = "c7190592b2707974686f6e2d636c6f75647069636b6c65c403800595"
	v1TuplePair   = "d6049201a161"
	v1TupleInMap  = "82a46c6973749201cb4004000000000000a470616972c70b049201cb4004000000000000"
	v1TupleNested = "d70492d40490d50491c0"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// TestVersion1ThunkReadsAsVersion1Wrote checks that version 1's thunk bytes (ext 5) decode
// to the Thunk with DecodeOptions{Version: 1}, re-encode as version 2's ext 64, and that the
// same bytes read as version 2 are the tuple ("python-cloudpickle", bytes), as
// dreamlake-lakeshore reads them.
func TestVersion1ThunkReadsAsVersion1Wrote(t *testing.T) {
	t.Parallel()
	old := mustHex(t, v1Thunk)
	thunk := Thunk{Language: "python-cloudpickle", Data: []byte{0x80, 0x05, 0x95}}
	got, err := DecodeWith(old, DecodeOptions{Version: 1})
	require.NoError(t, err)
	requireSameValue(t, thunk, got)
	again := mustMarshal(t, got)
	require.Equal(t, byte(ExtThunk), again[2], "re-encoded as ext 64")
	back, err := Decode(again)
	require.NoError(t, err)
	requireSameValue(t, thunk, back)

	asV2, err := Decode(old)
	require.NoError(t, err)
	requireSameValue(t, Tuple{"python-cloudpickle", []byte{0x80, 0x05, 0x95}}, asV2)
}

// TestVersion1TuplesReadInEveryVersion checks that version 1's ext-4 tuples decode as
// tuples whatever the version option, and re-encode as ext 5.
func TestVersion1TuplesReadInEveryVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		hex  string
		want any
	}{
		{v1TuplePair, Tuple{int64(1), "a"}},
		{v1TupleInMap, map[string]any{"pair": Tuple{int64(1), 2.5}, "list": []any{int64(1), 2.5}}},
		{v1TupleNested, Tuple{Tuple{}, Tuple{nil}}},
	} {
		for _, version := range []int{0, 1, 2} {
			got, err := DecodeWith(mustHex(t, tc.hex), DecodeOptions{Version: version})
			require.NoError(t, err)
			requireSameValue(t, tc.want, got)
		}
		require.Equal(t, len(tc.hex)/2, len(mustMarshal(t, tc.want)), "ext 5 takes the bytes ext 4 took")
	}
	got, err := Decode(mustHex(t, v1TuplePair))
	require.NoError(t, err)
	require.Equal(t, "d6059201a161", hex.EncodeToString(mustMarshal(t, got)))
}

// TestDecodeWithUnknownVersion checks that a version this package does not know is refused.
func TestDecodeWithUnknownVersion(t *testing.T) {
	t.Parallel()
	for _, v := range []int{-1, 3} {
		_, err := DecodeWith([]byte{0xc0}, DecodeOptions{Version: v})
		require.ErrorIs(t, err, ErrMalformed)
	}
}

// TestByteOrderDTypesNormalise checks that byte-order dtype names decode to the plain name
// and little-endian data, and that Verbatim keeps them as written so they re-encode exactly.
func TestByteOrderDTypesNormalise(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		written NDArray
		want    NDArray
	}{
		{NDArray{DType: ">i4", Shape: []int{2}, Data: []byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe}},
			mustArray(t, []int{2}, []int32{1, -2})},
		{NDArray{DType: "<f8", Shape: []int{1}, Data: []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
			mustArray(t, nil, []float64{1})},
		{NDArray{DType: ">c8", Shape: []int{1}, Data: []byte{0x3f, 0x80, 0, 0, 0x40, 0, 0, 0}},
			NDArray{DType: "complex64", Shape: []int{1}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}}},
		{NDArray{DType: "|u1", Shape: []int{2}, Data: []byte{7, 8}}, mustArray(t, []int{2}, []uint8{7, 8})},
		{NDArray{DType: ">f2", Shape: []int{1}, Data: []byte{0x3c, 0x00}},
			NDArray{DType: "float16", Shape: []int{1}, Data: []byte{0x00, 0x3c}}},
	} {
		b := mustMarshal(t, tc.written)
		got, err := Decode(b)
		require.NoError(t, err)
		want := tc.want
		if len(want.Shape) == 0 {
			want.Shape = tc.written.Shape
		}
		requireSameValue(t, want, got)
		tensor, err := Decode(mustMarshal(t, Tensor(tc.written)))
		require.NoError(t, err)
		requireSameValue(t, Tensor(want), tensor)

		kept, err := DecodeWith(b, DecodeOptions{Verbatim: true})
		require.NoError(t, err)
		requireSameValue(t, tc.written, kept)
		require.Equal(t, b, mustMarshal(t, kept))
	}
	values, err := NDArrayValues[int32](NDArray{DType: ">i4", Shape: []int{1}, Data: []byte{0, 0, 1, 0}})
	require.NoError(t, err)
	require.Equal(t, []int32{256}, values)
}

// TestVerbatimKeepsKeyOrder checks that Verbatim decodes maps to Map in wire order, nested
// too, that Marshal writes a Map in its order, and that Decode still refuses duplicates.
func TestVerbatimKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	m := Map{{"zeta", int64(1)}, {"alpha", Map{{"b", nil}, {"a", []any{Map{}}}}}, {"mid", Tuple{Map{{"y", true}, {"x", false}}}}}
	b := mustMarshal(t, m)
	require.Equal(t, "zeta", string(b[2:6]))
	got, err := DecodeWith(b, DecodeOptions{Verbatim: true})
	require.NoError(t, err)
	require.Equal(t, m, got)
	require.Equal(t, b, mustMarshal(t, got))
	v, ok := got.(Map).Get("zeta")
	require.True(t, ok)
	require.Equal(t, int64(1), v)
	_, ok = got.(Map).Get("nope")
	require.False(t, ok)

	plain, err := Decode(b)
	require.NoError(t, err)
	requireSameValue(t, map[string]any{"zeta": int64(1), "alpha": map[string]any{"b": nil, "a": []any{map[string]any{}}},
		"mid": Tuple{map[string]any{"y": true, "x": false}}}, plain)

	_, err = DecodeWith([]byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02}, DecodeOptions{Verbatim: true})
	require.ErrorIs(t, err, ErrMalformed)
	_, err = DecodeWith([]byte{0x81, 0x01, 0x02}, DecodeOptions{Verbatim: true})
	require.ErrorIs(t, err, ErrMalformed)
	_, err = Marshal(Map{{"a", 1}, {"a", 2}})
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorContains(t, err, "twice")
	type holder struct {
		M Map `msgpack:"m"`
	}
	inStruct := mustMarshal(t, holder{M: Map{{"b", int64(1)}, {"a", int64(2)}}})
	require.Equal(t, append([]byte{0x81, 0xa1, 'm'}, mustMarshal(t, Map{{"b", int64(1)}, {"a", int64(2)}})...), inStruct,
		"a Map field keeps its order too")
	nilMap, err := Marshal(Map(nil))
	require.NoError(t, err)
	require.Equal(t, []byte{0xc0}, nilMap)
}

// TestImageFormatEitherCase checks that an image's format is kept as written, upper case
// (PIL's "PNG", as dreamlake-lakeshore writes it) included.
func TestImageFormatEitherCase(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"PNG", "png", "Jpeg"} {
		img := Image{Format: format, Data: []byte{1, 2}}
		b := mustMarshal(t, img)
		got, err := Decode(b)
		require.NoError(t, err)
		require.Equal(t, img, got)
	}
}

// TestVersion1UpgradeRecipe checks docs/wire.md's upgrade of stored version 1 bytes:
// Marshal(DecodeWith(b, {Version: 1, Verbatim: true})) gives the version 2 golden vectors.
func TestVersion1UpgradeRecipe(t *testing.T) {
	t.Parallel()
	for old, golden := range map[string]string{v1Thunk: "thunk", v1TupleInMap: "tuple-in-map",
		v1TuplePair: "tuple-pair", v1TupleNested: "tuple-nested"} {
		v, err := DecodeWith(mustHex(t, old), DecodeOptions{Version: 1, Verbatim: true})
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join(goldenDir, golden+".msgpack"))
		require.NoError(t, err)
		require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(mustMarshal(t, v)), golden)
	}
}
