package record

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIdxset(t *testing.T) {
	t.Parallel()
	a := SetOf([]int64{5, 1, 2, 3, 9, 2, 10})
	require.Equal(t, IndexSet{{1, 4}, {5, 6}, {9, 11}}, a)
	require.Equal(t, int64(6), a.Count())
	require.True(t, a.Contains(3))
	require.False(t, a.Contains(4))
	b := IndexSet{{0, 2}, {3, 10}}
	for _, tc := range []struct {
		name string
		got  IndexSet
		want IndexSet
	}{
		{"union", a.Union(b), IndexSet{{0, 11}}},
		{"intersect", a.Intersect(b), IndexSet{{1, 2}, {3, 4}, {5, 6}, {9, 10}}},
		{"minus", a.Minus(b), IndexSet{{2, 3}, {10, 11}}},
		{"minus all", b.Minus(IndexSet{{0, 100}}), nil},
		{"from", a.From(5), IndexSet{{5, 6}, {9, 11}}},
		{"spansOf merges adjacent", SpansOf([]Span{{4, 6}, {0, 2}, {2, 3}, {5, 5}}), IndexSet{{0, 3}, {4, 6}}},
	} {
		require.Equal(t, tc.want, tc.got, tc.name)
	}
	require.Equal(t, []int64{1, 2, 3, 5}, a.First(4))
	require.Equal(t, []int64{1, 2, 3, 5, 9, 10}, a.First(-1))
}

// TestIndexSetOperations holds the cases of the copy of IndexSet that persist/lakestore kept
// (its spanSet) until it used this one.
func TestIndexSetOperations(t *testing.T) {
	t.Parallel()
	a := SetOf([]int64{5, 1, 2, 3, 9, 2})
	require.Equal(t, IndexSet{{1, 4}, {5, 6}, {9, 10}}, a)
	require.EqualValues(t, 5, a.Count())
	require.Equal(t, IndexSet{{1, 2}, {3, 4}, {9, 10}}, a.Minus(IndexSet{{2, 3}, {5, 9}}))
	require.Equal(t, IndexSet{{2, 4}, {5, 6}}, a.Intersect(IndexSet{{2, 7}}))
	require.Equal(t, IndexSet{{0, 6}, {9, 10}}, a.Union(IndexSet{{0, 1}, {4, 5}}))
	require.Equal(t, []int64{1, 2}, a.First(2))
	require.True(t, a.Contains(9))
	require.False(t, a.Contains(4))
	require.Equal(t, IndexSet{{3, 4}, {5, 6}, {9, 10}}, a.From(3))
}

// TestIndexSetBelow: how many indexes of a set are below each index (an ordinal).
func TestIndexSetBelow(t *testing.T) {
	t.Parallel()
	s := IndexSet{{2, 5}, {10, 12}}
	require.Equal(t, []int64{0, 0, 1, 3, 3, 4, 5}, s.Below([]int64{0, 2, 3, 5, 10, 11, 20}))
	require.Empty(t, IndexSet(nil).Below([]int64{4})[0])
}
