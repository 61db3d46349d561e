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
