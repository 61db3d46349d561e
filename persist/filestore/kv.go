package filestore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
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
	if err := q.enter(); err != nil {
		return nil, err
	}
	defer q.leave()
	idxOf := make([]int64, len(items))
	err = q.w.do(ctx, func(t *wtx) error {
		if err := t.checkSchema(all.kinds, all.bigInts); err != nil {
			return err
		}
		var newRecs, updRecs []record.NormRecord
		var newItems, updItems []int
		var updIdx []int64
		oldTags := make([]map[string]string, len(items))
		for i, it := range items {
			var idx int64
			var tj string
			err := t.queryRow(`SELECT idx, tags FROM kv WHERE partition = ? AND key = ?`, partition, it.Key).Scan(&idx, &tj)
			switch {
			case isNoRows(err):
				newItems = append(newItems, i)
				newRecs = append(newRecs, norm[i])
			case err != nil:
				return fmt.Errorf("read key: %w", err)
			default:
				idxOf[i] = idx
				oldTags[i] = map[string]string{}
				if err := json.Unmarshal([]byte(tj), &oldTags[i]); err != nil {
					return fmt.Errorf("%w: tags of key %q: %v", persist.ErrCorrupt, it.Key, err)
				}
				if len(norm[i]) > 0 {
					updItems = append(updItems, i)
					updRecs = append(updRecs, norm[i])
					updIdx = append(updIdx, idx)
				}
			}
		}
		if len(newRecs) > 0 {
			p, err := prepareNorm(partition, newRecs)
			if err != nil {
				return err
			}
			lo, err := t.putRows(p)
			if err != nil {
				return err
			}
			for j, i := range newItems {
				idxOf[i] = lo + int64(j)
				tj, _ := json.Marshal(items[i].Tags)
				if _, err := t.exec(`INSERT INTO kv(partition, key, idx, tags) VALUES (?, ?, ?, ?)`, partition, items[i].Key, idxOf[i], string(tj)); err != nil {
					return fmt.Errorf("insert key: %w", err)
				}
			}
		}
		if len(updRecs) > 0 {
			p, err := prepareNorm(partition, updRecs)
			if err != nil {
				return err
			}
			if err := t.putFields(p, updIdx); err != nil {
				return err
			}
		}
		for i, it := range items {
			if oldTags[i] == nil || len(it.Tags) == 0 {
				continue
			}
			maps.Copy(oldTags[i], it.Tags)
			tj, _ := json.Marshal(oldTags[i])
			if _, err := t.exec(`UPDATE kv SET tags = ? WHERE partition = ? AND key = ?`, string(tj), partition, it.Key); err != nil {
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
	if err := q.enter(); err != nil {
		return nil, err
	}
	defer q.leave()
	entries := make([]persist.KVEntry, len(keys))
	b, err := q.readBatch(ctx, fields, func(tx queryer, s *snapshot) ([]int64, error) {
		var missing []string
		var idx []int64
		for i, k := range keys {
			e := &entries[i]
			*e = persist.KVEntry{Partition: partition, Key: k, Tags: map[string]string{}}
			var tj string
			err := tx.QueryRowContext(ctx, `SELECT idx, tags FROM kv WHERE partition = ? AND key = ?`, partition, k).Scan(&e.Index, &tj)
			if isNoRows(err) {
				missing = append(missing, k)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("read key: %w", err)
			}
			if err := json.Unmarshal([]byte(tj), &e.Tags); err != nil {
				return nil, fmt.Errorf("%w: tags of key %q: %v", persist.ErrCorrupt, k, err)
			}
			idx = append(idx, e.Index)
		}
		if len(missing) > 0 {
			return nil, &persist.NotFoundError{Partition: partition, Keys: missing}
		}
		return record.SortedUnique(idx), nil
	})
	if err != nil {
		return nil, err
	}
	defer b.Release()
	rows, err := b.Rows()
	if err != nil {
		return nil, err
	}
	byIdx := make(map[int64]persist.Record, len(rows))
	for _, r := range rows {
		byIdx[r.Index] = r.Fields
	}
	for i := range entries {
		entries[i].Fields = byIdx[entries[i].Index]
	}
	return entries, nil
}

// List returns the keys of partition ("" for every partition) with their indexes and
// tags, in index order. Errors: ErrClosed, SQLite errors.
func (kv *fileKV) List(ctx context.Context, partition string) ([]persist.KVEntry, error) {
	q := kv.q
	if err := q.enter(); err != nil {
		return nil, err
	}
	defer q.leave()
	query := `SELECT partition, key, idx, tags FROM kv ORDER BY idx`
	var args []any
	if partition != "" {
		query = `SELECT partition, key, idx, tags FROM kv WHERE partition = ? ORDER BY idx`
		args = append(args, partition)
	}
	rows, err := q.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []persist.KVEntry
	for rows.Next() {
		e := persist.KVEntry{Tags: map[string]string{}}
		var tj string
		if err := rows.Scan(&e.Partition, &e.Key, &e.Index, &tj); err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		if err := json.Unmarshal([]byte(tj), &e.Tags); err != nil {
			return nil, fmt.Errorf("%w: tags of key %q: %v", persist.ErrCorrupt, e.Key, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Clear removes keys from partition: their samples get tombstones (they vanish from
// Get, Stream, GetMeta and Len; every other index stays as it was) and the keys are
// forgotten. Keys that do not exist are ignored, so Clear is idempotent. Errors:
// *InvalidError, ErrClosed.
func (kv *fileKV) Clear(ctx context.Context, partition string, keys []string) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	q := kv.q
	if err := q.enter(); err != nil {
		return err
	}
	defer q.leave()
	return q.w.do(ctx, func(t *wtx) error {
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
