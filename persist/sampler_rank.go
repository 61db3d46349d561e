package persist

import "context"

// RankAware serves data-parallel training: every rank of one data-parallel group (the
// same MetaRequest.DPRank and BatchIndex — e.g. the tensor- or pipeline-parallel ranks
// of that group) gets the identical indexes, and different groups get disjoint ones.
// The first GetMeta of a (task, partition, DPRank, BatchIndex) chooses the lowest
// ready indexes, marks them consumed and stores the assignment in meta.db in the same
// transaction; later calls of that group, from any process, return the stored
// assignment. With MetaRequest.DeferConsume the assigned samples stay ready until
// marked consumed, but no other group is offered them: a new assignment skips every
// index that a stored assignment of the task and partition holds. ResetConsumption
// forgets assignments with the consumption.
type RankAware struct{}

// Sample returns the stored assignment of the group, or assigns the first BatchSize
// ready indexes that no other group holds. A partial assignment is stored only outside
// wait mode (GetMeta rolls back a partial batch it waits on).
func (RankAware) Sample(_ context.Context, in *SampleInput) ([]int64, error) {
	if idx, ok, err := in.Assignment(); err != nil || ok {
		return idx, err
	}
	idx, err := in.ReadyUnheld(in.BatchSize)
	if err != nil || len(idx) == 0 {
		return nil, err
	}
	return idx, in.Assign(idx)
}

var _ Sampler = RankAware{}
