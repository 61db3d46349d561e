package lakestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
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
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	idxOf := make([]int64, len(items))
	err = s.write(ctx, func(tx pgx.Tx) error {
		st, err := s.loadQueue(ctx, tx, true)
		if err != nil {
			return err
		}
		var newRecs, updRecs []persist.Record
		var newItems []int
		var updIdx []int64
		oldTags := make([]map[string]string, len(items))
		for i, it := range items {
			var idx int64
			var tj []byte
			err := tx.QueryRow(ctx, `SELECT idx, tags FROM kv WHERE queue = $1 AND partition = $2 AND key = $3`, s.name, partition, it.Key).Scan(&idx, &tj)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				newItems = append(newItems, i)
				newRecs = append(newRecs, it.Fields)
			case err != nil:
				return fmt.Errorf("read key: %w", err)
			default:
				idxOf[i] = idx
				oldTags[i] = map[string]string{}
				if err := json.Unmarshal(tj, &oldTags[i]); err != nil {
					return fmt.Errorf("%w: tags of key %q: %v", persist.ErrCorrupt, it.Key, err)
				}
				if len(it.Fields) > 0 {
					updRecs = append(updRecs, it.Fields)
					updIdx = append(updIdx, idx)
				}
			}
		}
		if len(newRecs) > 0 {
			p, err := filestore.PrepareRecords(newRecs)
			if err != nil {
				return err
			}
			lo, err := s.putRows(ctx, tx, st, partition, p)
			if err != nil {
				return err
			}
			for j, i := range newItems {
				idxOf[i] = lo + int64(j)
				tj, _ := json.Marshal(items[i].Tags)
				if _, err := tx.Exec(ctx, `INSERT INTO kv(queue, partition, key, idx, tags) VALUES ($1, $2, $3, $4, $5)`, s.name, partition, items[i].Key, idxOf[i], tj); err != nil {
					return fmt.Errorf("insert key: %w", err)
				}
			}
		}
		if len(updRecs) > 0 {
			idx, p, err := filestore.PrepareFieldUpdates(updIdx, updRecs)
			if err != nil {
				return err
			}
			if err := s.putFields(ctx, tx, st, partition, idx, p); err != nil {
				return err
			}
		}
		for i, it := range items {
			if oldTags[i] == nil || len(it.Tags) == 0 {
				continue
			}
			maps.Copy(oldTags[i], it.Tags)
			tj, _ := json.Marshal(oldTags[i])
			if _, err := tx.Exec(ctx, `UPDATE kv SET tags = $4 WHERE queue = $1 AND partition = $2 AND key = $3`, s.name, partition, it.Key, tj); err != nil {
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
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	entries := make([]persist.KVEntry, len(keys))
	err := s.view(ctx, func(tx pgx.Tx) error {
		st, err := s.loadQueue(ctx, tx, false)
		if err != nil {
			return err
		}
		sel, err := record.SelectFields(st.schema, fields)
		if err != nil {
			return err
		}
		var missing []string
		var idx []int64
		for i, k := range keys {
			e := &entries[i]
			*e = persist.KVEntry{Partition: partition, Key: k, Tags: map[string]string{}}
			var tj []byte
			err := tx.QueryRow(ctx, `SELECT idx, tags FROM kv WHERE queue = $1 AND partition = $2 AND key = $3`, s.name, partition, k).Scan(&e.Index, &tj)
			if errors.Is(err, pgx.ErrNoRows) {
				missing = append(missing, k)
				continue
			}
			if err != nil {
				return fmt.Errorf("read key: %w", err)
			}
			if err := json.Unmarshal(tj, &e.Tags); err != nil {
				return fmt.Errorf("%w: tags of key %q: %v", persist.ErrCorrupt, k, err)
			}
			idx = append(idx, e.Index)
		}
		if len(missing) > 0 {
			return &persist.NotFoundError{Partition: partition, Keys: missing}
		}
		set := record.SetOf(idx)
		sorted := set.First(int(set.Count()))
		recs, parts, err := s.load(ctx, tx, sorted)
		if err != nil {
			return err
		}
		b := filestore.NewBatch(sel, sorted, parts, recs)
		defer b.Release()
		rows, err := b.Rows()
		if err != nil {
			return err
		}
		by := make(map[int64]persist.Record, len(rows))
		for _, r := range rows {
			by[r.Index] = r.Fields
		}
		for i := range entries {
			entries[i].Fields = by[entries[i].Index]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// KVList implements persist.Store: the keys of partition ("" for all), in index order.
func (s *Store) KVList(ctx context.Context, partition string) ([]persist.KVEntry, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	sql := `SELECT partition, key, idx, tags FROM kv WHERE queue = $1 ORDER BY idx`
	args := []any{s.name}
	if partition != "" {
		sql = `SELECT partition, key, idx, tags FROM kv WHERE queue = $1 AND partition = $2 ORDER BY idx`
		args = append(args, partition)
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("lakestore: list keys: %w", err)
	}
	defer rows.Close()
	var out []persist.KVEntry
	for rows.Next() {
		e := persist.KVEntry{Tags: map[string]string{}}
		var tj []byte
		if err := rows.Scan(&e.Partition, &e.Key, &e.Index, &tj); err != nil {
			return nil, fmt.Errorf("lakestore: list keys: %w", err)
		}
		if err := json.Unmarshal(tj, &e.Tags); err != nil {
			return nil, fmt.Errorf("%w: tags of key %q: %v", persist.ErrCorrupt, e.Key, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// KVClear implements persist.Store: the keys' samples get tombstones and the keys are
// forgotten; unknown keys are ignored.
func (s *Store) KVClear(ctx context.Context, partition string, keys []string) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	return s.write(ctx, func(tx pgx.Tx) error {
		if _, err := s.loadQueue(ctx, tx, true); err != nil {
			return err
		}
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
