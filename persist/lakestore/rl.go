package lakestore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// The distributed store's part of weight versions, staleness, back-pressure and
// leases (persist/rl.go; catalog migration 0003).

var (
	_ persist.Versioner     = (*Store)(nil)
	_ persist.VersionSource = (*sampleSource)(nil)
)

// SetVersion implements persist.Versioner. It waits for staleness-bounded GetMetas in
// flight (they hold the version's row FOR SHARE), so none hands out a batch judged
// against a version older than the committed one.
func (s *Store) SetVersion(ctx context.Context, version int64) error {
	if err := s.calls.Enter(); err != nil {
		return err
	}
	defer s.calls.Leave()
	return s.write(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO weight_versions(queue) VALUES ($1) ON CONFLICT DO NOTHING`, s.name); err != nil {
			return fmt.Errorf("set version: %w", err)
		}
		var cur int64
		if err := tx.QueryRow(ctx, `SELECT version FROM weight_versions WHERE queue = $1 FOR UPDATE`, s.name).Scan(&cur); err != nil {
			return fmt.Errorf("set version: %w", err)
		}
		if err := persist.CheckVersionForward(version, cur); err != nil {
			return err
		}
		if version == cur {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE weight_versions SET version = $2 WHERE queue = $1`, s.name, version); err != nil {
			return fmt.Errorf("set version: %w", err)
		}
		return s.notify(ctx, tx) // wake producers blocked by MaxAhead, in every process
	})
}

// Version implements persist.Versioner.
func (s *Store) Version(ctx context.Context) (int64, error) {
	if err := s.calls.Enter(); err != nil {
		return 0, err
	}
	defer s.calls.Leave()
	v, err := s.currentVersion(ctx, s.pool, false)
	return v, s.failure(ctx, err)
}

type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// versionSQL reads the weight version of queue $1.
const versionSQL = `SELECT version FROM weight_versions WHERE queue = $1`

// currentVersion reads the queue's weight version (0 without a row), holding its row
// FOR SHARE when share is set (then creating it first, so that there is a row to hold).
func (s *Store) currentVersion(ctx context.Context, q rowQuerier, share bool) (int64, error) {
	sql := versionSQL
	if share {
		sql += ` FOR SHARE`
	}
	for attempt := 0; ; attempt++ {
		var v int64
		err := q.QueryRow(ctx, sql, s.name).Scan(&v)
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("read version: %w", err)
		}
		if !share || attempt > 0 {
			return 0, nil
		}
		if err := q.QueryRow(ctx, `INSERT INTO weight_versions(queue) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 0`, s.name).Scan(new(int64)); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("create version: %w", err)
		}
	}
}

// CurrentVersion implements persist.VersionSource.
func (c *sampleSource) CurrentVersion() int64 { return c.version }

// Drop implements persist.VersionSource.
func (c *sampleSource) Drop(indexes []int64) { c.dropped = append(c.dropped, indexes...) }

// activeLeasesSQL reads the spans of (queue $1, partition $2, task $3) leased and not expired.
const activeLeasesSQL = `SELECT lo, hi FROM leases WHERE queue = $1 AND partition = $2 AND task = $3 AND expires > now()`

// nextLeaseExpiry returns how long until the earliest active lease of (partition,
// task) expires by the catalog's clock (0: none), for a waiting GetMeta to wake then: an
// expiry is no commit.
func (s *Store) nextLeaseExpiry(ctx context.Context, partition, task string) (time.Duration, error) {
	var us *int64
	if err := s.pool.QueryRow(ctx, `SELECT (extract(epoch FROM min(expires) - now()) * 1000000)::bigint FROM leases WHERE queue = $1 AND partition = $2 AND task = $3 AND expires > now()`,
		s.name, partition, task).Scan(&us); err != nil {
		return 0, s.failure(ctx, fmt.Errorf("read leases: %w", err))
	}
	if us == nil {
		return 0, nil
	}
	return time.Duration(*us) * time.Microsecond, nil
}

// queueLease queues in b the statements that lease set to (partition, task) for d,
// dropping the pair's expired leases.
func (s *Store) queueLease(b *pgx.Batch, partition, task string, set record.IndexSet, d time.Duration) {
	b.Queue(`DELETE FROM leases WHERE queue = $1 AND partition = $2 AND task = $3 AND expires <= now()`, s.name, partition, task)
	los := make([]int64, len(set))
	his := make([]int64, len(set))
	for i, sp := range set {
		los[i], his[i] = sp.Lo, sp.Hi
	}
	b.Queue(`INSERT INTO leases(queue, partition, task, lo, hi, expires)
		SELECT $1, $2, $3, l, h, now() + $6 * interval '1 microsecond' FROM unnest($4::bigint[], $5::bigint[]) AS t(l, h)`,
		s.name, partition, task, los, his, d.Microseconds())
}

// dropStale marks the stale samples a staleness-bounded sampler saw consumed for the
// task (those not consumed yet, and not handed out by this GetMeta) and counts them.
func (s *Store) dropStale(ctx context.Context, tx querier, rq *persist.MetaRequest, dropped []int64, chosen, consumed record.IndexSet) error {
	drop := record.SetOf(dropped).Minus(chosen).Minus(consumed)
	n := drop.Count()
	if n == 0 {
		return nil
	}
	if err := insertSpans(ctx, tx, "consumed", "queue, partition, task", drop, s.name, rq.Partition, rq.Task); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE consumers SET stale_dropped = stale_dropped + $4 WHERE queue = $1 AND partition = $2 AND task = $3`,
		s.name, rq.Partition, rq.Task, n); err != nil {
		return fmt.Errorf("count dropped: %w", err)
	}
	return nil
}

// unconsumed counts the samples of partition task has not consumed (cleared ones
// excluded), for persist.Admission.
func (s *Store) unconsumed(ctx context.Context, tx pgx.Tx, partition, task string) (int64, error) {
	_, live, err := s.partitionLive(ctx, tx, partition)
	if err != nil || len(live) == 0 {
		return 0, err
	}
	consumed, err := loadSpans(ctx, tx, consumedSQL, s.name, partition, task)
	if err != nil {
		return 0, err
	}
	return live.Minus(consumed).Count(), nil
}

// admit checks a put against its admission inside the put's transaction (the queue's
// row locked, so puts are judged one after another).
func (s *Store) admit(ctx context.Context, tx pgx.Tx, a *persist.Admission, partition string, n int, target int64) error {
	if a == nil {
		return nil
	}
	var unconsumed int64
	if a.MaxUnconsumed > 0 {
		var err error
		if unconsumed, err = s.unconsumed(ctx, tx, partition, a.Task); err != nil {
			return err
		}
	}
	cur, err := s.currentVersion(ctx, tx, false)
	if err != nil {
		return err
	}
	return persist.Admitted(a, partition, n, target, unconsumed, cur)
}

var _ persist.FieldRevisioner = (*Store)(nil)

// bumpFieldRevision adds 1 to field's revision (table field_revisions, migration
// 0004): a PutFields or KV update of field, or ("") a clear.
func (s *Store) bumpFieldRevision(ctx context.Context, tx pgx.Tx, field string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO field_revisions(queue, field, n) VALUES ($1, $2, 1)
		ON CONFLICT (queue, field) DO UPDATE SET n = field_revisions.n + 1`, s.name, field); err != nil {
		return fmt.Errorf("count field revision: %w", err)
	}
	return nil
}

// FieldRevision implements persist.FieldRevisioner: the queue's next index and the
// revisions of field and of clears, in one snapshot.
func (s *Store) FieldRevision(ctx context.Context, field string) (next, revision int64, err error) {
	err = s.viewQueue(ctx, func(tx pgx.Tx, st *queueState) error {
		next = st.next
		if err := tx.QueryRow(ctx, `SELECT COALESCE(SUM(n), 0)::bigint FROM field_revisions WHERE queue = $1 AND field IN ($2, '')`, s.name, field).Scan(&revision); err != nil {
			return fmt.Errorf("read field revision: %w", err)
		}
		return nil
	})
	return next, revision, err
}

var _ persist.GroupDropper = (*sampleSource)(nil)

// DropGroups implements persist.GroupDropper.
func (c *sampleSource) DropGroups(groups [][]int64) {
	c.droppedGroups = append(c.droppedGroups, groups...)
}

// DropUnused implements persist.GroupDropper.
func (c *sampleSource) DropUnused(indexes []int64) { c.unused = append(c.unused, indexes...) }

// drops reports whether the sampler left anything to drop.
func (c *sampleSource) drops() bool {
	return len(c.dropped) > 0 || len(c.droppedGroups) > 0 || len(c.unused) > 0
}

// dropGroups marks what GRPOGroupN dropped consumed for (partition, task), with the
// consumer's row locked: a group counts once in groups_dropped when any of its samples
// was not consumed yet, an unused sample once in samples_unused; samples of chosen
// (handed out by this transaction) are left alone.
func (s *Store) dropGroups(ctx context.Context, tx querier, partition, task string, groups [][]int64, unused []int64, chosen, consumed record.IndexSet) error {
	var grouped []int64
	for _, g := range groups {
		grouped = append(grouped, g...)
	}
	taken := consumed.Union(chosen)
	var nGroups int64
	for _, g := range groups {
		if len(record.SetOf(g).Minus(taken)) > 0 {
			nGroups++
		}
	}
	nUnused := record.SetOf(unused).Minus(taken).Minus(record.SetOf(grouped)).Count()
	drop := record.SetOf(append(grouped, unused...)).Minus(taken)
	if len(drop) == 0 {
		return nil
	}
	if err := insertSpans(ctx, tx, "consumed", "queue, partition, task", drop, s.name, partition, task); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE consumers SET groups_dropped = groups_dropped + $4, samples_unused = samples_unused + $5
		WHERE queue = $1 AND partition = $2 AND task = $3`, s.name, partition, task, nGroups, nUnused); err != nil {
		return fmt.Errorf("count dropped groups: %w", err)
	}
	return nil
}

var _ persist.GroupDropStore = (*Store)(nil)

// DropGroup implements persist.GroupDropStore, with the consumer's row locked (as
// GetMeta decides).
func (s *Store) DropGroup(ctx context.Context, task, partition string, indexes []int64) error {
	if err := persist.CheckDropGroup(task, partition, indexes); err != nil {
		return err
	}
	return s.consuming(ctx, task, partition, indexes, func(tx pgx.Tx, _, consumed record.IndexSet) error {
		return s.dropGroups(ctx, tx, partition, task, [][]int64{indexes}, nil, nil, consumed)
	})
}

var _ persist.PatchLocker = (*Store)(nil)

// LockPatches implements persist.PatchLocker with a PostgreSQL session advisory lock on the
// queue's partition (a 64-bit digest of "lakeshore.patch", the queue's catalog key and the
// partition), held on a connection of its own until the release: every process of every
// replica that opens the queue waits for it.
func (s *Store) LockPatches(ctx context.Context, partition string) (func(), error) {
	if err := s.calls.Enter(); err != nil {
		return nil, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		s.calls.Leave()
		return nil, s.failure(ctx, err)
	}
	sum := sha256.Sum256([]byte("lakeshore.patch\x00" + s.name + "\x00" + partition))
	key := int64(binary.BigEndian.Uint64(sum[:8]))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		conn.Release()
		s.calls.Leave()
		return nil, s.failure(ctx, fmt.Errorf("patch lock: %w", err))
	}
	return func() {
		// A failed unlock closes the connection, which releases the lock.
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, key); err != nil {
			_ = conn.Conn().Close(context.Background())
		}
		conn.Release()
		s.calls.Leave()
	}, nil
}
