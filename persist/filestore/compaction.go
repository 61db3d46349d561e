package filestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/bgloop"
)

// Compaction merges small fragments into larger ones so that reads open few files. It
// is the same protocol as a flush: one transaction records a pending output fragment
// and claims the inputs (fragments.claim_id); the merged file is written (temporary
// name, fsync, rename); one transaction makes the output live and marks the inputs
// removed (state 2, removed_version), bumping the manifest version; then the input
// files are deleted. Rows fragments merge with rows fragments and field fragments with
// field fragments (keeping every update's _seq), level by level: CompactFragments
// fragments of level L become one of level L+1. A crash at any point is rolled back by
// recovery (the claims of a dead owner are released, its output deleted); a reader
// whose fragment was deleted under it retries with a new snapshot.

// Bounds of one compaction.
const (
	compactMaxFragmentBytes = 256 << 20 // larger fragments are left alone
	compactMaxInputs        = 64
	compactMaxInputBytes    = 1 << 30
	retiredHandleGrace      = 30 * time.Second
)

// Compact merges small fragments now, until no level of either kind has two or more
// fragments below the size bound. Background compaction does the same in smaller
// steps. Errors: ErrClosed, I/O and SQLite errors (nothing is lost: inputs stay live).
func (q *fileQueue) Compact(ctx context.Context) error {
	if err := q.calls.Enter(); err != nil {
		return err
	}
	defer q.calls.Leave()
	for {
		did, err := q.compactOnce(ctx, 2)
		if err != nil || !did {
			return err
		}
	}
}

func (q *fileQueue) kickCompaction() {
	select {
	case q.compactKick <- struct{}{}:
	default:
	}
}

// compactLoop runs background compaction (and the release of dead processes' claims)
// every CompactInterval and after flushes.
func (q *fileQueue) compactLoop(ctx context.Context) {
	warnings := bgWarnings{log: q.log}
	bgloop.Run(ctx, q.cfg.CompactInterval, q.compactKick, func(ticked bool) {
		if ticked {
			if _, _, err := q.recoverQueue(ctx); err != nil {
				warnings.warn(ctx, "recovery pass failed", "queue", q.name, "error", err)
			}
		}
		for ctx.Err() == nil {
			did, err := q.compactOnce(ctx, q.cfg.CompactFragments)
			if err != nil {
				warnings.warn(ctx, "background compaction failed", "queue", q.name, "error", err)
				break
			}
			if !did {
				break
			}
		}
		q.pruneRetired(false)
	})
}

type compactClaim struct {
	id     int64
	kind   int
	level  int
	file   string
	inputs []*fragMeta
	fields []persist.Field
	tomb   record.IndexSet // cleared samples when the compaction was claimed: left out
}

// compactOnce merges one group of at least threshold fragments of the same kind and
// level, if there is one.
func (q *fileQueue) compactOnce(ctx context.Context, threshold int) (bool, error) {
	q.compactMu.Lock()
	defer q.compactMu.Unlock()
	var c *compactClaim
	err := q.w.do(context.WithoutCancel(ctx), func(t *wtx) error {
		c = nil
		s, err := t.loadSchema()
		if err != nil {
			return err
		}
		rows, err := t.query(`SELECT id, file, kind, level, min_idx, max_idx, rows, bytes, fields FROM fragments
			WHERE state = 1 AND claim_id IS NULL AND bytes < ? ORDER BY kind, level, min_idx, id`, compactMaxFragmentBytes)
		if err != nil {
			return fmt.Errorf("read manifest: %w", err)
		}
		groups := map[[2]int][]*fragMeta{}
		var order [][2]int
		for rows.Next() {
			f := &fragMeta{fields: map[string]bool{}}
			var fields string
			if err := rows.Scan(&f.id, &f.file, &f.kind, &f.level, &f.minI, &f.maxI, &f.rows, &f.bytes, &fields); err != nil {
				rows.Close()
				return fmt.Errorf("read manifest: %w", err)
			}
			for _, n := range strings.Split(fields, "\x1f") {
				if n != "" {
					f.fields[n] = true
				}
			}
			key := [2]int{f.kind, f.level}
			if groups[key] == nil {
				order = append(order, key)
			}
			groups[key] = append(groups[key], f)
		}
		rows.Close()
		for _, key := range order {
			g := groups[key]
			if len(g) < threshold {
				continue
			}
			var inputs []*fragMeta
			var bytes int64
			for _, f := range g {
				if len(inputs) >= compactMaxInputs || (len(inputs) >= 2 && bytes+f.bytes > compactMaxInputBytes) {
					break
				}
				inputs = append(inputs, f)
				bytes += f.bytes
			}
			if len(inputs) < 2 {
				continue
			}
			c = &compactClaim{kind: key[0], level: key[1] + 1, inputs: inputs}
			break
		}
		if c == nil {
			return nil
		}
		used := map[string]bool{}
		for _, f := range c.inputs {
			for n := range f.fields {
				used[n] = true
			}
		}
		for _, f := range s.Fields {
			if used[f.Name] {
				c.fields = append(c.fields, f)
			}
		}
		if c.tomb, err = loadSpans(t.ctx, t, `SELECT lo, hi FROM tombstones ORDER BY lo`); err != nil {
			return err
		}
		prefix := map[int]string{fragRows: "r", fragFields: "f"}[c.kind]
		c.file = fmt.Sprintf("%s-%s-%06d.parquet", prefix, q.owner.token, q.fileSeq.Add(1))
		res, err := t.exec(`INSERT INTO fragments(file, kind, state, owner, level) VALUES (?, ?, 0, ?, ?)`, c.file, c.kind, q.owner.token, c.level)
		if err != nil {
			return fmt.Errorf("record pending fragment: %w", err)
		}
		if c.id, err = res.LastInsertId(); err != nil {
			return err
		}
		for _, f := range c.inputs {
			if _, err := t.exec(`UPDATE fragments SET claim_id = ? WHERE id = ?`, c.id, f.id); err != nil {
				return fmt.Errorf("claim fragment: %w", err)
			}
		}
		return nil
	})
	if err != nil || c == nil {
		return false, err
	}
	q.hook("compact-claimed")
	out := filepath.Join(q.dataDir, c.file)
	size, rows, minI, maxI, err := q.mergeFragments(ctx, c, out)
	if err != nil {
		q.abortCompaction(ctx, c)
		return false, fmt.Errorf("compact: %w", err)
	}
	q.hook("compact-renamed")
	err = q.w.do(context.WithoutCancel(ctx), func(t *wtx) error {
		return t.newManifestVersion(func(ver int64) error {
			if rows == 0 {
				// Every input row was cleared: the inputs go, nothing replaces them.
				if _, err := t.exec(`DELETE FROM fragments WHERE id = ?`, c.id); err != nil {
					return fmt.Errorf("drop empty compaction output: %w", err)
				}
			} else if err := t.publishFragment(c.id, minI, maxI, rows, size, c.fields, ver); err != nil {
				return err
			}
			for _, f := range c.inputs {
				res, err := t.exec(`UPDATE fragments SET state = 2, removed_version = ?, claim_id = NULL WHERE id = ? AND claim_id = ? AND state = 1`, ver, f.id, c.id)
				if err != nil {
					return fmt.Errorf("retire fragment: %w", err)
				}
				if n, _ := res.RowsAffected(); n != 1 {
					return fmt.Errorf("%w: fragment %s was not claimed by this compaction", persist.ErrCorrupt, f.file)
				}
			}
			return nil
		})
	})
	if err != nil {
		q.abortCompaction(ctx, c)
		return false, fmt.Errorf("compact: %w", err)
	}
	q.metrics.compactions.Add(1)
	q.hub.notifyCommit(nil) // readiness is unchanged: GetMeta waiters sleep on
	q.retire(c.inputs)
	for _, f := range c.inputs {
		os.Remove(filepath.Join(q.dataDir, f.file))
	}
	// With the files gone, the manifest forgets the removed fragments. (After a crash
	// right before this point, recovery deletes the files and rows instead.)
	err = q.w.do(context.WithoutCancel(ctx), func(t *wtx) error {
		for _, f := range c.inputs {
			if _, err := t.exec(`DELETE FROM fragments WHERE id = ? AND state = 2`, f.id); err != nil {
				return fmt.Errorf("forget removed fragment: %w", err)
			}
		}
		return nil
	})
	return true, err
}

func (q *fileQueue) abortCompaction(ctx context.Context, c *compactClaim) {
	err := q.w.do(context.WithoutCancel(ctx), func(t *wtx) error {
		if _, err := t.exec(`UPDATE fragments SET claim_id = NULL WHERE claim_id = ?`, c.id); err != nil {
			return err
		}
		_, err := t.exec(`DELETE FROM fragments WHERE id = ? AND state = 0`, c.id)
		return err
	})
	if err != nil {
		q.log.Warn("abort compaction", "error", err)
		return
	}
	os.Remove(filepath.Join(q.dataDir, c.file))
	os.Remove(filepath.Join(q.dataDir, c.file+".tmp"))
}

// retired remembers when fragments left the manifest, so that their open handles and
// cached chunks are dropped once no read of this process can still be using them.
type retiredSet struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (q *fileQueue) retire(fs []*fragMeta) {
	q.retired.mu.Lock()
	defer q.retired.mu.Unlock()
	if q.retired.at == nil {
		q.retired.at = map[string]time.Time{}
	}
	for _, f := range fs {
		q.retired.at[f.file] = time.Now()
	}
}

// pruneRetired drops cached handles of fragments retired more than the grace period
// ago (all of them if all is set).
func (q *fileQueue) pruneRetired(all bool) {
	q.retired.mu.Lock()
	var drop []string
	for f, at := range q.retired.at {
		if all || time.Since(at) > retiredHandleGrace {
			drop = append(drop, f)
			delete(q.retired.at, f)
		}
	}
	q.retired.mu.Unlock()
	if len(drop) > 0 {
		q.cache.drop(drop)
	}
}

// mergeSource is one row group of one input fragment.
type mergeSource struct {
	idx    []int64
	second arrow.Array // _partition (rows) or _seq (fields)
	cols   map[string]arrow.Array
	kinds  map[string]persist.Kind
}

// mergeFragments writes the rows of c.inputs, sorted by (index, seq), into out.
func (q *fileQueue) mergeFragments(ctx context.Context, c *compactClaim, out string) (size, rows, minI, maxI int64, err error) {
	var srcs []*mergeSource
	defer func() {
		for _, s := range srcs {
			s.second.Release()
			for _, a := range s.cols {
				a.Release()
			}
		}
	}()
	second := record.ColPartition
	if c.kind == fragFields {
		second = record.ColSeq
	}
	for _, in := range c.inputs {
		h, err := openFragment(filepath.Join(q.dataDir, in.file))
		if err != nil {
			return 0, 0, 0, 0, err
		}
		for rg := range h.rgRows {
			s := &mergeSource{cols: map[string]arrow.Array{}, kinds: h.kinds}
			read := func(name string) (arrow.Array, error) { return readColumn(ctx, h, rg, name) }
			ia, err := read(record.ColIndex)
			if err != nil {
				h.close()
				return 0, 0, 0, 0, err
			}
			s.idx = append([]int64(nil), ia.(*array.Int64).Int64Values()...)
			ia.Release()
			if s.second, err = read(second); err != nil {
				h.close()
				return 0, 0, 0, 0, err
			}
			for _, f := range c.fields {
				a, err := read(f.Name)
				if err != nil {
					h.close()
					return 0, 0, 0, 0, err
				}
				if a != nil {
					s.cols[f.Name] = a
				}
			}
			srcs = append(srcs, s)
		}
		h.close()
	}
	type ref struct {
		src int
		row int
		idx int64
		seq int64
	}
	var refs []ref
	for si, s := range srcs {
		for r, x := range s.idx {
			rf := ref{src: si, row: r, idx: x}
			if c.kind == fragFields {
				rf.seq = s.second.(*array.Int64).Value(r)
			}
			refs = append(refs, rf)
		}
	}
	slices.SortStableFunc(refs, func(a, b ref) int {
		if a.idx != b.idx {
			return compareInt64(a.idx, b.idx)
		}
		return compareInt64(a.seq, b.seq)
	})
	if len(refs) == 0 {
		return 0, 0, 0, 0, fmt.Errorf("%w: compaction inputs hold no rows", persist.ErrCorrupt)
	}
	// Cleared samples (ClearSamples, ClearPartition, KV.Clear) are left out: their
	// storage is reclaimed here.
	if len(c.tomb) > 0 {
		kept := refs[:0]
		for _, r := range refs {
			if !c.tomb.Contains(r.idx) {
				kept = append(kept, r)
			}
		}
		refs = kept
		if len(refs) == 0 {
			return 0, 0, 0, 0, nil // no output file
		}
	}
	ff, err := createFragment(out, c.kind, c.fields, q.cfg.RowGroupRows)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	for start := 0; start < len(refs); {
		end := min(start+q.cfg.RowGroupRows, len(refs))
		// Bound row groups by bytes too (large tensors).
		var bytes int64
		for i := start; i < end; i++ {
			for _, f := range c.fields {
				if !record.IsTensor(f.Kind) && f.Kind != persist.KindBytes && f.Kind != persist.KindCodec {
					continue
				}
				if a := srcs[refs[i].src].cols[f.Name]; a != nil && !a.IsNull(refs[i].row) {
					bytes += int64(valueSizeAt(a, refs[i].row, f.Kind))
				}
			}
			if bytes >= fragmentRowGroupBytes {
				end = i + 1
				break
			}
		}
		chunk := refs[start:end]
		cols := make([]arrow.Array, 0, len(c.fields)+2)
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		for _, r := range chunk {
			ib.Append(r.idx)
		}
		cols = append(cols, ib.NewArray())
		ib.Release()
		if c.kind == fragRows {
			sb := array.NewStringBuilder(memory.DefaultAllocator)
			for _, r := range chunk {
				sb.Append(srcs[r.src].second.(*array.String).Value(r.row))
			}
			cols = append(cols, sb.NewArray())
			sb.Release()
		} else {
			sb := array.NewInt64Builder(memory.DefaultAllocator)
			for _, r := range chunk {
				sb.Append(r.seq)
			}
			cols = append(cols, sb.NewArray())
			sb.Release()
		}
		for _, f := range c.fields {
			cells := make([]cell, len(chunk))
			for i, r := range chunk {
				s := srcs[r.src]
				if a := s.cols[f.Name]; a != nil && !a.IsNull(r.row) {
					cells[i] = cell{arr: a, row: r.row, kind: s.kinds[f.Name], set: true}
				}
			}
			cols = append(cols, buildColumn(f.Kind, cells))
		}
		rec := array.NewRecordBatch(ff.sc, cols, int64(len(chunk)))
		for _, a := range cols {
			a.Release()
		}
		err := ff.write(rec)
		rec.Release()
		if err != nil {
			ff.abort()
			return 0, 0, 0, 0, err
		}
		start = end
	}
	size, err = ff.commit()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	return size, int64(len(refs)), refs[0].idx, refs[len(refs)-1].idx, nil
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// valueSizeAt approximates the bytes of element i of a binary or tensor column.
func valueSizeAt(a arrow.Array, i int, k persist.Kind) int {
	switch {
	case record.IsTensor(k):
		return len(a.(*array.Struct).Field(2).(*array.Binary).Value(i))
	case k == persist.KindBytes || k == persist.KindCodec:
		return len(a.(*array.Binary).Value(i))
	}
	return 8
}
