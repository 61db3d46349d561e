package persist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShardedReaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &Config{FlushInterval: -1, FlushRows: -1})
	const n = 300
	putN(t, q, DefaultPartition, n, func(i int) Record { return Record{"uid": fmt.Sprintf("u%d", i%17), "i": i} })
	require.NoError(t, q.Flush(ctx))
	putN(t, q, DefaultPartition, 20, func(i int) Record { return Record{"uid": fmt.Sprintf("u%d", i%17), "i": n + i} }) // tail too
	for _, col := range []string{"", "uid", "missing"} {
		t.Run("Column="+col, func(t *testing.T) {
			t.Parallel()
			const world = 3
			owner := map[int64]int{}
			uidRank := map[string]int{}
			for rank := 0; rank < world; rank++ {
				sh := Shard{Rank: rank, WorldSize: world, Column: col, Buckets: 16}
				rows, err := New(q).Get(ctx, 0, 10_000, &GetOpts{Shard: sh})
				require.NoError(t, err)
				again, err := New(q).Get(ctx, 0, 10_000, &GetOpts{Shard: sh})
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
				s := New(q).Stream(&StreamOpts{GetOpts: GetOpts{Shard: sh}, BatchSize: 7})
				var streamed []Row
				for {
					b, err := s.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					require.NoError(t, err)
					require.LessOrEqual(t, len(b), 7)
					streamed = append(streamed, b...)
				}
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
	_, err := New(q).Get(ctx, 0, 1, &GetOpts{Shard: Shard{Rank: 3, WorldSize: 3}})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = New(q).Get(ctx, 0, 1, &GetOpts{Shard: Shard{Rank: 0, WorldSize: 8, Buckets: 4}})
	require.ErrorIs(t, err, ErrInvalid)
}
