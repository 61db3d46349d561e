package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist/internal/tail"
)

// This file exports the request checks every store shares with the SDK, so that every
// store validates a call and shards a queue the same way.

// taskRule is the rule of a task name, a key of every store's consumption (PostgreSQL's
// text holds neither a NUL byte nor invalid UTF-8, and a C string ends at a NUL).
const taskRule = `1–256 bytes of valid UTF-8 without the byte \x00`

// CheckTask checks a consumption task name (taskRule). Errors: *InvalidError naming
// task.
func CheckTask(task string) error {
	if !validTask(task) {
		return &InvalidError{Field: "task", Value: task, Rule: taskRule}
	}
	return nil
}

func validTask(task string) bool {
	return task != "" && len(task) <= 256 && storableText(task)
}

// storableText reports whether s is valid UTF-8 without the byte \x00: what every store
// can keep as a key (PostgreSQL's text and jsonb hold neither a NUL byte nor invalid UTF-8,
// and a C string ends at a NUL). Task names, KV keys and KV tags are held to it.
func storableText(s string) bool {
	return !strings.Contains(s, "\x00") && utf8.ValidString(s)
}

// CheckFieldNames checks the field names a read asks for (MetaRequest.Fields, Produced's
// fields) by the rule of a record's field name (record.CheckFieldName): a name no record
// can have is a bad argument, refused the same way by every store, never a field that
// is merely not produced yet. Errors: *InvalidError naming fields.
func CheckFieldNames(names []string) error {
	for _, name := range names {
		if err := record.CheckFieldName(name); err != nil {
			var ie *InvalidError
			if errors.As(err, &ie) {
				return &InvalidError{Field: "fields", Value: name, Rule: ie.Rule}
			}
			return err
		}
	}
	return nil
}

// CheckTags checks the tags of a KV put: keys and values of valid UTF-8 without the
// byte \x00 (the stores keep tags as JSON, which PostgreSQL's jsonb holds no NUL of
// and which would replace invalid UTF-8). Errors: *InvalidError naming tags.
func CheckTags(tags map[string]string) error {
	for k, v := range tags {
		for _, s := range []string{k, v} {
			if !storableText(s) {
				return &InvalidError{Field: "tags", Value: s, Rule: `keys and values of valid UTF-8 without the byte \x00`}
			}
		}
	}
	return nil
}

// CheckTaskPartition checks a consumption call's task name (CheckTask) and its partition
// name (CheckName). Errors: *InvalidError naming the first bad one.
func CheckTaskPartition(task, partition string) error {
	if err := CheckTask(task); err != nil {
		return err
	}
	return CheckName("partition", partition)
}

// CheckIndexes checks that every global index of a call is in [0, 2^63−1): an index
// below 0 is never a sample's, nor is 2^63−1 (indexes are allocated below it, and the
// stores' half-open spans [i, i+1) of it would wrap), so either is a bad argument, not a
// missing one. Every path that takes indexes checks them with it. Errors: *InvalidError
// naming the first bad one.
func CheckIndexes(indexes []int64) error {
	for i, x := range indexes {
		if x < 0 || x == math.MaxInt64 {
			return &InvalidError{Field: fmt.Sprintf("indexes[%d]", i), Value: x, Rule: "a global index ≥ 0 and below 2^63−1"}
		}
	}
	return nil
}

// CheckGetData checks what every store refuses of a GetData of meta whatever its queue
// holds: an index outside [0, 2^63−1) (CheckIndexes) or a partition no put can name
// (CheckPartitionFilter; "" reads by global index in every partition). Errors:
// *InvalidError.
func CheckGetData(meta *BatchMeta) error {
	if err := CheckIndexes(meta.Indexes); err != nil {
		return err
	}
	return CheckPartitionFilter(meta.Partition)
}

// CheckReadArgs checks the arguments of a Scan (offset ≥ 0, limit ≥ 1, a valid shard
// and partition name). Errors: *InvalidError.
func CheckReadArgs(offset int64, limit int, opts *GetOpts) error {
	if offset < 0 {
		return &InvalidError{Field: "offset", Value: offset, Rule: "use a global index ≥ 0 (0: from the first record)"}
	}
	if limit <= 0 {
		return &InvalidError{Field: "limit", Value: limit, Rule: "use 1 or more records"}
	}
	if opts == nil {
		return nil
	}
	if err := opts.Shard.Validate(); err != nil {
		return err
	}
	return CheckPartitionFilter(opts.Partition)
}

// CheckPartitionFilter checks a read's partition filter: "" (every partition) or a valid
// partition name (CheckName), the rule of a put's partition, so that a read naming a
// partition no put can make ("../..", a NUL) is refused instead of answering nothing.
// Errors: *InvalidError.
func CheckPartitionFilter(partition string) error {
	if partition == "" {
		return nil
	}
	return CheckName("partition", partition)
}

// NormalizeMetaRequest returns req with its defaults applied (partition, sampler name)
// and the sampler of samplers it names. Errors: *InvalidError for a bad request or
// sampler.
func NormalizeMetaRequest(req *MetaRequest, samplers Samplers) (MetaRequest, Sampler, error) {
	rq := *req
	if rq.Partition == "" {
		rq.Partition = DefaultPartition
	}
	if err := rq.validate(); err != nil {
		return rq, nil, err
	}
	sampler, err := samplers.New(rq.Sampler)
	if err != nil {
		return rq, nil, err
	}
	if rq.Sampler.Name == "" {
		rq.Sampler.Name = SamplerSequential
	}
	if rq.Lease > 0 {
		if err := checkLeasedSampler(sampler, rq.Lease); err != nil {
			return rq, nil, err
		}
		rq.DeferConsume = true
	}
	return rq, withStaleness(sampler, rq.Staleness), nil
}

// SamplerWindow returns how many ready samples a sampler sees at first for a batch of
// batchSize (SampleInput.Ready): 4×batchSize and at least 1,024, or what a
// WindowSampler asks for.
func SamplerWindow(s Sampler, batchSize int) int {
	if ws, ok := s.(WindowSampler); ok {
		return max(ws.Window(batchSize), batchSize)
	}
	return max(4*batchSize, 1024)
}

// ShardOwns reports whether the record at index, with value v of kind k in the shard's
// column (nil v: none, or the column is the global index), belongs to sh's rank. It
// hashes as the file store does, so every store shards a queue alike.
func ShardOwns(sh Shard, index int64, v any, k Kind, useIndex bool) bool {
	if !sh.Active() {
		return true
	}
	return sh.Owns(hashStored(v, k, index, useIndex))
}

func hashStored(v any, k Kind, index int64, useIndex bool) uint64 {
	h := fnv.New64a()
	var b [8]byte
	if useIndex {
		binary.LittleEndian.PutUint64(b[:], uint64(index))
		h.Write(b[:])
		return h.Sum64()
	}
	if v == nil {
		return h.Sum64()
	}
	switch x := v.(type) {
	case int64:
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		h.Write(b[:])
	case float64:
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(x))
		h.Write(b[:])
	case bool:
		if x {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	case string:
		h.Write([]byte(x))
	case []byte:
		if k == KindCodec {
			h.Write(tail.EncodeRecords(nil, []record.NormRecord{{{Name: "", Kind: k, Val: record.CodecValue{Bytes: x}}}}))
		} else {
			h.Write(x)
		}
	default:
		h.Write(tail.EncodeRecords(nil, []record.NormRecord{{{Name: "", Kind: k, Val: v}}}))
	}
	return h.Sum64()
}

// KVItem is one key of a KVPut, with the fields and tags of every time the call gave it
// merged in order.
type KVItem struct {
	Key    string
	Fields Record            // never nil
	Tags   map[string]string // never nil
}

// MergeKVPut checks the arguments of Store.KVPut (a valid partition name, fields and
// tags nil or one per key, every key 1–1024 bytes, version fields CheckVersionFields) and merges a key given more than once
// in order (a later value of a field or tag replaces an earlier one), so each key
// appears once, in the order of its first appearance. Errors: *InvalidError.
func MergeKVPut(partition string, keys []string, fields []Record, tags []map[string]string) ([]*KVItem, error) {
	if err := CheckName("partition", partition); err != nil {
		return nil, err
	}
	if fields != nil && len(fields) != len(keys) {
		return nil, &InvalidError{Field: "fields", Value: len(fields), Rule: fmt.Sprintf("nil or one record per key (%d)", len(keys))}
	}
	if tags != nil && len(tags) != len(keys) {
		return nil, &InvalidError{Field: "tags", Value: len(tags), Rule: fmt.Sprintf("nil or one tag map per key (%d)", len(keys))}
	}
	if err := CheckVersionFields(fields); err != nil {
		return nil, err
	}
	var items []*KVItem
	byKey := map[string]*KVItem{}
	for i, k := range keys {
		if err := CheckKey(k); err != nil {
			return nil, err
		}
		it := byKey[k]
		if it == nil {
			it = &KVItem{Key: k, Fields: Record{}, Tags: map[string]string{}}
			byKey[k] = it
			items = append(items, it)
		}
		if fields != nil {
			maps.Copy(it.Fields, fields[i])
		}
		if tags != nil {
			if err := CheckTags(tags[i]); err != nil {
				return nil, err
			}
			maps.Copy(it.Tags, tags[i])
		}
	}
	return items, nil
}

// KVPutIndexes answers a KVPut of keys whose merged items (MergeKVPut) got the indexes
// idx (idx[j] for items[j]): the index of each key, in the order of keys.
func KVPutIndexes(keys []string, items []*KVItem, idx []int64) []int64 {
	pos := make(map[string]int, len(items))
	for j, it := range items {
		pos[it.Key] = j
	}
	out := make([]int64, len(keys))
	for i, k := range keys {
		out[i] = idx[pos[k]]
	}
	return out
}
