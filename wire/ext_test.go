package wire

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExtHeaderForms checks that each payload size gets the smallest extension header and
// that every form decodes. A Thunk's payload is 2 + len(language) + bin header + data bytes.
func TestExtHeaderForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		payloadLen int
		header     string // hex of the header bytes: lead, [length], type
	}{
		{name: "Fixext16", payloadLen: 16, header: "d805"},
		{name: "Ext8", payloadLen: 17, header: "c71105"},
		{name: "Ext8Max", payloadLen: 255, header: "c7ff05"},
		{name: "Ext16", payloadLen: 256, header: "c8010005"},
		{name: "Ext16Max", payloadLen: 65535, header: "c8ffff05"},
		{name: "Ext32", payloadLen: 65536, header: "c90001000005"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			th := thunkWithPayload(t, tc.payloadLen)
			b := mustMarshal(t, th)
			h := len(tc.header) / 2
			require.Equal(t, tc.header, hex.EncodeToString(b[:h]))
			require.Len(t, b, h+tc.payloadLen)
			got, err := Decode(b)
			require.NoError(t, err)
			requireSameValue(t, th, got)
		})
	}
}

// thunkWithPayload returns a Thunk whose extension payload is exactly n bytes (n >= 16).
func thunkWithPayload(t *testing.T, n int) Thunk {
	t.Helper()
	for lang := 1; lang < 32; lang++ {
		for data := 0; data <= n; data++ {
			if 1+strSize(lang)+binSize(data) == n {
				return Thunk{Language: string(bytes.Repeat([]byte{'x'}, lang)), Data: make([]byte, data)}
			}
		}
	}
	require.FailNow(t, "no thunk of that payload size")
	return Thunk{}
}

// TestTupleHeaderForms checks the tuple encoder, which writes the payload before the
// header, at each header size.
func TestTupleHeaderForms(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 3, 15, 16, 200, 300, 70000} {
		tup := make(Tuple, n)
		for i := range tup {
			tup[i] = int64(i % 100)
		}
		b := mustMarshal(t, map[string]any{"t": tup, "after": true})
		got, err := Decode(b)
		require.NoError(t, err)
		requireSameValue(t, map[string]any{"t": tup, "after": true}, got)
	}
}

func TestTimestampForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		time time.Time
		size int // payload bytes: 4, 8 or 12
	}{
		{name: "Epoch", time: time.Unix(0, 0), size: 4},
		{name: "Max32", time: time.Unix(math.MaxUint32, 0), size: 4},
		{name: "Min64", time: time.Unix(math.MaxUint32+1, 0), size: 8},
		{name: "NanosAtEpoch", time: time.Unix(0, 1), size: 8},
		{name: "Max64", time: time.Unix(1<<34-1, 999999999), size: 8},
		{name: "Min96", time: time.Unix(1<<34, 0), size: 12},
		{name: "JustBeforeEpoch", time: time.Unix(-1, 999999999), size: 12},
		{name: "GoZeroTime", time: time.Time{}, size: 12},
		{name: "FarPast", time: time.Unix(math.MinInt64, 0), size: 12},
		{name: "FarFuture", time: time.Unix(maxTimestampSeconds, 999999999), size: 12},
		{name: "NonUTCLocation", time: time.Date(2024, 5, 6, 7, 8, 9, 10, time.FixedZone("X", 3600)), size: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := mustMarshal(t, tc.time)
			require.Len(t, b, map[int]int{4: 6, 8: 10, 12: 15}[tc.size])
			got, err := Decode(b)
			require.NoError(t, err)
			require.True(t, tc.time.Equal(got.(time.Time)), "%v vs %v", tc.time, got)
			require.Equal(t, time.UTC, got.(time.Time).Location())
		})
	}
}

func TestTimestampInvalid(t *testing.T) {
	t.Parallel()
	// 96-bit with seconds past what time.Time can hold.
	b := appendExtHeader(nil, ExtTimestamp, 12)
	b = append(b, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	_, err := Decode(b)
	require.ErrorIs(t, err, ErrMalformed)

	// 64-bit with nanoseconds 2^30-1 (> 999999999).
	_, err = Decode([]byte{0xd7, 0xff, 0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 0})
	require.ErrorIs(t, err, ErrMalformed)
}

func TestTimestampMonotonicDropped(t *testing.T) {
	t.Parallel()
	now := time.Now() // carries a monotonic reading, which is not encoded
	got, err := Decode(mustMarshal(t, now))
	require.NoError(t, err)
	require.True(t, now.Equal(got.(time.Time)))
}
