package rl_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/rl"
	"github.com/lakeshore-dev/lakeshore/scope"
	"github.com/lakeshore-dev/lakeshore/server"
)

// dataStores opens data queue name on the embedded file store and on the HTTP store of a
// real server on loopback.
func dataStores(t *testing.T, name string) map[string]*persist.Queue {
	t.Helper()
	ctx := context.Background()
	file, err := persist.Open(ctx, name, &persist.Config{Dir: t.TempDir()}, filestore.Driver())
	require.NoError(t, err)
	t.Cleanup(func() { _ = file.Close(context.Background()) })
	back, err := sqliteplane.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	srv := server.New(back, &server.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts := httptest.NewServer(srv)
	overHTTP, err := persist.Open(ctx, name, &persist.Config{URL: ts.URL}, httpstore.Driver())
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = overHTTP.Close(context.Background())
		srv.Stop()
		ts.Close()
		_ = srv.Close(context.Background())
		_ = back.Close()
	})
	return map[string]*persist.Queue{"file": file, "http": overHTTP}
}

// TestRolloutTakesOnlyAReusedPutIDAsWrittenBefore: Rollout takes a refused put as done
// only when the store says its put id names an earlier put of another count (code
// put_id_reused: an earlier attempt's records stand). Before 2026-12-07 it took any
// invalid put_id so (rl.writtenBefore matched the field), and a put id refused for its
// length dropped the job's records while the job reported them written.
func TestRolloutTakesOnlyAReusedPutIDAsWrittenBefore(t *testing.T) {
	ctx := context.Background()
	for name, data := range dataStores(t, "traj") {
		t.Run(name, func(t *testing.T) {
			s, err := scope.Open(ctx, "file://"+t.TempDir(), "run")
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			n := 3
			h := rl.Rollout(&rl.Weights{Data: data, Scope: s}, func(context.Context, rl.Policy, *lakeshore.Job) ([]persist.Record, error) {
				recs := make([]persist.Record, n)
				for i := range recs {
					recs[i] = persist.Record{"n": int64(n), "i": int64(i)}
				}
				return recs, nil
			}, nil)
			length := func() int64 {
				st, err := data.Stats(ctx)
				require.NoError(t, err)
				return st.Len
			}

			// A put id refused for its length (129 bytes and more): an error, nothing written.
			_, err = h(ctx, &lakeshore.Job{ID: strings.Repeat("j", 130)})
			require.ErrorIs(t, err, persist.ErrInvalid)
			require.NotErrorIs(t, err, persist.ErrPutIDReused)
			require.Equal(t, int64(0), length(), "nothing written")

			// A retry of another count: the first attempt's records stand, the job is done.
			_, err = h(ctx, &lakeshore.Job{ID: "J1"})
			require.NoError(t, err)
			n = 2
			_, err = h(ctx, &lakeshore.Job{ID: "J1"})
			require.NoError(t, err, "an earlier attempt's put of another count stands")
			require.Equal(t, int64(3), length())

			// The refusal itself, as every store and the HTTP client give it.
			_, err = data.PutPartitionOnce(ctx, rl.RolloutPutID("J1", 0), "default", []persist.Record{{"n": int64(1), "i": int64(0)}})
			var reused *persist.PutIDReusedError
			require.ErrorAs(t, err, &reused)
			require.Equal(t, rl.RolloutPutID("J1", 0), reused.ID)
			require.ErrorIs(t, err, persist.ErrInvalid, "still a bad argument to callers matching ErrInvalid")
			require.Equal(t, "put_id_reused", persist.Code(err))
			require.Contains(t, err.Error(), "named a put of 3 records into partition default, this put has 1 into default")
		})
	}
}
