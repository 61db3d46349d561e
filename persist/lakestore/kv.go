package lakestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/internal/kvput"
)

// KVPut implements persist.Store: new keys get new samples (a put), known keys get a
// field update, and tags are merged — in one catalog transaction.
func (s *Store) KVPut(ctx context.Context, partition string, keys []string, fields []persist.Record, tags []map[string]string) ([]int64, error) {
	items, err := persist.MergeKVPut(partition, keys, fields, tags)
	if err != nil {
		return nil, err
	}
	all := make([]persist.Record, len(items))
	for i, it := range items {
		all[i] = it.Fields
	}
	if _, err := filestore.PrepareRecords(all); err != nil { // every error before the transaction
		return nil, err
	}
	if err := s.calls.Enter(); err != nil {
		return nil, err
	}
	defer s.calls.Leave()
	idxOf := make([]int64, len(items))
	err = s.write(ctx, func(tx pgx.Tx) error {
		st, err := s.loadQueue(ctx, tx, true)
		if err != nil {
			return err
		}
		plan, err := kvput.Split(items, all, s.kvLookup(ctx, tx, partition))
		if err != nil {
			return err
		}
		idxOf = plan.Index
		if len(plan.NewRecords) > 0 {
			p, err := filestore.PrepareRecords(plan.NewRecords)
			if err != nil {
				return err
			}
			lo, err := s.putRows(ctx, tx, st, partition, p)
			if err != nil {
				return err
			}
			for j, i := range plan.New {
				idxOf[i] = lo + int64(j)
				if _, err := tx.Exec(ctx, `INSERT INTO kv(queue, partition, key, idx, tags) VALUES ($1, $2, $3, $4, $5)`, s.name, partition, items[i].Key, idxOf[i], kvput.EncodeTags(items[i].Tags)); err != nil {
					return fmt.Errorf("insert key: %w", err)
				}
			}
		}
		if len(plan.UpdateRecords) > 0 {
			idx, p, err := filestore.PrepareFieldUpdates(plan.Update, plan.UpdateRecords)
			if err != nil {
				return err
			}
			if err := s.putFields(ctx, tx, st, partition, idx, p); err != nil {
				return err
			}
		}
		for i, tags := range plan.Merged(items) {
			if tags == nil {
				continue
			}
			if _, err := tx.Exec(ctx, `UPDATE kv SET tags = $4 WHERE queue = $1 AND partition = $2 AND key = $3`, s.name, partition, items[i].Key, tags); err != nil {
				return fmt.Errorf("update tags: %w", err)
			}
		}
		return s.saveQueue(ctx, tx, st)
	})
	if err != nil {
		return nil, err
	}
	s.puts.Add(int64(len(items)))
	s.noteUnflushed(int64(len(items)))
	return persist.KVPutIndexes(keys, items, idxOf), nil
}

// KVGet implements persist.Store. Errors: *persist.NotFoundError naming every missing
// (or cleared) key, *persist.InvalidError, ErrClosed.
func (s *Store) KVGet(ctx context.Context, partition string, keys []string, fields []string) ([]persist.KVEntry, error) {
	if err := persist.CheckName("partition", partition); err != nil {
		return nil, err
	}
	entries := make([]persist.KVEntry, len(keys))
	err := s.viewQueue(ctx, func(tx pgx.Tx, st *queueState) error {
		sel, err := record.SelectFields(st.schema, fields)
		if err != nil {
			return err
		}
		var idx []int64
		if entries, idx, err = kvput.Find(partition, keys, s.kvLookup(ctx, tx, partition)); err != nil {
			return err
		}
		set := record.SetOf(idx)
		sorted := set.First(int(set.Count()))
		recs, parts, err := s.load(ctx, tx, sorted)
		if err != nil {
			return err
		}
		b := filestore.NewBatch(sel, sorted, parts, recs)
		defer b.Release()
		return kvput.Fill(entries, b)
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// KVList implements persist.Store: the keys of partition ("" for all), in index order.
func (s *Store) KVList(ctx context.Context, partition string) ([]persist.KVEntry, error) {
	return s.KVListPage(ctx, partition, 0, 0)
}

var _ persist.KVPager = (*Store)(nil)

// KVListPage implements persist.KVPager: KVList from index offset on, at most limit keys
// when limit > 0.
func (s *Store) KVListPage(ctx context.Context, partition string, offset int64, limit int) ([]persist.KVEntry, error) {
	if err := persist.CheckPartitionFilter(partition); err != nil {
		return nil, err
	}
	if err := s.calls.Enter(); err != nil {
		return nil, err
	}
	defer s.calls.Leave()
	sql := `SELECT partition, key, idx, tags FROM kv WHERE queue = $1 AND idx >= $2`
	args := []any{s.name, offset}
	if partition != "" {
		sql += ` AND partition = $3`
		args = append(args, partition)
	}
	sql += ` ORDER BY idx`
	if limit > 0 {
		sql += fmt.Sprintf(` LIMIT %d`, limit)
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.failure(ctx, fmt.Errorf("lakestore: list keys: %w", err))
	}
	defer rows.Close()
	entries, err := kvput.Entries(rows, "lakestore: list keys")
	return entries, s.failure(ctx, err)
}

// KVClear implements persist.Store: the keys' samples get tombstones and the keys are
// forgotten; unknown keys are ignored.
func (s *Store) KVClear(ctx context.Context, partition string, keys []string) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	if err := kvput.CheckKeys(keys); err != nil {
		return err
	}
	return s.writeLocked(ctx, func(tx pgx.Tx) error {
		var idx []int64
		for _, k := range keys {
			var i int64
			err := tx.QueryRow(ctx, `DELETE FROM kv WHERE queue = $1 AND partition = $2 AND key = $3 RETURNING idx`, s.name, partition, k).Scan(&i)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("delete key: %w", err)
			}
			idx = append(idx, i)
		}
		if len(idx) == 0 {
			return nil
		}
		if err := s.addTombstones(ctx, tx, record.SetOf(idx)); err != nil {
			return err
		}
		return s.notify(ctx, tx)
	})
}

// kvLookup finds the keys of partition in tx.
func (s *Store) kvLookup(ctx context.Context, tx pgx.Tx, partition string) kvput.Lookup {
	return func(key string) (int64, []byte, bool, error) {
		var idx int64
		var tags []byte
		err := tx.QueryRow(ctx, `SELECT idx, tags FROM kv WHERE queue = $1 AND partition = $2 AND key = $3`, s.name, partition, key).Scan(&idx, &tags)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, nil, false, nil
		}
		return idx, tags, err == nil, err
	}
}
