// Package kvput holds what every data store does in a KV put and list besides its SQL:
// splitting a put's keys into new ones (a put of samples) and known ones (a field update,
// tags merged), and the stored form of a key's tags (a JSON object). The file store and
// the distributed store share it; it is internal so that it is not part of the data SDK.
package kvput

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// Plan is a KV put's items (persist.MergeKVPut) split by what the store holds for their
// keys. R is the store's form of an item's fields.
type Plan[R any] struct {
	// Index is, per item, the stored index of a known key; the store sets those of New
	// once it put them.
	Index []int64
	// New are the items whose key is new, in order, and NewRecords their fields.
	New        []int
	NewRecords []R
	// Update are the stored indexes of the known keys whose item has fields, in order,
	// and UpdateRecords those fields.
	Update        []int64
	UpdateRecords []R
	// OldTags are, per item, the tags stored for a known key (nil for a new key).
	OldTags []map[string]string
}

// Split looks up each item's key (lookup: its stored index and tags, found false for a
// new key) and splits the items: records[i] are item i's fields, put for a new key and
// written as a field update for a known key when there are any. Errors: lookup's;
// persist.ErrCorrupt for stored tags that are not a JSON object.
func Split[R interface {
	~[]record.FieldValue | ~map[string]any
}](items []*persist.KVItem, records []R, lookup Lookup) (*Plan[R], error) {
	p := &Plan[R]{Index: make([]int64, len(items)), OldTags: make([]map[string]string, len(items))}
	for i, it := range items {
		idx, tags, found, err := lookup(it.Key)
		switch {
		case err != nil:
			return nil, fmt.Errorf("read key: %w", err)
		case !found:
			p.New = append(p.New, i)
			p.NewRecords = append(p.NewRecords, records[i])
		default:
			p.Index[i] = idx
			if p.OldTags[i], err = DecodeTags(it.Key, tags); err != nil {
				return nil, err
			}
			if len(records[i]) > 0 {
				p.UpdateRecords = append(p.UpdateRecords, records[i])
				p.Update = append(p.Update, idx)
			}
		}
	}
	return p, nil
}

// Merged returns the stored tags of each known key whose item brings tags, merged with
// them (a tag of the item replaces a stored one), encoded: write[i] for item i, nil where
// nothing changes.
func (p *Plan[R]) Merged(items []*persist.KVItem) (write [][]byte) {
	write = make([][]byte, len(items))
	for i, it := range items {
		if p.OldTags[i] == nil || len(it.Tags) == 0 {
			continue
		}
		maps.Copy(p.OldTags[i], it.Tags)
		write[i] = EncodeTags(p.OldTags[i])
	}
	return write
}

// EncodeTags is the stored form of a key's tags: a JSON object (null for none).
func EncodeTags(tags map[string]string) []byte {
	b, _ := json.Marshal(tags)
	return b
}

// DecodeTags reads the stored tags of key (never nil). Errors: persist.ErrCorrupt naming
// the key when they are not a JSON object.
func DecodeTags(key string, stored []byte) (map[string]string, error) {
	tags := map[string]string{}
	if err := json.Unmarshal(stored, &tags); err != nil {
		return nil, fmt.Errorf("%w: tags of key %q: %v", persist.ErrCorrupt, key, err)
	}
	return tags, nil
}

// Rows are a store's rows of (partition, key, index, tags).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Entries reads the KV entries of rows (partition, key, index, tags), in their order; what
// prefixes a read error ("list keys"). Errors: the rows', DecodeTags's.
func Entries(rows Rows, what string) ([]persist.KVEntry, error) {
	var out []persist.KVEntry
	for rows.Next() {
		var e persist.KVEntry
		var tags []byte
		if err := rows.Scan(&e.Partition, &e.Key, &e.Index, &tags); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		var err error
		if e.Tags, err = DecodeTags(e.Key, tags); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Lookup finds a key's stored index and tags (found false: the key is not stored).
type Lookup func(key string) (index int64, tags []byte, found bool, err error)

// Find returns the entries of keys in partition, in the order of keys (their fields left
// for the store to read), and their stored indexes, in the same order. Errors: lookup's
// ("read key: …"), *persist.NotFoundError naming every key not stored, DecodeTags's,
// CheckKeys's.
func Find(partition string, keys []string, lookup Lookup) ([]persist.KVEntry, []int64, error) {
	if err := CheckKeys(keys); err != nil {
		return nil, nil, err
	}
	entries := make([]persist.KVEntry, len(keys))
	var missing []string
	var idx []int64
	for i, k := range keys {
		index, tags, found, err := lookup(k)
		switch {
		case err != nil:
			return nil, nil, fmt.Errorf("read key: %w", err)
		case !found:
			missing = append(missing, k)
			continue
		}
		e := persist.KVEntry{Partition: partition, Key: k, Index: index}
		if e.Tags, err = DecodeTags(k, tags); err != nil {
			return nil, nil, err
		}
		entries[i] = e
		idx = append(idx, index)
	}
	if len(missing) > 0 {
		return nil, nil, &persist.NotFoundError{Partition: partition, Keys: missing}
	}
	return entries, idx, nil
}

// Fill sets the Fields of each entry (Find) to the batch's row of its index (nil when the
// batch has none). Errors: as record.Batch.Rows.
func Fill(entries []persist.KVEntry, b *record.Batch) error {
	rows, err := b.Rows()
	if err != nil {
		return err
	}
	byIndex := make(map[int64]persist.Record, len(rows))
	for _, r := range rows {
		byIndex[r.Index] = r.Fields
	}
	for i := range entries {
		entries[i].Fields = byIndex[entries[i].Index]
	}
	return nil
}

// CheckKeys checks each key of a get or a clear by persist.CheckKey (a put's are checked
// by persist.MergeKVPut), before a store looks any up: a key no put could store (a NUL
// byte, which PostgreSQL's text refuses with an error of its own) is invalid, not
// missing. Errors: *persist.InvalidError naming key.
func CheckKeys(keys []string) error {
	for _, k := range keys {
		if err := persist.CheckKey(k); err != nil {
			return err
		}
	}
	return nil
}
