// Package getmeta holds what every data store's GetMeta does around its own hand-out
// transaction: the request normalized and the attempts repeated under one wait deadline
// (Loop), the wait for a change or a lease's expiry between attempts (AwaitChange), the
// BatchMeta of the samples handed out (Fields, Fold), and GetBatch's data read
// overlapping the hand-out's commit (Ahead). The file store and the distributed store share it;
// it is internal so that it is not part of the data SDK.
package getmeta

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// Attempt is one attempt of a GetMeta of rq (normalized) with its sampler: it hands out a
// batch (done), or, in wait mode, waits for a change of the partition (not done: the
// loop tries again) or for deadline, the end of the wait (done, an error).
type Attempt func(rq *persist.MetaRequest, sampler persist.Sampler, deadline <-chan time.Time) (meta *persist.BatchMeta, done bool, err error)

// Loop is a store's GetMeta: req normalized (persist.NormalizeMetaRequest, its sampler
// resolved in samplers), then, between enter and leave (the store's open check and its
// count of calls in flight), attempt until one is done. In wait mode the attempts share
// one deadline, rq.WaitTimeout from the start, and each attempt after the first (it
// follows a wait) is preceded by rq.Recheck when set. A wait that times out is
// rq.TimeoutErrorWith the store's stats (nil, or stats failing: rq.TimeoutError), so the
// error says what the partition holds for the task. Errors: NormalizeMetaRequest's,
// enter's, the attempt's, Recheck's.
func Loop(req *persist.MetaRequest, samplers persist.Samplers, enter func() error, leave func(), stats func() (persist.Stats, error), attempt Attempt) (*persist.BatchMeta, error) {
	rq, sampler, err := persist.NormalizeMetaRequest(req, samplers)
	if err != nil {
		return nil, err
	}
	if err := enter(); err != nil {
		return nil, err
	}
	defer leave()
	var deadline <-chan time.Time
	if rq.Wait {
		t := time.NewTimer(rq.WaitTimeout())
		defer t.Stop()
		deadline = t.C
	}
	final, waited := false, false
	for {
		if waited && rq.Recheck != nil {
			if err := rq.Recheck(); err != nil {
				return nil, err // before the hand-out: nothing consumed or leased
			}
		}
		waited = true // an attempt not done has waited (for a change, a lease or the deadline)
		meta, done, err := attempt(&rq, sampler, deadline)
		if final {
			if done && !errors.Is(err, persist.ErrTimeout) {
				return meta, err
			}
			return nil, timeoutError(&rq, stats)
		}
		if done {
			if !rq.Wait || !errors.Is(err, persist.ErrTimeout) {
				return meta, err
			}
			// The wait is over: one last attempt, at the deadline, so that samples that
			// became ready without a commit to wake the wait (a lease that expired) are
			// handed out rather than timed out. Its own wait ends at once.
			final = true
			deadline = closedTime
		}
	}
}

// timeoutError is the error of a wait of rq that timed out: rq.TimeoutErrorWith the
// store's stats, or rq.TimeoutError without them (nil, or failing: a closing store).
func timeoutError(rq *persist.MetaRequest, stats func() (persist.Stats, error)) error {
	if stats != nil {
		if st, err := stats(); err == nil {
			return rq.TimeoutErrorWith(st)
		}
	}
	return rq.TimeoutError()
}

// closedTime is a deadline already passed (the last attempt of Loop).
var closedTime = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// minLeaseWake bounds how soon awaitLease wakes for a lease's expiry: a clock a little
// ahead of the one that judges leases (the distributed store's catalog) makes the next
// attempt find it still active, and the next wait then wakes again after at least this.
const minLeaseWake = 5 * time.Millisecond

// AwaitChange is what an attempt of rq that found no full batch waits for before the
// next: Await, which, in a wait with a deadline, also wakes (nil: go on) when the
// earliest lease of rq's task in its partition expires (nextLeaseExpiry: the time until
// then, 0 for no lease), whose samples are then ready again with no commit to wake the
// wait (found by a trial: a waiting read timed out while leased samples became ready).
// Errors: nextLeaseExpiry's, Await's.
func AwaitChange[T any](ctx context.Context, rq *persist.MetaRequest, wake <-chan T, deadline <-chan time.Time, closing <-chan struct{},
	nextLeaseExpiry func(ctx context.Context, partition, task string) (time.Duration, error)) error {
	var leaseIn time.Duration
	if deadline != nil {
		var err error
		if leaseIn, err = nextLeaseExpiry(ctx, rq.Partition, rq.Task); err != nil {
			return err
		}
	}
	return awaitLease(ctx, rq, wake, leaseIn, deadline, closing)
}

// awaitLease is Await that also wakes (nil: go on) after leaseIn, when it is > 0.
func awaitLease[T any](ctx context.Context, rq *persist.MetaRequest, wake <-chan T, leaseIn time.Duration, deadline <-chan time.Time, closing <-chan struct{}) error {
	var expired <-chan time.Time // nil (never) without a lease to wait for
	if leaseIn > 0 {
		t := time.NewTimer(max(leaseIn, minLeaseWake))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-wake:
		return nil
	case <-expired:
		return nil
	case <-deadline:
		return rq.TimeoutError()
	case <-closing:
		return persist.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Await waits, for an attempt of rq that found no full batch, until wake fires (nil: go
// on), deadline passes (rq.TimeoutError), the store closes (closing: persist.ErrClosed)
// or ctx ends (its error).
func Await[T any](ctx context.Context, rq *persist.MetaRequest, wake <-chan T, deadline <-chan time.Time, closing <-chan struct{}) error {
	return awaitLease(ctx, rq, wake, 0, deadline, closing)
}

// Fields returns the BatchMeta of idx handed out for rq, whose fields have the kinds of
// schema (the kind's name as DType and a scalar shape; lists without either), and the
// positions in its Fields of the tensor fields, whose dtype and shape the store then
// folds in from the samples' values (Fold).
func Fields(rq *persist.MetaRequest, idx []int64, schema persist.Schema) (*persist.BatchMeta, []int) {
	m := &persist.BatchMeta{Size: len(idx), Indexes: idx, Partition: rq.Partition, Task: rq.Task}
	var tensors []int
	for _, f := range rq.Fields {
		k, _ := schema.Kind(f)
		fm := persist.FieldMeta{Name: f, Kind: k}
		switch k {
		case persist.KindTensor, persist.KindNDArray, persist.KindWireTensor:
			tensors = append(tensors, len(m.Fields))
		case persist.KindInt64List, persist.KindFloat64List:
		default:
			fm.DType, fm.Shape = string(k), []int{}
		}
		m.Fields = append(m.Fields, fm)
	}
	return m, tensors
}

// Fold adds a tensor value's dtype and shape to fm: first sets them; a later value with
// another shape leaves fm without one (nil), with another dtype without one ("").
func Fold(fm *persist.FieldMeta, dtype string, shape []int, first bool) {
	if first {
		fm.DType, fm.Shape = dtype, shape
		return
	}
	if fm.Shape != nil && !slices.Equal(fm.Shape, shape) {
		fm.Shape = nil
	}
	if dtype != fm.DType {
		fm.DType = ""
	}
}
