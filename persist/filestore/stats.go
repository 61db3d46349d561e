package filestore

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// metrics are this Queue handle's counters since Open.
type metrics struct {
	puts, gets, flushes, compactions atomic.Int64
	flushFailures                    atomic.Int64 // flushes that failed (rows left in the tail)
	lastFlush, lastFlushDur          atomic.Int64 // unix ns, ns
	commits, committedOps            atomic.Int64 // write transactions and the operations they carried
	recoveredFragments               atomic.Int64 // pending fragments of dead processes rolled back by Open
	orphansDeleted                   atomic.Int64 // files deleted by Open's recovery
}

// Stats returns the queue's counters and storage figures. Errors: ErrClosed, SQLite
// errors.
func (q *fileQueue) Stats(ctx context.Context) (persist.Stats, error) {
	if err := q.calls.Enter(); err != nil {
		return persist.Stats{}, err
	}
	defer q.calls.Leave()
	st := persist.Stats{
		Puts: q.metrics.puts.Load(), Gets: q.metrics.gets.Load(),
		Flushes: q.metrics.flushes.Load(), FlushFailures: q.metrics.flushFailures.Load(), Compactions: q.metrics.compactions.Load(),
		LastFlushDuration: time.Duration(q.metrics.lastFlushDur.Load()),
		Commits:           q.metrics.commits.Load(), CommittedOps: q.metrics.committedOps.Load(),
		RecoveredFragments: q.metrics.recoveredFragments.Load(), OrphansDeleted: q.metrics.orphansDeleted.Load(),
		Partitions: map[string]int64{}, ConsumedByTask: map[string]int64{},
	}
	if ns := q.metrics.lastFlush.Load(); ns != 0 {
		st.LastFlush = time.Unix(0, ns)
	}
	err := q.view(ctx, func(tx queryer) error {
		for _, m := range []struct {
			key  string
			into *int64
		}{
			{"next_index", &st.NextIndex}, {"tail_rows", &st.TailRows}, {"manifest_version", &st.ManifestVersion},
			{"weight_version", &st.WeightVersion}, {"stale_dropped", &st.StaleDropped},
			{"groups_dropped", &st.GroupsDropped}, {"samples_unused", &st.SamplesUnused},
		} {
			var err error
			if *m.into, err = metaGet(ctx, tx, m.key); err != nil {
				return err
			}
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
