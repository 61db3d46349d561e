package lakestore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSpanSet(t *testing.T) {
	a := setOf([]int64{5, 1, 2, 3, 9, 2})
	require.Equal(t, spanSet{{1, 4}, {5, 6}, {9, 10}}, a)
	require.EqualValues(t, 5, a.count())
	require.Equal(t, spanSet{{1, 2}, {3, 4}, {9, 10}}, a.minus(spanSet{{2, 3}, {5, 9}}))
	require.Equal(t, spanSet{{2, 4}, {5, 6}}, a.intersect(spanSet{{2, 7}}))
	require.Equal(t, spanSet{{0, 6}, {9, 10}}, a.union(spanSet{{0, 1}, {4, 5}}))
	require.Equal(t, []int64{1, 2}, a.first(2))
	require.True(t, a.contains(9))
	require.False(t, a.contains(4))
	require.Equal(t, spanSet{{3, 4}, {5, 6}, {9, 10}}, a.from(3))
}
