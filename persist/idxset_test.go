package persist

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIdxset(t *testing.T) {
	t.Parallel()
	a := setOf([]int64{5, 1, 2, 3, 9, 2, 10})
	require.Equal(t, idxset{{1, 4}, {5, 6}, {9, 11}}, a)
	require.Equal(t, int64(6), a.count())
	require.True(t, a.contains(3))
	require.False(t, a.contains(4))
	b := idxset{{0, 2}, {3, 10}}
	for _, tc := range []struct {
		name string
		got  idxset
		want idxset
	}{
		{"union", a.union(b), idxset{{0, 11}}},
		{"intersect", a.intersect(b), idxset{{1, 2}, {3, 4}, {5, 6}, {9, 10}}},
		{"minus", a.minus(b), idxset{{2, 3}, {10, 11}}},
		{"minus all", b.minus(idxset{{0, 100}}), nil},
		{"from", a.from(5), idxset{{5, 6}, {9, 11}}},
		{"spansOf merges adjacent", spansOf([]span{{4, 6}, {0, 2}, {2, 3}, {5, 5}}), idxset{{0, 3}, {4, 6}}},
	} {
		require.Equal(t, tc.want, tc.got, tc.name)
	}
	require.Equal(t, []int64{1, 2, 3, 5}, a.first(4))
	require.Equal(t, []int64{1, 2, 3, 5, 9, 10}, a.first(-1))
}
