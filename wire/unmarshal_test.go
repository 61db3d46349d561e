package wire

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type payload struct {
	Prompt      string            `msgpack:"prompt"`
	Seed        int64             `msgpack:"seed"`
	Temperature float64           `json:"temperature"`
	Steps       uint8             `msgpack:"steps,omitempty"`
	Tags        []string          `msgpack:"tags"`
	Options     map[string]any    `msgpack:"options"`
	Image       *Image            `msgpack:"image,omitempty"`
	Latent      *NDArray          `msgpack:"latent,omitempty"`
	Pair        Tuple             `msgpack:"pair"`
	When        time.Time         `msgpack:"when"`
	Extra       any               `msgpack:"extra"`
	Env         map[string]string `msgpack:"env"`
}

func TestUnmarshalStructRoundTrip(t *testing.T) {
	t.Parallel()
	latent := mustArray(t, []int{2}, []float32{0.5, 1})
	in := payload{
		Prompt: "a cat", Seed: -1, Temperature: 0.7, Steps: 30, Tags: []string{"x"},
		Options: map[string]any{"guidance": 7.5, "nested": []any{int64(1), Tuple{"a"}}},
		Image:   &Image{Format: "png", Data: []byte{1}}, Latent: &latent, Pair: Tuple{int64(1), "b"},
		When: mustTime(t, "2025-01-01T00:00:00.5Z"), Extra: map[string]any{"n": NDArray{DType: "bool", Data: []byte{1}}},
		Env: map[string]string{"K": "V"},
	}
	var out payload
	require.NoError(t, Unmarshal(mustMarshal(t, in), &out))
	require.Equal(t, in, out)
}

func TestUnmarshalGeneric(t *testing.T) {
	t.Parallel()
	data := mustMarshal(t, map[string]any{"a": Tuple{int64(1)}})
	var v any
	require.NoError(t, Unmarshal(data, &v))
	requireSameValue(t, map[string]any{"a": Tuple{int64(1)}}, v)

	var m map[string]any
	require.NoError(t, Unmarshal(data, &m))
	requireSameValue(t, map[string]any{"a": Tuple{int64(1)}}, m)
}

func TestUnmarshalConversions(t *testing.T) {
	t.Parallel()
	type named string
	var (
		i8    int8
		u     uint
		f32   float32
		f64   float64
		n     named
		ints  []int
		arr   [2]uint8
		barr  [3]byte
		bs    []byte
		p     *int
		pp    = new(int)
		m     map[named]int
		iface any = "old"
	)
	for _, tc := range []struct {
		name  string
		value any // marshalled, then unmarshalled into ptr
		ptr   any
		check func(t *testing.T)
	}{
		{name: "IntIntoInt8", value: -128, ptr: &i8, check: func(t *testing.T) { require.Equal(t, int8(-128), i8) }},
		{name: "MaxUint64IntoUint", value: uint64(math.MaxUint64), ptr: &u, check: func(t *testing.T) { require.Equal(t, uint(math.MaxUint64), u) }},
		{name: "IntIntoFloat", value: 3, ptr: &f64, check: func(t *testing.T) { require.Equal(t, 3.0, f64) }},
		{name: "Float64IntoFloat32", value: 0.5, ptr: &f32, check: func(t *testing.T) { require.Equal(t, float32(0.5), f32) }},
		{name: "StrIntoNamed", value: "x", ptr: &n, check: func(t *testing.T) { require.Equal(t, named("x"), n) }},
		{name: "TupleIntoSlice", value: Tuple{1, 2}, ptr: &ints, check: func(t *testing.T) { require.Equal(t, []int{1, 2}, ints) }},
		{name: "ArrayIntoArray", value: []any{1, 2}, ptr: &arr, check: func(t *testing.T) { require.Equal(t, [2]uint8{1, 2}, arr) }},
		{name: "BinIntoByteArray", value: []byte{1, 2, 3}, ptr: &barr, check: func(t *testing.T) { require.Equal(t, [3]byte{1, 2, 3}, barr) }},
		{name: "BinIntoBytes", value: []byte{9}, ptr: &bs, check: func(t *testing.T) { require.Equal(t, []byte{9}, bs) }},
		{name: "IntoNilPointer", value: 5, ptr: &p, check: func(t *testing.T) { require.Equal(t, 5, *p) }},
		{name: "NilIntoPointer", value: nil, ptr: &pp, check: func(t *testing.T) { require.Nil(t, pp) }},
		{name: "NamedKeys", value: map[string]int{"a": 1}, ptr: &m, check: func(t *testing.T) { require.Equal(t, map[named]int{"a": 1}, m) }},
		{name: "NilIntoInterface", value: nil, ptr: &iface, check: func(t *testing.T) { require.Nil(t, iface) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: the cases share the variables above.
			require.NoError(t, Unmarshal(mustMarshal(t, tc.value), tc.ptr))
			tc.check(t)
		})
	}
}

func TestUnmarshalMergesIntoExisting(t *testing.T) {
	t.Parallel()
	out := payload{Prompt: "kept", Env: map[string]string{"OLD": "1"}}
	require.NoError(t, Unmarshal(mustMarshal(t, map[string]any{"seed": 4, "env": map[string]any{"NEW": "2"}, "unknown": 1}), &out))
	require.Equal(t, "kept", out.Prompt)
	require.Equal(t, int64(4), out.Seed)
	require.Equal(t, map[string]string{"OLD": "1", "NEW": "2"}, out.Env)
}

func TestUnmarshalEmbedded(t *testing.T) {
	t.Parallel()
	type Meta struct{ Owner string }
	type job struct {
		*Meta
		ID string `json:"id"`
	}
	var out job
	require.NoError(t, Unmarshal(mustMarshal(t, map[string]any{"Owner": "me", "id": "j"}), &out))
	require.Equal(t, job{Meta: &Meta{Owner: "me"}, ID: "j"}, out)
}

func TestUnmarshalMismatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		value any
		ptr   any
		msg   string
	}{
		{name: "StrIntoInt", value: map[string]any{"seed": "x"}, ptr: new(payload),
			msg: "wire: cannot put str into int64 at $.seed"},
		{name: "Overflow", value: 300, ptr: new(int8), msg: "wire: cannot put int into int8 at $: 300 overflows int8"},
		{name: "HugeIntoInt64", value: uint64(math.MaxUint64), ptr: new(int64),
			msg: "wire: cannot put int into int64 at $: 18446744073709551615 overflows int64"},
		{name: "NegativeIntoUint", value: -1, ptr: new(uint), msg: "wire: cannot put int into uint at $: -1 is negative"},
		{name: "FloatIntoInt", value: 1.5, ptr: new(int), msg: "wire: cannot put float64 into int at $"},
		{name: "BinIntoString", value: []byte("x"), ptr: new(string), msg: "wire: cannot put bin into string at $"},
		{name: "StrIntoBytes", value: "x", ptr: new([]byte), msg: "wire: cannot put str into []uint8 at $"},
		{name: "ListIntoTuple", value: []any{1}, ptr: new(Tuple), msg: "wire: cannot put array into wire.Tuple at $"},
		{name: "TensorIntoNDArray", value: Tensor{DType: "int8", Data: []byte{1}}, ptr: new(NDArray),
			msg: "wire: cannot put tensor into wire.NDArray at $"},
		{name: "ArrayLength", value: []any{1, 2, 3}, ptr: new([2]int), msg: "wire: cannot put array into [2]int at $: 3 elements; want 2"},
		{name: "NestedElement", value: map[string]any{"tags": []any{"a", 2}}, ptr: new(payload),
			msg: "wire: cannot put int into string at $.tags[1]"},
		{name: "IntKeyedMap", value: map[string]any{"1": 1}, ptr: new(map[int]int),
			msg: "wire: cannot put map into map[int]int at $: map keys must be strings"},
		{name: "IntoError", value: "x", ptr: new(error), msg: "wire: cannot put str into error at $"},
		{name: "IntoChan", value: 1, ptr: new(chan int), msg: "wire: cannot put int into chan int at $: the Go type cannot hold wire values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Unmarshal(mustMarshal(t, tc.value), tc.ptr)
			require.ErrorIs(t, err, ErrMismatch)
			require.NotErrorIs(t, err, ErrMalformed)
			require.EqualError(t, err, tc.msg)
		})
	}
}

func TestUnmarshalBadTarget(t *testing.T) {
	t.Parallel()
	data := mustMarshal(t, 1)
	var x int
	for _, v := range []any{nil, x, (*int)(nil)} {
		err := Unmarshal(data, v)
		require.ErrorIs(t, err, ErrUnsupported)
	}
	require.ErrorIs(t, Unmarshal([]byte{0xc1}, &x), ErrMalformed)
}
