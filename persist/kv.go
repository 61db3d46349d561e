package persist

import "context"

// KVView is a key-value view of a queue: each key of a partition names one sample (one
// global index). A key keeps its index for as long as it exists; putting it again
// merges the new fields into the sample (a new value of a field replaces the old one)
// and the new tags into its tags; a put with no fields changes only the tags. Clear
// writes tombstones: the cleared samples disappear from reads, no other sample's index
// ever shifts, and clearing is idempotent. A key put again after it was cleared gets a
// new index. Keys and tags are kept by the store (the file store: table kv of
// meta.db), shared by every process.
type KVView struct {
	s Store
}

// KV returns the key-value view of q.
func KV(q *Queue) *KVView { return &KVView{s: q.s} }

// Put stores fields and tags under key in partition and returns its global index.
// Errors as for BatchPut.
func (kv *KVView) Put(ctx context.Context, partition, key string, fields Record, tags map[string]string) (int64, error) {
	idx, err := kv.BatchPut(ctx, partition, []string{key}, []Record{fields}, []map[string]string{tags})
	if err != nil {
		return -1, err
	}
	return idx[0], nil
}

// BatchPut stores fields[i] and tags[i] under keys[i] (fields and tags may be nil, or
// hold nil entries). New keys get new samples (consecutive indexes, in key order);
// existing keys are merged as described on KVView. A key given twice is merged in
// order. Durable when it returns; atomic. Errors: *InvalidError (empty key, lengths
// differ), *SchemaError, *UnsupportedValueError, ErrClosed.
func (kv *KVView) BatchPut(ctx context.Context, partition string, keys []string, fields []Record, tags []map[string]string) ([]int64, error) {
	return kv.s.KVPut(ctx, partition, keys, fields, tags)
}

// BatchGet reads fields (nil: all) of keys in partition, in the order of keys. Errors:
// *NotFoundError naming every missing (or cleared) key, *InvalidError, ErrClosed.
func (kv *KVView) BatchGet(ctx context.Context, partition string, keys []string, fields []string) ([]KVEntry, error) {
	return kv.s.KVGet(ctx, partition, keys, fields)
}

// List returns the keys of partition ("" for every partition) with their indexes and
// tags, in index order. Errors: *InvalidError for a partition no put can name
// (CheckPartitionFilter), ErrClosed, storage errors.
func (kv *KVView) List(ctx context.Context, partition string) ([]KVEntry, error) {
	return kv.s.KVList(ctx, partition)
}

// KVPager is implemented by stores that list keys a page at a time (the file store, the
// distributed store, the HTTP store): KVListPage returns the keys of partition ("" for
// every partition) whose index is ≥ offset, in index order, at most limit of them when
// limit > 0 (every one when limit is 0); a page of fewer than limit keys is the last.
// GET …/kv answers a page with it, so listing a large queue over HTTP never reads every
// key into the server's memory at once. Errors: as for KVList.
type KVPager interface {
	KVListPage(ctx context.Context, partition string, offset int64, limit int) ([]KVEntry, error)
}

// Clear removes keys from partition: their samples get tombstones (they vanish from
// Get, Stream, GetMeta and Len; every other index stays as it was) and the keys are
// forgotten. Keys that do not exist are ignored, so Clear is idempotent. Errors:
// *InvalidError, ErrClosed.
func (kv *KVView) Clear(ctx context.Context, partition string, keys []string) error {
	return kv.s.KVClear(ctx, partition, keys)
}
