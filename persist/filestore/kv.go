package filestore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/internal/kvput"
)

// KVView is a key-value view of a queue: each key of a partition names one sample (one
// global index). A key keeps its index for as long as it exists; putting it again
// merges the new fields into the sample (a new value of a field replaces the old one)
// and the new tags into its tags; a put with no fields changes only the tags. Clear
// writes tombstones: the cleared samples disappear from reads, no other sample's index
// ever shifts, and clearing is idempotent. A key put again after it was cleared gets a
// new index. Keys and tags live in meta.db (table kv), shared by every process.
type fileKV struct {
	q *fileQueue
}

// KV returns the key-value view of q.
func fileKVOf(q *fileQueue) *fileKV { return &fileKV{q: q} }

// BatchPut stores fields[i] and tags[i] under keys[i] (fields and tags may be nil, or
// hold nil entries). New keys get new samples (consecutive indexes, in key order);
// existing keys are merged as described on KVView. A key given twice is merged in
// order. Durable when it returns; atomic. Errors: *InvalidError (empty key, lengths
// differ), *SchemaError, *UnsupportedValueError, ErrClosed.
func (kv *fileKV) BatchPut(ctx context.Context, partition string, keys []string, fields []persist.Record, tags []map[string]string) ([]int64, error) {
	items, err := persist.MergeKVPut(partition, keys, fields, tags)
	if err != nil {
		return nil, err
	}
	norm := make([]record.NormRecord, len(items))
	for i, it := range items {
		nr, err := record.NormalizeRecord(it.Fields)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", it.Key, err)
		}
		norm[i] = nr
	}
	all, err := prepareNorm(partition, norm)
	if err != nil {
		return nil, err
	}
	q := kv.q
	if err := q.calls.Enter(); err != nil {
		return nil, err
	}
	defer q.calls.Leave()
	idxOf := make([]int64, len(items))
	err = q.w.do(ctx, func(t *wtx) error {
		if err := t.checkSchema(all.kinds, all.bigInts); err != nil {
			return err
		}
		plan, err := kvput.Split(items, norm, kvLookup(partition, t.queryRow))
		if err != nil {
			return err
		}
		idxOf = plan.Index
		if len(plan.NewRecords) > 0 {
			p, err := prepareNorm(partition, plan.NewRecords)
			if err != nil {
				return err
			}
			lo, err := t.putRows(p)
			if err != nil {
				return err
			}
			for j, i := range plan.New {
				idxOf[i] = lo + int64(j)
				if _, err := t.exec(`INSERT INTO kv(partition, key, idx, tags) VALUES (?, ?, ?, ?)`, partition, items[i].Key, idxOf[i], string(kvput.EncodeTags(items[i].Tags))); err != nil {
					return fmt.Errorf("insert key: %w", err)
				}
			}
		}
		if len(plan.UpdateRecords) > 0 {
			p, err := prepareNorm(partition, plan.UpdateRecords)
			if err != nil {
				return err
			}
			if err := t.putFields(p, plan.Update); err != nil {
				return err
			}
		}
		for i, tags := range plan.Merged(items) {
			if tags == nil {
				continue
			}
			if _, err := t.exec(`UPDATE kv SET tags = ? WHERE partition = ? AND key = ?`, string(tags), partition, items[i].Key); err != nil {
				return fmt.Errorf("update tags: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	q.metrics.puts.Add(int64(len(items)))
	return persist.KVPutIndexes(keys, items, idxOf), nil
}

// BatchGet reads fields (nil: all) of keys in partition, in the order of keys. Errors:
// *NotFoundError naming every missing (or cleared) key, *InvalidError, ErrClosed.
func (kv *fileKV) BatchGet(ctx context.Context, partition string, keys []string, fields []string) ([]persist.KVEntry, error) {
	if err := persist.CheckName("partition", partition); err != nil {
		return nil, err
	}
	q := kv.q
	if err := q.calls.Enter(); err != nil {
		return nil, err
	}
	defer q.calls.Leave()
	var entries []persist.KVEntry
	b, err := q.readBatch(ctx, fields, func(tx queryer, s *snapshot) ([]int64, error) {
		var idx []int64
		var err error
		entries, idx, err = kvput.Find(partition, keys, kvLookup(partition, func(query string, args ...any) *sql.Row {
			return tx.QueryRowContext(ctx, query, args...)
		}))
		if err != nil {
			return nil, err
		}
		return record.SortedUnique(idx), nil
	})
	if err != nil {
		return nil, err
	}
	defer b.Release()
	if err := kvput.Fill(entries, b); err != nil {
		return nil, err
	}
	return entries, nil
}

// List returns the keys of partition ("" for every partition) with their indexes and
// tags, in index order. Errors: *InvalidError (persist.CheckPartitionFilter), ErrClosed,
// SQLite errors.
func (kv *fileKV) List(ctx context.Context, partition string) ([]persist.KVEntry, error) {
	return kv.ListPage(ctx, partition, 0, 0)
}

// ListPage is List from index offset on, at most limit keys when limit > 0
// (persist.KVPager).
func (kv *fileKV) ListPage(ctx context.Context, partition string, offset int64, limit int) ([]persist.KVEntry, error) {
	if err := persist.CheckPartitionFilter(partition); err != nil {
		return nil, err
	}
	q := kv.q
	if err := q.calls.Enter(); err != nil {
		return nil, err
	}
	defer q.calls.Leave()
	query := `SELECT partition, key, idx, tags FROM kv WHERE idx >= ?`
	args := []any{offset}
	if partition != "" {
		query += ` AND partition = ?`
		args = append(args, partition)
	}
	query += ` ORDER BY idx`
	if limit > 0 {
		query += ` LIMIT +?`
		args = append(args, limit)
	}
	rows, err := q.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	return kvput.Entries(rows, "list keys")
}

// Clear removes keys from partition: their samples get tombstones (they vanish from
// Get, Stream, GetMeta and Len; every other index stays as it was) and the keys are
// forgotten. Keys that do not exist are ignored, so Clear is idempotent. Errors:
// *InvalidError, ErrClosed.
func (kv *fileKV) Clear(ctx context.Context, partition string, keys []string) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	if err := kvput.CheckKeys(keys); err != nil {
		return err
	}
	q := kv.q
	return q.write(ctx, func(t *wtx) error {
		var idx []int64
		for _, k := range keys {
			var i int64
			err := t.queryRow(`SELECT idx FROM kv WHERE partition = ? AND key = ?`, partition, k).Scan(&i)
			if isNoRows(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("read key: %w", err)
			}
			idx = append(idx, i)
			if _, err := t.exec(`DELETE FROM kv WHERE partition = ? AND key = ?`, partition, k); err != nil {
				return fmt.Errorf("delete key: %w", err)
			}
		}
		if len(idx) == 0 {
			return nil
		}
		sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
		return t.addTombstones(record.SetOf(idx))
	})
}

// addTombstones merges s into the tombstones.
func (t *wtx) addTombstones(s record.IndexSet) error {
	if err := mergeSpans(t, s, `SELECT lo, hi FROM tombstones WHERE hi >= ? AND lo <= ?`,
		`DELETE FROM tombstones WHERE lo = ?`, `INSERT INTO tombstones(lo, hi) VALUES (?, ?)`); err != nil {
		return err
	}
	if err := t.bumpFieldRevision(""); err != nil { // Replay's weights forget cleared records
		return err
	}
	return metaAdd(t.ctx, t, "tomb_version", 1) // readers cache tombstones by this version
}

// kvLookup finds the keys of partition with queryRow (the writer's, or a read snapshot's).
func kvLookup(partition string, queryRow func(query string, args ...any) *sql.Row) kvput.Lookup {
	return func(key string) (int64, []byte, bool, error) {
		var idx int64
		var tags []byte
		err := queryRow(`SELECT idx, tags FROM kv WHERE partition = ? AND key = ?`, partition, key).Scan(&idx, &tags)
		if isNoRows(err) {
			return 0, nil, false, nil
		}
		return idx, tags, err == nil, err
	}
}
