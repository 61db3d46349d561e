package filestore

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

func TestShardedReaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	const n = 300
	putN(t, q, persist.DefaultPartition, n, func(i int) persist.Record { return persist.Record{"uid": fmt.Sprintf("u%d", i%17), "i": i} })
	require.NoError(t, q.Flush(ctx))
	putN(t, q, persist.DefaultPartition, 20, func(i int) persist.Record { return persist.Record{"uid": fmt.Sprintf("u%d", i%17), "i": n + i} }) // tail too
	for _, col := range []string{"", "uid", "missing"} {
		t.Run("Column="+col, func(t *testing.T) {
			t.Parallel()
			const world = 3
			owner := map[int64]int{}
			uidRank := map[string]int{}
			for rank := 0; rank < world; rank++ {
				sh := persist.Shard{Rank: rank, WorldSize: world, Column: col, Buckets: 16}
				rows, err := persist.New(q).Get(ctx, 0, 10_000, &persist.GetOpts{Shard: sh})
				require.NoError(t, err)
				again, err := persist.New(q).Get(ctx, 0, 10_000, &persist.GetOpts{Shard: sh})
				require.NoError(t, err)
				require.Equal(t, rows, again, "deterministic")
				for _, r := range rows {
					_, dup := owner[r.Index]
					require.False(t, dup, "index %d in two shards", r.Index)
					owner[r.Index] = rank
					if col == "uid" {
						u := r.Fields["uid"].(string)
						if prev, ok := uidRank[u]; ok {
							require.Equal(t, prev, rank, "one uid, one rank")
						}
						uidRank[u] = rank
					}
				}
				// Stream with the same shard yields the same rows in small batches.
				s := persist.New(q).Stream(&persist.StreamOpts{GetOpts: persist.GetOpts{Shard: sh}, BatchSize: 7})
				streamed := streamAll(t, s, 7)
				require.Len(t, streamed, len(rows))
				if len(rows) > 0 {
					require.Equal(t, rows, streamed)
				}
			}
			require.Len(t, owner, n+20, "the shards' union is the whole log")
			if col == "" {
				counts := map[int]int{}
				for _, r := range owner {
					counts[r]++
				}
				for r := 0; r < world; r++ {
					require.Positive(t, counts[r], "rank %d got nothing", r)
				}
			}
		})
	}
	_, err := persist.New(q).Get(ctx, 0, 1, &persist.GetOpts{Shard: persist.Shard{Rank: 3, WorldSize: 3}})
	require.ErrorIs(t, err, persist.ErrInvalid)
	_, err = persist.New(q).Get(ctx, 0, 1, &persist.GetOpts{Shard: persist.Shard{Rank: 0, WorldSize: 8, Buckets: 4}})
	require.ErrorIs(t, err, persist.ErrInvalid)
}
