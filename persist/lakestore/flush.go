package lakestore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/internal/bgloop"
)

// flushEntries bounds the tail entries one flush moves into fragments.
const flushEntries = 4096

// metaPublishBy is the metadata key of a fragment object holding its flush's
// publication deadline (RFC 3339, the catalog's clock): see Config.FlushTimeout.
const metaPublishBy = "lakeshore-publish-by"

// Flush implements persist.Store: every record put before the call is in a fragment
// when it returns.
func (s *Store) Flush(ctx context.Context) error {
	if err := s.calls.Enter(); err != nil {
		return err
	}
	defer s.calls.Leave()
	return s.flushAll(ctx)
}

// flushAll flushes every tail entry committed before the call.
func (s *Store) flushAll(ctx context.Context) error {
	var below int64
	if err := s.pool.QueryRow(ctx, `SELECT next_seq FROM queues WHERE queue = $1`, s.name).Scan(&below); err != nil {
		return s.failure(ctx, fmt.Errorf("lakestore: flush: %w", err))
	}
	for {
		more, err := s.flushOnce(ctx, below)
		if err != nil && ctx.Err() == nil {
			s.flushFailures.Add(1)
		}
		if err != nil || !more {
			return err
		}
	}
}

// objectKey names a new fragment object of the queue.
func (s *Store) objectKey(kind filestore.FragmentKind) string {
	p := "r"
	if kind == filestore.FragmentFields {
		p = "f"
	}
	return s.name + "/" + p + "-" + strings.ToLower(ulid.MustNew(ulid.Now(), rand.Reader).String()) + ".parquet"
}

// flushOnce moves up to flushEntries tail entries with a sequence below below into
// fragments and reports whether it moved any. The fragments are written first
// (create-if-absent), then one catalog transaction — the one that read the entries
// under the queue's flush lock — publishes them and deletes the entries. A crash or an
// unreachable bucket before the commit leaves the entries in the tail (nothing is
// lost) and at most an unnamed object, which the sweeper deletes.
func (s *Store) flushOnce(ctx context.Context, below int64) (more bool, err error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.FlushTimeout)
	defer cancel()
	start := time.Now()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, s.failure(ctx, fmt.Errorf("lakestore: flush: %w", err))
	}
	defer tx.Rollback(context.Background())
	defer func() {
		if err != nil {
			err = s.failureOn(ctx, tx.Conn(), err)
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('lakeshore.lakestore.flush/' || $1, 0))`, s.name); err != nil {
		return false, fmt.Errorf("lakestore: flush lock: %w", err)
	}
	// The publication deadline, on the catalog's clock: the fragments rows carry it and
	// the catalog refuses them at COMMIT once it passed; the objects carry it for the
	// sweeper (see Config.FlushTimeout).
	var deadline time.Time
	if err := tx.QueryRow(ctx, `SELECT clock_timestamp() + $1 * interval '1 microsecond'`, s.cfg.FlushTimeout.Microseconds()).Scan(&deadline); err != nil {
		return false, fmt.Errorf("lakestore: flush: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT seq, kind, partition, lo, idx, data FROM tail WHERE queue = $1 AND seq < $2 ORDER BY seq LIMIT $3`, s.name, below, flushEntries)
	if err != nil {
		return false, fmt.Errorf("lakestore: flush: read tail: %w", err)
	}
	var rowRows, fieldRows []filestore.FragmentRow
	var seqs []int64
	for rows.Next() {
		var seq, lo int64
		var kind int16
		var part string
		var idx []int64
		var data []byte
		if err := rows.Scan(&seq, &kind, &part, &lo, &idx, &data); err != nil {
			rows.Close()
			return false, fmt.Errorf("lakestore: flush: read tail: %w", err)
		}
		dec, err := filestore.DecodeRecords(data)
		if err != nil {
			rows.Close()
			return false, fmt.Errorf("lakestore: flush: tail entry %d: %w", seq, err)
		}
		seqs = append(seqs, seq)
		if kind == 0 {
			for i, r := range dec {
				rowRows = append(rowRows, filestore.FragmentRow{Index: lo + int64(i), Partition: part, Record: r})
			}
			continue
		}
		if len(dec) != len(idx) {
			rows.Close()
			return false, fmt.Errorf("%w: tail entry %d has %d records for %d indexes", persist.ErrCorrupt, seq, len(dec), len(idx))
		}
		for i, x := range idx {
			fieldRows = append(fieldRows, filestore.FragmentRow{Index: x, Seq: seq, Record: dec[i]})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("lakestore: flush: read tail: %w", err)
	}
	if len(seqs) == 0 {
		return false, tx.Commit(ctx)
	}
	// The schema is read after the entries, so it covers every kind they hold.
	st, err := s.loadQueue(ctx, tx, false)
	if err != nil {
		return false, err
	}
	type published struct {
		key      string
		kind     filestore.FragmentKind
		min, max int64
		rows     int
		bytes    int64
		fields   []string
	}
	var pubs []published
	for _, part := range []struct {
		kind filestore.FragmentKind
		rows []filestore.FragmentRow
	}{{filestore.FragmentRows, rowRows}, {filestore.FragmentFields, fieldRows}} {
		if len(part.rows) == 0 {
			continue
		}
		sort.SliceStable(part.rows, func(i, j int) bool {
			if part.rows[i].Index != part.rows[j].Index {
				return part.rows[i].Index < part.rows[j].Index
			}
			return part.rows[i].Seq < part.rows[j].Seq
		})
		used := map[string]bool{}
		for _, r := range part.rows {
			for _, f := range r.Record.FieldNames() {
				used[f] = true
			}
		}
		var fields []persist.Field
		var names []string
		for _, f := range st.schema.Fields {
			if used[f.Name] {
				fields = append(fields, f)
				names = append(names, f.Name)
			}
		}
		if names == nil {
			names = []string{}
		}
		key := s.objectKey(part.kind)
		n, err := s.writeObject(ctx, key, part.kind, fields, part.rows, deadline)
		if err != nil {
			return false, err
		}
		pubs = append(pubs, published{key: key, kind: part.kind, min: part.rows[0].Index, max: part.rows[len(part.rows)-1].Index,
			rows: len(part.rows), bytes: n, fields: names})
	}
	var version int64
	if err := tx.QueryRow(ctx, `UPDATE queues SET manifest_version = manifest_version + 1, change_version = change_version + 1 WHERE queue = $1 RETURNING manifest_version`,
		s.name).Scan(&version); err != nil {
		return false, fmt.Errorf("lakestore: flush: %w", err)
	}
	for _, p := range pubs {
		if _, err := tx.Exec(ctx, `INSERT INTO fragments(queue, object, kind, min_idx, max_idx, rows, bytes, fields, added_version, publish_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			s.name, p.key, int16(p.kind), p.min, p.max, p.rows, p.bytes, p.fields, version, deadline); err != nil {
			return false, fmt.Errorf("lakestore: flush: publish fragment: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM tail WHERE queue = $1 AND seq = ANY($2)`, s.name, seqs); err != nil {
		return false, fmt.Errorf("lakestore: flush: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM put_ids WHERE queue = $1 AND created_at < now() - $2 * interval '1 microsecond'`,
		s.name, persist.PutIDRetention.Microseconds()); err != nil {
		return false, fmt.Errorf("lakestore: flush: forget old put ids: %w", err)
	}
	if err := s.announce(ctx, tx); err != nil { // the UPDATE above bumped the change version
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "LSF01" {
			return false, fmt.Errorf("lakestore: flush: took longer than FlushTimeout (%s), not published; the rows stay in the tail: %s", s.cfg.FlushTimeout, pe.Message)
		}
		return false, fmt.Errorf("lakestore: flush: publish: %w", err)
	}
	s.flushes.Add(1)
	s.lastFlush.Store(time.Now().UnixNano())
	s.lastFlushDur.Store(int64(time.Since(start)))
	s.committed()
	return len(seqs) == flushEntries, nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeObject writes rows as a new fragment object (create-if-absent) and returns its
// size in bytes; on any error the object is not created.
func (s *Store) writeObject(ctx context.Context, key string, kind filestore.FragmentKind, fields []persist.Field, rows []filestore.FragmentRow, publishBy time.Time) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{IfNotExist: true, ContentType: "application/vnd.apache.parquet",
		Metadata: map[string]string{metaPublishBy: publishBy.UTC().Format(time.RFC3339Nano)}})
	if err != nil {
		return 0, fmt.Errorf("lakestore: write fragment %s: %w", key, err)
	}
	cw := &countingWriter{w: w}
	if err := filestore.WriteFragment(cw, kind, fields, rows, s.cfg.RowGroupRows); err != nil {
		cancel() // aborts the write: no object
		w.Close()
		return 0, fmt.Errorf("lakestore: write fragment %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("lakestore: write fragment %s: %w", key, err)
	}
	return cw.n, nil
}

// flushLoop flushes in the background every FlushInterval and when FlushRows rows
// were put; failures (an unreachable bucket) are logged and retried at the next tick,
// the rows staying durable in the tail meanwhile.
func (s *Store) flushLoop(ctx context.Context) {
	bgloop.Run(ctx, s.cfg.FlushInterval, s.kick, func(bool) {
		s.unflushed.Store(0)
		if err := s.flushAll(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("lakestore: background flush failed; the rows stay in the tail", "queue", s.name, "err", err)
		}
	})
}

// Sweep deletes the queue's orphan fragments: objects under {prefix}{queue}/ that no
// catalog row names (left by flushes that died, or failed to publish, after writing
// them) and whose publication deadline passed more than Config.SweepGrace ago on the
// catalog's clock, so that no flush can publish them any more (see
// Config.FlushTimeout). It returns how many it deleted. The objects are listed and the
// catalog's clock read before the catalog's names, so an object published meanwhile is
// never taken for an orphan.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	if err := s.calls.Enter(); err != nil {
		return 0, err
	}
	defer s.calls.Leave()
	return s.sweep(ctx)
}

func (s *Store) sweep(ctx context.Context) (int, error) {
	type obj struct {
		key string
		mod time.Time
	}
	var objs []obj
	it := s.bucket.List(&blob.ListOptions{Prefix: s.name + "/"})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("lakestore: sweep: list: %w", err)
		}
		if !o.IsDir && strings.HasSuffix(o.Key, ".parquet") {
			objs = append(objs, obj{o.Key, o.ModTime})
		}
	}
	if len(objs) == 0 {
		return 0, nil
	}
	var catalogNow time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&catalogNow); err != nil {
		return 0, s.failure(ctx, fmt.Errorf("lakestore: sweep: %w", err))
	}
	rows, err := s.pool.Query(ctx, `SELECT object FROM fragments WHERE queue = $1`, s.name)
	if err != nil {
		return 0, s.failure(ctx, fmt.Errorf("lakestore: sweep: %w", err))
	}
	named, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, s.failure(ctx, fmt.Errorf("lakestore: sweep: %w", err))
	}
	slices.Sort(named)
	n := 0
	for _, o := range objs {
		if _, ok := slices.BinarySearch(named, o.key); ok {
			continue
		}
		attrs, err := s.bucket.Attributes(ctx, o.key)
		if err != nil {
			if gcerrors.Code(err) == gcerrors.NotFound {
				continue // deleted by another sweeper
			}
			return n, fmt.Errorf("lakestore: sweep: %s: %w", o.key, err)
		}
		if by, err := time.Parse(time.RFC3339Nano, attrs.Metadata[metaPublishBy]); err == nil {
			if !catalogNow.After(by.Add(s.cfg.SweepGrace)) {
				continue // a flush may still publish it, or just did
			}
		} else if time.Since(o.mod) <= FlushTimeoutDefault+s.cfg.SweepGrace {
			continue // no deadline (an older version wrote it): by its age
		}
		if err := s.bucket.Delete(ctx, o.key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return n, fmt.Errorf("lakestore: sweep: delete %s: %w", o.key, err)
		}
		n++
	}
	s.orphans.Add(int64(n))
	return n, nil
}

// sweepLoop sweeps at once and then every SweepInterval (not at all for -1).
func (s *Store) sweepLoop(ctx context.Context) {
	if s.cfg.SweepInterval <= 0 {
		return
	}
	sweep := func(bool) {
		if _, err := s.sweep(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("lakestore: sweep failed", "queue", s.name, "err", err)
		}
	}
	sweep(false)
	bgloop.Run(ctx, s.cfg.SweepInterval, nil, sweep)
}

// Stats implements persist.Store. OrphansDeleted counts the objects this store's
// sweeps deleted; RecoveredFragments and Compactions stay zero (a flush that dies
// leaves nothing to roll back, and the store does not compact yet).
func (s *Store) Stats(ctx context.Context) (persist.Stats, error) {
	if err := s.calls.Enter(); err != nil {
		return persist.Stats{}, err
	}
	defer s.calls.Leave()
	st := persist.Stats{Puts: s.puts.Load(), Gets: s.gets.Load(), Flushes: s.flushes.Load(), FlushFailures: s.flushFailures.Load(), OrphansDeleted: s.orphans.Load(),
		LastFlushDuration: time.Duration(s.lastFlushDur.Load()), Partitions: map[string]int64{}, ConsumedByTask: map[string]int64{}}
	if t := s.lastFlush.Load(); t != 0 {
		st.LastFlush = time.Unix(0, t)
	}
	err := s.view(ctx, func(tx pgx.Tx) error {
		q, err := s.loadQueue(ctx, tx, false)
		if err != nil {
			return err
		}
		tomb, err := s.tombstones(ctx, tx)
		if err != nil {
			return err
		}
		st.NextIndex, st.Cleared, st.ManifestVersion = q.next, tomb.Count(), q.manifestVersion
		if st.WeightVersion, err = s.currentVersion(ctx, tx, false); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(stale_dropped), 0), coalesce(sum(groups_dropped), 0), coalesce(sum(samples_unused), 0)
			FROM consumers WHERE queue = $1`, s.name).Scan(&st.StaleDropped, &st.GroupsDropped, &st.SamplesUnused); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		st.Len = st.NextIndex - st.Cleared
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(n), 0) FROM tail WHERE queue = $1`, s.name).Scan(&st.TailRows); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(rows), 0), coalesce(sum(bytes), 0) FROM fragments WHERE queue = $1`, s.name).
			Scan(&st.Fragments, &st.FragmentRows, &st.FragmentBytes); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT partition, sum(hi - lo) FROM segments WHERE queue = $1 GROUP BY partition`, s.name)
		if err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		for rows.Next() {
			var p string
			var n int64
			if err := rows.Scan(&p, &n); err != nil {
				rows.Close()
				return fmt.Errorf("stats: %w", err)
			}
			st.Partitions[p] = n
		}
		rows.Close()
		rows, err = tx.Query(ctx, `SELECT partition, task, sum(hi - lo) FROM consumed WHERE queue = $1 GROUP BY partition, task`, s.name)
		if err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var p, t string
			var n int64
			if err := rows.Scan(&p, &t, &n); err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			st.ConsumedByTask[p+"/"+t] = n
		}
		return rows.Err()
	})
	return st, err
}
