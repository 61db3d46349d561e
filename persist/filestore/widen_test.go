package filestore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestWideningKeepsBigIntegersExact (issue 11 item 13): an int64 beyond ±2^53 is never
// silently rounded by a float64 column: the put or widening that would round it fails
// with *SchemaError and writes nothing; integers within ±2^53 still widen.
func TestWideningKeepsBigIntegersExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const big = int64(1)<<53 + 1 // 9007199254740993, not a float64
	q := openTemp(t, nil)
	requireRefused := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, persist.ErrSchema)
		var se *persist.SchemaError
		require.ErrorAs(t, err, &se)
		require.Contains(t, se.Error(), "2^53")
	}

	// A float column refuses a big integer.
	_, err := persist.New(q).Put(ctx, persist.Record{"f": 0.5})
	require.NoError(t, err)
	_, err = persist.New(q).Put(ctx, persist.Record{"f": big})
	requireRefused(err)
	_, err = persist.New(q).Put(ctx, persist.Record{"f": int64(1) << 53})
	require.NoError(t, err, "2^53 itself is exact")

	// An int column holding a big integer refuses to widen.
	_, err = persist.New(q).Put(ctx, persist.Record{"i": big})
	require.NoError(t, err)
	_, err = persist.New(q).Put(ctx, persist.Record{"i": 1.5})
	requireRefused(err)
	// A batch mixing both refuses too, and writes nothing.
	_, err = persist.New(q).PutBatch(ctx, []persist.Record{{"j": big}, {"j": 2.5}})
	requireRefused(err)
	// Lists.
	_, err = persist.New(q).Put(ctx, persist.Record{"l": []int64{1, big}})
	require.NoError(t, err)
	_, err = persist.New(q).Put(ctx, persist.Record{"l": []float64{0.5}})
	requireRefused(err)
	// PutFields and KV go through the same rule.
	require.ErrorIs(t, q.PutFields(ctx, persist.DefaultPartition, []int64{0}, []persist.Record{{"f": -big}}), persist.ErrSchema)

	n, err := q.NextIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "refused puts wrote nothing")
	s, err := q.Schema(ctx)
	require.NoError(t, err)
	k, _ := s.Kind("i")
	require.Equal(t, persist.KindInt64, k)
	_, ok := s.Kind("j")
	require.False(t, ok)
	rows, err := persist.New(q).Get(ctx, 2, 1, nil)
	require.NoError(t, err)
	require.Equal(t, big, rows[0].Fields["i"], "exact after the refused widening")

	// Small integers still widen.
	_, err = persist.New(q).Put(ctx, persist.Record{"s": int64(3)})
	require.NoError(t, err)
	_, err = persist.New(q).Put(ctx, persist.Record{"s": 3.5})
	require.NoError(t, err)
}
