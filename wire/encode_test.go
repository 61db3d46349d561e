package wire

import (
	"encoding/hex"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMarshalUnsupported(t *testing.T) {
	t.Parallel()
	type node struct{ Next *node }
	cycle := &node{}
	cycle.Next = cycle
	var selfRef any
	selfRef = &selfRef
	deep := any(nil)
	for range MaxDepth + 1 {
		deep = []any{deep}
	}
	for _, tc := range []struct {
		name  string
		value any
		path  string // expected EncodeError.Path
	}{
		{name: "Chan", value: make(chan int)},
		{name: "Func", value: func() {}},
		{name: "Complex64", value: complex64(1 + 2i)},
		{name: "Complex128InStruct", value: struct{ C complex128 }{}, path: ".C"},
		{name: "Uintptr", value: uintptr(1)},
		{name: "IntKeyedMap", value: map[int]string{1: "a"}},
		{name: "BadUTF8", value: "\xff"},
		{name: "BadUTF8Key", value: map[string]any{"\xff": 1}, path: `["\xff"]`},
		{name: "BadUTF8NamedString", value: []myString{"ok", "\xfe"}, path: "[1]"},
		{name: "NestedChan", value: map[string]any{"a": []any{1, make(chan int)}}, path: ".a[1]"},
		{name: "NDArrayUnknownDType", value: NDArray{DType: "float8", Data: []byte{0}}},
		{name: "NDArrayShortData", value: NDArray{DType: "float32", Shape: []int{2}, Data: make([]byte, 4)}},
		{name: "NDArrayNegativeDim", value: NDArray{DType: "uint8", Shape: []int{-1}}},
		{name: "NDArrayTooManyDims", value: NDArray{DType: "uint8", Shape: make([]int, MaxDims+1)}},
		{name: "NDArrayOverflowingShape", value: NDArray{DType: "uint8", Shape: []int{1 << 40, 1 << 40}}},
		{name: "TensorInTuple", value: Tuple{1, Tensor{DType: "int8"}}, path: "[1]"},
		{name: "ImageNoFormat", value: Image{Data: []byte{1}}},
		{name: "ThunkNoLanguage", value: &Thunk{Data: []byte{1}}},
		{name: "PointerCycle", value: cycle},
		{name: "InterfaceCycle", value: selfRef},
		{name: "TooDeep", value: deep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := []byte{0xc0}
			out, err := Append(prefix, tc.value)
			require.ErrorIs(t, err, ErrUnsupported)
			require.NotErrorIs(t, err, ErrMalformed)
			require.Equal(t, prefix, out, "Append returns b unchanged on error")
			var ee *EncodeError
			require.ErrorAs(t, err, &ee)
			if tc.path != "" {
				require.Equal(t, tc.path, ee.Path)
			}
			t.Log(err)
		})
	}
}

type myString string

func TestMarshalDepthLimit(t *testing.T) {
	t.Parallel()
	v := any(int64(1))
	for range MaxDepth {
		v = []any{v}
	}
	b := mustMarshal(t, v) // MaxDepth nested arrays: allowed both ways
	got, err := Decode(b)
	require.NoError(t, err)
	requireSameValue(t, v, got)

	_, err = Marshal([]any{v})
	require.ErrorIs(t, err, ErrUnsupported)
	_, err = Decode(append([]byte{0x91}, b...))
	require.ErrorIs(t, err, ErrMalformed)
}

func TestMarshalReflect(t *testing.T) {
	t.Parallel()
	type Base struct {
		ID   string `json:"id"`
		Kind string `json:"kind"` // shadowed by withEmbedded.Kind
	}
	type Extra struct{ Note string }
	type withEmbedded struct {
		Base
		*Extra
		Kind  string `msgpack:"kind"`
		Count int    `json:"count,omitempty"`
		Skip  int    `json:"-"`
		Both  int    `msgpack:"both" json:"ignored"`
		inner int
	}
	type color string
	seven := 7
	for _, tc := range []struct {
		name  string
		value any
		want  any // the generic value the bytes must decode to
	}{
		{name: "NamedString", value: color("red"), want: "red"},
		{name: "IntPointer", value: &seven, want: int64(7)},
		{name: "NilPointer", value: (*int)(nil), want: nil},
		{name: "NilSlice", value: []string(nil), want: nil},
		{name: "NilBytes", value: []byte(nil), want: nil},
		{name: "NilMap", value: map[string]int(nil), want: nil},
		{name: "NilAnySlice", value: []any(nil), want: nil},
		{name: "NilTupleIsEmpty", value: Tuple(nil), want: Tuple{}},
		{name: "TypedSlice", value: []float32{1, 2}, want: []any{float32(1), float32(2)}},
		{name: "ByteArray", value: [3]byte{1, 2, 3}, want: []byte{1, 2, 3}},
		{name: "IntArray", value: [2]int8{-1, 1}, want: []any{int64(-1), int64(1)}},
		{name: "TypedMap", value: map[color]uint{"b": 2, "a": 1}, want: map[string]any{"a": int64(1), "b": int64(2)}},
		{name: "MapOfPointers", value: map[string]*int{"x": &seven, "y": nil}, want: map[string]any{"x": int64(7), "y": nil}},
		{name: "NDArrayPointer", value: &NDArray{DType: "int8", Shape: []int{1}, Data: []byte{0xff}},
			want: NDArray{DType: "int8", Shape: []int{1}, Data: []byte{0xff}}},
		{name: "Struct", value: withEmbedded{Base: Base{ID: "a", Kind: "shadowed"}, Kind: "k", Skip: 9, Both: 2, inner: 3},
			want: map[string]any{"id": "a", "kind": "k", "both": int64(2)}},
		{name: "StructEmbeddedPointer", value: withEmbedded{Extra: &Extra{Note: "n"}, Count: 4},
			want: map[string]any{"id": "", "Note": "n", "kind": "", "count": int64(4), "both": int64(0)}},
		{name: "StructInAny", value: map[string]any{"s": struct{ A []int }{A: []int{1}}},
			want: map[string]any{"s": map[string]any{"A": []any{int64(1)}}}},
		{name: "UintMaxValue", value: uint64(math.MaxUint64), want: uint64(math.MaxUint64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Decode(mustMarshal(t, tc.value))
			require.NoError(t, err)
			requireSameValue(t, tc.want, got)
		})
	}
}

func TestMarshalDeterministic(t *testing.T) {
	t.Parallel()
	m := map[string]any{}
	for _, k := range []string{"zeta", "alpha", "mu", "beta", "omega", "é", "A", ""} {
		m[k] = map[string]int{k + "2": 2, k + "1": 1}
	}
	first := mustMarshal(t, m)
	for range 20 {
		require.Equal(t, first, mustMarshal(t, m))
	}
}

func TestAppend(t *testing.T) {
	t.Parallel()
	b, err := Append([]byte{0x01}, "hi")
	require.NoError(t, err)
	require.Equal(t, "01a26869", hex.EncodeToString(b))
}

func TestMarshalErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := Marshal(map[string]any{"inputs": []any{NDArray{DType: "float32", Shape: []int{3}, Data: make([]byte, 8)}}})
	require.EqualError(t, err, "wire: cannot encode wire.NDArray at $.inputs[0]: "+
		"data is 8 bytes; shape [3] of float32 needs 12 (3 elements × 4 bytes)")
	require.True(t, errors.Is(err, ErrUnsupported))
}
