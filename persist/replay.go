package persist

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// ReplayWindowDefault is ReplayRequest.Window's default: the last 100,000 indexes.
const ReplayWindowDefault = 100_000

// ReplaySizeMax bounds ReplayRequest.Size (draws per call).
const ReplaySizeMax = 1 << 20

// ReplayPartSeed is the seed of part k (from 0) of a replay split into several draws of
// at most ScanLimitMax each, as the HTTP store draws a Size above that bound: seed + k
// modulo 2^64, skipping 0 (part 0 keeps seed; seed 0, a fresh seed, stays 0 for every
// part). So a seeded replay over HTTP repeats itself for the same Size and window, and
// its first ScanLimitMax draws are those of the same seed in one call.
func ReplayPartSeed(seed uint64, k int) uint64 {
	if seed == 0 {
		return 0
	}
	s := seed + uint64(k)
	if s < seed { // wrapped past 0
		s++
	}
	return s
}

// ReplayRequest asks for a replay sample: Size draws with replacement from the
// records of Partition among the last Window global indexes, weighted by the numeric
// field Weight (a priority, a reward, a TD error; a record without it, or with a value
// ≤ 0 or not finite, is never drawn) or uniform when Weight is "". Retrieval is not
// consumption: nothing is marked, and the records stay for every reader (stale records
// a staleness bound kept, StaleKeep, included).
type ReplayRequest struct {
	// Partition to draw from; DefaultPartition when "".
	Partition string
	// Fields are the fields to return; nil means every field, an empty non-nil slice
	// none (the draws' indexes only, with no read of the records).
	Fields []string
	// Size is the number of draws, 1–ReplaySizeMax.
	Size int
	// Window is how many of the latest global indexes to draw from, ≥ 0 (0:
	// ReplayWindowDefault).
	Window int64
	// Weight names the numeric field that weights the draw; "" draws uniformly.
	Weight string
	// Rand is the random source; nil uses one seeded by Seed, or a fresh one seeded
	// from the runtime when Seed is 0. (Over HTTP only Seed crosses.)
	Rand *rand.Rand
	// Seed seeds the draw when Rand is nil and Seed ≠ 0, so a draw can be repeated.
	Seed uint64
}

// ReplaySample is what Replay drew: Draws lists the drawn global indexes in draw order
// (an index drawn twice appears twice), and Batch holds one row per draw in the same
// order (Batch.Indexes equals Draws; the caller releases it), with the requested
// fields.
type ReplaySample struct {
	Draws []int64
	Batch *Batch
}

// Replayer is implemented by stores that draw replay samples themselves (the HTTP
// store: the server draws, from its weights cache, and applies priority updates to
// it); Queue.Replay and Queue.UpdatePriorities hand their calls to it.
type Replayer interface {
	Replay(ctx context.Context, req *ReplayRequest) (*ReplaySample, error)
	UpdatePriorities(ctx context.Context, partition, field string, indexes []int64, values []float64) error
}

// FieldRevisioner is implemented by stores that count rewrites of existing records,
// so that Queue.Replay can keep a field's values in memory exactly: FieldRevision
// returns, read in one snapshot, the index the next put gets and a revision of field
// that grows with every commit, by any process, that changes field's value of an
// existing record (PutFields or a KV update carrying it) or clears records (field ""
// counts only clears). Errors: ErrClosed, storage errors.
type FieldRevisioner interface {
	FieldRevision(ctx context.Context, field string) (next, revision int64, err error)
}

func (req *ReplayRequest) validate() error {
	if req == nil || req.Size < 1 || req.Size > ReplaySizeMax {
		var size any = req
		if req != nil {
			size = req.Size
		}
		return &InvalidError{Field: "size", Value: size, Rule: fmt.Sprintf("a ReplayRequest with Size 1–%d", ReplaySizeMax)}
	}
	if req.Window < 0 {
		return &InvalidError{Field: "window", Value: req.Window, Rule: "≥ 0 (0: the last 100,000 indexes)"}
	}
	if req.Weight == WeightVersionField || req.Weight == TargetVersionField {
		return &InvalidError{Field: "weight", Value: req.Weight, Rule: "a numeric field other than a weight version"}
	}
	if req.Weight != "" {
		if err := record.CheckFieldName(req.Weight); err != nil {
			return err
		}
	}
	return CheckName("partition", cmpOrString(req.Partition, DefaultPartition))
}

// CheckReplayRequest checks a ReplayRequest as Replay does. Errors: *InvalidError.
func CheckReplayRequest(req *ReplayRequest) error { return req.validate() }

// Replay draws a replay sample as req says, on any store. The draw itself does no
// I/O: the window's weights are kept in memory by the Queue (a Fenwick tree of
// prefix sums per partition and weight field), filled on first use and then kept
// exact — new records are read incrementally (only the indexes put since), this
// Queue's UpdatePriorities update it in place, and a store that is a FieldRevisioner
// tells it whether anything else changed the weight field or cleared records since
// (then it is read again); a store that is not one is read afresh at every call. Then
// one GetData reads the drawn records. An empty window (or one whose weights are all
// 0) draws nothing. Errors: *InvalidError (a bad request, a weight field that is not
// numeric), ErrClosed.
func (q *Queue) Replay(ctx context.Context, req *ReplayRequest) (*ReplaySample, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	if r, ok := q.s.(Replayer); ok {
		return r.Replay(ctx, req)
	}
	part := cmpOrString(req.Partition, DefaultPartition)
	sc, err := q.s.Schema(ctx)
	if err != nil {
		return nil, err
	}
	if req.Weight != "" {
		if k, ok := sc.Kind(req.Weight); ok && k != KindInt64 && k != KindFloat64 {
			return nil, &InvalidError{Field: "weight", Value: req.Weight, Rule: fmt.Sprintf("a numeric field (it is %s)", k)}
		}
	}
	rng := req.Rand
	if rng == nil {
		seed := req.Seed
		if seed == 0 {
			seed = rand.Uint64()
		}
		rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	}
	draws, err := q.replay.draw(ctx, q.s, sc, part, req, rng)
	if err != nil {
		return nil, err
	}
	names := req.Fields
	if names == nil {
		for _, f := range sc.Fields {
			names = append(names, f.Name)
		}
	}
	b, err := q.replayBatch(ctx, part, names, draws)
	if err != nil {
		return nil, err
	}
	return &ReplaySample{Draws: draws, Batch: b}, nil
}

// replayBatch reads the records of draws (once each) and expands them to one row per
// draw, in draw order.
func (q *Queue) replayBatch(ctx context.Context, part string, names []string, draws []int64) (*Batch, error) {
	if len(names) == 0 || len(draws) == 0 {
		parts := make([]string, len(draws))
		for i := range parts {
			parts[i] = part
		}
		var fields []Field
		if len(draws) == 0 {
			sc, err := q.s.Schema(ctx)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				if k, ok := sc.Kind(n); ok {
					fields = append(fields, Field{Name: n, Kind: k})
				}
			}
		}
		return record.EmptyBatch(fields, draws, parts), nil
	}
	unique := record.SortedUnique(append([]int64(nil), draws...))
	meta := &BatchMeta{Indexes: unique, Size: len(unique), Partition: part}
	for _, f := range names {
		meta.Fields = append(meta.Fields, FieldMeta{Name: f})
	}
	b, err := q.s.GetData(ctx, meta)
	if err != nil {
		return nil, err
	}
	if len(unique) == len(draws) && sort.SliceIsSorted(draws, func(i, j int) bool { return draws[i] < draws[j] }) {
		return b, nil
	}
	defer b.Release()
	pos := make([]int, len(draws))
	parts := make([]string, len(draws))
	at := make(map[int64]int, len(unique))
	for j, x := range unique {
		at[x] = j
	}
	for i, x := range draws {
		j := at[x]
		pos[i] = j
		parts[i] = b.Partitions[j]
	}
	cols := make([]arrow.Array, len(b.Fields))
	for i, f := range b.Fields {
		cols[i] = takeRows(b.Column(f.Name), f.Kind, pos)
	}
	idx := append([]int64(nil), draws...)
	// MakeRecord takes over cols.
	return &Batch{Indexes: idx, Partitions: parts, Fields: b.Fields, Record: record.MakeRecord(idx, b.Fields, cols)}, nil
}

// UpdatePriorities sets the numeric field of the samples at indexes of partition to
// values (values[i] for indexes[i]), for Replay's Weight: PutFields of one field, then
// the same values in this Queue's weights cache (a value of 0 or below: never drawn).
// Errors as for PutFields, and *InvalidError for lengths that differ, a value that is not a
// finite number, or a weight-version field.
func (q *Queue) UpdatePriorities(ctx context.Context, partition, field string, indexes []int64, values []float64) error {
	if len(indexes) != len(values) {
		return &InvalidError{Field: "values", Value: len(values), Rule: fmt.Sprintf("one value per index (%d)", len(indexes))}
	}
	for i, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			// The value as text: JSON has no NaN or infinity to carry it in an error body.
			return &InvalidError{Field: fmt.Sprintf("values[%d]", i), Value: fmt.Sprint(v), Rule: "a finite number (0 or below: never drawn)"}
		}
	}
	if field == WeightVersionField || field == TargetVersionField || field == LastWeightVersionField || field == "" {
		return &InvalidError{Field: "field", Value: field, Rule: "a priority field, not a weight version"}
	}
	if err := CheckIndexes(indexes); err != nil {
		return err
	}
	if r, ok := q.s.(Replayer); ok {
		return r.UpdatePriorities(ctx, partition, field, indexes, values)
	}
	part := cmpOrString(partition, DefaultPartition)
	recs := make([]Record, len(values))
	for i, v := range values {
		recs[i] = Record{field: v}
	}
	return q.replay.update(part, field, indexes, values, func() error { return q.s.PutFields(ctx, part, indexes, recs) })
}

func cmpOrString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// replayCache holds, per (partition, weight field), the weights of the records of a
// window in a Fenwick tree, so that a draw costs O(log n) and no I/O.
type replayCache struct {
	mu      sync.Mutex
	entries map[replayKey]*replayWeights
}

type replayKey struct{ partition, field string }

// replayWeights are the weights of the records of one partition with index in
// [from, to): idx ascending, w[i] the weight of idx[i] (0 when it cannot be drawn).
type replayWeights struct {
	from, to int64
	// revision is the store's FieldRevision when the entry was last read, own how many
	// of this Queue's UpdatePriorities committed since (each adds 1 to it).
	revision, own int64
	revisioned    bool
	idx           []int64
	w             []float64
	tree          fenwick
	updates       int // in-place updates since the tree was built (float drift)
}

// draw answers Replay's draws for part from the cache, reading what it lacks.
func (c *replayCache) draw(ctx context.Context, s Store, sc Schema, part string, req *ReplayRequest, rng *rand.Rand) ([]int64, error) {
	key := replayKey{part, req.Weight}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[replayKey]*replayWeights{}
	}
	e := c.entries[key]
	var next, rev int64
	fr, revisioned := s.(FieldRevisioner)
	var err error
	if revisioned {
		next, rev, err = fr.FieldRevision(ctx, req.Weight)
	} else {
		next, _, err = s.Counts(ctx)
	}
	if err != nil {
		return nil, err
	}
	window := cmpOr64(req.Window, ReplayWindowDefault)
	from := max(0, next-window)
	if e == nil || !revisioned || !e.revisioned || rev != e.revision+e.own || from < e.from {
		e = &replayWeights{from: from, to: from, revision: rev, revisioned: revisioned}
		c.entries[key] = e
	}
	if e.to < next {
		if err := e.read(ctx, s, sc, part, req.Weight, e.to, next); err != nil {
			delete(c.entries, key)
			return nil, err
		}
	}
	e.trim(from)
	head := sort.Search(len(e.idx), func(i int) bool { return e.idx[i] >= from })
	base := e.tree.prefix(head)
	total := e.tree.prefix(len(e.idx)) - base
	draws := make([]int64, 0, req.Size)
	if total <= 0 || len(e.idx) == head {
		return draws, nil
	}
	for range req.Size {
		i := e.tree.find(base + rng.Float64()*total)
		i = max(i, head)
		if i >= len(e.idx) || e.w[i] <= 0 {
			i = e.nearestPositive(i, head)
			if i < 0 {
				return draws[:0], nil
			}
		}
		draws = append(draws, e.idx[i])
	}
	return draws, nil
}

// read appends the weights of part's records in [lo, hi).
func (e *replayWeights) read(ctx context.Context, s Store, sc Schema, part, weight string, lo, hi int64) error {
	field := weight
	if field == "" {
		if len(sc.Fields) == 0 {
			e.to = hi
			return nil
		}
		field = sc.Fields[0].Name // carries the indexes; its values are not looked at
	} else if _, ok := sc.Kind(weight); !ok {
		e.to = hi // no record has the field yet: nothing can be drawn
		return nil
	}
	for off := lo; off < hi; {
		b, scanned, err := s.Scan(ctx, off, int(min(hi-off, 65_536)), &GetOpts{Partition: part, Fields: []string{field}})
		if err != nil {
			return err
		}
		var col arrow.Array
		var kind Kind
		if weight != "" && len(b.Fields) == 1 {
			col, kind = b.Column(weight), b.Fields[0].Kind
			if kind != KindInt64 && kind != KindFloat64 {
				b.Release()
				return &InvalidError{Field: "weight", Value: weight, Rule: fmt.Sprintf("a numeric field (it is %s)", kind)}
			}
		}
		for i, x := range b.Indexes {
			if x >= hi {
				break
			}
			w := 1.0
			if weight != "" {
				w = 0
				if col != nil && !col.IsNull(i) {
					if kind == KindInt64 {
						w = float64(col.(*array.Int64).Value(i))
					} else {
						w = col.(*array.Float64).Value(i)
					}
				}
			}
			e.idx = append(e.idx, x)
			e.w = append(e.w, drawable(w))
			e.tree.push(e.w[len(e.w)-1])
		}
		b.Release()
		if scanned <= off {
			break
		}
		off = scanned
	}
	e.to = hi
	return nil
}

// drawable returns w, or 0 for a weight that is never drawn.
func drawable(w float64) float64 {
	if w > 0 && !math.IsInf(w, 0) && !math.IsNaN(w) {
		return w
	}
	return 0
}

// trim forgets the records below from once they are most of the entry, and rebuilds
// the tree after many in-place updates (their rounding adds up).
func (e *replayWeights) trim(from int64) {
	head := sort.Search(len(e.idx), func(i int) bool { return e.idx[i] >= from })
	if (head > 4096 && head > len(e.idx)/2) || e.updates > max(len(e.idx), 4096) {
		e.idx, e.w = append([]int64(nil), e.idx[head:]...), append([]float64(nil), e.w[head:]...)
		e.from = max(e.from, from)
		e.tree.build(e.w)
		e.updates = 0
	}
}

// nearestPositive returns the position ≥ head nearest to i with a weight > 0 (-1:
// none), for a draw that rounding put on a weight of 0.
func (e *replayWeights) nearestPositive(i, head int) int {
	i = min(i, len(e.idx)-1)
	for d := 0; i-d >= head || i+d < len(e.idx); d++ {
		if i+d < len(e.idx) && e.w[i+d] > 0 {
			return i + d
		}
		if i-d >= head && e.w[i-d] > 0 {
			return i - d
		}
	}
	return -1
}

// update runs put (the PutFields of the new values) and, once it committed, applies
// the values to the cached weights of (part, field): under the cache's lock, so that a
// Replay sees the store's revision and the cache agree.
func (c *replayCache) update(part, field string, indexes []int64, values []float64, put func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := put(); err != nil {
		return err
	}
	e := c.entries[replayKey{part, field}]
	if e == nil {
		return nil
	}
	e.own++
	for i, x := range indexes {
		if x < e.from || x >= e.to {
			continue
		}
		j := sort.Search(len(e.idx), func(j int) bool { return e.idx[j] >= x })
		if j < len(e.idx) && e.idx[j] == x {
			w := drawable(values[i])
			e.tree.add(j, w-e.w[j])
			e.w[j] = w
			e.updates++
		}
	}
	return nil
}

func cmpOr64(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// fenwick is a binary indexed tree of float64 weights that grows at its end.
type fenwick struct{ t []float64 } // 1-based: t[i] sums (i − lowbit(i), i]

// push appends weight w.
func (f *fenwick) push(w float64) {
	if len(f.t) == 0 {
		f.t = append(f.t, 0)
	}
	i := len(f.t)
	lb := i & -i
	f.t = append(f.t, w+f.prefix(i-1)-f.prefix(i-lb))
}

// build replaces the tree with one over ws, in O(n).
func (f *fenwick) build(ws []float64) {
	f.t = make([]float64, len(ws)+1)
	copy(f.t[1:], ws)
	for i := 1; i < len(f.t); i++ {
		if j := i + i&-i; j < len(f.t) {
			f.t[j] += f.t[i]
		}
	}
}

// add adds d to the weight at position i (0-based).
func (f *fenwick) add(i int, d float64) {
	for j := i + 1; j < len(f.t); j += j & -j {
		f.t[j] += d
	}
}

// prefix returns the sum of the first n weights.
func (f *fenwick) prefix(n int) float64 {
	s := 0.0
	for ; n > 0; n -= n & -n {
		s += f.t[n]
	}
	return s
}

// find returns the 0-based position of the first weight at which the running sum
// passes u (len when u ≥ the total).
func (f *fenwick) find(u float64) int {
	pos := 0
	step := 1
	for step*2 < len(f.t) {
		step *= 2
	}
	for ; step > 0; step /= 2 {
		if n := pos + step; n < len(f.t) && f.t[n] <= u {
			pos = n
			u -= f.t[n]
		}
	}
	return pos
}

// takeRows returns the rows pos of col (of kind k) in that order, a row possibly
// repeated, as a new array (arrow/compute's Take would do it too, but links the compute
// engine and, through its extension types, Parquet into every program on the SDK).
func takeRows(col arrow.Array, k Kind, pos []int) arrow.Array {
	b := array.NewBuilder(memory.DefaultAllocator, record.ArrowType(k))
	defer b.Release()
	b.Reserve(len(pos))
	switch k { // the numeric kinds in one loop each: Replay's weights and rewards
	case KindInt64:
		takeValues(b.(*array.Int64Builder), col.(*array.Int64), pos)
	case KindFloat64:
		takeValues(b.(*array.Float64Builder), col.(*array.Float64), pos)
	default:
		for _, j := range pos {
			record.AppendArrow(b, k, col, j, k)
		}
	}
	return b.NewArray()
}

// takeValues appends the rows pos of src to b (reserved for them).
func takeValues[T int64 | float64, B interface {
	UnsafeAppend(T)
	AppendNull()
}, A interface {
	IsNull(int) bool
	Value(int) T
}](b B, src A, pos []int) {
	for _, j := range pos {
		if src.IsNull(j) {
			b.AppendNull()
			continue
		}
		b.UnsafeAppend(src.Value(j))
	}
}
