package filestore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/wire"
)

func TestWireValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nd, err := wire.NewNDArray([]int{2, 2}, []float32{1, 2, 3, 4})
	require.NoError(t, err)
	wt := wire.Tensor(nd)
	type meta struct {
		Step int    `msgpack:"step"`
		Tag  string `msgpack:"tag"`
	}
	tailAndFragments(t, func(t *testing.T, q *fileQueue, maybeFlush func()) {
		_, err := persist.New(q).Put(ctx, persist.Record{
			"nd":    nd,
			"wt":    &wt,
			"words": []string{"a", "b"},
			"m":     map[string]any{"k": int64(1), "v": []any{"x", 2.5}},
			"st":    meta{Step: 3, Tag: "t"},
			"tup":   wire.Tuple{int64(1), "two"},
		})
		require.NoError(t, err)
		maybeFlush()
		s, err := q.Schema(ctx)
		require.NoError(t, err)
		for _, f := range s.Fields {
			// Tensor is wire.NDArray: one type, stored as kind tensor.
			want := map[string]persist.Kind{"nd": persist.KindTensor, "wt": persist.KindWireTensor, "words": persist.KindCodec, "m": persist.KindCodec, "st": persist.KindCodec, "tup": persist.KindCodec}[f.Name]
			require.Equal(t, want, f.Kind, f.Name)
		}
		rows, err := persist.New(q).Get(ctx, 0, 1, nil)
		require.NoError(t, err)
		got := rows[0].Fields
		require.Equal(t, nd, got["nd"])
		require.Equal(t, wt, got["wt"])
		require.Equal(t, []any{"a", "b"}, got["words"])
		require.Equal(t, map[string]any{"k": int64(1), "v": []any{"x", 2.5}}, got["m"])
		require.Equal(t, map[string]any{"step": int64(3), "tag": "t"}, got["st"], "structs come back in the codec's generic form")
		require.Equal(t, wire.Tuple{int64(1), "two"}, got["tup"])

		// A tensor field takes only its own tensor type.
		_, err = persist.New(q).Put(ctx, persist.Record{"nd": wt})
		require.ErrorIs(t, err, persist.ErrSchema)
		require.ErrorContains(t, err, "tensor")
		require.ErrorContains(t, err, "wire.tensor")
		// An NDArray whose data does not match dtype and shape is rejected.
		_, err = persist.New(q).Put(ctx, persist.Record{"nd": wire.NDArray{DType: "float32", Shape: []int{3}, Data: []byte{1}}})
		require.ErrorIs(t, err, persist.ErrUnsupportedValue)
	})
}

// TestLegacyNDArrayColumn: a column of kind ndarray (written when wire.NDArray and
// Tensor were two types) takes Tensor values, and its values read back as Tensor.
func TestLegacyNDArrayColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	require.NoError(t, q.w.do(ctx, func(t *wtx) error {
		_, err := t.exec(`INSERT INTO fields(pos, name, kind) VALUES (0, 'nd', 'ndarray')`)
		if err != nil {
			return err
		}
		return metaAdd(t.ctx, t, "schema_version", 1)
	}))
	x := persist.Tensor{DType: "uint8", Shape: []int{2}, Data: []byte{1, 2}}
	_, err := persist.New(q).Put(ctx, persist.Record{"nd": x})
	require.NoError(t, err)
	s, err := q.Schema(ctx)
	require.NoError(t, err)
	k, _ := s.Kind("nd")
	require.Equal(t, persist.KindNDArray, k, "the column keeps its kind")
	rows, err := persist.New(q).Get(ctx, 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, x, rows[0].Fields["nd"])
}
