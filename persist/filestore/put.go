package filestore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/putid"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
)

// putResult is filled by a put op.
type putPrepared struct {
	partition string
	recs      []record.NormRecord
	data      []byte
	kinds     []record.FieldValue // unique (name, kind) pairs, val unused
	bigInts   map[string]int64    // field → an integer beyond ±2^53 it holds (see exactInt)
	runs      []fieldRun          // consecutive records with the same field set
}

type fieldRun struct {
	n      int
	fields string // sorted names joined by \x1f
}

// prepare normalizes and encodes records outside the writer, so that encoding runs on
// the callers' goroutines in parallel.
func prepare(partition string, recs []persist.Record) (*putPrepared, error) {
	norm := make([]record.NormRecord, len(recs))
	for i, r := range recs {
		nr, err := record.NormalizeRecord(r)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		norm[i] = nr
	}
	return prepareNorm(partition, norm)
}

// prepareNorm builds the put of normalized records: their (field, kind) pairs, runs of
// equal field sets and encoding. It fails with *SchemaError if the records themselves
// disagree on a field's type.
func prepareNorm(partition string, recs []record.NormRecord) (*putPrepared, error) {
	p := &putPrepared{partition: partition, recs: recs}
	seen := map[string]persist.Kind{}
	for _, nr := range recs {
		names := make([]string, len(nr))
		for j, fv := range nr {
			names[j] = fv.Name
			if k, ok := seen[fv.Name]; !ok || (k != fv.Kind) {
				if ok {
					if _, ok := record.Widen(k, fv.Kind); !ok {
						return nil, &persist.SchemaError{Field: fv.Name, Have: k, Got: fv.Kind}
					}
				}
				seen[fv.Name] = fv.Kind
				p.kinds = append(p.kinds, record.FieldValue{Name: fv.Name, Kind: fv.Kind})
			}
		}
		for _, fv := range nr {
			if v, big := record.InexactInt(fv); big {
				if p.bigInts == nil {
					p.bigInts = map[string]int64{}
				}
				if _, ok := p.bigInts[fv.Name]; !ok {
					p.bigInts[fv.Name] = v
				}
			}
		}
		fs := strings.Join(names, "\x1f")
		if n := len(p.runs); n > 0 && p.runs[n-1].fields == fs {
			p.runs[n-1].n++
		} else {
			p.runs = append(p.runs, fieldRun{n: 1, fields: fs})
		}
	}
	p.data = tail.EncodeRecords(nil, p.recs)
	return p, nil
}

// PutPartition appends recs to partition (1–128 bytes of [A-Za-z0-9._-], not starting
// with . _ or -) and returns their consecutive global indexes once durable. Global
// indexes are unique across partitions, monotonic and never reused. Atomic; errors as
// for Put. With opts.ID, the id is stored in meta.db (table put_ids) in the put's
// transaction, and a put repeating it answers the stored indexes without writing.
func (q *fileQueue) PutPartition(ctx context.Context, partition string, recs []persist.Record, opts *persist.PutOpts) ([]int64, error) {
	args, err := persist.CheckPut(partition, recs, opts)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	id, adm, target := args.ID, args.Admission, args.Target
	p, err := prepare(partition, recs)
	if err != nil {
		return nil, err
	}
	if err := q.calls.Enter(); err != nil {
		return nil, err
	}
	defer q.calls.Leave()
	return persist.AdmitLoop(ctx, adm, q.Changes, q.calls.Closing(), func() ([]int64, error) {
		return q.putOnce(ctx, partition, recs, p, id, adm, target)
	})
}

// putOnce is one attempt of PutPartition.
func (q *fileQueue) putOnce(ctx context.Context, partition string, recs []persist.Record, p *putPrepared, id string, adm *persist.Admission, target int64) ([]int64, error) {
	var lo int64
	var repeat []int64
	err := q.w.doPut(ctx, func(t *wtx) error {
		if id != "" {
			var part string
			var plo, pn int64
			err := t.queryRow(`SELECT partition, lo, n FROM put_ids WHERE id = ?`, id).Scan(&part, &plo, &pn)
			if err == nil {
				repeat, err = putid.Repeat(id, part, plo, pn, partition, len(recs))
				return err // nothing written either way
			}
			if !isNoRows(err) {
				return fmt.Errorf("read put id: %w", err)
			}
		}
		if err := t.admit(adm, partition, len(recs), target); err != nil {
			return err
		}
		var err error
		if lo, err = t.putRows(p); err != nil {
			return err
		}
		if id != "" {
			if _, err := t.exec(`INSERT INTO put_ids(id, partition, lo, n, at) VALUES (?, ?, ?, ?, ?)`,
				id, partition, lo, len(recs), time.Now().UnixNano()); err != nil {
				return fmt.Errorf("record put id: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if repeat != nil {
		return repeat, nil
	}
	q.metrics.puts.Add(int64(len(recs)))
	if target >= 0 {
		q.versions.putVersions(lo, recs) // some record has a version
	}
	out := make([]int64, len(recs))
	for i := range out {
		out[i] = lo + int64(i)
	}
	return out, nil
}

// checkSchema evolves the schema for the prepared kinds and saves it when it changed.
// It refuses, with *SchemaError, to let a float64 column hold an integer beyond ±2^53
// (bigInts, field → such a value), which it would round: neither a put of such an
// integer into a float64 column nor the widening of an int64 column that holds one.
func (t *wtx) checkSchema(kinds []record.FieldValue, bigInts map[string]int64) error {
	s, err := t.loadSchema()
	if err != nil {
		return err
	}
	ns, changed, err := record.Evolve(*s, []record.NormRecord{kinds})
	if err != nil {
		return err
	}
	final := *s
	if changed {
		final = ns
	}
	for field, v := range bigInts {
		if k, _ := final.Kind(field); k == persist.KindFloat64 || k == persist.KindFloat64List {
			have, ok := s.Kind(field)
			if !ok {
				have = record.IntKindOf(k)
			}
			return &persist.SchemaError{Field: field, Have: have, Got: record.OtherKind(have),
				Reason: fmt.Sprintf("the integer %d is beyond ±2^53 and a float64 column would round it (allowed: integers within ±2^53, or int64 only in this field)", v)}
		}
	}
	if changed {
		for _, f := range s.Fields {
			if k, _ := ns.Kind(f.Name); k != f.Kind && (k == persist.KindFloat64 || k == persist.KindFloat64List) {
				var one int
				err := t.queryRow(`SELECT 1 FROM big_int_fields WHERE field = ?`, f.Name).Scan(&one)
				if err == nil {
					return &persist.SchemaError{Field: f.Name, Have: f.Kind, Got: k,
						Reason: "the field holds integers beyond ±2^53, which a float64 column would round (allowed: integers only in this field)"}
				}
				if !isNoRows(err) {
					return fmt.Errorf("read big-integer fields: %w", err)
				}
			}
		}
	}
	for field := range bigInts {
		if _, err := t.exec(`INSERT OR IGNORE INTO big_int_fields(field) VALUES (?)`, field); err != nil {
			return fmt.Errorf("record big-integer field: %w", err)
		}
	}
	if changed {
		return t.saveSchema(*s, ns)
	}
	return nil
}

// putRows is the write op of a put: it checks the schema, allocates indexes, stores the
// tail entry and extends the partition's segments. It returns the first index.
func (t *wtx) putRows(p *putPrepared) (int64, error) {
	if err := t.checkSchema(p.kinds, p.bigInts); err != nil {
		return 0, err
	}
	if err := t.loadPuts(); err != nil {
		return 0, err
	}
	lo := t.ps.next
	n := int64(len(p.recs))
	ps := &t.ps
	if ps.pendN > 0 && (ps.pendPart != p.partition || ps.pendLo+ps.pendN != lo || len(ps.pendData)+len(p.data) > 4<<20) {
		if err := t.writeTail(); err != nil {
			return 0, err
		}
	}
	if ps.pendN == 0 {
		ps.pendPart, ps.pendLo = p.partition, lo
		ps.pendData = append(make([]byte, 0, len(p.data)), p.data...)
	} else {
		// Appending writes only past the saved length, so a savepoint's copy of ps
		// keeps seeing its own bytes.
		ps.pendData = append(ps.pendData, p.data...)
	}
	ps.pendN += n
	at := lo
	for _, run := range p.runs {
		if err := t.addSegment(p.partition, run.fields, at, at+int64(run.n)); err != nil {
			return 0, err
		}
		at += int64(run.n)
	}
	t.ps.next = lo + n
	t.ps.tailRows += n
	t.ps.tailAdd += n
	t.changed(p.partition)
	if fr := t.q.cfg.FlushRows; fr > 0 && t.ps.tailRows >= int64(fr) {
		t.kick = true
	}
	return lo, nil
}

// fieldsetID returns the id of a field set, creating it.
func (t *wtx) fieldsetID(fields string) (int64, error) {
	if id, ok := t.fsIDs[fields]; ok {
		return id, nil
	}
	t.q.schemaMu.Lock()
	id, ok := t.q.fieldsetIDs[fields]
	t.q.schemaMu.Unlock()
	if ok {
		return id, nil
	}
	err := t.queryRow(`SELECT id FROM fieldsets WHERE fields = ?`, fields).Scan(&id)
	if isNoRows(err) {
		res, err := t.exec(`INSERT INTO fieldsets(fields) VALUES (?)`, fields)
		if err != nil {
			return 0, fmt.Errorf("insert field set: %w", err)
		}
		if id, err = res.LastInsertId(); err != nil {
			return 0, err
		}
	} else if err != nil {
		return 0, fmt.Errorf("read field set: %w", err)
	}
	if t.fsIDs == nil {
		t.fsIDs = map[string]int64{}
	}
	t.fsIDs[fields] = id
	q := t.q
	t.after = append(t.after, func() {
		q.schemaMu.Lock()
		defer q.schemaMu.Unlock()
		if q.fieldsetIDs == nil {
			q.fieldsetIDs = map[string]int64{}
		}
		q.fieldsetIDs[fields] = id
	})
	return id, nil
}

// addSegment records that indexes [lo, hi) belong to partition with the given field
// set, extending the last segment when it is adjacent and alike. It works on the
// transaction's putState (loadPuts must have run).
func (t *wtx) addSegment(partition, fields string, lo, hi int64) error {
	fs, err := t.fieldsetID(fields)
	if err != nil {
		return err
	}
	ps := &t.ps
	if ps.segOK && ps.seg.hi == lo && ps.seg.partition == partition && ps.seg.fieldset == fs {
		ps.seg.hi = hi
		ps.segDirty = true
		return nil
	}
	if err := t.writeSegment(); err != nil {
		return err
	}
	ps.seg = segment{lo: lo, hi: hi, partition: partition, fieldset: fs}
	ps.segOK, ps.segDirty, ps.segNew = true, true, true
	return nil
}

// PutFields adds fields to existing samples of partition: fields[i] is merged into
// the sample at indexes[i] (new fields are added, fields it already has are
// overwritten; the latest put of a (sample, field) wins; an index given twice is merged
// in order, so its later record wins). Each (sample, field) put becomes produced, so readers waiting for those fields see the sample. Durable when it
// returns; atomic. Errors: *NotFoundError for an index that does not exist in partition
// (or was cleared), *SchemaError, *InvalidError, ErrClosed.
func (q *fileQueue) PutFields(ctx context.Context, partition string, indexes []int64, fields []persist.Record) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	indexes, prepared, err := PrepareFieldUpdates(indexes, fields)
	if err != nil {
		return err
	}
	if len(indexes) == 0 {
		return nil
	}
	p := prepared.p
	p.partition = partition
	if err := q.write(ctx, func(t *wtx) error { return t.putFields(p, indexes) }); err != nil {
		return err
	}
	q.metrics.puts.Add(int64(len(indexes)))
	return nil
}

// mergeDuplicateIndexes merges the records of an index given more than once, in order
// (a later non-nil value of a field replaces an earlier one), so that every index
// appears once: reads resolve updates of one (sample, field) by tail sequence, which
// records of one call share. Without duplicates it returns its arguments.
func mergeDuplicateIndexes(indexes []int64, fields []persist.Record) ([]int64, []persist.Record) {
	pos := make(map[int64]int, len(indexes))
	for _, x := range indexes {
		pos[x] = 0
	}
	if len(pos) == len(indexes) {
		return indexes, fields
	}
	clear(pos)
	outIdx := make([]int64, 0, len(pos))
	outRec := make([]persist.Record, 0, len(pos))
	for i, x := range indexes {
		j, ok := pos[x]
		if !ok {
			j = len(outIdx)
			pos[x] = j
			outIdx = append(outIdx, x)
			outRec = append(outRec, persist.Record{})
		}
		for k, v := range fields[i] {
			if v != nil {
				outRec[j][k] = v
			}
		}
	}
	return outIdx, outRec
}

func (t *wtx) putFields(p *putPrepared, indexes []int64) error {
	set := record.SetOf(indexes)
	if err := t.requireInPartition(p.partition, set); err != nil {
		return err
	}
	if err := t.checkSchema(p.kinds, p.bigInts); err != nil {
		return err
	}
	minI, maxI := set[0].Lo, set[len(set)-1].Hi-1
	if _, err := t.exec(`INSERT INTO tail(kind, partition, lo, n, min_idx, max_idx, idx, data) VALUES (1, ?, 0, ?, ?, ?, ?, ?)`,
		p.partition, len(indexes), minI, maxI, tail.EncodeIndexes(indexes), p.data); err != nil {
		return fmt.Errorf("insert tail: %w", err)
	}
	// Production status: per field, the set of samples that received it.
	byField := map[string][]int64{}
	for i, rec := range p.recs {
		for _, fv := range rec {
			byField[fv.Name] = append(byField[fv.Name], indexes[i])
		}
	}
	for f, idx := range byField {
		if err := t.addProduced(f, record.SetOf(idx)); err != nil {
			return err
		}
		if err := t.bumpFieldRevision(f); err != nil {
			return err
		}
	}
	if err := metaAdd(t.ctx, t, "tail_rows", int64(len(indexes))); err != nil {
		return err
	}
	t.changed(p.partition)
	return nil
}

// partitionSet returns the part of s that exists in partition and is not cleared, the
// puts of this transaction included (it writes them back first: their segments must be
// in the table).
func (t *wtx) partitionSet(partition string, s record.IndexSet) (record.IndexSet, error) {
	if err := t.syncPuts(); err != nil {
		return nil, err
	}
	segs, err := partitionSpansIn(t.ctx, t, partition, s[0].Lo, s[len(s)-1].Hi-1)
	if err != nil {
		return nil, err
	}
	tomb, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM tombstones WHERE hi > ? AND lo <= ? ORDER BY lo`, s[0].Lo, s[len(s)-1].Hi-1)
	if err != nil {
		return nil, err
	}
	return s.Intersect(segs).Minus(tomb), nil
}

// requireInPartition checks that every index of s exists in partition and is not
// cleared. Errors: *NotFoundError naming the others.
func (t *wtx) requireInPartition(partition string, s record.IndexSet) error {
	in, err := t.partitionSet(partition, s)
	if err != nil {
		return err
	}
	return record.IndexesNotFound(partition, s.Minus(in))
}

// addProduced merges s into the produced spans of field.
func (t *wtx) addProduced(field string, s record.IndexSet) error {
	return mergeSpans(t, s, `SELECT lo, hi FROM produced WHERE field = ? AND hi >= ? AND lo <= ?`,
		`DELETE FROM produced WHERE field = ? AND lo = ?`, `INSERT INTO produced(field, lo, hi) VALUES (?, ?, ?)`, field)
}

// mergeSpans unions s into a table of spans keyed by key args: overlapping or adjacent
// stored spans are deleted and re-inserted merged.
func mergeSpans(t *wtx, s record.IndexSet, sel, del, ins string, keys ...any) error {
	for _, sp := range s {
		args := append(append([]any{}, keys...), sp.Lo, sp.Hi)
		old, err := loadSpans(t.ctx, t, sel, args...)
		if err != nil {
			return err
		}
		merged := record.IndexSet{sp}.Union(old)
		for _, o := range old {
			if _, err := t.exec(del, append(append([]any{}, keys...), o.Lo)...); err != nil {
				return fmt.Errorf("merge spans: %w", err)
			}
		}
		for _, m := range merged {
			if _, err := t.exec(ins, append(append([]any{}, keys...), m.Lo, m.Hi)...); err != nil {
				return fmt.Errorf("merge spans: %w", err)
			}
		}
	}
	return nil
}

func loadSpans(ctx context.Context, q queryer, query string, args ...any) (record.IndexSet, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read spans: %w", err)
	}
	defer rows.Close()
	var out []record.Span
	for rows.Next() {
		var sp record.Span
		if err := rows.Scan(&sp.Lo, &sp.Hi); err != nil {
			return nil, fmt.Errorf("read spans: %w", err)
		}
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read spans: %w", err)
	}
	return record.SpansOf(out), nil
}
