package lakestore

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
)

// fragment is a decoded fragment, kept in the cache (fragments never change).
type fragment struct {
	kind filestore.FragmentKind
	rows []filestore.FragmentRow // sorted by (Index, Seq)
}

// fragment returns the decoded fragment stored as object.
func (s *Store) fragment(ctx context.Context, object string) (*fragment, error) {
	if f, ok := s.cache.Get(object); ok {
		return f, nil
	}
	b, err := s.bucket.ReadAll(ctx, object)
	if err != nil {
		return nil, fmt.Errorf("lakestore: read fragment %s: %w", object, err)
	}
	kind, rows, err := filestore.ReadFragment(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("fragment %s: %w", object, err)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Index != rows[j].Index {
			return rows[i].Index < rows[j].Index
		}
		return rows[i].Seq < rows[j].Seq
	})
	f := &fragment{kind: kind, rows: rows}
	s.cache.Add(object, f)
	return f, nil
}

type update struct {
	seq int64
	rec filestore.StoredRecord
}

// load returns the records (own record merged with its field updates, latest
// sequence last) and partitions of idx, sorted and unique, from the tail table and
// the fragments. The tail is read before the fragments, so that a flush committing
// in between (outside a snapshot) shows a row twice, never not at all.
func (s *Store) load(ctx context.Context, q querier, idx []int64) ([]filestore.StoredRecord, []string, error) {
	if len(idx) == 0 {
		return make([]filestore.StoredRecord, 0), make([]string, 0), nil
	}
	// One round trip: the tail, then the fragments (in this order, see above).
	batch := &pgx.Batch{}
	l := s.queueLoad(batch, idx)
	if err := q.SendBatch(ctx, batch).Close(); err != nil {
		return nil, nil, err
	}
	return l.records(ctx)
}

// loading is a load whose catalog reads are queued in a batch (queueLoad); records ends it
// once the batch ran.
type loading struct {
	s   *Store
	idx []int64
	// entries are the tail's entries overlapping idx, objects the fragments'.
	entries []tailEntry
	objects []string
}

// tailEntry is a row of the tail table read by a load.
type tailEntry struct {
	seq, lo int64
	kind    int16
	part    string
	idx     []int64
	data    []byte
}

// queueLoad queues in batch the catalog reads of load(idx) (idx sorted, unique, not
// empty): the tail, then the fragments.
func (s *Store) queueLoad(batch *pgx.Batch, idx []int64) *loading {
	l := &loading{s: s, idx: idx}
	lo, hi := idx[0], idx[len(idx)-1]
	batch.Queue(`SELECT seq, kind, partition, lo, idx, data FROM tail WHERE queue = $1 AND min_idx <= $3 AND max_idx >= $2`, s.name, lo, hi).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var e tailEntry
			if err := rows.Scan(&e.seq, &e.kind, &e.part, &e.lo, &e.idx, &e.data); err != nil {
				return fmt.Errorf("read tail: %w", err)
			}
			l.entries = append(l.entries, e)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read tail: %w", err)
		}
		return nil
	})
	batch.Queue(`SELECT object FROM fragments WHERE queue = $1 AND min_idx <= $3 AND max_idx >= $2`, s.name, lo, hi).Query(func(rows pgx.Rows) error {
		var err error
		if l.objects, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("read fragments: %w", err)
		}
		return nil
	})
	return l
}

// records merges what the load's batch read with the fragments' rows (load).
func (l *loading) records(ctx context.Context) ([]filestore.StoredRecord, []string, error) {
	s, idx, entries, objects := l.s, l.idx, l.entries, l.objects
	recs := make([]filestore.StoredRecord, len(idx))
	parts := make([]string, len(idx))
	pos := make(map[int64]int, len(idx))
	for i, x := range idx {
		pos[x] = i
	}
	updates := map[int][]update{}
	for _, e := range entries {
		dec, err := filestore.DecodeRecords(e.data)
		if err != nil {
			return nil, nil, fmt.Errorf("tail entry %d: %w", e.seq, err)
		}
		if e.kind == 0 {
			for i, r := range dec {
				if p, ok := pos[e.lo+int64(i)]; ok {
					recs[p], parts[p] = r, e.part
				}
			}
			continue
		}
		if len(dec) != len(e.idx) {
			return nil, nil, fmt.Errorf("%w: tail entry %d has %d records for %d indexes", persist.ErrCorrupt, e.seq, len(dec), len(e.idx))
		}
		for i, x := range e.idx {
			if p, ok := pos[x]; ok {
				updates[p] = append(updates[p], update{e.seq, dec[i]})
			}
		}
	}
	for _, obj := range objects {
		f, err := s.fragment(ctx, obj)
		if err != nil {
			return nil, nil, err
		}
		first := sort.Search(len(idx), func(i int) bool { return len(f.rows) > 0 && idx[i] >= f.rows[0].Index })
		for p := first; p < len(idx); p++ {
			x := idx[p]
			i := sort.Search(len(f.rows), func(i int) bool { return f.rows[i].Index >= x })
			if i == len(f.rows) {
				break
			}
			for ; i < len(f.rows) && f.rows[i].Index == x; i++ {
				r := &f.rows[i]
				if f.kind == filestore.FragmentRows {
					recs[p], parts[p] = r.Record, r.Partition
				} else {
					updates[p] = append(updates[p], update{r.Seq, r.Record})
				}
			}
		}
	}
	for p, us := range updates {
		sort.SliceStable(us, func(i, j int) bool { return us[i].seq < us[j].seq })
		for _, u := range us {
			recs[p] = recs[p].Merge(u.rec)
		}
	}
	return recs, parts, nil
}

// Scan implements persist.Store.
func (s *Store) Scan(ctx context.Context, offset int64, limit int, opts *persist.GetOpts) (*persist.Batch, int64, error) {
	if opts == nil {
		opts = &persist.GetOpts{}
	}
	if err := persist.CheckReadArgs(offset, limit, opts); err != nil {
		return nil, 0, err
	}
	if err := s.calls.Enter(); err != nil {
		return nil, 0, err
	}
	defer s.calls.Leave()
	var b *persist.Batch
	var scanned int64
	err := s.view(ctx, func(tx pgx.Tx) error {
		st, segs, tomb, err := s.readHead(ctx, tx, opts.Partition, offset)
		if err != nil {
			return err
		}
		fields, err := record.SelectFields(st.schema, opts.Fields)
		if err != nil {
			return err
		}
		live := record.IndexSet{{Lo: offset, Hi: st.next}}.Intersect(spansOfSegments(segs)).Minus(tomb)
		scanned = st.next
		var idx []int64
		var recs []filestore.StoredRecord
		var parts []string
		if !opts.Shard.Active() {
			idx = live.First(limit)
			if len(idx) == limit {
				scanned = idx[len(idx)-1] + 1
			}
			if recs, parts, err = s.load(ctx, tx, idx); err != nil {
				return err
			}
		} else {
			col := opts.Shard.Column
			useIndex := col == "" || col == "_index"
			kind, _ := st.schema.Kind(col)
			rest := live
			for len(rest) > 0 && len(idx) < limit {
				chunk := rest.First(max(4*limit, 256))
				rest = rest.From(chunk[len(chunk)-1] + 1)
				crecs, cparts, err := s.load(ctx, tx, chunk)
				if err != nil {
					return err
				}
				for i, x := range chunk {
					var v any
					if !useIndex {
						v, _, _ = crecs[i].Value(col)
						v = widenForHash(v, kind)
					}
					if persist.ShardOwns(opts.Shard, x, v, kind, useIndex) {
						idx, recs, parts = append(idx, x), append(recs, crecs[i]), append(parts, cparts[i])
						if len(idx) == limit {
							scanned = x + 1
							break
						}
					}
				}
			}
		}
		b = filestore.NewBatch(fields, idx, parts, recs)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	s.gets.Add(int64(b.Len()))
	return b, max(scanned, offset), nil // past the end: offset (persist.Store.Scan)
}

// widenForHash converts an int64 value of a column widened to float64, as the
// column's readers see it.
func widenForHash(v any, k persist.Kind) any {
	if x, ok := v.(int64); ok && k == persist.KindFloat64 {
		return float64(x)
	}
	if x, ok := v.([]int64); ok && k == persist.KindFloat64List {
		out := make([]float64, len(x))
		for i, y := range x {
			out[i] = float64(y)
		}
		return out
	}
	return v
}

// GetData implements persist.Store: the records of meta.Partition ("" any). Errors:
// *persist.InvalidError (nil meta, unknown field), *persist.NotFoundError for indexes
// never put in meta.Partition or cleared, ErrClosed.
func (s *Store) GetData(ctx context.Context, meta *persist.BatchMeta) (*persist.Batch, error) {
	if meta == nil {
		return nil, &persist.InvalidError{Field: "meta", Value: nil, Rule: "the batch metadata returned by GetMeta"}
	}
	if err := s.calls.Enter(); err != nil {
		return nil, err
	}
	defer s.calls.Leave()
	want := record.SetOf(meta.Indexes)
	sorted := want.First(int(want.Count()))
	// One snapshot, one round trip: the queue's row, its tombstones, and the catalog's part
	// of the load (read even when an index turns out missing: then it is not used).
	var st *queueState
	var tomb, inPartition record.IndexSet
	var loaded *loading
	err := s.viewBatch(ctx, func(batch *pgx.Batch) {
		batch.Queue(queueRowSQL, s.name).QueryRow(func(row pgx.Row) error {
			var err error
			st, err = s.scanQueue(row)
			return err
		})
		batch.Queue(tombstonesSQL, s.name).Query(func(rows pgx.Rows) error {
			var err error
			tomb, err = scanSpans(rows)
			return err
		})
		if len(sorted) > 0 {
			if meta.Partition != "" {
				sql, args := s.segmentsQuery(meta.Partition, sorted[0], sorted[len(sorted)-1]+1)
				batch.Queue(sql, args...).Query(func(rows pgx.Rows) error {
					segs, err := scanSegments(rows)
					inPartition = spansOfSegments(segs)
					return err
				})
			}
			loaded = s.queueLoad(batch, sorted)
		}
	})
	if err != nil {
		return nil, err
	}
	var b *persist.Batch
	if len(meta.Indexes) == 0 {
		var fields []persist.Field
		for _, f := range meta.Fields {
			if k, ok := st.schema.Kind(f.Name); ok {
				fields = append(fields, persist.Field{Name: f.Name, Kind: k})
			}
		}
		b = filestore.NewBatch(fields, nil, nil, nil)
	} else {
		fields, err := record.SelectFields(st.schema, meta.FieldNames())
		if err != nil {
			return nil, err
		}
		have := record.IndexSet{{Lo: 0, Hi: st.next}}.Minus(tomb)
		if meta.Partition != "" {
			have = have.Intersect(inPartition)
		}
		if err := record.IndexesNotFound(meta.Partition, want.Minus(have)); err != nil {
			return nil, err
		}
		// The fragments named in the snapshot are immutable and never deleted (the sweep
		// deletes only objects no catalog row names): they are read after its commit.
		recs, parts, err := loaded.records(ctx)
		if err != nil {
			return nil, err
		}
		at := make(map[int64]int, len(sorted))
		for i, x := range sorted {
			at[x] = i
		}
		orecs := make([]filestore.StoredRecord, len(meta.Indexes))
		oparts := make([]string, len(meta.Indexes))
		for i, x := range meta.Indexes {
			orecs[i], oparts[i] = recs[at[x]], parts[at[x]]
		}
		b = filestore.NewBatch(fields, append([]int64(nil), meta.Indexes...), oparts, orecs)
	}
	s.gets.Add(int64(b.Len()))
	return b, nil
}

// Produced implements persist.Store: samples not in partition, or cleared, report
// false for every field.
func (s *Store) Produced(ctx context.Context, partition string, indexes []int64, fields []string) ([][]bool, error) {
	if err := persist.CheckName("partition", partition); err != nil {
		return nil, err
	}
	if err := s.calls.Enter(); err != nil {
		return nil, err
	}
	defer s.calls.Leave()
	out := make([][]bool, len(indexes))
	for i := range out {
		out[i] = make([]bool, len(fields))
	}
	if len(indexes) == 0 || len(fields) == 0 {
		return out, nil
	}
	err := s.view(ctx, func(tx pgx.Tx) error {
		segs, live, err := s.partitionLive(ctx, tx, partition)
		if err != nil {
			return err
		}
		for j, f := range fields {
			ready, err := s.producedSet(ctx, tx, segs, f)
			if err != nil {
				return err
			}
			ready = ready.Intersect(live)
			for i, x := range indexes {
				out[i][j] = ready.Contains(x)
			}
		}
		return nil
	})
	return out, err
}

// producedSet returns the samples of segs that have field f: in their own record or
// by a later update.
func (s *Store) producedSet(ctx context.Context, q querier, segs []segment, f string) (record.IndexSet, error) {
	prod, err := loadSpans(ctx, q, `SELECT lo, hi FROM produced WHERE queue = $1 AND field = $2`, s.name, f)
	if err != nil {
		return nil, err
	}
	return producedWith(segs, f, prod), nil
}

// producedWith returns the samples of segs that have field f in their own record, and
// prod (f's spans of the produced table).
func producedWith(segs []segment, f string, prod record.IndexSet) record.IndexSet {
	var has []record.Span
	for _, sg := range segs {
		for _, name := range sg.fields {
			if name == f {
				has = append(has, sg.sp)
				break
			}
		}
	}
	return record.SpansOf(has).Union(prod)
}

// Schema implements persist.Store.
func (s *Store) Schema(ctx context.Context) (persist.Schema, error) {
	if err := s.calls.Enter(); err != nil {
		return persist.Schema{}, err
	}
	defer s.calls.Leave()
	st, err := s.loadQueue(ctx, s.pool, false)
	if err != nil {
		return persist.Schema{}, s.failure(ctx, err)
	}
	return st.schema, nil
}

// Counts implements persist.Store.
func (s *Store) Counts(ctx context.Context) (next, live int64, err error) {
	err = s.viewQueue(ctx, func(tx pgx.Tx, st *queueState) error {
		tomb, err := s.tombstones(ctx, tx)
		if err != nil {
			return err
		}
		next, live = st.next, st.next-tomb.Count()
		return nil
	})
	return next, live, err
}

// readHead reads, in one round trip, the queue's row, its segments from offset on (of
// partition, "" for all) and its tombstones.
func (s *Store) readHead(ctx context.Context, tx pgx.Tx, partition string, offset int64) (*queueState, []segment, record.IndexSet, error) {
	batch := &pgx.Batch{}
	var st *queueState
	var segs []segment
	var tomb record.IndexSet
	batch.Queue(`SELECT next_index, schema FROM queues WHERE queue = $1`, s.name).QueryRow(func(row pgx.Row) error {
		var sj []byte
		st = &queueState{}
		if err := row.Scan(&st.next, &sj); err != nil {
			return fmt.Errorf("read queue: %w", err)
		}
		var err error
		st.schema, err = decodeSchema(sj)
		return err
	})
	sql := `SELECT lo, hi, partition, fields FROM segments WHERE queue = $1 AND hi > $2`
	args := []any{s.name, offset}
	if partition != "" {
		sql += ` AND partition = $3`
		args = append(args, partition)
	}
	batch.Queue(sql+` ORDER BY lo`, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var sg segment
			if err := rows.Scan(&sg.sp.Lo, &sg.sp.Hi, &sg.partition, &sg.fields); err != nil {
				return fmt.Errorf("read segments: %w", err)
			}
			segs = append(segs, sg)
		}
		return rows.Err()
	})
	batch.Queue(`SELECT lo, hi FROM tombstones WHERE queue = $1`, s.name).Query(func(rows pgx.Rows) error {
		var sp []record.Span
		for rows.Next() {
			var x record.Span
			if err := rows.Scan(&x.Lo, &x.Hi); err != nil {
				return fmt.Errorf("read tombstones: %w", err)
			}
			sp = append(sp, x)
		}
		tomb = record.SpansOf(sp)
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, nil, nil, err
	}
	return st, segs, tomb, nil
}
