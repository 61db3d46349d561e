package persist

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"
)

// metrics are this Queue handle's counters since Open.
type metrics struct {
	puts, gets, flushes, compactions atomic.Int64
	lastFlush, lastFlushDur          atomic.Int64 // unix ns, ns
	commits, committedOps            atomic.Int64 // write transactions and the operations they carried
	recoveredFragments               atomic.Int64 // pending fragments of dead processes rolled back by Open
	orphansDeleted                   atomic.Int64 // files deleted by Open's recovery
}

// Stats is a snapshot of a queue's counters and storage.
type Stats struct {
	// Counters of this Queue handle (this process) since Open.
	Puts        int64 // records put (Put, PutBatch, PutPartition, PutFields, KV puts)
	Gets        int64 // rows returned by Get, Stream, GetData and GetBatch
	Flushes     int64 // flushes that wrote at least one fragment
	Compactions int64 // compactions that replaced fragments
	// LastFlush is when this handle last completed a flush (zero if never), and
	// LastFlushDuration how long writing its fragments and publishing them took.
	LastFlush         time.Time
	LastFlushDuration time.Duration
	// Commits is how many write transactions this handle committed, and CommittedOps
	// how many operations (puts, reads handing out samples, ...) they carried: their
	// ratio is the group-commit batching.
	Commits      int64
	CommittedOps int64
	// RecoveredFragments is how many unfinished flushes or compactions of crashed
	// processes this handle's Open rolled back, and OrphansDeleted how many files it
	// deleted that the manifest did not name.
	RecoveredFragments int64
	OrphansDeleted     int64

	// Shared state, as stored in meta.db (all processes).
	NextIndex        int64            // the index the next put gets
	Len              int64            // readable records: NextIndex minus cleared ones
	Cleared          int64            // records cleared (tombstoned)
	TailRows         int64            // rows (and field updates) in the durable tail, not yet in fragments
	FragmentRows     int64            // rows in live fragments (row and field fragments)
	Fragments        int              // live fragments
	FragmentBytes    int64            // bytes of live fragment files
	ManifestVersion  int64            // grows with every flush and compaction
	Partitions       map[string]int64 // partition → records put into it (cleared ones included)
	ConsumedByTask   map[string]int64 // "partition/task" → samples marked consumed
	PendingFragments int              // flushes or compactions in progress (or of crashed processes)
}

// Stats returns the queue's counters and storage figures. Errors: ErrClosed, SQLite
// errors.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	if err := q.enter(); err != nil {
		return Stats{}, err
	}
	defer q.leave()
	st := Stats{
		Puts: q.metrics.puts.Load(), Gets: q.metrics.gets.Load(),
		Flushes: q.metrics.flushes.Load(), Compactions: q.metrics.compactions.Load(),
		LastFlushDuration: time.Duration(q.metrics.lastFlushDur.Load()),
		Commits:           q.metrics.commits.Load(), CommittedOps: q.metrics.committedOps.Load(),
		RecoveredFragments: q.metrics.recoveredFragments.Load(), OrphansDeleted: q.metrics.orphansDeleted.Load(),
		Partitions: map[string]int64{}, ConsumedByTask: map[string]int64{},
	}
	if ns := q.metrics.lastFlush.Load(); ns != 0 {
		st.LastFlush = time.Unix(0, ns)
	}
	err := q.view(ctx, func(tx queryer) error {
		var err error
		if st.NextIndex, err = metaGet(ctx, tx, "next_index"); err != nil {
			return err
		}
		if st.TailRows, err = metaGet(ctx, tx, "tail_rows"); err != nil {
			return err
		}
		if st.ManifestVersion, err = metaGet(ctx, tx, "manifest_version"); err != nil {
			return err
		}
		var cleared, frows, fbytes sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT SUM(hi - lo) FROM tombstones`).Scan(&cleared); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		st.Cleared = cleared.Int64
		st.Len = st.NextIndex - st.Cleared
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), SUM(rows), SUM(bytes) FROM fragments WHERE state = 1`).Scan(&st.Fragments, &frows, &fbytes); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		st.FragmentRows, st.FragmentBytes = frows.Int64, fbytes.Int64
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fragments WHERE state = 0`).Scan(&st.PendingFragments); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		if err := scanCounts(ctx, tx, `SELECT partition, SUM(hi - lo) FROM segments GROUP BY partition`, st.Partitions); err != nil {
			return err
		}
		return scanCounts(ctx, tx, `SELECT partition || '/' || task, SUM(hi - lo) FROM consumed GROUP BY partition, task`, st.ConsumedByTask)
	})
	return st, err
}

func scanCounts(ctx context.Context, tx queryer, query string, into map[string]int64) error {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		into[k] = n
	}
	return rows.Err()
}
