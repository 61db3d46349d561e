package filestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
)

// The manifest is the fragments table of meta.db: every fragment file with its state
// (pending, live, removed), index range, row count, size, fields and the manifest
// version that added (and removed) it. meta.manifest_version grows by one with every
// flush or compaction that changes the set of live fragments. A read takes one SQLite
// read transaction and sees a consistent manifest, tail and tombstone set.

// fragMeta is one live fragment as listed by a snapshot.
type fragMeta struct {
	id     int64
	file   string
	kind   int
	minI   int64
	maxI   int64
	rows   int64
	bytes  int64
	level  int
	fields map[string]bool
}

// tailEntry is one decoded tail row (a put or a PutFields).
type tailEntry struct {
	seq   int64
	kind  int
	part  string
	lo, n int64
	minI  int64
	maxI  int64
	idx   []int64 // entryFields: the target indexes
	recs  []record.NormRecord
}

// segment: indexes [lo, hi) belong to partition and were put with field set fieldset.
type segment struct {
	lo, hi    int64
	partition string
	fieldset  int64
}

// snapshot is a consistent view of the queue for one read.
type snapshot struct {
	schema   persist.Schema
	next     int64
	version  int64
	tailRows int64
	tomb     record.IndexSet
	frags    []*fragMeta  // live, overlapping the loaded range
	tail     []*tailEntry // overlapping the loaded range, by seq
}

// tailCache keeps decoded tail entries by seq; entries never change, they only go away.
type tailCache struct {
	mu sync.Mutex
	m  map[int64]*tailEntry
}

func newTailCache() *tailCache { return &tailCache{m: map[int64]*tailEntry{}} }

// view runs fn in one read transaction of meta.db.
func (q *fileQueue) view(ctx context.Context, fn func(tx queryer) error) error {
	tx, err := q.rdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback() // also when fn panics
	err = fn(&readTx{tx: tx, q: q})
	tx.Rollback()
	q.readStmts.prepare(ctx, q.rdb)
	return err
}

// loadHead reads the index counter, manifest version, schema and the tombstones.
func (q *fileQueue) loadHead(ctx context.Context, tx queryer) (*snapshot, error) {
	s := &snapshot{}
	rows, err := tx.QueryContext(ctx, `SELECT key, value FROM meta WHERE key IN ('next_index', 'manifest_version', 'schema_version', 'tail_rows', 'tomb_version')`)
	if err != nil {
		return nil, fmt.Errorf("read meta: %w", err)
	}
	var schemaVer, tombVer int64
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read meta: %w", err)
		}
		switch k {
		case "next_index":
			s.next = v
		case "manifest_version":
			s.version = v
		case "schema_version":
			schemaVer = v
		case "tail_rows":
			s.tailRows = v
		case "tomb_version":
			tombVer = v
		}
	}
	rows.Close()
	q.schemaMu.Lock()
	cached, cv := q.schema, q.schemaVer
	q.schemaMu.Unlock()
	if cached != nil && cv == schemaVer {
		s.schema = *cached
	} else {
		if s.schema, err = loadSchema(ctx, tx); err != nil {
			return nil, err
		}
		q.setSchema(&s.schema, schemaVer)
	}
	// Tombstones change only with tomb_version: keep them between reads.
	q.readCache.mu.Lock()
	cachedTomb := q.readCache.tombOK && q.readCache.tombVer == tombVer
	if cachedTomb {
		s.tomb = q.readCache.tomb
	}
	q.readCache.mu.Unlock()
	if !cachedTomb {
		if s.tomb, err = loadSpans(ctx, tx, `SELECT lo, hi FROM tombstones ORDER BY lo`); err != nil {
			return nil, err
		}
		q.readCache.mu.Lock()
		q.readCache.tomb, q.readCache.tombVer, q.readCache.tombOK = s.tomb, tombVer, true
		q.readCache.mu.Unlock()
	}
	return s, nil
}

// readCache keeps what reads need from meta.db and changes rarely, keyed by the
// version counter that changes with it in the same transaction: the live fragments
// (manifest_version) and the tombstones (tomb_version).
type readCache struct {
	mu      sync.Mutex
	fragVer int64
	fragOK  bool
	frags   []*fragMeta // every live fragment, by min_idx
	tombVer int64
	tombOK  bool
	tomb    record.IndexSet
}

// liveFragments returns every live fragment as of manifest version ver.
func (q *fileQueue) liveFragments(ctx context.Context, tx queryer, ver int64) ([]*fragMeta, error) {
	q.readCache.mu.Lock()
	if q.readCache.fragOK && q.readCache.fragVer == ver {
		f := q.readCache.frags
		q.readCache.mu.Unlock()
		return f, nil
	}
	q.readCache.mu.Unlock()
	rows, err := tx.QueryContext(ctx, `SELECT id, file, kind, min_idx, max_idx, rows, bytes, level, fields FROM fragments
		WHERE state = 1 ORDER BY min_idx, id`)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	defer rows.Close()
	var out []*fragMeta
	for rows.Next() {
		f := &fragMeta{fields: map[string]bool{}}
		var fields string
		if err := rows.Scan(&f.id, &f.file, &f.kind, &f.minI, &f.maxI, &f.rows, &f.bytes, &f.level, &fields); err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		for _, name := range strings.Split(fields, "\x1f") {
			if name != "" {
				f.fields[name] = true
			}
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	q.readCache.mu.Lock()
	q.readCache.frags, q.readCache.fragVer, q.readCache.fragOK = out, ver, true
	q.readCache.mu.Unlock()
	return out, nil
}

// loadRange adds to s the live fragments and tail entries that overlap [lo, hi].
func (q *fileQueue) loadRange(ctx context.Context, tx queryer, s *snapshot, lo, hi int64) error {
	s.frags, s.tail = s.frags[:0], s.tail[:0]
	all, err := q.liveFragments(ctx, tx, s.version)
	if err != nil {
		return err
	}
	for _, f := range all {
		if f.maxI >= lo && f.minI <= hi {
			s.frags = append(s.frags, f)
		}
	}
	if s.tailRows == 0 {
		return nil // the tail is empty
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, kind, partition, lo, n, min_idx, max_idx FROM tail
		WHERE max_idx >= ? AND min_idx <= ? ORDER BY seq`, lo, hi)
	if err != nil {
		return fmt.Errorf("read tail: %w", err)
	}
	var missing []*tailEntry
	q.tails.mu.Lock()
	for rows.Next() {
		e := &tailEntry{}
		if err := rows.Scan(&e.seq, &e.kind, &e.part, &e.lo, &e.n, &e.minI, &e.maxI); err != nil {
			q.tails.mu.Unlock()
			rows.Close()
			return fmt.Errorf("read tail: %w", err)
		}
		if c, ok := q.tails.m[e.seq]; ok {
			e = c
		} else {
			missing = append(missing, e)
		}
		s.tail = append(s.tail, e)
	}
	q.tails.mu.Unlock()
	rows.Close()
	for _, e := range missing {
		var idxb, data []byte
		if err := tx.QueryRowContext(ctx, `SELECT idx, data FROM tail WHERE seq = ?`, e.seq).Scan(&idxb, &data); err != nil {
			return fmt.Errorf("read tail entry %d: %w", e.seq, err)
		}
		if e.recs, err = tail.DecodeRecords(data); err != nil {
			return fmt.Errorf("%w: tail entry %d: %v", persist.ErrCorrupt, e.seq, err)
		}
		if e.kind == tail.EntryFields {
			if e.idx, err = tail.DecodeIndexes(idxb); err != nil {
				return fmt.Errorf("%w: tail entry %d: %v", persist.ErrCorrupt, e.seq, err)
			}
		}
	}
	if len(missing) > 0 {
		q.tails.mu.Lock()
		if len(q.tails.m) > 1<<16 {
			clear(q.tails.m) // entries are cheap to reload; keep the cache bounded
		}
		for _, e := range missing {
			q.tails.m[e.seq] = e
		}
		q.tails.mu.Unlock()
	}
	return nil
}

// dropFlushedTail forgets cached tail entries older than the oldest one in meta.db.
func (q *fileQueue) dropFlushedTail(ctx context.Context) {
	var minSeq sql.NullInt64
	if err := q.rdb.QueryRowContext(ctx, `SELECT MIN(seq) FROM tail`).Scan(&minSeq); err != nil {
		return
	}
	q.tails.mu.Lock()
	defer q.tails.mu.Unlock()
	for seq := range q.tails.m {
		if !minSeq.Valid || seq < minSeq.Int64 {
			delete(q.tails.m, seq)
		}
	}
}

// partitionSpans returns the index spans of partition (all partitions if "").
func partitionSpans(ctx context.Context, tx queryer, partition string, lo int64) (record.IndexSet, error) {
	if partition == "" {
		return record.IndexSet{{Lo: lo, Hi: 1<<62 - 1}}, nil
	}
	return loadSpans(ctx, tx, `SELECT lo, hi FROM segments WHERE partition = ? AND hi > ? ORDER BY lo`, partition, lo)
}

// partitionSpansIn returns the index spans of partition that meet [lo, hi].
func partitionSpansIn(ctx context.Context, tx queryer, partition string, lo, hi int64) (record.IndexSet, error) {
	return loadSpans(ctx, tx, `SELECT lo, hi FROM segments WHERE partition = ? AND hi > ? AND lo <= ? ORDER BY lo`, partition, lo, hi)
}

// partitionsOf returns the partition of each of the sorted indexes idx.
func partitionsOf(ctx context.Context, tx queryer, idx []int64) ([]string, error) {
	out := make([]string, len(idx))
	if len(idx) == 0 {
		return out, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT lo, hi, partition FROM segments WHERE hi > ? AND lo <= ? ORDER BY lo`, idx[0], idx[len(idx)-1])
	if err != nil {
		return nil, fmt.Errorf("read segments: %w", err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() && i < len(idx) {
		var lo, hi int64
		var p string
		if err := rows.Scan(&lo, &hi, &p); err != nil {
			return nil, fmt.Errorf("read segments: %w", err)
		}
		for i < len(idx) && idx[i] < lo {
			i++
		}
		for i < len(idx) && idx[i] < hi {
			out[i] = p
			i++
		}
	}
	return out, rows.Err()
}

// newManifestVersion runs fn in t with the next manifest version, then stores that version:
// every change of the set of live fragments (a flush, a compaction) is one version.
func (t *wtx) newManifestVersion(fn func(ver int64) error) error {
	ver, err := metaGet(t.ctx, t, "manifest_version")
	if err != nil {
		return err
	}
	ver++
	if err := fn(ver); err != nil {
		return err
	}
	return metaSet(t.ctx, t, "manifest_version", ver)
}

// publishFragment makes pending fragment id live from manifest version ver, with its index
// range [minI, maxI], row count, size in bytes and fields.
func (t *wtx) publishFragment(id, minI, maxI, rows, bytes int64, fields []persist.Field, ver int64) error {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	if _, err := t.exec(`UPDATE fragments SET state = 1, min_idx = ?, max_idx = ?, rows = ?, bytes = ?, fields = ?, added_version = ? WHERE id = ?`,
		minI, maxI, rows, bytes, strings.Join(names, "\x1f"), ver, id); err != nil {
		return fmt.Errorf("publish fragment: %w", err)
	}
	return nil
}
