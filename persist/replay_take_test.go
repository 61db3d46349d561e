package persist

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
)

// TestTakeRows: rows come out in the order asked, repeated rows and nulls included,
// and runs of consecutive rows are one slice.
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
		got, err := takeRows(col, tc.pos)
		require.NoError(t, err)
		require.Equal(t, tc.want, got.String(), tc.pos)
		require.Equal(t, len(tc.pos), got.Len())
		got.Release()
	}
}
