package filestore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestFieldNameSeparatorRejected: field sets are stored as names joined by \x1f, so a
// name holding that byte would be split apart on flush and its values silently lost.
// Such a name is refused up front, and nothing is written.
func TestFieldNameSeparatorRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	_, err := persist.New(q).Put(ctx, persist.Record{"p\x1fq": 1})
	require.ErrorIs(t, err, persist.ErrInvalid)
	require.ErrorContains(t, err, `"p\x1fq"`)
	_, err = persist.New(q).Put(ctx, persist.Record{"ok": 1})
	require.NoError(t, err)
	err = q.PutFields(ctx, persist.DefaultPartition, []int64{0}, []persist.Record{{"a\x1fb": 2}})
	require.ErrorIs(t, err, persist.ErrInvalid)
	_, err = persist.KV(persist.New(q)).Put(ctx, "kv", "k", persist.Record{"x\x1f": 1}, nil)
	require.ErrorIs(t, err, persist.ErrInvalid)

	n, err := q.NextIndex(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.NoError(t, q.Flush(ctx))
	rows, err := persist.New(q).Get(ctx, 0, 10, nil)
	require.NoError(t, err)
	require.Equal(t, []persist.Row{{Index: 0, Partition: persist.DefaultPartition, Fields: persist.Record{"ok": int64(1)}}}, rows)
}

// TestFieldNameMustBeUTF8: Parquet and Arrow names are UTF-8, and a fragment's
// lakeshore.kinds metadata is JSON, which turns invalid bytes into U+FFFD, so an
// independent reader could not match such a column to its kind. Such a name is refused.
func TestFieldNameMustBeUTF8(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	_, err := persist.New(q).Put(ctx, persist.Record{"\xff": 1})
	require.ErrorIs(t, err, persist.ErrInvalid)
	require.ErrorContains(t, err, "UTF-8")
	_, err = persist.New(q).Put(ctx, persist.Record{"naïve": 1})
	require.NoError(t, err)
	n, err := q.NextIndex(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}
