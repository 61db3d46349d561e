package persist

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// TestTakeRows: rows come out in the order asked, repeated rows and nulls included.
func TestTakeRows(t *testing.T) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendValues([]string{"a", "b", "", "d"}, []bool{true, true, false, true})
	col := b.NewArray()
	b.Release()
	defer col.Release()
	for _, tc := range []struct {
		pos  []int
		want string
	}{
		{[]int{3, 0, 0, 2, 1, 2, 3}, `["d" "a" "a" (null) "b" (null) "d"]`},
		{[]int{0, 1, 2, 3}, `["a" "b" (null) "d"]`},
		{[]int{}, `[]`},
	} {
		got := takeRows(col, KindString, tc.pos)
		require.Equal(t, tc.want, got.String(), tc.pos)
		require.Equal(t, len(tc.pos), got.Len())
		got.Release()
	}

	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.AppendValues([]int64{7, 0, 9}, []bool{true, false, true})
	ints := ib.NewArray()
	ib.Release()
	defer ints.Release()
	got := takeRows(ints, KindInt64, []int{2, 1, 0, 2})
	defer got.Release()
	require.Equal(t, "[9 (null) 7 9]", got.String())
	require.Equal(t, 1, got.NullN())
}

// TestReplayPartSeed: part k of a split replay is seeded seed + k modulo 2^64, never 0
// (which would mean a fresh seed) unless the replay had no seed.
func TestReplayPartSeed(t *testing.T) {
	require.Equal(t, uint64(7), ReplayPartSeed(7, 0))
	require.Equal(t, uint64(9), ReplayPartSeed(7, 2))
	require.Equal(t, uint64(0), ReplayPartSeed(0, 3))
	require.Equal(t, uint64(1<<64-1), ReplayPartSeed(1<<64-1, 0))
	require.Equal(t, uint64(1), ReplayPartSeed(1<<64-1, 1))
	require.Equal(t, uint64(2), ReplayPartSeed(1<<64-2, 3))
}
