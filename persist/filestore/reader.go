package filestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/getmeta"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
)

// Reader does two-phase reads for training loops: GetMeta decides which samples a
// batch holds (and marks them consumed for the task), GetData reads the requested
// fields of those samples. A Reader is a light view of its Queue, safe for concurrent
// use.
type fileReader struct {
	q *fileQueue
}

// Reader returns a two-phase reader of q.
func (q *fileQueue) fileReader() *fileReader { return &fileReader{q: q} }

var errNotFull = errors.New("batch not full")

// GetMeta hands out a batch of samples of req.Partition whose req.Fields are all
// produced and that req.Task has not consumed, chosen by req.Sampler, and marks them
// consumed (unless DeferConsume) in the same transaction. A field that no sample has
// yet is not an error: no sample is ready (a consumer may start before its producers).
// Errors: *InvalidError (bad request, a sampler's rule such as GRPO batch sizes),
// ErrTimeout (wait mode), ErrClosed, ctx's error.
func (r *fileReader) GetMeta(ctx context.Context, req *persist.MetaRequest) (*persist.BatchMeta, error) {
	q := r.q
	return getmeta.Loop(req, q.cfg.Samplers, q.calls.Enter, q.calls.Leave, func() (persist.Stats, error) { return q.Stats(ctx) }, func(rq *persist.MetaRequest, sampler persist.Sampler, deadline <-chan time.Time) (*persist.BatchMeta, bool, error) {
		return q.getMetaOnce(ctx, rq, sampler, deadline, nil)
	})
}

// GetBatch is GetMeta then GetData (persist.BatchGetter), with the data read on a read
// snapshot while the writer commits the hand-out rather than after it: the two costs
// overlap, and the batch is still returned only once its consumption is durable. When a
// batch is chosen inside the write transaction (after lost races, or by a waiting
// GetMeta that chose nothing ahead) it is read after the commit, as GetData does.
// Errors as for GetMeta and GetData; when reading fails after the hand-out, the
// metadata is returned beside the error.
func (r *fileReader) GetBatch(ctx context.Context, req *persist.MetaRequest) (*persist.Batch, *persist.BatchMeta, error) {
	q := r.q
	ahead := &getmeta.Ahead{}
	var early *persist.Batch // the batch read ahead (readahead.go), when handed out
	var next persist.MetaRequest
	var nextSampler persist.Sampler
	meta, err := getmeta.Loop(req, q.cfg.Samplers, q.calls.Enter, q.calls.Leave, func() (persist.Stats, error) { return q.Stats(ctx) }, func(rq *persist.MetaRequest, sampler persist.Sampler, deadline <-chan time.Time) (*persist.BatchMeta, bool, error) {
		next, nextSampler = *rq, sampler
		if a := q.takeReadAhead(rq); a != nil {
			meta, b, ok, err := q.useReadAhead(ctx, rq, a)
			if ok {
				early = b // nil when its read failed: read below
				return meta, true, err
			}
		}
		return q.getMetaOnce(ctx, rq, sampler, deadline, ahead)
	})
	if err != nil {
		ahead.Discard()
		return nil, nil, err
	}
	defer func() {
		if len(meta.Indexes) > 0 {
			q.startReadAhead(next, nextSampler)
		}
	}()
	if early != nil {
		q.metrics.gets.Add(int64(early.Len()))
		return early, meta, nil
	}
	b, held, err := ahead.Batch(ctx, meta, r.GetData)
	if err != nil {
		return nil, meta, err
	}
	if held { // GetData counts its own reads
		q.metrics.gets.Add(int64(b.Len()))
	}
	return b, meta, nil
}

// getMetaOnce is one attempt of GetMeta: it hands out a batch (done), or in wait mode
// waits for the next commit that changes the partition (not done) or for the end of
// the wait (done, an error).
func (q *fileQueue) getMetaOnce(ctx context.Context, rq *persist.MetaRequest, sampler persist.Sampler, deadline <-chan time.Time, ahead *getmeta.Ahead) (*persist.BatchMeta, bool, error) {
	// Taken before the attempt, so no commit is missed. Only commits that change the
	// partition (or other processes' commits, or Close) wake it.
	woken, release := q.hub.watchPartition(rq.Partition)
	defer release()
	q.hook("getmeta-attempt")
	start := time.Now()
	idx, schema, err := q.handOut(ctx, rq, sampler, ahead)
	if err == nil {
		meta, err := q.batchMeta(ctx, rq, idx, schema)
		return meta, true, err
	}
	if !errors.Is(err, errNotFull) {
		return nil, true, err
	}
	// An attempt that took long (a large ready set, a sampler paging past many
	// incomplete GRPO groups) is not repeated before waitBackoff times its duration
	// has passed, however often the partition changes: a waiter then spends at most
	// about 1/(waitBackoff+1) of a core, and producers keep the rest.
	if pause := waitBackoff * time.Since(start); pause >= minWaitBackoff {
		t := time.NewTimer(pause)
		defer t.Stop()
		if err := getmeta.Await(ctx, rq, t.C, deadline, q.calls.Closing()); err != nil {
			return nil, true, err
		}
	}
	if err := getmeta.AwaitChange(ctx, rq, woken, deadline, q.calls.Closing(), q.nextLeaseExpiry); err != nil {
		return nil, true, err
	}
	return nil, false, nil
}

// waitBackoff and minWaitBackoff: a waiting GetMeta whose attempt took d does not try
// again before waitBackoff×d has passed, when that is at least minWaitBackoff (cheap
// attempts retry at the next change).
const (
	waitBackoff    = 3
	minWaitBackoff = 5 * time.Millisecond
)

// errHandOutConflict reports that the samples a GetMeta chose on a read snapshot were
// taken (consumed, cleared, held or assigned) before its write transaction: it
// chooses again.
var errHandOutConflict = errors.New("chosen samples were taken meanwhile")

// maxHandOutConflicts bounds how often one GetMeta chooses on a read snapshot and
// loses its samples to another consumer; it then chooses inside the write transaction,
// which always succeeds.
const maxHandOutConflicts = 4

// handOut chooses a batch and records it. The ready set is computed and the sampler
// runs on a read snapshot, outside the writer, so a consumer — above all one waiting
// for a full batch, re-run after every commit of its partition — never holds up
// producers; only a batch to hand out takes the writer, for a short transaction that
// checks the chosen samples are still free (not consumed by the task, not cleared,
// not held by another group, the group's stored assignment unchanged) and records the
// consumption and assignment. If they were taken meanwhile it chooses again; after
// maxHandOutConflicts such losses it chooses inside the write transaction.
//
// With ahead (GetBatch), the data of a batch chosen on a read snapshot is read while
// the writer records it (Ahead.Start); the read is dropped when the batch is lost.
func (q *fileQueue) handOut(ctx context.Context, rq *persist.MetaRequest, sampler persist.Sampler, ahead *getmeta.Ahead) ([]int64, persist.Schema, error) {
	for range maxHandOutConflicts {
		var p *metaPlan
		err := q.readSnapshot(ctx, func(t *wtx) error {
			var err error
			p, err = t.loadMetaState(rq)
			return err
		})
		if err != nil {
			return nil, persist.Schema{}, err
		}
		if err := p.sample(ctx, rq, sampler); err != nil {
			if errors.Is(err, errNotFull) && p.src.dropsUnserved() {
				// No full batch, but stale samples to drop: drop them now (they stay stale),
				// so that producers held by back-pressure get the room.
				p.idx, p.src.assigned, p.src.unused = nil, nil, nil // unused samples go with their group's hand-out
				if err := q.w.do(ctx, func(t *wtx) error { return t.recordMeta(rq, p, false) }); err != nil {
					return nil, p.schema, err
				}
			}
			return nil, p.schema, err
		}
		if len(p.idx) == 0 && p.src.assigned == nil && !p.src.drops() {
			return p.idx, p.schema, nil // nothing to record
		}
		q.hook("getmeta-chosen")
		if ahead != nil && len(p.idx) > 0 {
			idx := p.idx
			ahead.Start(rq.Fields, idx, func() (*persist.Batch, error) {
				if err := q.calls.Enter(); err != nil {
					return nil, err
				}
				defer q.calls.Leave()
				return q.readData(ctx, rq.Partition, rq.Fields, idx, false)
			})
		}
		err = q.w.do(ctx, func(t *wtx) error { return t.recordMeta(rq, p, true) })
		if err == nil {
			return p.idx, p.schema, nil
		}
		ahead.Discard()
		if !errors.Is(err, errHandOutConflict) {
			return nil, p.schema, err
		}
	}
	var p *metaPlan
	notFull := false
	err := q.w.do(ctx, func(t *wtx) error {
		var err error
		if p, err = t.loadMetaState(rq); err != nil {
			return err
		}
		if err := p.sample(t.ctx, rq, sampler); err != nil {
			if errors.Is(err, errNotFull) && p.src.dropsUnserved() {
				p.idx, p.src.assigned, p.src.unused = nil, nil, nil // unused samples go with their group's hand-out
				if rerr := t.recordMeta(rq, p, false); rerr != nil {
					return rerr
				}
				notFull = true
				return nil // commit the drops
			}
			return err
		}
		return t.recordMeta(rq, p, false)
	})
	if err == nil && notFull {
		err = errNotFull
	}
	if err != nil {
		if p != nil {
			return nil, p.schema, err
		}
		return nil, persist.Schema{}, err
	}
	return p.idx, p.schema, nil
}

// readSnapshot runs fn on one read transaction of the read pool (a consistent
// snapshot of meta.db), through a *wtx whose writes fail (the read connections are
// query-only). The connection is released before readSnapshot returns, so that fn's
// caller may read fragments (their own read transactions) afterwards.
func (q *fileQueue) readSnapshot(ctx context.Context, fn func(t *wtx) error) error {
	tx, err := q.rdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	t := &wtx{ctx: ctx, rtx: &readTx{tx: tx, q: q}, q: q, stmts: map[string]*sql.Stmt{}}
	err = fn(t)
	if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) && err == nil { // ErrTxDone: ctx ended, database/sql rolled back
		err = fmt.Errorf("end read: %w", rerr)
	}
	q.readStmts.prepare(ctx, q.rdb)
	if err != nil {
		return err
	}
	for _, f := range t.after {
		f() // caches of committed state only: a read transaction sees nothing else
	}
	return nil
}

// metaPlan is one GetMeta's choice: what its transaction or snapshot showed (src), and
// the samples the sampler chose.
type metaPlan struct {
	schema persist.Schema
	src    *fileSampleSource
	idx    []int64
}

// loadMetaState reads, through t (a read snapshot or the write transaction),
// everything a GetMeta's sampler may look at: the schema, the ready set, the
// partition's spans, the group's stored assignment and the (partition, task) holds.
func (t *wtx) loadMetaState(rq *persist.MetaRequest) (*metaPlan, error) {
	s, err := t.loadSchema()
	if err != nil {
		return nil, err
	}
	p := &metaPlan{schema: *s, src: &fileSampleSource{Task: rq.Task, Partition: rq.Partition, DPRank: rq.DPRank, BatchIndex: rq.BatchIndex, q: t.q, schema: *s}}
	known := true
	for _, f := range rq.Fields {
		if _, ok := s.Kind(f); !ok {
			known = false // a field no sample has yet: nothing is ready
		}
	}
	if known {
		if p.src.ready, p.src.partSpans, err = t.readySet(rq.Partition, rq.Task, rq.Fields); err != nil {
			return nil, err
		}
	}
	if p.src.stored, p.src.storedOK, err = t.assignment(rq.Partition, rq.Task, rq.DPRank, rq.BatchIndex); err != nil {
		return nil, err
	}
	if p.src.held, err = loadSpans(t.ctx, t, `SELECT lo, hi FROM held WHERE partition = ? AND task = ? ORDER BY lo`, rq.Partition, rq.Task); err != nil {
		return nil, err
	}
	if p.src.version, err = metaGet(t.ctx, t, "weight_version"); err != nil {
		return nil, err
	}
	if rq.Staleness != nil {
		var updated int64
		if err := t.queryRow(`SELECT EXISTS (SELECT 1 FROM produced WHERE field = ?)`, persist.WeightVersionField).Scan(&updated); err != nil {
			return nil, fmt.Errorf("read produced: %w", err)
		}
		p.src.versionsStable = updated == 0
	}
	if len(p.src.ready) > 0 {
		leased, err := t.activeLeases(rq.Partition, rq.Task, time.Now())
		if err != nil {
			return nil, err
		}
		p.src.ready = p.src.ready.Minus(leased)
	}
	return p, nil
}

// sample runs the sampler on the loaded state and checks what it returned. In wait
// mode a partial batch is errNotFull (nothing is recorded, not even an assignment the
// sampler made).
func (p *metaPlan) sample(ctx context.Context, rq *persist.MetaRequest, sampler persist.Sampler) error {
	ready := p.src.ready
	// The sampler runs even when nothing is ready, so that its rules (GRPO batch sizes)
	// fail at once rather than after a wait.
	window := max(4*rq.BatchSize, 1024)
	if ws, ok := sampler.(persist.WindowSampler); ok {
		window = max(ws.Window(rq.BatchSize), rq.BatchSize)
	}
	in := &persist.SampleInput{Ready: ready.First(window), BatchSize: rq.BatchSize, Task: rq.Task, Partition: rq.Partition,
		DPRank: rq.DPRank, BatchIndex: rq.BatchIndex, Source: p.src}
	in.MoreReady = int64(len(in.Ready)) < ready.Count()
	idx, err := sampler.Sample(ctx, in)
	if err != nil {
		return err
	}
	if len(idx) > rq.BatchSize {
		return fmt.Errorf("%w: sampler %s returned %d samples for a batch of %d", persist.ErrInvalid, rq.Sampler.Name, len(idx), rq.BatchSize)
	}
	// Everything handed out must be ready now, or be the group's stored assignment.
	chosen := record.SetOf(idx)
	if int(chosen.Count()) != len(idx) {
		return fmt.Errorf("%w: sampler %s returned an index twice", persist.ErrInvalid, rq.Sampler.Name)
	}
	bad := chosen.Minus(ready)
	if len(bad) > 0 && p.src.storedOK {
		bad = bad.Minus(record.SetOf(p.src.stored))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: sampler %s returned index %d, which is not ready for task %q", persist.ErrInvalid, rq.Sampler.Name, bad[0].Lo, rq.Task)
	}
	if rq.Wait && len(idx) < rq.BatchSize {
		return errNotFull
	}
	p.idx = idx
	return nil
}

// recordMeta is the write op of GetMeta: it stores the assignment the sampler made
// and marks the batch consumed (unless DeferConsume). With recheck (the plan was made
// on a read snapshot) it first checks, for the chosen samples only, what may have
// changed since: the group's stored assignment, and that the samples are not consumed
// by the task, not cleared and (for a new assignment) not held by another group;
// errHandOutConflict otherwise. Readiness can change no other way: a sample's
// partition and production never go back.
func (t *wtx) recordMeta(rq *persist.MetaRequest, p *metaPlan, recheck bool) error {
	src := p.src
	chosen := record.SetOf(p.idx)
	if recheck {
		stored, ok, err := t.assignment(rq.Partition, rq.Task, rq.DPRank, rq.BatchIndex)
		if err != nil {
			return err
		}
		if ok != src.storedOK || !slices.Equal(stored, src.stored) {
			return errHandOutConflict
		}
		if rq.Staleness != nil {
			// The batch was judged fresh against this version: it must still be current.
			cur, err := metaGet(t.ctx, t, "weight_version")
			if err != nil {
				return err
			}
			if cur != src.version {
				return errHandOutConflict
			}
		}
		fresh := chosen
		if src.storedOK {
			fresh = fresh.Minus(record.SetOf(src.stored)) // checked against the stored assignment above
		}
		if len(fresh) > 0 {
			lo, hi := fresh[0].Lo, fresh[len(fresh)-1].Hi
			consumed, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM consumed WHERE partition = ? AND task = ? AND lo < ? AND hi > ? ORDER BY lo`, rq.Partition, rq.Task, hi, lo)
			if err != nil {
				return err
			}
			tomb, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM tombstones WHERE lo < ? AND hi > ? ORDER BY lo`, hi, lo)
			if err != nil {
				return err
			}
			if len(fresh.Intersect(consumed)) > 0 || len(fresh.Intersect(tomb)) > 0 {
				return errHandOutConflict
			}
			leased, err := t.activeLeases(rq.Partition, rq.Task, time.Now())
			if err != nil {
				return err
			}
			if len(fresh.Intersect(leased)) > 0 {
				return errHandOutConflict
			}
		}
		if src.assigned != nil && len(src.assigned) > 0 {
			a := record.SetOf(src.assigned)
			held, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM held WHERE partition = ? AND task = ? AND lo < ? AND hi > ? ORDER BY lo`,
				rq.Partition, rq.Task, a[len(a)-1].Hi, a[0].Lo)
			if err != nil {
				return err
			}
			if len(a.Intersect(held)) > 0 {
				return errHandOutConflict
			}
		}
	}
	if src.assigned != nil {
		if _, err := t.exec(`INSERT OR REPLACE INTO assignments(partition, task, dp_rank, batch_index, indexes) VALUES (?, ?, ?, ?, ?)`,
			rq.Partition, rq.Task, rq.DPRank, rq.BatchIndex, tail.EncodeIndexes(src.assigned)); err != nil {
			return fmt.Errorf("store assignment: %w", err)
		}
		if err := t.addHeld(rq.Partition, rq.Task, record.SetOf(src.assigned)); err != nil {
			return err
		}
	}
	if !rq.DeferConsume && len(p.idx) > 0 {
		if err := t.markConsumed(rq.Partition, rq.Task, chosen); err != nil {
			return err
		}
		t.rows = true // wake producers blocked by back-pressure
	}
	if rq.Lease > 0 && len(p.idx) > 0 {
		if err := t.addLease(rq.Partition, rq.Task, chosen, time.Now().Add(rq.Lease)); err != nil {
			return err
		}
	}
	if len(src.dropped) > 0 {
		// Stale samples stay stale (versions never go back): dropping them needs no
		// recheck. Only those the task has not consumed yet count.
		drop := record.SetOf(src.dropped).Minus(chosen)
		consumed, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM consumed WHERE partition = ? AND task = ? AND lo < ? AND hi > ? ORDER BY lo`,
			rq.Partition, rq.Task, drop[len(drop)-1].Hi, drop[0].Lo)
		if err != nil {
			return err
		}
		drop = drop.Minus(consumed)
		if n := drop.Count(); n > 0 {
			if err := t.markConsumed(rq.Partition, rq.Task, drop); err != nil {
				return err
			}
			if err := metaAdd(t.ctx, t, "stale_dropped", n); err != nil {
				return err
			}
			t.rows = true
		}
	}
	if len(src.droppedGroups) > 0 || len(src.unused) > 0 {
		if err := t.dropGroups(rq.Partition, rq.Task, src.droppedGroups, src.unused, chosen); err != nil {
			return err
		}
	}
	return nil
}

// readySet computes the samples of partition with all fields produced, not consumed by
// task and not cleared; it also returns the partition's spans.
func (t *wtx) readySet(partition, task string, fields []string) (ready, part record.IndexSet, err error) {
	rows, err := t.query(`SELECT lo, hi, fieldset FROM segments WHERE partition = ? ORDER BY lo`, partition)
	if err != nil {
		return nil, nil, fmt.Errorf("read segments: %w", err)
	}
	type seg struct {
		sp record.Span
		fs int64
	}
	var segs []seg
	for rows.Next() {
		var s seg
		if err := rows.Scan(&s.sp.Lo, &s.sp.Hi, &s.fs); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("read segments: %w", err)
		}
		segs = append(segs, s)
	}
	rows.Close()
	if len(segs) == 0 {
		return nil, nil, nil
	}
	fieldsets, err := t.fieldsets()
	if err != nil {
		return nil, nil, err
	}
	var all []record.Span
	for _, s := range segs {
		all = append(all, s.sp)
	}
	part = record.SpansOf(all)
	ready = part
	// Spans produced later (PutFields), for all requested fields in one query.
	prod := map[string][]record.Span{}
	if n, err := t.producedCount(); err != nil {
		return nil, nil, err
	} else if n > 0 {
		q := `SELECT field, lo, hi FROM produced WHERE hi > ? AND field IN (?` + strings.Repeat(", ?", len(fields)-1) + `)`
		args := []any{part[0].Lo}
		for _, f := range fields {
			args = append(args, f)
		}
		rows, err := t.query(q, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("read produced: %w", err)
		}
		for rows.Next() {
			var f string
			var sp record.Span
			if err := rows.Scan(&f, &sp.Lo, &sp.Hi); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("read produced: %w", err)
			}
			prod[f] = append(prod[f], sp)
		}
		rows.Close()
	}
	for _, f := range fields {
		var has []record.Span
		for _, s := range segs {
			if fieldsets[s.fs][f] {
				has = append(has, s.sp)
			}
		}
		ready = ready.Intersect(record.SpansOf(append(has, prod[f]...)))
	}
	lo := part[0].Lo
	tomb, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM tombstones WHERE hi > ? ORDER BY lo`, lo)
	if err != nil {
		return nil, nil, err
	}
	consumed, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM consumed WHERE partition = ? AND task = ? ORDER BY lo`, partition, task)
	if err != nil {
		return nil, nil, err
	}
	return ready.Minus(tomb).Minus(consumed), part, nil
}

// fieldsets returns every field set (id → field names), cached by the Queue: a field
// set never changes once created.
func (t *wtx) fieldsets() (map[int64]map[string]bool, error) {
	q := t.q
	q.schemaMu.Lock()
	if q.fieldsetCache == nil {
		q.fieldsetCache = map[int64]map[string]bool{}
	}
	cache := q.fieldsetCache
	var maxID int64
	for id := range cache {
		maxID = max(maxID, id)
	}
	q.schemaMu.Unlock()
	rows, err := t.query(`SELECT id, fields FROM fieldsets WHERE id > ?`, maxID)
	if err != nil {
		return nil, fmt.Errorf("read field sets: %w", err)
	}
	defer rows.Close()
	fresh := map[int64]map[string]bool{}
	for rows.Next() {
		var id int64
		var fs string
		if err := rows.Scan(&id, &fs); err != nil {
			return nil, fmt.Errorf("read field sets: %w", err)
		}
		m := map[string]bool{}
		for _, f := range strings.Split(fs, "\x1f") {
			if f != "" {
				m[f] = true
			}
		}
		fresh[id] = m
	}
	q.schemaMu.Lock()
	defer q.schemaMu.Unlock()
	out := make(map[int64]map[string]bool, len(cache)+len(fresh))
	for id, m := range q.fieldsetCache {
		out[id] = m
	}
	for id, m := range fresh {
		out[id] = m
	}
	// Only committed ids may be cached; ids read here may belong to this transaction.
	t.after = append(t.after, func() {
		q.schemaMu.Lock()
		defer q.schemaMu.Unlock()
		for id, m := range fresh {
			q.fieldsetCache[id] = m
		}
	})
	return out, nil
}

// batchMeta builds the BatchMeta of handed-out indexes, reading tensor dtypes and
// shapes.
func (q *fileQueue) batchMeta(ctx context.Context, rq *persist.MetaRequest, idx []int64, s persist.Schema) (*persist.BatchMeta, error) {
	m, tensors := getmeta.Fields(rq, idx, s)
	if len(tensors) > 0 && len(idx) > 0 {
		names := make([]string, len(tensors))
		for i, f := range tensors {
			names[i] = m.Fields[f].Name
		}
		sorted := record.SortedUnique(append([]int64(nil), idx...))
		b, err := q.readBatch(ctx, names, func(queryer, *snapshot) ([]int64, error) { return sorted, nil })
		if err != nil {
			return nil, err
		}
		defer b.Release()
		for _, f := range tensors {
			fm := &m.Fields[f]
			col := b.Column(fm.Name)
			for r := 0; r < b.Len(); r++ {
				if col.IsNull(r) {
					continue
				}
				tn := record.TensorAt(col.(*array.Struct), r)
				getmeta.Fold(fm, tn.DType, tn.Shape, r == 0)
			}
		}
	}
	return m, nil
}

// GetData reads the fields of meta for its samples, in meta.Indexes order, of
// meta.Partition ("" any). The batch is columnar (Arrow; Batch.Rows converts to rows).
// Errors: *InvalidError (nil meta), *NotFoundError for indexes that were never put in
// meta.Partition or were cleared, ErrClosed, I/O errors.
func (r *fileReader) GetData(ctx context.Context, meta *persist.BatchMeta) (*persist.Batch, error) {
	if meta == nil {
		return nil, &persist.InvalidError{Field: "meta", Value: nil, Rule: "the batch metadata returned by GetMeta"}
	}
	q := r.q
	if err := q.calls.Enter(); err != nil {
		return nil, err
	}
	defer q.calls.Leave()
	if len(meta.Indexes) == 0 {
		// An empty batch (possibly for fields no sample has yet): nothing to read.
		var fields []persist.Field
		for _, f := range meta.Fields {
			if record.ValidKind(f.Kind) {
				fields = append(fields, persist.Field{Name: f.Name, Kind: f.Kind})
			}
		}
		cols := make([]arrow.Array, len(fields))
		for i, f := range fields {
			cols[i] = buildColumn(f.Kind, nil)
		}
		return &persist.Batch{Fields: fields, Record: record.MakeRecord(nil, fields, cols)}, nil
	}
	return q.readData(ctx, meta.Partition, meta.FieldNames(), meta.Indexes, true)
}

// readData reads fields of the samples indexes (none empty) of partition ("" any), in
// that order: GetData's read, counted in Stats.Gets when count is set (a read ahead of
// its hand-out counts when it is handed out). Errors: *NotFoundError for indexes never
// put in partition or cleared, I/O errors.
func (q *fileQueue) readData(ctx context.Context, partition string, fields []string, indexes []int64, count bool) (*persist.Batch, error) {
	sorted := record.SortedUnique(append([]int64(nil), indexes...))
	b, err := q.readBatchCounted(ctx, fields, func(tx queryer, s *snapshot) ([]int64, error) {
		have := record.IndexSet{{Lo: 0, Hi: s.next}}.Minus(s.tomb)
		if partition != "" {
			in, err := partitionSpansIn(ctx, tx, partition, sorted[0], sorted[len(sorted)-1])
			if err != nil {
				return nil, err
			}
			have = have.Intersect(in)
		}
		if err := record.IndexesNotFound(partition, record.SetOf(sorted).Minus(have)); err != nil {
			return nil, err
		}
		return sorted, nil
	}, count)
	if err != nil {
		return nil, err
	}
	if !isAscending(indexes) {
		b = reorderBatch(b, indexes)
	}
	return b, nil
}

func isAscending(x []int64) bool {
	for i := 1; i < len(x); i++ {
		if x[i] <= x[i-1] {
			return false
		}
	}
	return true
}

// producedCount returns whether any span was ever produced later (0 when no PutFields
// or KV merge ever ran), to skip the produced query in the common case.
func (t *wtx) producedCount() (int64, error) {
	var n int64
	if err := t.queryRow(`SELECT EXISTS (SELECT 1 FROM produced)`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read produced: %w", err)
	}
	return n, nil
}
