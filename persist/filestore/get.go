package filestore

import (
	"context"
	"encoding/binary"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
	"hash/fnv"
	"math"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// hashValue hashes element i of arr (nil arr: the index itself).
func hashValue(arr arrow.Array, i int, k persist.Kind, index int64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	if arr == nil {
		binary.LittleEndian.PutUint64(b[:], uint64(index))
		h.Write(b[:])
		return h.Sum64()
	}
	if arr.IsNull(i) {
		return h.Sum64()
	}
	v, err := record.ValueAt(arr, i, k)
	if err != nil {
		return h.Sum64()
	}
	switch x := v.(type) {
	case int64:
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		h.Write(b[:])
	case float64:
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(x))
		h.Write(b[:])
	case bool:
		if x {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	case string:
		h.Write([]byte(x))
	case []byte:
		h.Write(x)
	default:
		// Lists, tensors and codec values hash by their tail encoding.
		h.Write(tail.EncodeRecords(nil, []record.NormRecord{{{Name: "", Kind: k, Val: normalizeForHash(v, k)}}}))
	}
	return h.Sum64()
}

func normalizeForHash(v any, k persist.Kind) any {
	if k == persist.KindCodec {
		b, _ := record.WireMarshal(v)
		return record.CodecValue{Bytes: b}
	}
	return v
}

// read also returns the index below which every record has been considered, where a
// following read continues.
func (q *fileQueue) read(ctx context.Context, offset int64, limit int, opts *persist.GetOpts) (*persist.Batch, int64, error) {
	if opts == nil {
		opts = &persist.GetOpts{}
	}
	if offset < 0 {
		return nil, 0, &persist.InvalidError{Field: "offset", Value: offset, Rule: "≥ 0"}
	}
	if limit <= 0 {
		return nil, 0, &persist.InvalidError{Field: "limit", Value: limit, Rule: "≥ 1"}
	}
	if err := opts.Shard.Validate(); err != nil {
		return nil, 0, err
	}
	if opts.Partition != "" {
		if err := persist.CheckName("partition", opts.Partition); err != nil {
			return nil, 0, err
		}
	}
	if err := q.enter(); err != nil {
		return nil, 0, err
	}
	defer q.leave()
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
	return b, scanned, nil
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
			if !sh.Owns(fnv.New64a().Sum64()) {
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
			if !sh.Owns(hashValue(arr, i, kind, x)) {
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
