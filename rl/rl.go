// Package rl runs the rollouts of a reinforcement-learning loop as jobs and keeps what they
// produce as records of a data queue (issue 26, item 8; the Python SDK's lakeshore.rl,
// docs/python.md "Rollouts as jobs"):
//
//   - Weights keeps a policy's weights by version in a scope (package scope), next to the
//     data queue's current version (persist.Queue.SetVersion): Publish writes version v's
//     weights, then advances the queue to v, so a worker that sees v always finds them.
//   - Rollout makes a job handler from a rollout function: each job reads the queue's
//     current version, reloads the weights when it moved since the handler's last job,
//     runs the function and puts its records tagged with that version
//     (persist.Queue.PutVersioned), waiting while back-pressure holds them.
//   - Pool keeps N rollout jobs queued or running, N sized by the back-pressure window.
//
// The weights are stored wire-encoded (package wire) under {Key}/{version:012d}, the
// layout of the Python SDK, so a Go trainer and Python rollout workers (or the reverse)
// share them.
package rl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/scope"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// DefaultKey is the key prefix of Weights when Key is empty.
const DefaultKey = "weights"

// Policy is the weights a rollout job runs with.
type Policy struct {
	// Version is the data queue's current version when the job started; every record
	// the job puts is tagged with it.
	Version int64
	// Weights is the value published for Version (Weights.Publish), decoded by the wire
	// codec; nil when none was published.
	Weights any
}

// Weights is a policy's weights by version in a scope, next to a data queue's current
// version. A published version's key is never rewritten by Publish of the current
// version, so a reader never sees half of an update; old versions are not pruned.
type Weights struct {
	// Data is the data queue whose current version the weights follow. Required.
	Data *persist.Queue
	// Scope holds the weights. Required.
	Scope *scope.Scope
	// Key prefixes the weights' keys: version v is {Key}/{v:012d}. Default DefaultKey.
	Key string
}

func (w *Weights) key(version int64) (string, error) {
	if version < 0 {
		return "", &persist.InvalidError{Field: "version", Value: version, Rule: "an integer ≥ 0"}
	}
	k := w.Key
	if k == "" {
		k = DefaultKey
	}
	return fmt.Sprintf("%s/%012d", k, version), nil
}

// Publish stores weights (any value the wire codec encodes: []byte, wire.NDArray, maps of
// them) as version, then advances the data queue's current version to it. Publishing the
// current version again writes nothing when its weights are there (a restarted trainer
// repeats its last publish harmlessly). Errors: *persist.InvalidError for a negative
// version or one below the current version (versions never go back); the wire codec's
// for a value it cannot encode; the scope's and the queue's.
func (w *Weights) Publish(ctx context.Context, version int64, weights any) error {
	key, err := w.key(version)
	if err != nil {
		return err
	}
	current, err := w.Data.Version(ctx)
	if err != nil {
		return err
	}
	if err := persist.CheckVersionForward(version, current); err != nil {
		return err
	}
	if version > current || !w.Exists(ctx, version) {
		b, err := wire.Marshal(weights)
		if err != nil {
			return fmt.Errorf("encode the weights of version %d: %w", version, err)
		}
		if _, err := w.Scope.Write(ctx, key, b); err != nil {
			return err
		}
	}
	return w.Data.SetVersion(ctx, version)
}

// Load returns the weights published as version, decoded. Errors: plane.ErrNotFound
// (matched by errors.Is) when none were; the scope's; the codec's.
func (w *Weights) Load(ctx context.Context, version int64) (any, error) {
	key, err := w.key(version)
	if err != nil {
		return nil, err
	}
	b, err := w.Scope.Read(ctx, key)
	if err != nil {
		return nil, err
	}
	v, err := wire.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("decode the weights of version %d: %w", version, err)
	}
	return v, nil
}

// Exists reports whether weights were published as version (false on any read error).
func (w *Weights) Exists(ctx context.Context, version int64) bool {
	key, err := w.key(version)
	if err != nil {
		return false
	}
	_, err = w.Scope.Read(ctx, key)
	return err == nil
}

// Current returns the queue's current version with its weights (nil Weights when none
// were published for it).
func (w *Weights) Current(ctx context.Context) (Policy, error) {
	v, err := w.Data.Version(ctx)
	if err != nil {
		return Policy{}, err
	}
	weights, err := w.Load(ctx, v)
	if errors.Is(err, plane.ErrNotFound) {
		return Policy{Version: v}, nil
	}
	if err != nil {
		return Policy{}, err
	}
	return Policy{Version: v, Weights: weights}, nil
}

// RolloutFunc is a rollout: it produces records with the policy of the job (its
// payload read with job.Decode).
type RolloutFunc func(ctx context.Context, policy Policy, job *lakeshore.Job) ([]persist.Record, error)

// RolloutOptions configure Rollout. A nil *RolloutOptions means all defaults.
type RolloutOptions struct {
	// Partition is the data queue's partition of the records. Default "default".
	Partition string
	// Admission is the back-pressure of the puts (nil: none). With Block, a put the
	// trainer's unconsumed records hold back waits Timeout and is tried again, for as
	// long as the job runs (its context): back-pressure, not failure. Without Block a
	// refused put is tried again every RetryInterval.
	Admission *persist.Admission
	// RetryInterval spaces the tries of a refused put. Default 50 ms.
	RetryInterval time.Duration
}

// RolloutResult is a rollout job's result.
type RolloutResult struct {
	// Records is how many records the job put.
	Records int `json:"records"`
	// WeightVersion is the version they were tagged with.
	WeightVersion int64 `json:"weight_version"`
}

// Rollout returns the job handler of fn (bind it with lakeshore.Handle and run it with
// RunWorker): each job reads the data queue's current version, loads that version's
// weights when it moved since this handler's last job (nil Weights when none were
// published), runs fn and puts its records to w.Data in one put tagged
// WeightVersionField = the version, so a group is never split. Its result is a
// map{"records": n, "weight_version": v}, as the Python SDK's. A retried job runs fn
// again, and its put carries the same put id as every attempt's (RolloutPutID(job.ID,
// 0)): when an earlier attempt's put committed (its worker killed before the job's ack),
// the store answers the retry with those indexes and writes nothing, so each job's
// records are in the queue once — those of the first attempt whose put committed, also
// when the retry's fn returns another number of records (the store refuses that repeat,
// and Rollout takes the refusal as done). The store keeps put ids for
// persist.PutIDRetention: a retry later than that writes its records again.
func Rollout(w *Weights, fn RolloutFunc, opts *RolloutOptions) lakeshore.HandlerFunc {
	var o RolloutOptions
	if opts != nil {
		o = *opts
	}
	if o.Partition == "" {
		o.Partition = "default"
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 50 * time.Millisecond
	}
	var mu sync.Mutex
	var cached *Policy
	return func(ctx context.Context, job *lakeshore.Job) (any, error) {
		v, err := w.Data.Version(ctx)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		p := cached
		mu.Unlock()
		if p == nil || p.Version != v {
			np := Policy{Version: v}
			weights, err := w.Load(ctx, v)
			switch {
			case err == nil:
				np.Weights = weights
			case !errors.Is(err, plane.ErrNotFound):
				return nil, err
			}
			mu.Lock()
			cached = &np
			mu.Unlock()
			p = &np
		}
		recs, err := fn(ctx, *p, job)
		if err != nil {
			return nil, err
		}
		if len(recs) > 0 {
			for {
				_, err = w.Data.PutVersioned(ctx, o.Partition, recs, p.Version, -1, &persist.PutOpts{ID: RolloutPutID(job.ID, 0), Admission: o.Admission})
				if writtenBefore(err) {
					err = nil // an earlier attempt's records of another count stand
				}
				if !errors.Is(err, persist.ErrQueueFull) {
					break
				}
				select {
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				case <-time.After(o.RetryInterval):
				}
			}
			if err != nil {
				return nil, err
			}
		}
		return map[string]any{"records": int64(len(recs)), "weight_version": p.Version}, nil
	}
}

// RolloutPutID is the put id (persist.PutOpts.ID) of put number k of rollout job jobID,
// "rollout.{jobID}.{k}": the same in every attempt of the job and in both SDKs (Go's
// Rollout makes one put, k = 0; Python's @rollout one per flush_every records), so a
// retried attempt's put repeats the one an earlier attempt committed instead of writing
// its records twice.
func RolloutPutID(jobID string, k int) string { return "rollout." + jobID + "." + strconv.Itoa(k) }

// writtenBefore reports whether a rollout's put was refused because its put id names an
// earlier put of another count (an earlier attempt of the job wrote it): the code
// put_id_reused (persist.ErrPutIDReused), never another refusal of the id (too long, bad
// characters), which would drop the records and report success.
func writtenBefore(err error) bool {
	return errors.Is(err, persist.ErrPutIDReused)
}

// Pool keeps InFlight jobs of a rollout queue queued or running.
type Pool struct {
	// Queue is the rollout jobs' queue. Required.
	Queue *lakeshore.Queue
	// InFlight is how many jobs to keep queued or running (≥ 1).
	InFlight int
	// Payload returns the payload of job i (0, 1, 2, … over the queue's life).
	// Required.
	Payload func(i int64) any
	// KeyPrefix makes job i's idempotency key {KeyPrefix}{i}. Default "rollout-".
	KeyPrefix string
}

// PoolForWindow returns a Pool sized by the back-pressure window: max(1, maxUnconsumed /
// recordsPerJob) jobs, as many as the trainer's bound holds the output of (more would
// only wait on back-pressure). Errors: *persist.InvalidError for recordsPerJob < 1.
func PoolForWindow(q *lakeshore.Queue, maxUnconsumed, recordsPerJob int64, payload func(i int64) any) (*Pool, error) {
	if recordsPerJob < 1 {
		return nil, &persist.InvalidError{Field: "records_per_job", Value: recordsPerJob, Rule: "≥ 1"}
	}
	n := maxUnconsumed / recordsPerJob
	if n < 1 {
		n = 1
	}
	return &Pool{Queue: q, InFlight: int(n), Payload: payload}, nil
}

// nextListed bounds how many of the queue's newest jobs next reads.
const nextListed = 1000

// next returns the number of the pool's next job: one more than the highest i of the jobs
// keyed {prefix}{i} among the queue's newest nextListed (0 when there are none). Not the
// count of the queue's jobs: that goes back when finished jobs are trimmed (Queue.Trim, or
// the plane's retention), and the numbers it then named were used already, their keys
// freed by the trim, so their payloads were submitted again. Jobs are submitted in the
// order of their numbers, so the highest is among the newest; when every job was trimmed
// it starts again from 0.
func (p *Pool) next(ctx context.Context, prefix string) (int64, error) {
	page, err := p.Queue.List(ctx, &lakeshore.ListOptions{KeyPrefix: prefix, Limit: nextListed})
	if err != nil {
		return 0, err
	}
	var next int64
	for _, inv := range page.Invocations {
		i, err := strconv.ParseInt(strings.TrimPrefix(inv.Key, prefix), 10, 64)
		if err == nil && i >= 0 && i < math.MaxInt64 {
			next = max(next, i+1)
		}
	}
	return next, nil
}

var allStates = []lakeshore.State{
	lakeshore.StateQueued, lakeshore.StateRunning, lakeshore.StateSucceeded, lakeshore.StateFailed,
	lakeshore.StateCancelled, lakeshore.StateKilled, lakeshore.StateTimeout,
}

// Live returns the pool's jobs queued or running now, and how many the queue holds in
// all (those not trimmed).
func (p *Pool) Live(ctx context.Context) (live, total int64, err error) {
	for _, s := range allStates {
		n, err := p.Queue.Count(ctx, s)
		if err != nil {
			return 0, 0, err
		}
		if s == lakeshore.StateQueued || s == lakeshore.StateRunning {
			live += n
		}
		total += n
	}
	return live, total, nil
}

// TopUp submits jobs until InFlight are queued or running (call it after each trainer
// step: finished jobs are replaced), and returns the new ids. Job i goes with key
// {KeyPrefix}{i}, so a repeated top-up makes no second job; i counts on from the highest
// number among the queue's newest jobs, past finished jobs that were trimmed. Errors:
// *persist.InvalidError for InFlight < 1 or a nil Payload; the queue's.
func (p *Pool) TopUp(ctx context.Context) ([]string, error) {
	if p.InFlight < 1 {
		return nil, &persist.InvalidError{Field: "in_flight", Value: p.InFlight, Rule: "≥ 1"}
	}
	if p.Payload == nil {
		return nil, &persist.InvalidError{Field: "payload", Value: nil, Rule: "a function of the job's number"}
	}
	live, _, err := p.Live(ctx)
	if err != nil {
		return nil, err
	}
	missing := int64(p.InFlight) - live
	if missing <= 0 {
		return nil, nil
	}
	prefix := p.KeyPrefix
	if prefix == "" {
		prefix = "rollout-"
	}
	next, err := p.next(ctx, prefix)
	if err != nil {
		return nil, err
	}
	batch := make([]lakeshore.Submission, 0, missing)
	for i := next; i < next+missing; i++ {
		batch = append(batch, lakeshore.Submission{Payload: p.Payload(i), SubmitOptions: lakeshore.SubmitOptions{Key: fmt.Sprintf("%s%d", prefix, i)}})
	}
	return p.Queue.SubmitMany(ctx, batch)
}
