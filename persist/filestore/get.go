package filestore

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// shardValue is element i of arr as persist.ShardOwns takes it: nil for a null (or
// unreadable) element, a codec value's stored bytes, else the normalized value.
func shardValue(arr arrow.Array, i int, k persist.Kind) any {
	if arr.IsNull(i) {
		return nil
	}
	if k == persist.KindCodec {
		return arr.(*array.Binary).Value(i)
	}
	v, err := record.ValueAt(arr, i, k)
	if err != nil {
		return nil
	}
	return v
}

// read also returns the index below which every record has been considered, where a
// following read continues: never below offset (persist.Store.Scan).
func (q *fileQueue) read(ctx context.Context, offset int64, limit int, opts *persist.GetOpts) (*persist.Batch, int64, error) {
	if opts == nil {
		opts = &persist.GetOpts{}
	}
	if err := persist.CheckReadArgs(offset, limit, opts); err != nil {
		return nil, 0, err
	}
	if err := q.calls.Enter(); err != nil {
		return nil, 0, err
	}
	defer q.calls.Leave()
	var scanned int64
	b, err := q.readBatch(ctx, opts.Fields, func(tx queryer, s *snapshot) ([]int64, error) {
		parts, err := partitionSpans(ctx, tx, opts.Partition, offset)
		if err != nil {
			return nil, err
		}
		live := record.IndexSet{{Lo: offset, Hi: s.next}}.Minus(s.tomb).Intersect(parts)
		if !opts.Shard.Active() {
			out := live.First(limit)
			scanned = s.next
			if len(out) == limit {
				scanned = out[len(out)-1] + 1
			}
			return out, nil
		}
		return q.pickShard(ctx, tx, s, live, limit, opts.Shard, &scanned)
	})
	if err != nil {
		return nil, 0, err
	}
	return b, max(scanned, offset), nil
}

// pickShard walks live in chunks, keeping the indexes this rank owns.
func (q *fileQueue) pickShard(ctx context.Context, tx queryer, s *snapshot, live record.IndexSet, limit int, sh persist.Shard, scanned *int64) ([]int64, error) {
	*scanned = s.next
	var field *persist.Field
	if col := sh.Column; col != "" && col != record.ColIndex {
		k, ok := s.schema.Kind(col)
		if !ok {
			// No record has the column: every record hashes as empty, so one rank
			// owns the whole log.
			if !persist.ShardOwns(sh, 0, nil, "", false) {
				return nil, nil
			}
			out := live.First(limit)
			if len(out) == limit {
				*scanned = out[len(out)-1] + 1
			}
			return out, nil
		}
		field = &persist.Field{Name: col, Kind: k}
	}
	var out []int64
	for len(live) > 0 {
		chunk := live.First(max(limit*sh.WorldSize, 1024))
		live = live.From(chunk[len(chunk)-1] + 1)
		var arr arrow.Array
		var kind persist.Kind
		if field != nil {
			if err := q.loadRange(ctx, tx, s, chunk[0], chunk[len(chunk)-1]); err != nil {
				return nil, err
			}
			cols, err := q.readColumns(ctx, s, chunk, []persist.Field{*field})
			if err != nil {
				return nil, err
			}
			arr, kind = cols[0], field.Kind
		}
		for i, x := range chunk {
			var v any
			if arr != nil {
				v = shardValue(arr, i, kind)
			}
			if !persist.ShardOwns(sh, x, v, kind, arr == nil) {
				continue
			}
			out = append(out, x)
			if len(out) == limit {
				*scanned = x + 1
				break
			}
		}
		if arr != nil {
			arr.Release()
		}
		if len(out) == limit {
			break
		}
	}
	return out, nil
}
