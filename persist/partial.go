package persist

import (
	"context"
	"errors"
	"fmt"
)

// Partial rollouts (issue 26, item 5; docs/persist.md, "Partial rollouts"): a record put
// before its generation finished and patched later with segments produced at later
// weight versions. Its versions are ordinary columns, so every store keeps them and
// every reader and sampler reads them alone:
//
//   - WeightVersionField: the version of its first (oldest) segment, set by the put and
//     never changed by a patch, so the staleness bound judges the oldest segment by
//     default and the file store's version cache stays valid;
//   - LastWeightVersionField: the version of its newest segment (StalenessNewest judges it);
//   - SegmentVersionsField: every segment's version, in order (list<int64>);
//   - CompleteField: true once the last segment is in, absent before — so a reader that
//     asks for it (MetaRequest.Fields) is handed only complete records (field-level
//     readiness), and one that does not may train on partial ones.

// The fields of a partial rollout.
const (
	LastWeightVersionField = "last_weight_version"
	SegmentVersionsField   = "segment_versions"
	CompleteField          = "complete"
)

// StalenessVersion says which segment's version a staleness bound judges.
type StalenessVersion string

const (
	// StalenessOldest (the default, "") judges WeightVersionField: a record is as stale
	// as its oldest segment.
	StalenessOldest StalenessVersion = "oldest"
	// StalenessNewest judges LastWeightVersionField (WeightVersionField for records
	// without it): a record is as fresh as its newest segment.
	StalenessNewest StalenessVersion = "newest"
)

// PutPartial appends recs to partition as partial rollouts whose first segment was
// produced at version: each gets WeightVersionField = LastWeightVersionField = version,
// SegmentVersionsField = [version], and CompleteField true only when complete
// (partition "" is DefaultPartition). Returns
// their indexes as PutPartition does, with opts (nil: none): its idempotency id
// (PutOpts.ID) and admission (PutOpts.Admission), as PutVersioned's. Errors as for
// PutPartition, and *InvalidError for a version below 0.
func (q *Queue) PutPartial(ctx context.Context, partition string, recs []Record, version int64, complete bool, opts *PutOpts) ([]int64, error) {
	partition = cmpOrString(partition, DefaultPartition)
	if version < 0 {
		return nil, &InvalidError{Field: "weight_version", Value: version, Rule: "≥ 0"}
	}
	tagged := taggedCopies(recs, func(c Record) {
		c[WeightVersionField], c[LastWeightVersionField], c[SegmentVersionsField] = version, version, []int64{version}
		if complete {
			c[CompleteField] = true
		}
	})
	return q.s.PutPartition(ctx, partition, tagged, opts)
}

// notPartialRule is the rule of PatchPartial's refusal of an index that is not a partial
// rollout.
const notPartialRule = "a partial rollout (put by PutPartial: it has segment_versions)"

// PatchPartial adds a segment produced at version to the partial rollouts at indexes
// of partition: fields[i] is merged into indexes[i] (PutFields), version is appended to
// its SegmentVersionsField and becomes its LastWeightVersionField, and with complete
// its CompleteField becomes true (readers waiting for complete records get it). Its
// WeightVersionField (the oldest segment) is left as it is. The segment versions are
// read and written back (GetData, then PutFields), serialized within this Queue and,
// when the store is a PatchLocker (the file store: a file lock; the distributed store: a
// PostgreSQL advisory lock), across every handle and process of the queue's partition;
// over HTTP the server's store does it. Errors: as for
// PutFields, *InvalidError (lengths that differ, a version below the record's newest,
// a record that is not a partial rollout, a patch of a version field, an index named
// twice), *NotFoundError.
func (q *Queue) PatchPartial(ctx context.Context, partition string, indexes []int64, fields []Record, version int64, complete bool) error {
	partition = cmpOrString(partition, DefaultPartition)
	if fields == nil {
		fields = make([]Record, len(indexes))
	}
	if len(fields) != len(indexes) {
		return &InvalidError{Field: "fields", Value: len(fields), Rule: fmt.Sprintf("one record per index (%d)", len(indexes))}
	}
	if version < 0 {
		return &InvalidError{Field: "weight_version", Value: version, Rule: "≥ 0"}
	}
	if err := CheckIndexes(indexes); err != nil {
		return err
	}
	// One segment a record a patch: an index named twice would merge both records into
	// one segment, its version recorded once.
	seen := make(map[int64]int, len(indexes))
	for i, x := range indexes {
		if j, dup := seen[x]; dup {
			return &InvalidError{Field: fmt.Sprintf("indexes[%d]", i), Value: x, Rule: fmt.Sprintf("each index once a patch (also indexes[%d])", j)}
		}
		seen[x] = i
	}
	if len(indexes) == 0 {
		return nil
	}
	for i, f := range fields {
		for _, k := range []string{WeightVersionField, TargetVersionField, LastWeightVersionField, SegmentVersionsField, CompleteField} {
			if _, ok := f[k]; ok {
				return &InvalidError{Field: fmt.Sprintf("fields[%d].%s", i, k), Value: f[k], Rule: "a field of the segment; the versions and the complete flag are PatchPartial's"}
			}
		}
	}
	q.patchMu.Lock()
	defer q.patchMu.Unlock()
	if l, ok := q.s.(PatchLocker); ok { // other handles and processes of the same queue
		unlock, err := l.LockPatches(ctx, partition)
		if err != nil {
			return err
		}
		defer unlock()
	}
	meta := &BatchMeta{Indexes: indexes, Size: len(indexes), Partition: partition, Fields: []FieldMeta{{Name: SegmentVersionsField}}}
	b, err := q.s.GetData(ctx, meta)
	if ie := (*InvalidError)(nil); errors.As(err, &ie) && ie.Field == "fields" {
		// No record of the queue has segment_versions (no partial rollout was ever put):
		// the first index is not one, said as for a queue that holds some, not as a read
		// of an unknown field the caller never named.
		return &InvalidError{Field: "indexes[0]", Value: indexes[0], Rule: notPartialRule}
	}
	if err != nil {
		return err
	}
	rows, err := b.Rows()
	b.Release()
	if err != nil {
		return err
	}
	recs := make([]Record, len(indexes))
	for i, row := range rows {
		segs, ok := int64List(row.Fields[SegmentVersionsField])
		if !ok || len(segs) == 0 {
			return &InvalidError{Field: fmt.Sprintf("indexes[%d]", i), Value: indexes[i], Rule: notPartialRule}
		}
		if last := segs[len(segs)-1]; version < last {
			return &InvalidError{Field: "weight_version", Value: version, Rule: fmt.Sprintf("≥ the newest segment's version %d of index %d (segments go forward)", last, indexes[i])}
		}
		r := make(Record, len(fields[i])+3)
		for k, v := range fields[i] {
			r[k] = v
		}
		r[SegmentVersionsField] = append(segs, version)
		r[LastWeightVersionField] = version
		if complete {
			r[CompleteField] = true
		}
		recs[i] = r
	}
	return q.s.PutFields(ctx, partition, indexes, recs)
}

// PatchLocker is a Store that serializes PatchPartial's read and write of a partition's
// segment versions across every handle and process that opens the queue. LockPatches
// blocks until the partition's patch lock is held (or ctx ends: its error) and returns
// its release.
type PatchLocker interface {
	LockPatches(ctx context.Context, partition string) (unlock func(), err error)
}

// int64List converts a stored list<int64> value.
func int64List(v any) ([]int64, bool) {
	switch x := v.(type) {
	case []int64:
		return append([]int64(nil), x...), true
	case []any:
		out := make([]int64, 0, len(x))
		for _, e := range x {
			n, ok := VersionValue(e)
			if !ok {
				return nil, false
			}
			out = append(out, n)
		}
		return out, true
	}
	return nil, false
}
