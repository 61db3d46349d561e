package persist

import (
	"context"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// Sampler chooses which ready samples a GetMeta hands out. Implement it to add a
// strategy; Sequential, RankAware and GRPOGroupN are built in. Sample sees one
// consistent snapshot of the store (the file store runs it on a read snapshot,
// outside its writer, so that waiting consumers do not hold up producers); the store
// then records the batch (consumption, the assignment made with Assign) in one
// transaction that first checks the chosen samples are still free, and runs Sample
// again on a fresh snapshot if another consumer took them meanwhile — so concurrent
// readers in any process never hand out the same sample twice to one task. Sample
// may therefore run more than once per GetMeta; it must have no effect outside
// SampleInput, must be quick and must not call the Queue.
type Sampler interface {
	// Sample returns up to in.BatchSize global indexes chosen from in.Ready (or a
	// stored assignment, see SampleInput.Assignment). Returning fewer is allowed (a
	// partial batch); in wait mode GetMeta then waits for more samples.
	Sample(ctx context.Context, in *SampleInput) ([]int64, error)
}

// WindowSampler is an optional interface: a Sampler that needs to see more than the
// default number of ready samples (4×BatchSize, at least 1,024) says how many.
type WindowSampler interface {
	Sampler
	Window(batchSize int) int
}

// SampleInput is what a Sampler sees: the request, the first window of ready samples,
// and the Source of the store running the GetMeta, all of one snapshot.
type SampleInput struct {
	// Ready lists, ascending, samples of Partition whose requested fields are all
	// produced, that Task has not consumed and that are not cleared — the first
	// Window of them.
	Ready []int64
	// MoreReady reports that more ready samples exist beyond Ready.
	MoreReady bool
	// BatchSize is the requested batch size.
	BatchSize int
	// Task and Partition are the consumption key.
	Task, Partition string
	// DPRank and BatchIndex identify the data-parallel group and step (MetaRequest).
	DPRank, BatchIndex int
	// Source answers the questions below from the store; every store sets it. A nil
	// Source (a SampleInput built by hand, in a test) knows only Ready: ordinals are
	// then the indexes themselves, and Values and Assign fail with ErrInvalid.
	Source SampleSource
}

// SampleSource is what a store gives its samplers for one GetMeta, as of one
// snapshot (an Assign takes effect in the transaction that hands the samples out):
// every store (the file store, and next the HTTP and distributed stores) implements
// it, so the samplers of this package run on any store. The methods are those of
// SampleInput, which documents them.
type SampleSource interface {
	ReadyAfter(after int64, n int) ([]int64, bool)
	ReadyUnheld(n int) ([]int64, error)
	Values(ctx context.Context, field string, indexes []int64) ([]any, error)
	Ordinals(indexes []int64) []int64
	Assignment() ([]int64, bool, error)
	Assign(indexes []int64) error
}

// errNoSource is returned by the SampleInput methods that need a store.
var errNoSource = fmt.Errorf("%w: this SampleInput has no Source (samplers run inside a store's GetMeta)", ErrInvalid)

// ReadyAfter returns, ascending, up to n ready samples with an index greater than
// after (-1 for the first), and whether more ready samples follow them. Samplers that
// may need more than the window Ready (GRPOGroupN, when incomplete groups fill it) page
// through every ready sample with it.
func (in *SampleInput) ReadyAfter(after int64, n int) ([]int64, bool) {
	if in.Source != nil {
		return in.Source.ReadyAfter(after, n)
	}
	rest := record.SetOf(in.Ready).From(after + 1)
	page := rest.First(n)
	return page, int64(len(page)) < rest.Count()
}

// ReadyUnheld returns, ascending, the first n ready samples that no stored assignment
// of (Task, Partition) holds: with DeferConsume, samples handed to one data-parallel
// group stay ready until consumed, and must not be offered to another group.
func (in *SampleInput) ReadyUnheld(n int) ([]int64, error) {
	if in.Source == nil {
		return in.Ready[:min(n, len(in.Ready))], nil
	}
	return in.Source.ReadyUnheld(n)
}

// Values returns the values of field for indexes (nil where a sample has no value),
// for samplers that group or balance by content.
func (in *SampleInput) Values(ctx context.Context, field string, indexes []int64) ([]any, error) {
	if in.Source == nil {
		return nil, errNoSource
	}
	return in.Source.Values(ctx, field, indexes)
}

// Ordinals returns, for each of indexes, its position among all samples of the
// partition (0 for the partition's first sample), counting cleared ones.
func (in *SampleInput) Ordinals(indexes []int64) []int64 {
	if in.Source == nil {
		return append([]int64(nil), indexes...)
	}
	return in.Source.Ordinals(indexes)
}

// Assignment returns the indexes stored for (Task, Partition, DPRank, BatchIndex) by
// an earlier GetMeta of any process, and whether there is one.
func (in *SampleInput) Assignment() ([]int64, bool, error) {
	if in.Source == nil {
		return nil, false, nil
	}
	return in.Source.Assignment()
}

// Assign stores indexes as the assignment of (Task, Partition, DPRank, BatchIndex), in
// the same transaction that hands them out, and marks them held (see ReadyUnheld).
// ResetConsumption and ClearPartition clear assignments.
func (in *SampleInput) Assign(indexes []int64) error {
	if in.Source == nil {
		return errNoSource
	}
	return in.Source.Assign(indexes)
}

// Sequential hands out the lowest ready indexes first.
type Sequential struct{}

// Sample returns the first BatchSize ready indexes.
func (Sequential) Sample(_ context.Context, in *SampleInput) ([]int64, error) {
	n := min(in.BatchSize, len(in.Ready))
	return append([]int64(nil), in.Ready[:n]...), nil
}

var _ Sampler = Sequential{}
