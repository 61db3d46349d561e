package persist

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// GetMetaTimeoutDefault is the default MetaRequest.Timeout in wait mode.
const GetMetaTimeoutDefault = 30 * time.Second

// MetaRequest describes the batch GetMeta should hand out.
type MetaRequest struct {
	// Fields are the fields the consumer needs; only samples with all of them produced
	// are eligible. Required.
	Fields []string
	// BatchSize is the number of samples wanted, ≥ 1. Required.
	BatchSize int
	// Task names the consumer; consumption is tracked per (Partition, Task). Required.
	Task string
	// Partition to read. Defaults to DefaultPartition.
	Partition string
	// Sampler chooses the samples by name and parameters (e.g. RankAware{}.Spec(),
	// GRPOGroupN{N: 4}.Spec()). The zero value means Sequential.
	Sampler SamplerSpec
	// Wait makes GetMeta block until a full batch (BatchSize samples) is ready, the
	// Timeout passes (ErrTimeout, nothing handed out) or ctx ends. Without Wait,
	// GetMeta returns what is ready now, possibly fewer than BatchSize or none.
	Wait bool
	// Timeout bounds a wait. Defaults to GetMetaTimeoutDefault (30 s).
	Timeout time.Duration
	// DeferConsume hands the samples out without marking them consumed; the caller
	// calls Queue.MarkConsumed after processing them. Samplers that store
	// assignments (RankAware) still store them.
	DeferConsume bool
	// DPRank and BatchIndex identify the data-parallel group and the step, for
	// RankAware (and custom samplers).
	DPRank, BatchIndex int
	// Staleness, when set, bounds the weight versions handed out (see Staleness): a
	// record produced at version v is served only while current − v ≤ Staleness.Max.
	// Any sampler takes it.
	Staleness *Staleness
	// Lease, when > 0, hands the samples out without consuming them (as DeferConsume)
	// and holds them from the task's other GetMetas for Lease (at most LeaseMax):
	// MarkConsumed (Reader.Commit) consumes them; once the lease expires
	// uncommitted, they are ready again. 0: no lease.
	Lease time.Duration
	// Recheck, when set, is called in wait mode before each attempt at a hand-out that
	// follows a wait; its error ends the GetMeta with nothing handed out (no sample
	// consumed or leased). The server sets it to look the caller's token up again, so
	// that a token revoked while its GetMeta waited gets 401 rather than a batch. It is
	// not sent over HTTP (the server sets its own); nil: no check.
	Recheck func() error
}

// FieldMeta describes one field of a batch. For tensor fields DType and Shape are the
// element type and shape shared by every sample of the batch (Shape is nil when the
// samples differ); for lists Shape is nil (variable length); for scalars DType is the
// kind and Shape is empty.
type FieldMeta struct {
	Name  string
	Kind  Kind
	DType string
	Shape []int
}

// BatchMeta is the first phase of a read: which samples a batch holds.
type BatchMeta struct {
	Size      int
	Indexes   []int64 // global indexes, in the order the sampler chose
	Fields    []FieldMeta
	Partition string
	Task      string
}

// FieldNames returns the names of Fields.
func (m *BatchMeta) FieldNames() []string {
	out := make([]string, len(m.Fields))
	for i, f := range m.Fields {
		out[i] = f.Name
	}
	return out
}

// CheckMetaRequest refuses what every store refuses of req whatever its queue holds and
// whichever samplers it knows (fields, batch size, task, timeout, rank, batch index,
// lease, staleness, partition name; an empty partition is the default): `lakeshore serve`
// checks it for a queue no put has created yet, so that such a request is refused as in
// process instead of answered as an empty queue. Errors: *InvalidError naming the
// field.
func CheckMetaRequest(req *MetaRequest) error {
	if req == nil {
		return &InvalidError{Field: "MetaRequest", Value: nil, Rule: "a request"}
	}
	rq := *req
	rq.Partition = cmp.Or(rq.Partition, DefaultPartition)
	return rq.validate()
}

func (r *MetaRequest) validate() error {
	if len(r.Fields) == 0 {
		return &InvalidError{Field: "fields", Value: nil, Rule: "at least one field name"}
	}
	if err := CheckFieldNames(r.Fields); err != nil {
		return err
	}
	if r.BatchSize < 1 {
		return &InvalidError{Field: "batch_size", Value: r.BatchSize, Rule: "≥ 1"}
	}
	if err := CheckTask(r.Task); err != nil {
		return err
	}
	if r.Timeout < 0 {
		return &InvalidError{Field: "timeout", Value: r.Timeout, Rule: "≥ 0"}
	}
	if r.DPRank < 0 {
		return &InvalidError{Field: "dp_rank", Value: r.DPRank, Rule: "≥ 0"}
	}
	if r.BatchIndex < 0 {
		return &InvalidError{Field: "batch_index", Value: r.BatchIndex, Rule: "≥ 0"}
	}
	if r.Lease < 0 || r.Lease > LeaseMax {
		return &InvalidError{Field: "lease", Value: r.Lease, Rule: "≥ 0 and ≤ 24h (0: no lease)"}
	}
	if err := r.Staleness.validate(); err != nil {
		return err
	}
	return CheckName("partition", r.Partition)
}

// WaitTimeout is how long a GetMeta of r in wait mode waits for a full batch: Timeout,
// or GetMetaTimeoutDefault when Timeout is 0.
func (r *MetaRequest) WaitTimeout() time.Duration {
	return cmp.Or(r.Timeout, GetMetaTimeoutDefault)
}

// TimeoutError is the error of a GetMeta of r in wait mode that found no full batch
// within WaitTimeout: it wraps ErrTimeout and names the batch size, fields, task and
// partition.
func (r *MetaRequest) TimeoutError() error {
	return fmt.Errorf("%w: no full batch of %d samples with fields %s for task %q in partition %q within %v",
		ErrTimeout, r.BatchSize, strings.Join(r.Fields, ", "), r.Task, r.Partition, messageDuration(r.WaitTimeout()))
}

// TimeoutErrorWith is TimeoutError followed by what st — the store's Stats, read as the
// wait ended — says of the request's partition and task: the records put into the
// partition and those the task has consumed (stale ones dropped included) and, for a
// staleness-bounded read, the queue's current weight version, the oldest version the
// bound takes and the records dropped as stale. A trainer whose wait timed out then sees
// whether its records were never put, already consumed, or too old (found by a trial:
// after set_version ran ahead of the rollouts, every read timed out saying only "no full
// batch", while each record put was dropped as stale at once).
func (r *MetaRequest) TimeoutErrorWith(st Stats) error {
	consumed := st.ConsumedByTask[r.Partition+"/"+r.Task]
	why := fmt.Sprintf("partition %q holds %d records put, %d of them consumed by task %q (stale ones dropped included)",
		r.Partition, st.Partitions[r.Partition], consumed, r.Task)
	if r.Staleness != nil {
		why += fmt.Sprintf("; the queue is at weight version %d and max_staleness %d takes versions ≥ %d; %d records dropped as stale so far (every task)",
			st.WeightVersion, r.Staleness.Max, max(st.WeightVersion-r.Staleness.Max, 0), st.StaleDropped)
	}
	return fmt.Errorf("%w: %s", r.TimeoutError(), why)
}

// messageDuration is d as an error message says it: to the millisecond from 1 ms up. A
// wait's timeout may be what was left of a deadline (the HTTP store sends the time left
// of its caller's timeout, 1.499999259 s of 1.5 s), and a measured wait is never a round
// figure; their nanoseconds say nothing to a reader.
func messageDuration(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d
	}
	return d.Round(time.Millisecond)
}
