package persist

import "context"

// Groups of samples (GRPO): the barrier, over-sampling, the zero-variance filter and
// the straggler bound are GRPOGroupN's (sampler_grpo.go), decided in the hand-out's
// transaction through the store's GroupDropper; DropGroup is the verb that drops a
// group by hand (docs/persist.md, "Groups").

// GroupDropStore is implemented by every store of this repository: DropGroup marks
// the samples of one group (indexes, all of partition) consumed for task, in one
// transaction, and counts the group in Stats.GroupsDropped when any of them was not
// consumed yet (dropping it again is a no-op). Errors: *InvalidError (a bad task,
// partition or index, no index), *NotFoundError (an index not in partition, or
// cleared), ErrClosed.
type GroupDropStore interface {
	DropGroup(ctx context.Context, task, partition string, indexes []int64) error
}

// CheckDropGroup checks DropGroup's arguments. Errors: *InvalidError.
func CheckDropGroup(task, partition string, indexes []int64) error {
	if err := CheckTask(task); err != nil {
		return err
	}
	if err := CheckName("partition", partition); err != nil {
		return err
	}
	if len(indexes) == 0 {
		return &InvalidError{Field: "indexes", Value: indexes, Rule: "the global indexes of the group's samples, at least one"}
	}
	return CheckIndexes(indexes)
}

// DropGroup drops the group of samples at indexes of partition for task: they are
// never handed to task (marked consumed) and the group is counted as dropped
// (Stats.GroupsDropped, once however often it is dropped). A trainer uses it for a
// group it judged useless after reading it, or to give up on a straggling group.
// Errors as for GroupDropStore, and *InvalidError for a store without groups.
func (q *Queue) DropGroup(ctx context.Context, task, partition string, indexes []int64) error {
	partition = cmpOrString(partition, DefaultPartition)
	if err := CheckDropGroup(task, partition, indexes); err != nil {
		return err
	}
	g, ok := q.s.(GroupDropStore)
	if !ok {
		return &InvalidError{Field: "store", Value: q.s.Name(), Rule: "a store that drops groups"}
	}
	return g.DropGroup(ctx, task, partition, indexes)
}
