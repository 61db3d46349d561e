package wire

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNDArrayRoundTrip(t *testing.T) {
	t.Parallel()
	t.Run("Bool", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []bool{true, false}, "bool", 1) })
	t.Run("Int8", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []int8{math.MinInt8, 1}, "int8", 1) })
	t.Run("Int16", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []int16{math.MinInt16, 1}, "int16", 2) })
	t.Run("Int32", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []int32{math.MinInt32, 1}, "int32", 4) })
	t.Run("Int64", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []int64{math.MinInt64, 1}, "int64", 8) })
	t.Run("Uint8", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []uint8{255, 1}, "uint8", 1) })
	t.Run("Uint16", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []uint16{math.MaxUint16, 1}, "uint16", 2) })
	t.Run("Uint32", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []uint32{math.MaxUint32, 1}, "uint32", 4) })
	t.Run("Uint64", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []uint64{math.MaxUint64, 1}, "uint64", 8) })
	t.Run("Float32", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []float32{-1.5, 1e-30}, "float32", 4) })
	t.Run("Float64", func(t *testing.T) { t.Parallel(); checkRoundTrip(t, []float64{-1.5, 1e-300}, "float64", 8) })
}

// checkRoundTrip builds a [2]-shaped array from values, checks its dtype and bytes, and
// reads the values back after a trip through the wire.
func checkRoundTrip[T Element](t *testing.T, values []T, dtype string, size int) {
	t.Helper()
	require.Equal(t, dtype, DTypeOf[T]())
	got, ok := ItemSize(dtype)
	require.True(t, ok)
	require.Equal(t, size, got)

	a, err := NewNDArray([]int{len(values)}, values)
	require.NoError(t, err)
	require.Equal(t, dtype, a.DType)
	require.Len(t, a.Data, len(values)*size)
	require.NoError(t, a.Validate())

	decoded, err := Decode(mustMarshal(t, a))
	require.NoError(t, err)
	back, err := NDArrayValues[T](decoded.(NDArray))
	require.NoError(t, err)
	require.Equal(t, values, back)
}

func TestNewNDArrayLittleEndian(t *testing.T) {
	t.Parallel()
	a := mustArray(t, []int{2}, []uint16{0x0102, 0x0304})
	require.Equal(t, []byte{0x02, 0x01, 0x04, 0x03}, a.Data)
}

func TestNewNDArrayCopies(t *testing.T) {
	t.Parallel()
	shape := []int{1}
	a := mustArray(t, shape, []int8{1})
	shape[0] = 5
	require.Equal(t, []int{1}, a.Shape)
}

func TestNewNDArrayErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		shape  []int
		values []float32
	}{
		{name: "TooFewValues", shape: []int{2, 2}, values: []float32{1, 2, 3}},
		{name: "TooManyValues", shape: nil, values: []float32{1, 2}},
		{name: "NegativeDim", shape: []int{-1}, values: nil},
		{name: "TooManyDims", shape: make([]int, MaxDims+1), values: nil},
		{name: "OverflowingShape", shape: []int{math.MaxInt, math.MaxInt}, values: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewNDArray(tc.shape, tc.values)
			require.ErrorIs(t, err, ErrUnsupported)
			t.Log(err)
		})
	}
}

func TestNDArrayValuesErrors(t *testing.T) {
	t.Parallel()
	a := mustArray(t, []int{1}, []float32{1})
	_, err := NDArrayValues[float64](a)
	require.ErrorIs(t, err, ErrMismatch)
	require.EqualError(t, err, "wire: cannot put ndarray into []float64 at $: dtype is float32, want float64")

	_, err = NDArrayValues[float32](NDArray{DType: "float32", Shape: []int{2}, Data: make([]byte, 4)})
	require.ErrorIs(t, err, ErrUnsupported)
}

func TestNDArrayValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		array NDArray
		ok    bool
	}{
		{name: "ZeroDim", array: NDArray{DType: "int32", Data: make([]byte, 4)}, ok: true},
		{name: "EmptyShapeIsZeroDim", array: NDArray{DType: "int32", Shape: []int{}, Data: make([]byte, 4)}, ok: true},
		{name: "ZeroSizedWithHugeDim", array: NDArray{DType: "int64", Shape: []int{0, math.MaxInt}}, ok: true},
		{name: "MaxDims", array: NDArray{DType: "uint8", Shape: ones(MaxDims), Data: []byte{7}}, ok: true},
		{name: "Complex128", array: NDArray{DType: "complex128", Shape: []int{1}, Data: make([]byte, 16)}, ok: true},
		{name: "ZeroValue", array: NDArray{}},
		{name: "NumpyByteOrderLittle", array: NDArray{DType: "<f4", Shape: []int{1}, Data: make([]byte, 4)}, ok: true},
		{name: "NumpyByteOrderBig", array: NDArray{DType: ">c16", Shape: []int{1}, Data: make([]byte, 16)}, ok: true},
		{name: "NumpyByteOrderOneByte", array: NDArray{DType: "|u1", Shape: []int{1}, Data: make([]byte, 1)}, ok: true},
		{name: "NumpyByteOrderNative", array: NDArray{DType: "=f4", Shape: []int{1}, Data: make([]byte, 4)}},
		{name: "NumpyByteOrderNotApplicableWide", array: NDArray{DType: "|f4", Shape: []int{1}, Data: make([]byte, 4)}},
		{name: "NumpyByteOrderWrongLength", array: NDArray{DType: ">i8", Shape: []int{1}, Data: make([]byte, 4)}},
		{name: "WrongLength", array: NDArray{DType: "float16", Shape: []int{3}, Data: make([]byte, 5)}},
		{name: "HugeBytes", array: NDArray{DType: "complex128", Shape: []int{math.MaxInt / 8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.array.Validate()
			terr := Tensor(tc.array).Validate()
			if tc.ok {
				require.NoError(t, err)
				require.NoError(t, terr)
				return
			}
			require.ErrorIs(t, err, ErrUnsupported)
			require.ErrorIs(t, terr, ErrUnsupported)
			t.Log(err)
		})
	}
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func TestItemSizeUnknown(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "float", "int", "object", "str", "U8", "Float32"} {
		_, ok := ItemSize(name)
		require.False(t, ok, name)
	}
}
