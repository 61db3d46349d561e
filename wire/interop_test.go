package wire

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// The reference implementation is github.com/vmihailenco/msgpack/v5, with extension
// handlers written here against its own Encoder/Decoder API, so that it checks our bytes
// without sharing any code with this package. Its ext registry is global: the handlers are
// registered once, in TestMain, before any test runs.

type (
	refNDArray struct {
		DType string
		Shape []int64
		Data  []byte
	}
	refTensor refNDArray
	refImage  struct {
		Format string
		Data   []byte
	}
	refTuple struct{ Items []any } // a struct: vmihailenco mishandles ext types that are slices
	refThunk struct {
		Language string
		Data     []byte
	}
)

// newRefEncoder returns a vmihailenco encoder configured for canonical Lakeshore bytes:
// smallest integer forms and sorted map keys.
func newRefEncoder(buf *bytes.Buffer) *msgpack.Encoder {
	enc := msgpack.NewEncoder(buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	return enc
}

// refEncode encodes v with the reference encoder.
func refEncode(v any) ([]byte, error) {
	var buf bytes.Buffer
	err := newRefEncoder(&buf).Encode(v)
	return buf.Bytes(), err
}

// refPayload encodes the values of an extension payload as one array.
func refPayload(values ...any) ([]byte, error) {
	var buf bytes.Buffer
	enc := newRefEncoder(&buf)
	if err := enc.EncodeArrayLen(len(values)); err != nil {
		return nil, err
	}
	for _, v := range values {
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// refDecodeArray reads [dtype, shape, data] with the reference decoder.
func refDecodeArray(d *msgpack.Decoder) (refNDArray, error) {
	var a refNDArray
	n, err := d.DecodeArrayLen()
	if err != nil || n != 3 {
		return a, fmt.Errorf("array payload: len %d, %v", n, err)
	}
	if a.DType, err = d.DecodeString(); err != nil {
		return a, err
	}
	dims, err := d.DecodeArrayLen()
	if err != nil {
		return a, err
	}
	a.Shape = make([]int64, dims)
	for i := range a.Shape {
		if a.Shape[i], err = d.DecodeInt64(); err != nil {
			return a, err
		}
	}
	a.Data, err = d.DecodeBytes()
	return a, err
}

// refDecodePair reads [name, data] with the reference decoder.
func refDecodePair(d *msgpack.Decoder) (string, []byte, error) {
	n, err := d.DecodeArrayLen()
	if err != nil || n != 2 {
		return "", nil, fmt.Errorf("pair payload: len %d, %v", n, err)
	}
	name, err := d.DecodeString()
	if err != nil {
		return "", nil, err
	}
	data, err := d.DecodeBytes()
	return name, data, err
}

func registerReferenceExts() {
	msgpack.RegisterExtEncoder(ExtNDArray, refNDArray{}, func(_ *msgpack.Encoder, v reflect.Value) ([]byte, error) {
		a := v.Interface().(refNDArray)
		return refPayload(a.DType, a.Shape, a.Data)
	})
	msgpack.RegisterExtDecoder(ExtNDArray, refNDArray{}, func(d *msgpack.Decoder, v reflect.Value, _ int) error {
		a, err := refDecodeArray(d)
		v.Set(reflect.ValueOf(a))
		return err
	})
	msgpack.RegisterExtEncoder(ExtTensor, refTensor{}, func(_ *msgpack.Encoder, v reflect.Value) ([]byte, error) {
		a := v.Interface().(refTensor)
		return refPayload(a.DType, a.Shape, a.Data)
	})
	msgpack.RegisterExtDecoder(ExtTensor, refTensor{}, func(d *msgpack.Decoder, v reflect.Value, _ int) error {
		a, err := refDecodeArray(d)
		v.Set(reflect.ValueOf(refTensor(a)))
		return err
	})
	msgpack.RegisterExtEncoder(ExtImage, refImage{}, func(_ *msgpack.Encoder, v reflect.Value) ([]byte, error) {
		im := v.Interface().(refImage)
		return refPayload(im.Format, im.Data)
	})
	msgpack.RegisterExtDecoder(ExtImage, refImage{}, func(d *msgpack.Decoder, v reflect.Value, _ int) error {
		format, data, err := refDecodePair(d)
		v.Set(reflect.ValueOf(refImage{Format: format, Data: data}))
		return err
	})
	msgpack.RegisterExtEncoder(ExtThunk, refThunk{}, func(_ *msgpack.Encoder, v reflect.Value) ([]byte, error) {
		th := v.Interface().(refThunk)
		return refPayload(th.Language, th.Data)
	})
	msgpack.RegisterExtDecoder(ExtThunk, refThunk{}, func(d *msgpack.Decoder, v reflect.Value, _ int) error {
		lang, data, err := refDecodePair(d)
		v.Set(reflect.ValueOf(refThunk{Language: lang, Data: data}))
		return err
	})
	msgpack.RegisterExtEncoder(ExtTuple, refTuple{}, func(_ *msgpack.Encoder, v reflect.Value) ([]byte, error) {
		return refPayload(v.Interface().(refTuple).Items...)
	})
	msgpack.RegisterExtDecoder(ExtTuple, refTuple{}, func(d *msgpack.Decoder, v reflect.Value, _ int) error {
		items, err := d.DecodeSlice()
		v.Set(reflect.ValueOf(refTuple{Items: items}))
		return err
	})
}

// toRef converts a generic value into the values the reference encoder should write the
// same way.
func toRef(v any) any {
	switch x := v.(type) {
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toRef(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = toRef(e)
		}
		return out
	case NDArray:
		return refNDArray{DType: x.DType, Shape: refShape(x.Shape), Data: x.Data}
	case Tensor:
		return refTensor{DType: x.DType, Shape: refShape(x.Shape), Data: x.Data}
	case Image:
		return refImage(x)
	case Thunk:
		return refThunk(x)
	case Tuple:
		out := refTuple{Items: make([]any, len(x))}
		for i, e := range x {
			out.Items[i] = toRef(e)
		}
		return out
	}
	return v
}

func refShape(shape []int) []int64 {
	out := make([]int64, len(shape))
	for i, d := range shape {
		out[i] = int64(d)
	}
	return out
}

// fromRef converts what the reference decoder returns into our generic form.
func fromRef(v any) any {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromRef(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fromRef(e)
		}
		return out
	case refNDArray:
		return NDArray{DType: x.DType, Shape: ourShape(x.Shape), Data: x.Data}
	case refTensor:
		return Tensor{DType: x.DType, Shape: ourShape(x.Shape), Data: x.Data}
	case refImage:
		return Image(x)
	case refThunk:
		return Thunk(x)
	case refTuple:
		out := make(Tuple, len(x.Items))
		for i, e := range x.Items {
			out[i] = fromRef(e)
		}
		return out
	case time.Time:
		return x.UTC()
	}
	return v
}

func ourShape(shape []int64) []int {
	out := make([]int, len(shape))
	for i, d := range shape {
		out[i] = int(d)
	}
	return out
}

// TestReference checks, for every golden case, that the reference decoder reads our bytes
// as the same value, and that the reference encoder writes the very same bytes, which our
// decoder reads back.
func TestReference(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ours := mustMarshal(t, c.value)

			t.Run("TheyDecodeOurs", func(t *testing.T) {
				t.Parallel()
				var got any
				require.NoError(t, msgpack.Unmarshal(ours, &got))
				requireSameValue(t, c.decoded(), fromRef(got))
			})
			t.Run("WeDecodeTheirs", func(t *testing.T) {
				t.Parallel()
				theirs, err := refEncode(toRef(c.value))
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("%x", ours), fmt.Sprintf("%x", theirs), "same bytes from both encoders")
				got, err := Decode(theirs)
				require.NoError(t, err)
				requireSameValue(t, c.decoded(), got)
			})
		})
	}
}

// TestReferenceStruct checks a struct with every kind of field: their Unmarshal reads our
// bytes into the same struct, their bytes (same tags) are ours, and we read them back.
func TestReferenceStruct(t *testing.T) {
	t.Parallel()
	type Inner struct {
		Name  string  `msgpack:"name"`
		Ratio float32 `msgpack:"ratio"`
	}
	type Job struct {
		ID       string            `msgpack:"id"`
		Seed     int64             `msgpack:"seed"`
		Count    uint16            `msgpack:"count"`
		Temp     float64           `msgpack:"temperature"`
		Tags     []string          `msgpack:"tags"`
		Labels   map[string]string `msgpack:"labels"`
		Blob     []byte            `msgpack:"blob"`
		When     time.Time         `msgpack:"when"`
		Inner    Inner             `msgpack:"inner"`
		Ptr      *Inner            `msgpack:"ptr"`
		Skipped  string            `msgpack:"-"`
		Optional string            `msgpack:"optional,omitempty"`
	}
	when := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	job := Job{ID: "j1", Seed: -7, Count: 300, Temp: 0.25, Tags: []string{"a", "b"},
		Labels: map[string]string{"z": "1", "a": "2"}, Blob: []byte{1, 2}, When: when,
		Inner: Inner{Name: "x", Ratio: 0.5}, Skipped: "not sent"}

	ours := mustMarshal(t, job)
	theirs, err := refEncode(job)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%x", theirs), fmt.Sprintf("%x", ours))

	var back Job
	require.NoError(t, msgpack.Unmarshal(ours, &back))
	back.When = back.When.UTC()
	want := job
	want.Skipped = ""
	require.Equal(t, want, back)

	var again Job
	require.NoError(t, Unmarshal(theirs, &again))
	require.Equal(t, want, again)
}
