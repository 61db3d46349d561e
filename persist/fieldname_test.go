package persist

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFieldNameSeparatorRejected: field sets are stored as names joined by \x1f, so a
// name holding that byte would be split apart on flush and its values silently lost.
// Such a name is refused up front, and nothing is written.
func TestFieldNameSeparatorRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &Config{FlushInterval: -1, FlushRows: -1})
	_, err := New(q).Put(ctx, Record{"p\x1fq": 1})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `"p\x1fq"`)
	_, err = New(q).Put(ctx, Record{"ok": 1})
	require.NoError(t, err)
	err = q.PutFields(ctx, DefaultPartition, []int64{0}, []Record{{"a\x1fb": 2}})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = KV(New(q)).Put(ctx, "kv", "k", Record{"x\x1f": 1}, nil)
	require.ErrorIs(t, err, ErrInvalid)

	n, err := q.NextIndex(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.NoError(t, q.Flush(ctx))
	rows, err := New(q).Get(ctx, 0, 10, nil)
	require.NoError(t, err)
	require.Equal(t, []Row{{Index: 0, Partition: DefaultPartition, Fields: Record{"ok": int64(1)}}}, rows)
}

// TestFieldNameMustBeUTF8: Parquet and Arrow names are UTF-8, and a fragment's
// lakeshore.kinds metadata is JSON, which turns invalid bytes into U+FFFD, so an
// independent reader could not match such a column to its kind. Such a name is refused.
func TestFieldNameMustBeUTF8(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &Config{FlushInterval: -1, FlushRows: -1})
	_, err := New(q).Put(ctx, Record{"\xff": 1})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "UTF-8")
	_, err = New(q).Put(ctx, Record{"naïve": 1})
	require.NoError(t, err)
	n, err := q.NextIndex(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}
