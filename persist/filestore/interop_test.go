package filestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// interopTensor and interopRow describe a row fragment as an independent reader sees it.
type interopTensor struct {
	DType string  `parquet:"dtype,optional"`
	Shape []int64 `parquet:"shape,list,optional"`
	Data  []byte  `parquet:"data,optional"`
}

type interopRow struct {
	Index     int64          `parquet:"_index"`
	Partition string         `parquet:"_partition"`
	B         *bool          `parquet:"b,optional"`
	I         *int64         `parquet:"i,optional"`
	F         *float64       `parquet:"f,optional"`
	S         *string        `parquet:"s,optional"`
	Raw       []byte         `parquet:"raw,optional"`
	LI        []int64        `parquet:"li,list,optional"`
	LF        []float64      `parquet:"lf,list,optional"`
	T         *interopTensor `parquet:"t,optional"`
}

// TestParquetInterop reads a flushed fragment with github.com/parquet-go/parquet-go,
// an implementation independent of the Arrow writer, and checks every value and the
// schema metadata that marks kinds.
func TestParquetInterop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1, RowGroupRows: 4})
	recs := make([]persist.Record, 10)
	for i := range recs {
		recs[i] = allKinds(i)
	}
	recs[3] = persist.Record{"i": 3} // a sparse row: other columns are null
	_, err := q.PutPartition(ctx, "train", recs, nil)
	require.NoError(t, err)
	require.NoError(t, q.Flush(ctx))

	files, err := filepath.Glob(filepath.Join(q.Dir(), "data", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	f, err := os.Open(files[0])
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)

	pf, err := parquet.OpenFile(f, st.Size())
	require.NoError(t, err)
	require.Equal(t, int64(10), pf.NumRows())
	require.Len(t, pf.RowGroups(), 3, "row groups of at most 4 rows")
	kinds, ok := pf.Lookup("lakeshore.kinds")
	require.True(t, ok)
	require.JSONEq(t, `{"b":"bool","i":"int64","f":"float64","s":"string","raw":"bytes","li":"list<int64>","lf":"list<float64>","t":"tensor"}`, kinds)

	rows, err := parquet.Read[interopRow](f, st.Size())
	require.NoError(t, err)
	require.Len(t, rows, 10)
	for i, r := range rows {
		require.Equal(t, int64(i), r.Index)
		require.Equal(t, "train", r.Partition)
		require.Equal(t, int64(i), *r.I)
		if i == 3 {
			require.Nil(t, r.B)
			require.Nil(t, r.S)
			require.Nil(t, r.T)
			require.Empty(t, r.LI)
			continue
		}
		w := wantKinds(i)
		require.Equal(t, w["b"], *r.B)
		require.Equal(t, w["f"], *r.F)
		require.Equal(t, w["s"], *r.S)
		require.Equal(t, w["raw"], r.Raw)
		require.Equal(t, w["li"], r.LI)
		require.Equal(t, w["lf"], r.LF)
		require.Equal(t, interopTensor{DType: "uint8", Shape: []int64{1, 3}, Data: []byte{byte(i), 4, 5}}, *r.T)
	}
}
