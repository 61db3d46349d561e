package persist

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// ReplayWindowDefault is ReplayRequest.Window's default: the last 100,000 indexes.
const ReplayWindowDefault = 100_000

// ReplayRequest asks for a replay sample: Size draws with replacement from the
// records of Partition among the last Window global indexes, weighted by the numeric
// field Weight (a priority, a reward, a TD error; a record without it, or with a value
// ≤ 0 or not finite, is never drawn) or uniform when Weight is "". Retrieval is not
// consumption: nothing is marked, and the records stay for every reader (stale records
// a staleness bound kept, StaleKeep, included).
type ReplayRequest struct {
	// Partition to draw from; DefaultPartition when "".
	Partition string
	// Fields are the fields to return; nil means every field.
	Fields []string
	// Size is the number of draws, ≥ 1.
	Size int
	// Window is how many of the latest global indexes to draw from, ≥ 0 (0:
	// ReplayWindowDefault).
	Window int64
	// Weight names the numeric field that weights the draw; "" draws uniformly.
	Weight string
	// Rand is the random source; nil uses a fresh one seeded from the runtime.
	Rand *rand.Rand
}

// ReplaySample is what Replay drew: Draws lists the drawn global indexes in draw order
// (an index drawn twice appears twice); Batch holds their records once each, ascending
// by index (the caller releases it).
type ReplaySample struct {
	Draws []int64
	Batch *Batch
}

// Replay draws a replay sample as req says, on any store (two reads: the window's
// weights, then the drawn records). An empty window (or one whose weights are all 0)
// draws nothing. Errors: *InvalidError (a bad request, a weight field that is not
// numeric), ErrClosed.
func (q *Queue) Replay(ctx context.Context, req *ReplayRequest) (*ReplaySample, error) {
	if req == nil || req.Size < 1 {
		return nil, &InvalidError{Field: "size", Value: req, Rule: "a ReplayRequest with Size ≥ 1"}
	}
	if req.Window < 0 {
		return nil, &InvalidError{Field: "window", Value: req.Window, Rule: "≥ 0 (0: the last 100,000 indexes)"}
	}
	part := cmpOrString(req.Partition, DefaultPartition)
	if err := CheckName("partition", part); err != nil {
		return nil, err
	}
	next, _, err := q.s.Counts(ctx)
	if err != nil {
		return nil, err
	}
	window := req.Window
	if window == 0 {
		window = ReplayWindowDefault
	}
	from := max(0, next-window)
	sc, err := q.s.Schema(ctx)
	if err != nil {
		return nil, err
	}
	if len(sc.Fields) == 0 {
		return &ReplaySample{Draws: []int64{}, Batch: NewBatch(nil, []int64{}, []string{}, nil)}, nil
	}
	// The weight column, or for a uniform draw the cheapest one to carry the indexes: the
	// first field (its values are not looked at).
	weightFields := []string{sc.Fields[0].Name}
	if req.Weight != "" {
		weightFields = []string{req.Weight}
	}
	var idx []int64
	var weights []float64
	for off := from; off < next; {
		b, scanned, err := q.s.Scan(ctx, off, int(min(next-off, 65_536)), &GetOpts{Partition: part, Fields: weightFields})
		if err != nil {
			return nil, err
		}
		var col interface {
			IsNull(int) bool
		}
		var kind Kind
		if req.Weight != "" && len(b.Fields) == 1 {
			col, kind = b.Column(req.Weight), b.Fields[0].Kind
			if kind != KindInt64 && kind != KindFloat64 {
				b.Release()
				return nil, &InvalidError{Field: "weight", Value: req.Weight, Rule: fmt.Sprintf("a numeric field (it is %s)", kind)}
			}
		}
		for i, x := range b.Indexes {
			w := 1.0
			if req.Weight != "" {
				w = 0
				if col != nil && !col.IsNull(i) {
					if kind == KindInt64 {
						w = float64(col.(*array.Int64).Value(i))
					} else {
						w = col.(*array.Float64).Value(i)
					}
				}
			}
			if w > 0 && !math.IsInf(w, 0) && !math.IsNaN(w) {
				idx, weights = append(idx, x), append(weights, w)
			}
		}
		b.Release()
		if scanned <= off {
			break
		}
		off = scanned
	}
	out := &ReplaySample{Draws: []int64{}}
	if len(idx) > 0 {
		rng := req.Rand
		if rng == nil {
			rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		}
		cum := make([]float64, len(weights))
		total := 0.0
		for i, w := range weights {
			total += w
			cum[i] = total
		}
		for range req.Size {
			u := rng.Float64() * total
			lo, hi := 0, len(cum)-1
			for lo < hi {
				mid := (lo + hi) / 2
				if cum[mid] > u {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			out.Draws = append(out.Draws, idx[lo])
		}
	}
	unique := record.SortedUnique(append([]int64(nil), out.Draws...))
	meta := &BatchMeta{Indexes: unique, Size: len(unique), Partition: part}
	names := req.Fields
	if names == nil {
		for _, f := range sc.Fields {
			names = append(names, f.Name)
		}
	}
	for _, f := range names {
		meta.Fields = append(meta.Fields, FieldMeta{Name: f})
	}
	if out.Batch, err = q.s.GetData(ctx, meta); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdatePriorities sets the numeric field of the samples at indexes of partition to
// values (values[i] for indexes[i]), for Replay's Weight: PutFields of one field.
// Errors as for PutFields, and *InvalidError for lengths that differ.
func (q *Queue) UpdatePriorities(ctx context.Context, partition, field string, indexes []int64, values []float64) error {
	if len(indexes) != len(values) {
		return &InvalidError{Field: "values", Value: len(values), Rule: fmt.Sprintf("one value per index (%d)", len(indexes))}
	}
	if field == WeightVersionField || field == TargetVersionField {
		return &InvalidError{Field: "field", Value: field, Rule: "a priority field, not a weight version"}
	}
	recs := make([]Record, len(values))
	for i, v := range values {
		recs[i] = Record{field: v}
	}
	return q.PutFields(ctx, cmpOrString(partition, DefaultPartition), indexes, recs)
}

func cmpOrString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
