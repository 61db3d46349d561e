package filestore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// The file store's part of weight versions, staleness, back-pressure and leases
// (rl.go): the current version and the dropped count are meta keys of meta.db, leases
// are rows of table leases (migration 0003).

var (
	_ persist.Versioner     = (*fileQueue)(nil)
	_ persist.VersionSource = (*fileSampleSource)(nil)
)

// SetVersion implements Versioner.
func (q *fileQueue) SetVersion(ctx context.Context, version int64) error {
	return q.write(ctx, func(t *wtx) error {
		cur, err := metaGet(t.ctx, t, "weight_version")
		if err != nil {
			return err
		}
		if err := persist.CheckVersionForward(version, cur); err != nil {
			return err
		}
		if version == cur {
			return nil
		}
		t.rows = true // wake producers blocked by MaxAhead
		return metaSet(t.ctx, t, "weight_version", version)
	})
}

// Version implements Versioner.
func (q *fileQueue) Version(ctx context.Context) (int64, error) {
	if err := q.calls.Enter(); err != nil {
		return 0, err
	}
	defer q.calls.Leave()
	var v int64
	err := q.view(ctx, func(tx queryer) error {
		var err error
		v, err = metaGet(ctx, tx, "weight_version")
		return err
	})
	return v, err
}

// CurrentVersion implements VersionSource.
func (in *fileSampleSource) CurrentVersion() int64 { return in.version }

// Drop implements VersionSource.
func (in *fileSampleSource) Drop(indexes []int64) { in.dropped = append(in.dropped, indexes...) }

// activeLeases returns the spans of (partition, task) leased and not expired at now.
func (t *wtx) activeLeases(partition, task string, now time.Time) (record.IndexSet, error) {
	return loadSpans(t.ctx, t, `SELECT lo, hi FROM leases WHERE partition = ? AND task = ? AND expires > ?`, partition, task, now.UnixNano())
}

// nextLeaseExpiry returns how long until the earliest active lease of (partition,
// task) expires (0: none), for a waiting GetMeta to wake then: an expiry is no commit.
func (q *fileQueue) nextLeaseExpiry(ctx context.Context, partition, task string) (time.Duration, error) {
	var d time.Duration
	err := q.readSnapshot(ctx, func(t *wtx) error {
		var at sql.NullInt64
		now := time.Now()
		if err := t.queryRow(`SELECT min(expires) FROM leases WHERE partition = ? AND task = ? AND expires > ?`, partition, task, now.UnixNano()).Scan(&at); err != nil {
			return fmt.Errorf("read leases: %w", err)
		}
		if at.Valid {
			d = time.Unix(0, at.Int64).Sub(now)
		}
		return nil
	})
	return d, err
}

// addLease leases s to (partition, task) until expires, dropping expired leases of
// the pair.
func (t *wtx) addLease(partition, task string, s record.IndexSet, expires time.Time) error {
	if _, err := t.exec(`DELETE FROM leases WHERE partition = ? AND task = ? AND expires <= ?`, partition, task, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("drop expired leases: %w", err)
	}
	for _, sp := range s {
		if _, err := t.exec(`INSERT INTO leases(partition, task, lo, hi, expires) VALUES (?, ?, ?, ?, ?)`, partition, task, sp.Lo, sp.Hi, expires.UnixNano()); err != nil {
			return fmt.Errorf("store lease: %w", err)
		}
	}
	return nil
}

// unconsumed counts the samples of partition that task has not consumed (cleared ones
// excluded), for Admission.
func (t *wtx) unconsumed(partition, task string) (int64, error) {
	var put, consumed, cleared sql.NullInt64
	if err := t.queryRow(`SELECT SUM(hi - lo) FROM segments WHERE partition = ?`, partition).Scan(&put); err != nil {
		return 0, fmt.Errorf("count unconsumed: %w", err)
	}
	if put.Int64 == 0 {
		return 0, nil
	}
	if err := t.queryRow(`SELECT SUM(hi - lo) FROM consumed WHERE partition = ? AND task = ?`, partition, task).Scan(&consumed); err != nil {
		return 0, fmt.Errorf("count unconsumed: %w", err)
	}
	// Cleared samples of the partition that the task had not consumed.
	part, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM segments WHERE partition = ? ORDER BY lo`, partition)
	if err != nil {
		return 0, err
	}
	tomb, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM tombstones WHERE hi > ? ORDER BY lo`, part[0].Lo)
	if err != nil {
		return 0, err
	}
	if len(tomb) > 0 {
		cons, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM consumed WHERE partition = ? AND task = ? ORDER BY lo`, partition, task)
		if err != nil {
			return 0, err
		}
		cleared.Int64 = part.Intersect(tomb).Minus(cons).Count()
	}
	return put.Int64 - consumed.Int64 - cleared.Int64, nil
}

// admit checks a put of n records with highest target version target against a,
// inside the put's transaction.
func (t *wtx) admit(a *persist.Admission, partition string, n int, target int64) error {
	if a == nil {
		return nil
	}
	var unconsumed int64
	if a.MaxUnconsumed > 0 {
		// Earlier puts of this group keep their rows in memory: write them back first,
		// so that the count sees them.
		if err := t.syncPuts(); err != nil {
			return err
		}
		var err error
		if unconsumed, err = t.unconsumed(partition, a.Task); err != nil {
			return err
		}
	}
	cur, err := metaGet(t.ctx, t, "weight_version")
	if err != nil {
		return err
	}
	return persist.Admitted(a, partition, n, target, unconsumed, cur)
}

// versionCache holds the weight versions of records this process put or read, as
// spans of consecutive indexes of one version (a put batch is one span), so that a
// staleness-bounded GetMeta judges its samples without reading the column again. A
// record's version is written with it and changes only by a later PutFields of the
// field: a GetMeta uses the cache only while its snapshot shows no such update
// (produced spans of WeightVersionField), in any process.
type versionCache struct {
	mu    sync.Mutex
	spans []versionSpan // sorted by lo, disjoint
}

type versionSpan struct{ lo, hi, v int64 }

// maxVersionSpans bounds the cache; past it, it starts over.
const maxVersionSpans = 1 << 20

// add records that indexes lo..hi-1 have version v.
func (c *versionCache) add(lo, hi, v int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.spans)
	if n > 0 && c.spans[n-1].hi == lo && c.spans[n-1].v == v {
		c.spans[n-1].hi = hi
		return
	}
	if n >= maxVersionSpans {
		c.spans, n = nil, 0
	}
	if n == 0 || c.spans[n-1].hi <= lo {
		c.spans = append(c.spans, versionSpan{lo, hi, v})
		return
	}
	i := sort.Search(n, func(i int) bool { return c.spans[i].hi > lo })
	if i < n && c.spans[i].lo < hi {
		return // overlaps what is known (the same records): keep it
	}
	c.spans = append(c.spans, versionSpan{})
	copy(c.spans[i+1:], c.spans[i:])
	c.spans[i] = versionSpan{lo, hi, v}
}

// lookup returns the versions of indexes (ascending or not) and which are known.
func (c *versionCache) lookup(indexes []int64) ([]int64, []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	vs, ok := make([]int64, len(indexes)), make([]bool, len(indexes))
	for i, x := range indexes {
		j := sort.Search(len(c.spans), func(j int) bool { return c.spans[j].hi > x })
		if j < len(c.spans) && c.spans[j].lo <= x {
			vs[i], ok[i] = c.spans[j].v, true
		}
	}
	return vs, ok
}

// reset forgets everything (a PutFields of the version field in this process).
func (c *versionCache) reset() {
	c.mu.Lock()
	c.spans = nil
	c.mu.Unlock()
}

// putVersions caches the versions of a put's records (indexes lo…).
func (c *versionCache) putVersions(lo int64, recs []persist.Record) {
	for i := 0; i < len(recs); {
		v, ok := persist.VersionValue(recs[i][persist.WeightVersionField])
		j := i + 1
		for j < len(recs) {
			w, ok2 := persist.VersionValue(recs[j][persist.WeightVersionField])
			if ok2 != ok || w != v {
				break
			}
			j++
		}
		if ok {
			c.add(lo+int64(i), lo+int64(j), v)
		}
		i = j
	}
}

// versionValues answers SampleSource.Values for WeightVersionField from the cache when
// the snapshot allows it, reading (and caching) only what it does not know.
func (in *fileSampleSource) versionValues(ctx context.Context, indexes []int64) ([]any, error) {
	c := &in.q.versions
	vs, known := c.lookup(indexes)
	var miss []int64
	for i, ok := range known {
		if !ok {
			miss = append(miss, indexes[i])
		}
	}
	var got []any
	if len(miss) > 0 {
		var err error
		if got, err = in.readValues(ctx, persist.WeightVersionField, miss); err != nil {
			return nil, err
		}
		for i, x := range miss {
			if v, ok := persist.VersionValue(got[i]); ok && got[i] != nil {
				c.add(x, x+1, v)
			}
		}
	}
	out := make([]any, len(indexes))
	m := 0
	for i, ok := range known {
		if ok {
			out[i] = vs[i]
		} else {
			out[i] = got[m]
			m++
		}
	}
	return out, nil
}

var _ persist.FieldRevisioner = (*fileQueue)(nil)

// bumpFieldRevision adds 1 to field's revision (table field_revisions, migration 0004):
// a PutFields or KV update of field, or ("") a clear.
func (t *wtx) bumpFieldRevision(field string) error {
	if _, err := t.exec(`INSERT INTO field_revisions(field, n) VALUES (?, 1) ON CONFLICT(field) DO UPDATE SET n = n + 1`, field); err != nil {
		return fmt.Errorf("count field revision: %w", err)
	}
	return nil
}

// FieldRevision implements FieldRevisioner: next_index and the revisions of field and
// of clears, in one read transaction.
func (q *fileQueue) FieldRevision(ctx context.Context, field string) (next, revision int64, err error) {
	if err := q.calls.Enter(); err != nil {
		return 0, 0, err
	}
	defer q.calls.Leave()
	err = q.view(ctx, func(tx queryer) error {
		var err error
		if next, err = metaGet(ctx, tx, "next_index"); err != nil {
			return err
		}
		var n sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT SUM(n) FROM field_revisions WHERE field IN (?, '')`, field).Scan(&n); err != nil {
			return fmt.Errorf("read field revision: %w", err)
		}
		revision = n.Int64
		return nil
	})
	return next, revision, err
}

// dropGroups marks what GRPOGroupN dropped consumed for (partition, task), in the
// hand-out's transaction: each group counts once in groups_dropped when any of its
// samples was not consumed yet (so concurrent readers that judged the same group count
// it once), and unused samples count one each in samples_unused. Samples of chosen
// (handed out by this same transaction) are left alone.
func (t *wtx) dropGroups(partition, task string, groups [][]int64, unused []int64, chosen record.IndexSet) error {
	var all []int64
	for _, g := range groups {
		all = append(all, g...)
	}
	all = append(all, unused...)
	if len(all) == 0 {
		return nil
	}
	every := record.SetOf(all)
	consumed, err := loadSpans(t.ctx, t, `SELECT lo, hi FROM consumed WHERE partition = ? AND task = ? AND lo < ? AND hi > ? ORDER BY lo`,
		partition, task, every[len(every)-1].Hi, every[0].Lo)
	if err != nil {
		return err
	}
	taken := consumed.Union(chosen)
	var nGroups, nUnused int64
	for _, g := range groups {
		if len(record.SetOf(g).Minus(taken)) > 0 {
			nGroups++
		}
	}
	nUnused = record.SetOf(unused).Minus(taken).Minus(record.SetOf(all[:len(all)-len(unused)])).Count()
	drop := every.Minus(taken)
	if len(drop) == 0 {
		return nil
	}
	if err := t.markConsumed(partition, task, drop); err != nil {
		return err
	}
	if err := metaAdd(t.ctx, t, "groups_dropped", nGroups); err != nil {
		return err
	}
	if err := metaAdd(t.ctx, t, "samples_unused", nUnused); err != nil {
		return err
	}
	t.rows = true // wake producers held by back-pressure
	return nil
}

var _ persist.GroupDropStore = (*fileQueue)(nil)

// DropGroup implements GroupDropStore.
func (q *fileQueue) DropGroup(ctx context.Context, task, partition string, indexes []int64) error {
	if err := persist.CheckDropGroup(task, partition, indexes); err != nil {
		return err
	}
	return q.write(ctx, func(t *wtx) error {
		if err := t.requireInPartition(partition, record.SetOf(indexes)); err != nil {
			return err
		}
		return t.dropGroups(partition, task, [][]int64{indexes}, nil, nil)
	})
}
