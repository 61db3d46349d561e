package persisttest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// The conformance case of partial rollouts (persist/partial.go): segments at later
// versions, the complete flag through field-level readiness, and staleness judged by the
// oldest segment unless the bound says newest.
func testPartialRollouts(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	idx, err := q.PutPartial(ctx, "", []persist.Record{{"tokens": []int64{1, 2}}, {"tokens": []int64{3}}}, 0, false, nil)
	require.NoError(t, err)
	done, err := q.PutPartial(ctx, "", []persist.Record{{"tokens": []int64{9}}}, 2, true, nil)
	require.NoError(t, err)
	require.NoError(t, q.SetVersion(ctx, 1))
	require.NoError(t, q.PatchPartial(ctx, "", idx, []persist.Record{{"tokens": []int64{1, 2, 4}}, {"more": 1}}, 1, false))
	require.NoError(t, q.SetVersion(ctx, 3))
	require.NoError(t, q.PatchPartial(ctx, "", idx[:1], nil, 3, true))

	b, err := q.Reader().GetData(ctx, &persist.BatchMeta{Indexes: append(append([]int64{}, idx...), done...), Partition: persist.DefaultPartition,
		Fields: []persist.FieldMeta{{Name: persist.WeightVersionField}, {Name: persist.LastWeightVersionField}, {Name: persist.SegmentVersionsField}, {Name: persist.CompleteField}, {Name: "tokens"}}})
	require.NoError(t, err)
	rows, err := b.Rows()
	b.Release()
	require.NoError(t, err)
	require.EqualValues(t, 0, rows[0].Fields[persist.WeightVersionField], "the oldest segment's version stays")
	require.EqualValues(t, 3, rows[0].Fields[persist.LastWeightVersionField])
	require.EqualValues(t, []int64{0, 1, 3}, rows[0].Fields[persist.SegmentVersionsField])
	require.Equal(t, true, rows[0].Fields[persist.CompleteField])
	require.EqualValues(t, []int64{1, 2, 4}, rows[0].Fields["tokens"])
	require.EqualValues(t, []int64{0, 1}, rows[1].Fields[persist.SegmentVersionsField])
	require.Nil(t, rows[1].Fields[persist.CompleteField], "not complete yet")
	require.EqualValues(t, []int64{2}, rows[2].Fields[persist.SegmentVersionsField])

	// Only complete records, when the reader asks for the flag.
	require.Equal(t, []int64{idx[0], done[0]}, metaIdx(t, q, persist.MetaRequest{
		Fields: []string{"tokens", persist.CompleteField}, BatchSize: 8, Task: "complete", DeferConsume: true}))
	// Oldest (default): idx[0] (0) and idx[1] (0) are 3 behind; done (2) is 1 behind.
	require.Equal(t, []int64{done[0]}, metaIdx(t, q, persist.MetaRequest{Fields: []string{"tokens"}, BatchSize: 8, Task: "oldest",
		Staleness: &persist.Staleness{Max: 1, Policy: persist.StaleKeep}}))
	// Newest: idx[0] (3) and done (2) are fresh; idx[1] (1) is 2 behind.
	require.Equal(t, []int64{idx[0], done[0]}, metaIdx(t, q, persist.MetaRequest{Fields: []string{"tokens"}, BatchSize: 8, Task: "newest",
		Staleness: &persist.Staleness{Max: 1, Policy: persist.StaleKeep, Version: persist.StalenessNewest}}))

	requireInvalid(t, q.PatchPartial(ctx, "", idx[1:], nil, 0, false)) // segments go forward
	requireInvalid(t, q.PatchPartial(ctx, "", idx[1:], []persist.Record{{persist.WeightVersionField: 5}}, 5, false))
	requireInvalid(t, q.PatchPartial(ctx, "", idx, []persist.Record{{}}, 5, false))
	// An index named twice would merge two records into one segment: refused, nothing written.
	requireInvalid(t, q.PatchPartial(ctx, "", []int64{idx[0], idx[0]}, []persist.Record{{"a": 1}, {"b": 2}}, 9, false))
	requireInvalid(t, q.PatchPartial(ctx, "", idx[:1], nil, 2, false)) // still at segment 3: nothing was written
	_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"tokens"}, BatchSize: 1, Task: "t",
		Staleness: &persist.Staleness{Max: 1, Version: "middle"}})
	requireInvalid(t, err)
	plain := putN(t, q, persist.DefaultPartition, 1, func(int) persist.Record { return persist.Record{"tokens": []int64{7}} })
	requireInvalid(t, q.PatchPartial(ctx, "", plain, nil, 5, false)) // not a partial rollout
}

// testPatchPartialWithoutPartials: a PatchPartial of a record of a queue that holds no
// partial rollout at all is refused as of one that is not a partial rollout, naming the
// index, as in a queue that holds some. Before 2026-12-07 it was refused as a read of an
// unknown field ("invalid fields \"segment_versions\": names of fields in the queue
// schema …"), which named nothing the caller had given.
func testPatchPartialWithoutPartials(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	plain := putN(t, q, persist.DefaultPartition, 2, func(int) persist.Record { return persist.Record{"tokens": []int64{7}} })
	err := q.PatchPartial(ctx, "", plain, nil, 1, false)
	requireInvalidField(t, err, "indexes[0]")
	require.Contains(t, err.Error(), "a partial rollout")
}
