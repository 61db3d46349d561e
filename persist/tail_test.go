package persist

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTailEncoding(t *testing.T) {
	t.Parallel()
	var recs []normRecord
	for i := 0; i < 5; i++ {
		nr, err := normalizeRecord(allKinds(i))
		require.NoError(t, err)
		recs = append(recs, nr)
	}
	recs = append(recs, normRecord{}) // a record without fields
	b := encodeRecords(nil, recs)
	got, err := decodeRecords(b)
	require.NoError(t, err)
	require.Equal(t, recs, got)

	// Concatenated batches (the writer merges consecutive puts) decode as one list.
	two, err := decodeRecords(append(append([]byte{}, b...), b...))
	require.NoError(t, err)
	require.Len(t, two, 2*len(recs))
	require.Equal(t, recs, two[len(recs):])

	idx := []int64{5, 3, 100, -1 + 1}
	gotIdx, err := decodeIndexes(encodeIndexes(idx))
	require.NoError(t, err)
	require.Equal(t, idx, gotIdx)

	// Every truncation fails cleanly.
	for n := 1; n < len(b); n++ {
		_, err := decodeRecords(b[:n])
		require.Error(t, err, "truncated at %d", n)
	}
}

// FuzzDecodeRecords checks that arbitrary bytes never make the tail decoder panic or
// allocate without bound.
func FuzzDecodeRecords(f *testing.F) {
	nr, _ := normalizeRecord(allKinds(3))
	f.Add(encodeRecords(nil, []normRecord{nr}))
	f.Add([]byte{1, 1, 1, 'a', 8, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decodeRecords(b)
		if err == nil {
			// What decodes re-encodes to the same bytes modulo batch framing.
			_ = encodeRecords(nil, recs)
		}
		_, _ = decodeIndexes(b)
	})
}
