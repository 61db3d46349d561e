package filestore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
)

// TestDamagedMetaDBIsCorruptMidQuery: a meta.db with one page damaged, each page in turn,
// fails with the typed corrupt error wherever a query meets the damage — at open, or in a
// call long after (reading the schema, the manifest, the tail, an assignment) — never a
// bare SQLite error of code "internal". Before, only errors of openDB's own steps were
// wrapped: SQLite's "database disk image is malformed" met by any later query had code
// internal, and the server answered 500 "internal error".
func TestDamagedMetaDBIsCorruptMidQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := filestore.Open(ctx, "q", &persist.Config{Dir: dir})
	require.NoError(t, err)
	recs := make([]persist.Record, 500)
	for i := range recs {
		recs[i] = persist.Record{"x": int64(i), "s": "text enough to fill a few pages of the catalog"}
	}
	_, err = s.PutPartition(ctx, "p", recs, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))
	path := filepath.Join(dir, "q", "meta.db")
	clean, err := os.ReadFile(path)
	require.NoError(t, err)

	const page = 4096 // SQLite's default page size
	midQuery := 0
	for p := 1; p*page < len(clean); p++ {
		damaged := append([]byte(nil), clean...)
		for i := p * page; i < min((p+1)*page, len(damaged)); i++ {
			damaged[i] = 0xa5
		}
		require.NoError(t, os.WriteFile(path, damaged, 0o600))
		s, err := filestore.Open(ctx, "q", &persist.Config{Dir: dir})
		if err != nil {
			require.Equal(t, "corrupt", persist.Code(err), "page %d damaged, at open: %v", p, err)
			require.True(t, persist.IsCorrupt(err))
			continue
		}
		var errs []error
		_, _, err = s.Counts(ctx)
		errs = append(errs, err)
		b, _, err := s.Scan(ctx, 0, 10, nil)
		if b != nil {
			b.Release()
		}
		errs = append(errs, err)
		_, err = s.GetMeta(ctx, &persist.MetaRequest{Task: "t", Fields: []string{"x"}, BatchSize: 5})
		errs = append(errs, err)
		_, err = s.PutPartition(ctx, "p", recs[:2], nil)
		errs = append(errs, err)
		for _, err := range errs {
			if err != nil {
				midQuery++
				require.Equal(t, "corrupt", persist.Code(err), "page %d damaged, met after open: %v", p, err)
				require.True(t, persist.IsCorrupt(err))
			}
		}
		_ = s.Close(ctx)
	}
	require.NotZero(t, midQuery, "some damage is met only by a query after open")
}
