package wire

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
