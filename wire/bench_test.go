package wire

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// The benchmarks compare this package with github.com/vmihailenco/msgpack/v5 (configured for
// the same bytes: compact ints, sorted keys) on a small payload map and a 1 MiB float32
// NDArray. Run: go test ./wire -run '^$' -bench . -benchmem

func smallPayload() map[string]any {
	return map[string]any{"prompt": "a lighthouse at dusk, oil painting", "seed": int64(1234), "temperature": 0.7}
}

func bigArray(b *testing.B) NDArray {
	values := make([]float32, 1<<18) // 1 MiB of float32
	for i := range values {
		values[i] = float32(i) * 0.5
	}
	a, err := NewNDArray([]int{512, 512}, values)
	require.NoError(b, err)
	return a
}

func benchMarshal(b *testing.B, v any) {
	b.ReportAllocs()
	n := len(mustMarshal(b, v))
	b.SetBytes(int64(n))
	for b.Loop() {
		if _, err := Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDecode(b *testing.B, v any) {
	data := mustMarshal(b, v)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRefMarshal(b *testing.B, v any) {
	b.ReportAllocs()
	var buf bytes.Buffer
	enc := newRefEncoder(&buf)
	require.NoError(b, enc.Encode(v))
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		var buf bytes.Buffer // a fresh buffer each time, as Marshal returns fresh bytes
		enc.Reset(&buf)
		if err := enc.Encode(v); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRefDecode(b *testing.B, v any) {
	data, err := refEncode(v)
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var out any
		if err := msgpack.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalSmallMap(b *testing.B) { benchMarshal(b, smallPayload()) }
func BenchmarkDecodeSmallMap(b *testing.B)  { benchDecode(b, smallPayload()) }
func BenchmarkMarshalNDArray1MiB(b *testing.B) {
	benchMarshal(b, bigArray(b))
}
func BenchmarkDecodeNDArray1MiB(b *testing.B) { benchDecode(b, bigArray(b)) }

func BenchmarkVmihailencoMarshalSmallMap(b *testing.B) { benchRefMarshal(b, smallPayload()) }
func BenchmarkVmihailencoDecodeSmallMap(b *testing.B)  { benchRefDecode(b, smallPayload()) }
func BenchmarkVmihailencoMarshalNDArray1MiB(b *testing.B) {
	benchRefMarshal(b, toRef(bigArray(b)))
}
func BenchmarkVmihailencoDecodeNDArray1MiB(b *testing.B) { benchRefDecode(b, toRef(bigArray(b))) }
