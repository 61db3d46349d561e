package persist

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The reinforcement-learning pieces of the data queue (docs/persist.md, "Weight
// versions, staleness, back-pressure and leases"): every store honours them the same
// way, checked by persisttest.
//
//   - A record's weight version is its int64 field WeightVersionField (and, optionally,
//     TargetVersionField): an ordinary column, so GetData, Scan and samplers read it
//     alone, without the record's other fields. Queue.PutVersioned sets it.
//   - The queue's current version is a counter in the store's catalog that the trainer
//     advances (Queue.SetVersion) and producers read (Queue.Version).
//   - MetaRequest.Staleness bounds what a GetMeta hands out: a record produced at v is
//     served only while current − v ≤ Max, judged in the transaction that hands it out.
//   - PutOpts.Admission holds producers back (reject or block) while the trainer has
//     too much to consume or they run too far ahead.
//   - MetaRequest.Lease hands a batch out without consuming it: MarkConsumed (Reader.Commit)
//     consumes it; if the lease expires first (a trainer killed), it is ready again.

// WeightVersionField is the field that holds the policy (weight) version that produced
// a record, an int64 ≥ 0. Records without it have no version: a staleness bound never
// drops or skips them.
const WeightVersionField = "weight_version"

// TargetVersionField is the optional field holding the version a record is meant for
// (NeMo RL's target weight version); Admission.MaxAhead judges it when present, else
// WeightVersionField.
const TargetVersionField = "target_weight_version"

// ErrQueueFull is returned (inside *BackpressureError) by a put that the queue's
// back-pressure refused. It is plane.ErrQueueFull (code "queue_full"), the code of job
// admission, so a producer that is a rollout job sees back-pressure, not a failure.
var ErrQueueFull = plane.ErrQueueFull

// Versioner is implemented by every store of this repository: the queue-level current
// weight version. SetVersion sets it (to a value ≥ the current one: versions never go
// back; equal is a no-op) and wakes waiting readers and blocked producers; Version reads
// it (0 on a new queue). Errors: *InvalidError (a value below the current one or below
// 0), ErrClosed, storage errors.
type Versioner interface {
	SetVersion(ctx context.Context, version int64) error
	Version(ctx context.Context) (int64, error)
}

// StalenessPolicy says what a staleness-bounded GetMeta does with records that are
// too old.
type StalenessPolicy string

const (
	// StaleDrop marks stale records consumed for the task, in the transaction that
	// hands out the batch, and counts them (BatchMeta.Dropped, Stats.StaleDropped).
	StaleDrop StalenessPolicy = "drop"
	// StaleKeep skips stale records and leaves them as they are, for a replay reader
	// (another task, or a Scan).
	StaleKeep StalenessPolicy = "keep"
)

// Staleness bounds the age of what a GetMeta hands out: a record with weight version
// v is served only while current − v ≤ Max, current being the queue's version in the
// transaction that hands it out.
type Staleness struct {
	// Max is the bound k, ≥ 0 (0: only records of the current version).
	Max int64
	// Policy is StaleDrop (the default, "") or StaleKeep.
	Policy StalenessPolicy
	// Version is which segment of a partial rollout is judged (partial.go):
	// StalenessOldest (the default, "": WeightVersionField) or StalenessNewest
	// (LastWeightVersionField, else WeightVersionField).
	Version StalenessVersion
}

func (s *Staleness) validate() error {
	if s == nil {
		return nil
	}
	if s.Max < 0 {
		return &InvalidError{Field: "max_staleness", Value: s.Max, Rule: "≥ 0"}
	}
	switch s.Version {
	case "", StalenessOldest, StalenessNewest:
	default:
		return &InvalidError{Field: "stale_version", Value: string(s.Version), Rule: `"oldest" or "newest"`}
	}
	switch s.Policy {
	case "", StaleDrop, StaleKeep:
		return nil
	}
	return &InvalidError{Field: "stale_policy", Value: string(s.Policy), Rule: `"drop" or "keep"`}
}

// Admission is the back-pressure of a put: the put is admitted only while, after it,
// Task has at most MaxUnconsumed unconsumed records in the partition, and while the
// versions its records are meant for are at most MaxAhead above the queue's current
// version. A refused put writes nothing.
type Admission struct {
	// Task is the consumer (the trainer's task) whose unconsumed records count.
	// Required with MaxUnconsumed (a task name, CheckTask's rule; else *InvalidError
	// naming admission_task, its HTTP query parameter).
	Task string
	// MaxUnconsumed bounds the records of the partition not yet consumed by Task
	// (leased ones count as unconsumed until committed), counting the put's own. 0:
	// no bound; an Admission with neither bound (MaxUnconsumed 0, MaxAhead < 0) is
	// refused (*InvalidError naming max_unconsumed).
	MaxUnconsumed int64
	// MaxAhead, when ≥ 0, bounds how far a record's target version (TargetVersionField,
	// else WeightVersionField) may be above the current version. -1 (or any value
	// below 0): no bound. Note that 0 is a bound; the zero Admission has MaxAhead 0,
	// so set -1 when only MaxUnconsumed is meant. (Over HTTP and in Python no bound is
	// max_ahead left out; a negative max_ahead there is refused, as a negative
	// max_unconsumed is.)
	MaxAhead int64
	// Block makes a refused put wait until the trainer consumes or advances the
	// version, up to Timeout (GetMetaTimeoutDefault when 0); without Block it fails at
	// once. Either way the error is *BackpressureError.
	Block bool
	// Timeout bounds a blocked put; ≥ 0.
	Timeout time.Duration
	// Recheck, when set, is called before each attempt of a blocked put that follows a
	// wait; its error ends the put with nothing written. The server sets it to look the
	// caller's token up again (as MetaRequest.Recheck); it is not sent over HTTP. nil:
	// no check.
	Recheck func() error
}

func (a *Admission) validate() error {
	if a == nil {
		return nil
	}
	if a.MaxUnconsumed < 0 {
		return &InvalidError{Field: "max_unconsumed", Value: a.MaxUnconsumed, Rule: "≥ 0 (0: no bound)"}
	}
	if a.MaxUnconsumed > 0 && !validTask(a.Task) {
		// Named by its query parameter (admission_task), whose bound it is.
		return &InvalidError{Field: "admission_task", Value: a.Task, Rule: taskRule + ": the task whose unconsumed records max_unconsumed bounds (required with max_unconsumed)"}
	}
	if a.Timeout < 0 {
		return &InvalidError{Field: "admission_timeout", Value: a.Timeout, Rule: "≥ 0"}
	}
	if a.MaxUnconsumed == 0 && a.MaxAhead < 0 {
		// An Admission that bounds nothing admits every put: a producer that named its
		// trainer's task (or asked to block) and forgot the bound would never be held back,
		// silently. Refused, naming what to give (no back-pressure is no Admission).
		return &InvalidError{Field: "max_unconsumed", Value: a.MaxUnconsumed, Rule: noBoundRule}
	}
	return nil
}

// noBoundRule is the rule of an Admission without a bound (Admission.validate).
const noBoundRule = "back-pressure needs a bound: max_unconsumed > 0 (with admission_task, the trainer's task) " +
	"and/or max_ahead ≥ 0 (for none, leave back-pressure out)"

// BackpressureError reports a put refused by its Admission: what was over its bound.
// It matches ErrQueueFull (code "queue_full").
type BackpressureError struct {
	Partition string
	// Unconsumed is the task's unconsumed records before the put, and Records the
	// put's records; Limit its MaxUnconsumed (0 when the count was not the reason).
	Unconsumed, Records, Limit int64
	// Version and Target: the current version and the highest target of the put, when
	// the version bound (MaxAhead) was the reason.
	Version, Target, MaxAhead int64
	// Waited reports a blocked put whose Timeout passed.
	Waited time.Duration
}

func (e *BackpressureError) Error() string {
	var why string
	if e.Limit > 0 {
		why = fmt.Sprintf("%d unconsumed records in partition %q and %d more would pass the bound of %d", e.Unconsumed, e.Partition, e.Records, e.Limit)
	} else {
		why = fmt.Sprintf("a record meant for version %d is more than %d versions ahead of the current version %d", e.Target, e.MaxAhead, e.Version)
	}
	if e.Waited > 0 {
		why += fmt.Sprintf(" (waited %v)", messageDuration(e.Waited))
	}
	return "persist: back-pressure: " + why
}

// Is matches ErrQueueFull.
func (e *BackpressureError) Is(target error) bool { return target == ErrQueueFull }

// Admitted reports whether a put of n records whose highest target version is target
// (-1: none has a version) passes a, given the task's unconsumed records and the
// current version; when it does not, it returns the *BackpressureError. Stores call it
// inside the put's write transaction.
func Admitted(a *Admission, partition string, n int, target, unconsumed, current int64) error {
	if a == nil {
		return nil
	}
	if a.MaxUnconsumed > 0 && unconsumed+int64(n) > a.MaxUnconsumed && unconsumed > 0 {
		return &BackpressureError{Partition: partition, Unconsumed: unconsumed, Records: int64(n), Limit: a.MaxUnconsumed}
	}
	if a.MaxAhead >= 0 && target >= 0 && target-current > a.MaxAhead {
		return &BackpressureError{Partition: partition, Version: current, Target: target, MaxAhead: a.MaxAhead}
	}
	return nil
}

// VersionFields returns the fields holding a weight version (an integer ≥ 0) that
// CheckVersionFields checks: staleness judges WeightVersionField (and
// LastWeightVersionField), admission TargetVersionField. Each call returns a new slice.
func VersionFields() []string { return append([]string(nil), versionFields[:]...) }

// versionFields are the fields of VersionFields, an array so that no caller can change
// what CheckVersionFields checks.
var versionFields = [...]string{WeightVersionField, TargetVersionField, LastWeightVersionField}

// CheckVersionFields checks that every version field (VersionFields) a record of recs
// sets is an integer ≥ 0 (VersionValue): the one check of every write path (a put,
// PutFields, a KV put, a partial patch), so that no record carries a version that a
// staleness bound could not judge. A version field set to nil (JSON null) is absent, as
// any nil value of a record is no value. Errors: *InvalidError naming records[i].field.
func CheckVersionFields(recs []Record) error {
	for i, r := range recs {
		for _, f := range versionFields {
			v, ok := versionSet(r, f)
			if !ok {
				continue
			}
			if _, ok := VersionValue(v); !ok {
				return &InvalidError{Field: fmt.Sprintf("records[%d].%s", i, f), Value: shownVersion(v), Rule: "an integer ≥ 0"}
			}
		}
	}
	return nil
}

// versionSet returns the value of version field f of r, and whether r sets it: a field
// absent or nil (JSON null, no value) is not set.
func versionSet(r Record, f string) (any, bool) {
	v, ok := r[f]
	return v, ok && v != nil
}

// shownVersion is a refused version value as its error quotes it: a scalar as given; a
// list, map, bytes or tensor by its kind alone, which Go would print in its own notation
// ("map[a:1]", a tensor's struct with its raw bytes).
func shownVersion(v any) any {
	type kind string // not a string: InvalidError quotes strings, a kind stays bare
	switch v.(type) {
	case nil, bool, string, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return v
	case []byte:
		return kind("(bytes)")
	case map[string]any:
		return kind("(a map)")
	case Tensor, *Tensor:
		return kind("(a tensor)")
	}
	if k := reflect.ValueOf(v).Kind(); k == reflect.Slice || k == reflect.Array {
		return kind("(a list)")
	}
	return kind("(a structured value)")
}

// TargetVersion returns the highest target version of recs (TargetVersionField, else
// WeightVersionField, of each record; nil is no version), or -1 when none has one. Errors: *InvalidError
// for a version field (CheckVersionFields) that is not an integer ≥ 0.
func TargetVersion(recs []Record) (int64, error) {
	if err := CheckVersionFields(recs); err != nil {
		return -1, err
	}
	out := int64(-1)
	for _, r := range recs {
		for _, f := range []string{TargetVersionField, WeightVersionField} {
			v, ok := versionSet(r, f)
			if !ok {
				continue
			}
			x, _ := VersionValue(v)
			out = max(out, x)
			break
		}
	}
	return out, nil
}

// VersionValue converts a weight version as given or stored (an integer ≥ 0 of any Go
// integer type, or a float64 holding one) to int64; ok is false for any other value.
func VersionValue(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, x >= 0
	case int:
		return int64(x), x >= 0
	case int32:
		return int64(x), x >= 0
	case uint32:
		return int64(x), true
	case float64:
		return int64(x), x >= 0 && x == float64(int64(x))
	}
	return 0, false
}

// AdmitLoop runs put (one attempt inside the store's write transaction, which calls
// Admitted) and, when a blocking Admission refuses it, waits on changes (Store.Changes:
// the trainer consuming, or advancing the version) and tries again until the
// Admission's Timeout, each attempt after a wait preceded by the Admission's Recheck
// when set. Stores call it from PutPartition so that the wait is one mechanism
// everywhere; closing is the store's closing channel.
func AdmitLoop[T any](ctx context.Context, a *Admission, changes func() (<-chan struct{}, func()), closing <-chan struct{}, put func() (T, error)) (T, error) {
	if a == nil || !a.Block {
		return put()
	}
	start := time.Now()
	timer := time.NewTimer(cmp.Or(a.Timeout, GetMetaTimeoutDefault))
	defer timer.Stop()
	for waited := false; ; waited = true {
		if waited && a.Recheck != nil {
			if err := a.Recheck(); err != nil {
				var zero T
				return zero, err // before the put's transaction: nothing written
			}
		}
		ch, release := changes()
		out, err := put()
		var bp *BackpressureError
		if !errors.As(err, &bp) {
			release()
			return out, err
		}
		select {
		case <-ch:
			release()
		case <-timer.C:
			release()
			bp.Waited = time.Since(start)
			return out, bp
		case <-closing:
			release()
			return out, ErrClosed
		case <-ctx.Done():
			release()
			return out, ctx.Err()
		}
	}
}

// VersionSource is implemented by a store's SampleSource: the queue's current version
// as of the GetMeta's snapshot (the store checks it is unchanged when it hands the
// batch out), and Drop, which marks stale samples consumed for the task in that same
// transaction.
type VersionSource interface {
	CurrentVersion() int64
	Drop(indexes []int64)
}

// stalenessSampler bounds the samples its inner sampler sees to those fresh enough:
// Ready, ReadyAfter and ReadyUnheld show only them.
type stalenessSampler struct {
	inner Sampler
	st    Staleness
}

// Window implements WindowSampler.
func (s stalenessSampler) Window(batchSize int) int {
	if ws, ok := s.inner.(WindowSampler); ok {
		return max(ws.Window(batchSize), batchSize)
	}
	return max(4*batchSize, 1024)
}

// Sample implements Sampler.
func (s stalenessSampler) Sample(ctx context.Context, in *SampleInput) ([]int64, error) {
	vs, ok := in.Source.(VersionSource)
	if !ok {
		return nil, &InvalidError{Field: "max_staleness", Value: s.st.Max, Rule: "a store that keeps weight versions"}
	}
	fs := &freshSource{SampleSource: in.Source, ctx: ctx, floor: vs.CurrentVersion() - s.st.Max, known: map[int64]bool{}, newest: s.st.Version == StalenessNewest}
	// Judge only what the inner sampler looks at: its own window if it asks for one,
	// else one batch (samplers that need more page on with ReadyAfter, which judges as
	// it goes). Reading versions is the bound's whole cost.
	want := in.BatchSize
	if ws, ok := s.inner.(WindowSampler); ok {
		want = max(ws.Window(in.BatchSize), in.BatchSize)
	}
	head := in.Ready[:min(want, len(in.Ready))]
	ready, err := fs.fresh(head)
	if err != nil {
		return nil, err
	}
	more := in.MoreReady || len(head) < len(in.Ready)
	if more && len(head) > 0 && len(ready) < want {
		// Stale samples made room: fill it from beyond.
		extra, m, err := fs.readyAfter(head[len(head)-1], want-len(ready))
		if err != nil {
			return nil, err
		}
		ready, more = append(ready, extra...), m
	}
	if fs.err != nil {
		return nil, fs.err
	}
	out := *in
	out.Ready, out.MoreReady, out.Source = ready, more, fs
	idx, err := s.inner.Sample(ctx, &out)
	if err != nil {
		return nil, err
	}
	if fs.err != nil {
		return nil, fs.err
	}
	for _, x := range idx {
		if fresh, seen := fs.known[x]; seen && !fresh {
			return nil, fmt.Errorf("%w: sampler returned index %d, which is stale", ErrInvalid, x)
		}
	}
	if s.st.Policy != StaleKeep && len(fs.stale) > 0 {
		vs.Drop(fs.stale)
	}
	return idx, nil
}

// freshSource is a SampleSource showing only samples whose weight version is ≥ floor
// (or that have none).
type freshSource struct {
	SampleSource
	ctx   context.Context
	floor int64
	known map[int64]bool // index → fresh
	stale []int64
	err   error
	// newest judges LastWeightVersionField first (StalenessNewest).
	newest bool
}

// fresh returns the fresh ones of idx, in order.
func (f *freshSource) fresh(idx []int64) ([]int64, error) {
	var ask []int64
	for _, x := range idx {
		if _, ok := f.known[x]; !ok {
			ask = append(ask, x)
		}
	}
	if len(ask) > 0 {
		vals, err := f.versions(ask)
		if err != nil {
			return nil, err
		}
		for i, x := range ask {
			fresh := true
			if vals[i] != nil {
				if v, ok := VersionValue(vals[i]); ok && v < f.floor {
					fresh = false
				}
			}
			f.known[x] = fresh
			if !fresh {
				f.stale = append(f.stale, x)
			}
		}
	}
	out := make([]int64, 0, len(idx))
	for _, x := range idx {
		if f.known[x] {
			out = append(out, x)
		}
	}
	return out, nil
}

// versions reads the judged version of each of idx (nil: none).
func (f *freshSource) versions(idx []int64) ([]any, error) {
	if !f.newest {
		return f.SampleSource.Values(f.ctx, WeightVersionField, idx)
	}
	vals, err := f.SampleSource.Values(f.ctx, LastWeightVersionField, idx)
	if err != nil {
		return nil, err
	}
	var miss []int64
	for i, v := range vals {
		if v == nil {
			miss = append(miss, idx[i])
		}
	}
	if len(miss) > 0 {
		old, err := f.SampleSource.Values(f.ctx, WeightVersionField, miss)
		if err != nil {
			return nil, err
		}
		m := 0
		for i, v := range vals {
			if v == nil {
				vals[i] = old[m]
				m++
			}
		}
	}
	return vals, nil
}

// readyAfter pages through the ready samples after after until n fresh ones.
func (f *freshSource) readyAfter(after int64, n int) ([]int64, bool, error) {
	var out []int64
	page := max(n, 256)
	for {
		got, more := f.SampleSource.ReadyAfter(after, page)
		fr, err := f.fresh(got)
		if err != nil {
			return nil, false, err
		}
		out = append(out, fr...)
		if len(out) >= n {
			return out[:n], more || len(out) > n, nil
		}
		if !more || len(got) == 0 {
			return out, false, nil
		}
		after = got[len(got)-1]
	}
}

// ReadyAfter implements SampleSource.
func (f *freshSource) ReadyAfter(after int64, n int) ([]int64, bool) {
	out, more, err := f.readyAfter(after, n)
	if err != nil && f.err == nil {
		f.err = err
	}
	return out, more
}

// DropGroups implements GroupDropper.
func (f *freshSource) DropGroups(groups [][]int64) {
	if d, ok := f.SampleSource.(GroupDropper); ok {
		d.DropGroups(groups)
	}
}

// DropUnused implements GroupDropper.
func (f *freshSource) DropUnused(indexes []int64) {
	if d, ok := f.SampleSource.(GroupDropper); ok {
		d.DropUnused(indexes)
	}
}

// ReadyUnheld implements SampleSource.
func (f *freshSource) ReadyUnheld(n int) ([]int64, error) {
	for m := max(n, 64); ; m *= 4 {
		got, err := f.SampleSource.ReadyUnheld(m)
		if err != nil {
			return nil, err
		}
		fr, err := f.fresh(got)
		if err != nil {
			return nil, err
		}
		if len(fr) >= n || len(got) < m {
			return fr[:min(n, len(fr))], nil
		}
	}
}

// WithStaleness returns sampler bounded by st (sampler itself when st is nil). Stores
// get it from NormalizeMetaRequest.
func withStaleness(sampler Sampler, st *Staleness) Sampler {
	if st == nil {
		return sampler
	}
	return stalenessSampler{inner: sampler, st: *st}
}

// LeaseMax bounds MetaRequest.Lease.
const LeaseMax = 24 * time.Hour

// Commit consumes a batch handed out with a lease (MetaRequest.Lease): it is
// MarkConsumed of meta's indexes for meta.Task. A batch committed is never handed to
// the task again; one whose lease expired before the commit may have been handed out
// again meanwhile (the commit still consumes it). Errors as for MarkConsumed.
func (r *Reader) Commit(ctx context.Context, meta *BatchMeta) error {
	if meta == nil {
		return &InvalidError{Field: "meta", Value: nil, Rule: "the batch metadata returned by a leased GetMeta"}
	}
	if len(meta.Indexes) == 0 {
		return nil
	}
	if err := CheckIndexes(meta.Indexes); err != nil {
		return err
	}
	return r.s.MarkConsumed(ctx, meta.Task, meta.Partition, meta.Indexes)
}

// GetBatchLeased is GetBatch with req.Lease set to lease (> 0): the batch is handed
// out without being consumed and is held from the task's other reads for lease; Commit
// consumes it. If the caller dies before Commit, the batch is ready again once the
// lease expires — so a trainer killed between reading a batch and its optimizer step
// reads exactly that batch again after its restart, and never a committed one.
func (r *Reader) GetBatchLeased(ctx context.Context, req *MetaRequest, lease time.Duration) (*Batch, *BatchMeta, error) {
	if lease <= 0 || lease > LeaseMax {
		return nil, nil, &InvalidError{Field: "lease", Value: lease, Rule: "> 0 and ≤ 24h"}
	}
	rq := *req
	rq.Lease = lease
	return r.GetBatch(ctx, &rq)
}

// SetVersion advances the queue's current weight version to version (the trainer,
// after an optimizer step); readers bounded by staleness and blocked producers see it
// at once. Errors: *InvalidError (version below the current one), ErrClosed, and
// *InvalidError for a store without versions.
func (q *Queue) SetVersion(ctx context.Context, version int64) error {
	v, ok := q.s.(Versioner)
	if !ok {
		return &InvalidError{Field: "store", Value: q.s.Name(), Rule: "a store that keeps weight versions"}
	}
	if err := CheckSetVersion(version); err != nil {
		return err
	}
	return v.SetVersion(ctx, version)
}

// CheckSetVersion checks the argument of a SetVersion: a version ≥ 0 (a negative one is
// a bad argument whatever the current version). Errors: *InvalidError naming version.
func CheckSetVersion(version int64) error {
	if version < 0 {
		return &InvalidError{Field: "version", Value: version, Rule: "use an integer ≥ 0"}
	}
	return nil
}

// CheckVersionForward is the rule every store's SetVersion (and rl.Weights.Publish)
// applies against the queue's current version: versions never go back, the same version
// again is allowed (a no-op). Errors: *InvalidError naming version, the current version
// and what is allowed.
func CheckVersionForward(version, current int64) error {
	if version < current {
		return &InvalidError{Field: "version", Value: version,
			Rule: fmt.Sprintf("the queue is at version %d: use %d or more (versions never go back)", current, current)}
	}
	return nil
}

// Version returns the queue's current weight version (0 until SetVersion), for
// rollout workers deciding when to reload weights. Errors as for SetVersion.
func (q *Queue) Version(ctx context.Context) (int64, error) {
	v, ok := q.s.(Versioner)
	if !ok {
		return 0, &InvalidError{Field: "store", Value: q.s.Name(), Rule: "a store that keeps weight versions"}
	}
	return v.Version(ctx)
}

// PutVersioned appends recs to partition, each tagged with WeightVersionField =
// version (and TargetVersionField = target when target ≥ 0), with opts (nil: none): its
// idempotency id (PutOpts.ID: a repeat of the call with the same id — after a lost
// answer, a server restart — writes nothing and answers the same indexes) and its
// admission (PutOpts.Admission). Returns their indexes as PutPartition does. Errors as
// for PutPartition, and *BackpressureError (matching ErrQueueFull) when the admission
// refuses the put.
func (q *Queue) PutVersioned(ctx context.Context, partition string, recs []Record, version, target int64, opts *PutOpts) ([]int64, error) {
	if version < 0 {
		return nil, &InvalidError{Field: "weight_version", Value: version, Rule: "≥ 0"}
	}
	tagged := taggedCopies(recs, func(c Record) {
		c[WeightVersionField] = version
		if target >= 0 {
			c[TargetVersionField] = target
		}
	})
	return q.s.PutPartition(ctx, partition, tagged, opts)
}

// taggedCopies returns a copy of each of recs with the fields tag sets on it (room is
// made for four), leaving recs as they are: the caller's records are not changed.
func taggedCopies(recs []Record, tag func(Record)) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		c := make(Record, len(r)+4)
		for k, v := range r {
			c[k] = v
		}
		tag(c)
		out[i] = c
	}
	return out
}

// PutAdmitted is PutPartition with opts (nil: none): its admission (PutOpts.Admission,
// see Admission) and idempotency id (PutOpts.ID).
func (q *Queue) PutAdmitted(ctx context.Context, partition string, recs []Record, opts *PutOpts) ([]int64, error) {
	return q.s.PutPartition(ctx, partition, recs, opts)
}

// CheckAdmission checks a put's Admission (nil is none). Errors: *InvalidError.
func CheckAdmission(a *Admission) error { return a.validate() }
