package filestore

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
)

func TestTailEncoding(t *testing.T) {
	t.Parallel()
	var recs []record.NormRecord
	for i := 0; i < 5; i++ {
		nr, err := record.NormalizeRecord(allKinds(i))
		require.NoError(t, err)
		recs = append(recs, nr)
	}
	recs = append(recs, record.NormRecord{}) // a record without fields
	b := tail.EncodeRecords(nil, recs)
	got, err := tail.DecodeRecords(b)
	require.NoError(t, err)
	require.Equal(t, recs, got)

	// Concatenated batches (the writer merges consecutive puts) decode as one list.
	two, err := tail.DecodeRecords(append(append([]byte{}, b...), b...))
	require.NoError(t, err)
	require.Len(t, two, 2*len(recs))
	require.Equal(t, recs, two[len(recs):])

	idx := []int64{5, 3, 100, -1 + 1}
	gotIdx, err := tail.DecodeIndexes(tail.EncodeIndexes(idx))
	require.NoError(t, err)
	require.Equal(t, idx, gotIdx)

	// Every truncation fails cleanly.
	for n := 1; n < len(b); n++ {
		_, err := tail.DecodeRecords(b[:n])
		require.Error(t, err, "truncated at %d", n)
	}
}

// FuzzDecodeRecords checks that arbitrary bytes never make the tail decoder panic or
// allocate without bound.
func FuzzDecodeRecords(f *testing.F) {
	nr, _ := record.NormalizeRecord(allKinds(3))
	f.Add(tail.EncodeRecords(nil, []record.NormRecord{nr}))
	f.Add([]byte{1, 1, 1, 'a', 8, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := tail.DecodeRecords(b)
		if err == nil {
			// What decodes re-encodes to the same bytes modulo batch framing.
			_ = tail.EncodeRecords(nil, recs)
		}
		_, _ = tail.DecodeIndexes(b)
	})
}

// TestFlushFailuresCounted: a flush that cannot write its fragment (here the data
// directory is replaced by a file) fails, keeps the rows in the tail and is counted in
// Stats.FlushFailures; the next flush after the fault is gone succeeds.
func TestFlushFailuresCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	_, err := persist.New(q).PutBatch(ctx, []persist.Record{{"x": 1}, {"x": 2}})
	require.NoError(t, err)
	require.NoError(t, os.Rename(q.dataDir, q.dataDir+".away"))
	require.NoError(t, os.WriteFile(q.dataDir, nil, 0o644))
	require.Error(t, q.Flush(ctx))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.FlushFailures)
	require.EqualValues(t, 2, st.TailRows, "the rows stay in the tail")
	require.NoError(t, os.Remove(q.dataDir))
	require.NoError(t, os.Rename(q.dataDir+".away", q.dataDir))
	require.NoError(t, q.Flush(ctx))
	st, err = q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.FlushFailures)
	require.Zero(t, st.TailRows)
}
