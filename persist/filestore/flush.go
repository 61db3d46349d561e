package filestore

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/bgloop"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
)

// Flushing moves rows from the durable tail in meta.db into an immutable Parquet
// fragment. It never rewrites existing data, so its cost is proportional to the rows
// it moves. Steps: (1) one transaction records a pending fragment owned by this process
// and claims the tail entries (tail.flush_id); (2) the file is written under a
// temporary name, fsynced, renamed and the directory fsynced; (3) one transaction makes
// the fragment live, bumps the manifest version and deletes the claimed entries. A
// crash between (1) and (3) leaves the entries in the tail; recovery unclaims them and
// deletes the file.

// Bounds of one flushed fragment; a larger tail is flushed in several fragments.
const (
	flushMaxRows  = 1 << 20
	flushMaxBytes = 512 << 20
)

// Flush writes every row put before the call into fragments. Rows are durable without
// it; Flush only moves them into the Parquet files that other tools read and that reads
// are fastest from. Errors: ErrClosed, I/O and SQLite errors (the rows stay in the tail).
func (q *fileQueue) Flush(ctx context.Context) error {
	if err := q.calls.Enter(); err != nil {
		return err
	}
	defer q.calls.Leave()
	return q.flush(ctx)
}

type flushClaim struct {
	id     int64
	kind   int
	file   string
	rows   []fragRow
	fields []persist.Field
	minI   int64
	maxI   int64
}

func (q *fileQueue) flush(ctx context.Context) error {
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	err := q.flushLocked(ctx)
	if err != nil && ctx.Err() == nil {
		q.metrics.flushFailures.Add(1)
	}
	return err
}

func (q *fileQueue) flushLocked(ctx context.Context) error {
	for {
		claims, more, err := q.claimTail(ctx)
		if err != nil {
			return err
		}
		if len(claims) == 0 {
			return nil
		}
		q.hook("flush-claimed")
		start := time.Now()
		sizes := make([]int64, len(claims))
		for i, c := range claims {
			sizes[i], err = writeFragment(filepath.Join(q.dataDir, c.file), c.kind, c.fields, c.rows, q.cfg.RowGroupRows)
			if err != nil {
				q.abortClaims(ctx, claims)
				return fmt.Errorf("flush: %w", err)
			}
		}
		q.hook("flush-renamed")
		err = q.w.do(context.WithoutCancel(ctx), func(t *wtx) error {
			return t.newManifestVersion(func(ver int64) error {
				var n int64
				for i, c := range claims {
					if err := t.publishFragment(c.id, c.minI, c.maxI, int64(len(c.rows)), sizes[i], c.fields, ver); err != nil {
						return err
					}
					if _, err := t.exec(`DELETE FROM tail WHERE flush_id = ?`, c.id); err != nil {
						return fmt.Errorf("drop flushed tail: %w", err)
					}
					n += int64(len(c.rows))
				}
				if err := metaAdd(t.ctx, t, "tail_rows", -n); err != nil {
					return err
				}
				if _, err := t.exec(`DELETE FROM put_ids WHERE at < ?`, time.Now().Add(-persist.PutIDRetention).UnixNano()); err != nil {
					return fmt.Errorf("forget old put ids: %w", err)
				}
				return nil
			})
		})
		if err != nil {
			q.abortClaims(ctx, claims)
			return fmt.Errorf("flush: %w", err)
		}
		q.metrics.flushes.Add(1)
		q.metrics.lastFlush.Store(time.Now().UnixNano())
		q.metrics.lastFlushDur.Store(int64(time.Since(start)))
		q.hub.notifyCommit(nil) // wakes streams and Changes waiters (tests, Stats watchers); readiness is unchanged
		q.dropFlushedTail(ctx)
		if !more {
			return nil
		}
	}
}

// rawEntry is a claimed tail entry, decoded outside the writer.
type rawEntry struct {
	seq, lo, n int64
	kind       int
	part       string
	idxb, data []byte
}

// claimTail claims up to flushMaxRows unclaimed tail rows, oldest first, for new
// pending fragments (one for new rows, one for field updates). The claim transaction
// only copies the entries; they are decoded afterwards, off the writer goroutine.
func (q *fileQueue) claimTail(ctx context.Context) (claims []*flushClaim, more bool, err error) {
	var entries []rawEntry
	var schema persist.Schema
	byKind := [2]*flushClaim{}
	err = q.w.do(context.WithoutCancel(ctx), func(t *wtx) error {
		claims, more, entries, byKind = nil, false, nil, [2]*flushClaim{}
		s, err := t.loadSchema()
		if err != nil {
			return err
		}
		schema = *s
		rows, err := t.query(`SELECT seq, kind, n, length(data) FROM tail WHERE flush_id IS NULL ORDER BY seq`)
		if err != nil {
			return fmt.Errorf("read tail: %w", err)
		}
		defer rows.Close()
		minSeq := [2]int64{-1, -1}
		maxSeq := [2]int64{}
		var nrows, nbytes int64
		for rows.Next() {
			if nrows >= flushMaxRows || nbytes >= flushMaxBytes {
				more = true
				break
			}
			var e rawEntry
			var size int64
			if err := rows.Scan(&e.seq, &e.kind, &e.n, &size); err != nil {
				return fmt.Errorf("read tail: %w", err)
			}
			if e.kind != tail.EntryRows && e.kind != tail.EntryFields {
				return fmt.Errorf("%w: tail entry %d has kind %d", persist.ErrCorrupt, e.seq, e.kind)
			}
			if byKind[e.kind] == nil {
				byKind[e.kind] = &flushClaim{kind: e.kind, minI: 1<<63 - 1, maxI: -1}
				minSeq[e.kind] = e.seq
			}
			maxSeq[e.kind] = e.seq
			nrows += e.n
			nbytes += size
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read tail: %w", err)
		}
		rows.Close()
		for kind, c := range byKind {
			if c == nil {
				continue
			}
			prefix := map[int]string{tail.EntryRows: "r", tail.EntryFields: "f"}[kind]
			c.file = fmt.Sprintf("%s-%s-%06d.parquet", prefix, q.owner.token, q.fileSeq.Add(1))
			res, err := t.exec(`INSERT INTO fragments(file, kind, state, owner) VALUES (?, ?, 0, ?)`, c.file, kind, q.owner.token)
			if err != nil {
				return fmt.Errorf("record pending fragment: %w", err)
			}
			if c.id, err = res.LastInsertId(); err != nil {
				return err
			}
			if _, err := t.exec(`UPDATE tail SET flush_id = ? WHERE flush_id IS NULL AND kind = ? AND seq BETWEEN ? AND ?`,
				c.id, kind, minSeq[kind], maxSeq[kind]); err != nil {
				return fmt.Errorf("claim tail: %w", err)
			}
			claims = append(claims, c)
		}
		return nil
	})
	if err != nil || len(claims) == 0 {
		return nil, false, err
	}
	// The claimed entries cannot change until this process deletes them: read their
	// data through the read pool, off the writer.
	for _, c := range claims {
		rows, err := q.rdb.QueryContext(ctx, `SELECT seq, kind, partition, lo, n, idx, data FROM tail WHERE flush_id = ? ORDER BY seq`, c.id)
		if err != nil {
			q.abortClaims(ctx, claims)
			return nil, false, fmt.Errorf("read claimed tail: %w", err)
		}
		for rows.Next() {
			var e rawEntry
			if err := rows.Scan(&e.seq, &e.kind, &e.part, &e.lo, &e.n, &e.idxb, &e.data); err != nil {
				rows.Close()
				q.abortClaims(ctx, claims)
				return nil, false, fmt.Errorf("read claimed tail: %w", err)
			}
			entries = append(entries, e)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			q.abortClaims(ctx, claims)
			return nil, false, fmt.Errorf("read claimed tail: %w", err)
		}
	}
	used := [2]map[string]bool{{}, {}}
	for _, e := range entries {
		recs, err := tail.DecodeRecords(e.data)
		if err != nil {
			q.abortClaims(ctx, claims)
			return nil, false, fmt.Errorf("%w: tail entry %d: %v", persist.ErrCorrupt, e.seq, err)
		}
		var idx []int64
		if e.kind == tail.EntryFields {
			if idx, err = tail.DecodeIndexes(e.idxb); err != nil || len(idx) != len(recs) {
				q.abortClaims(ctx, claims)
				return nil, false, fmt.Errorf("%w: tail entry %d: bad index list", persist.ErrCorrupt, e.seq)
			}
		}
		c := byKind[e.kind]
		for i, r := range recs {
			fr := fragRow{rec: r, part: e.part, seq: e.seq}
			if e.kind == tail.EntryRows {
				fr.idx = e.lo + int64(i)
			} else {
				fr.idx = idx[i]
			}
			c.minI = min(c.minI, fr.idx)
			c.maxI = max(c.maxI, fr.idx)
			for _, fv := range r {
				used[e.kind][fv.Name] = true
			}
			c.rows = append(c.rows, fr)
		}
	}
	for _, c := range claims {
		for _, f := range schema.Fields {
			if used[c.kind][f.Name] {
				c.fields = append(c.fields, f)
			}
		}
		sortFragRows(c.rows)
	}
	return claims, more, nil
}

// abortClaims returns claimed tail entries and deletes the pending fragments' files.
func (q *fileQueue) abortClaims(ctx context.Context, claims []*flushClaim) {
	err := q.w.do(context.WithoutCancel(ctx), func(t *wtx) error {
		for _, c := range claims {
			if _, err := t.exec(`UPDATE tail SET flush_id = NULL WHERE flush_id = ?`, c.id); err != nil {
				return err
			}
			if _, err := t.exec(`DELETE FROM fragments WHERE id = ? AND state = 0`, c.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Recovery of a later Open releases the claims (this process's lock is gone then).
		q.log.Warn("abort flush", "error", err)
		return
	}
	for _, c := range claims {
		os.Remove(filepath.Join(q.dataDir, c.file))
		os.Remove(filepath.Join(q.dataDir, c.file+".tmp"))
	}
}

// flushLoop runs background flushes: every FlushInterval and when puts push the tail
// past FlushRows.
func (q *fileQueue) flushLoop(ctx context.Context) {
	warnings := bgWarnings{log: q.log}
	bgloop.Run(ctx, q.cfg.FlushInterval, q.flushKick, func(bool) {
		if err := q.flush(ctx); err != nil {
			warnings.warn(ctx, "background flush failed; rows stay in the durable tail", "queue", q.name, "error", err)
		}
		q.kickCompaction()
	})
}

// bgWarnings logs the failures of one background loop: at most one every 30 s, and none
// once the loop's context is done (the work a close cancels has not failed).
type bgWarnings struct {
	log  *slog.Logger
	last time.Time
}

func (w *bgWarnings) warn(ctx context.Context, msg string, args ...any) {
	if ctx.Err() != nil || time.Since(w.last) <= 30*time.Second {
		return
	}
	w.log.Warn(msg, args...)
	w.last = time.Now()
}

func sortFragRows(rows []fragRow) {
	sorted := true
	for i := 1; i < len(rows); i++ {
		if rows[i].idx < rows[i-1].idx || (rows[i].idx == rows[i-1].idx && rows[i].seq < rows[i-1].seq) {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	slices.SortStableFunc(rows, func(a, b fragRow) int {
		if c := cmp.Compare(a.idx, b.idx); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
}
