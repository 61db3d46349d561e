package lakeshore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// Queue is a handle on one named queue of a plane, with the producer verbs (Submit, Result,
// Stream, Cancel, …), the worker verbs (Claim, Ack, Nack, Post, Working, …) and topics.
// Handles are cheap and stateless; make them with Dispatch.Queue. Safe for concurrent use.
//
// Invocation ids are global handles: the verbs that take an id (Result, Stream, Get,
// Cancel, Kill) act on that invocation whichever queue it was submitted to.
type Queue struct {
	d    *Dispatch
	name string
	opts QueueOptions // with defaults, validated
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Namespace returns the queue's namespace.
func (q *Queue) Namespace() string { return q.opts.Namespace }

// Kind returns the handle's claim order.
func (q *Queue) Kind() Kind { return q.opts.Kind }

// Temperature returns the handle's boltzmann temperature.
func (q *Queue) Temperature() float64 { return q.opts.Temperature }

// Submit enqueues payload and returns the new invocation's id: a ULID string that is the
// whole handle, usable from any process. payload is encoded with the wire codec (any value
// it encodes: maps, slices, numbers, strings, []byte, wire.NDArray, …; nil is allowed).
// opts is the envelope (key, priority, attempts, timeouts, metadata; nil: defaults). With a
// Key that already exists in the queue, Submit returns the existing id and enqueues nothing.
// Errors: *InvalidError (matches ErrInvalid) for a payload that does not encode or exceeds
// 16 MiB and for a bad option, with nothing submitted; an *AdmissionError (matching
// ErrQueueFull or ErrRateLimited) when the queue's admission block refuses it.
func (q *Queue) Submit(ctx context.Context, payload any, opts *SubmitOptions) (string, error) {
	var o SubmitOptions
	if opts != nil {
		o = *opts
	}
	ids, err := q.SubmitMany(ctx, []Submission{{Payload: payload, SubmitOptions: o}})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// SubmitMany enqueues a batch in one transaction and returns the ids in the batch's order
// (an existing key yields the existing id). The batch is all or nothing: when any payload
// does not encode or any option is invalid, nothing is submitted. An empty batch does
// nothing. A batch holds at most plane.SubmitManyMax (10,000) submissions: split larger
// ones. Errors: as Submit; an encoding error names the submission's index.
func (q *Queue) SubmitMany(ctx context.Context, batch []Submission) ([]string, error) {
	res, err := q.SubmitManyResults(ctx, batch)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids, nil
}

// SubmitResult is the outcome of one submission of SubmitManyResults (an alias of
// plane.SubmitResult): the invocation's ID, and Existing when its key or ID already existed
// and nothing was enqueued.
type SubmitResult = plane.SubmitResult

// SubmitManyResults is SubmitMany telling, for each submission, whether its key (or ID)
// already existed, so that nothing was enqueued for it (`lakeshore map` resumes with it).
func (q *Queue) SubmitManyResults(ctx context.Context, batch []Submission) ([]SubmitResult, error) {
	if len(batch) == 0 {
		return []SubmitResult{}, nil
	}
	params := &plane.SubmitManyParams{
		Namespace:   q.opts.Namespace,
		Queue:       q.name,
		Invocations: make([]plane.SubmitParams, len(batch)),
	}
	modes := modeRuns{q: q}
	for i, s := range batch {
		if s.Mode != "" || s.Function != "" {
			if err := modes.apply(ctx, &s.SubmitOptions); err != nil {
				if len(batch) > 1 {
					return nil, fmt.Errorf("submission [%d]: %w", i, err)
				}
				return nil, err
			}
		}
		if s.Delay < 0 {
			field := "delay"
			if len(batch) > 1 {
				field = fmt.Sprintf("delay [%d]", i)
			}
			return nil, plane.Invalid(field, s.Delay, "use a duration ≥ 0 (0: no delay)")
		}
		b, err := wire.Marshal(s.Payload)
		if err != nil {
			field := "payload"
			if len(batch) > 1 {
				field = fmt.Sprintf("payload [%d]", i)
			}
			return nil, encodeError(field, s.Payload, err)
		}
		params.Invocations[i] = plane.SubmitParams{
			ID:             s.ID,
			Payload:        b,
			Key:            s.Key,
			Priority:       s.Priority,
			MaxAttempts:    s.MaxAttempts,
			AttemptTimeout: s.AttemptTimeout,
			Deadline:       s.Deadline,
			Metadata:       s.Metadata,
			NotBefore:      s.NotBefore,
			Delay:          s.Delay,
			UniqueFor:      s.UniqueFor,
			Debounce:       s.Debounce,
			ConcurrencyKey: s.ConcurrencyKey,
			Requirement:    s.Requirement,
		}
	}
	res, err := q.d.drv.InvocationSubmitMany(ctx, params)
	if err != nil {
		return nil, err
	}
	if len(res) != len(batch) {
		return nil, fmt.Errorf("submit: the plane returned %d ids for %d submissions", len(res), len(batch))
	}
	return res, nil
}

// Result waits until invocation id is terminal and decodes its result into into, a pointer
// (as for wire.Unmarshal; nil discards the value). The wait ends after opts.Timeout or at
// ctx's deadline (see ResultOptions); waiting never changes the invocation.
// Errors: ErrNotFound; a *TerminalError matching ErrFailed (carrying the job's error),
// ErrCancelled (cancelled or killed) or ErrTimedOut (the job timed out); ErrTimeout when
// the wait ends first (also matching context.DeadlineExceeded when ctx's deadline ended
// it); ctx's error when ctx is cancelled; a decoding error when the result does not fit into;
// an *InvalidError, before any wait, when into is neither nil nor a non-nil pointer.
func (q *Queue) Result(ctx context.Context, id string, into any, opts *ResultOptions) error {
	if into != nil {
		if err := checkInto(into); err != nil {
			return err // before waiting: the result could not be decoded into it anyway
		}
	}
	inv, err := q.wait(ctx, id, opts.timeout())
	if err != nil {
		return err
	}
	if into == nil {
		return nil
	}
	if err := wire.Unmarshal(inv.Result, into); err != nil {
		return fmt.Errorf("decode result of %s into %T: %w", id, into, err)
	}
	return nil
}

// ResultValue is Result returning the result in its generic form, as wire.Decode returns
// it (nil, bool, int64, uint64, float32, float64, string, []byte, []any, map[string]any,
// time.Time or a wire extension type).
func (q *Queue) ResultValue(ctx context.Context, id string, opts *ResultOptions) (any, error) {
	inv, err := q.wait(ctx, id, opts.timeout())
	if err != nil {
		return nil, err
	}
	v, err := wire.Decode(inv.Result)
	if err != nil {
		return nil, fmt.Errorf("decode result of %s: %w", id, err)
	}
	return v, nil
}

// Call submits payload and waits for its result, decoding it into into (a pointer; nil
// discards it): the one-line RPC. It returns the invocation id with the outcome, so a
// caller whose wait timed out can wait again with Result. Errors: as Submit, then as Result.
func (q *Queue) Call(ctx context.Context, payload, into any, opts *CallOptions) (string, error) {
	var o CallOptions
	if opts != nil {
		o = *opts
	}
	id, err := q.Submit(ctx, payload, &o.SubmitOptions)
	if err != nil {
		return "", err
	}
	return id, q.Result(ctx, id, into, &ResultOptions{Timeout: o.Timeout})
}

// CallValue is Call returning the result in its generic form, as ResultValue.
func (q *Queue) CallValue(ctx context.Context, payload any, opts *CallOptions) (string, any, error) {
	var o CallOptions
	if opts != nil {
		o = *opts
	}
	id, err := q.Submit(ctx, payload, &o.SubmitOptions)
	if err != nil {
		return "", nil, err
	}
	v, err := q.ResultValue(ctx, id, &ResultOptions{Timeout: o.Timeout})
	return id, v, err
}

// wait waits for id to be terminal and returns it when it succeeded, else its error.
// timeout: > 0 bounds the wait; 0 means ctx's deadline or ResultTimeoutDefault; < 0 waits
// until ctx ends.
func (q *Queue) wait(ctx context.Context, id string, timeout time.Duration) (*plane.Invocation, error) {
	if timeout == 0 {
		timeout = ResultTimeoutDefault
		if dl, ok := ctx.Deadline(); ok {
			timeout = max(time.Until(dl), time.Nanosecond)
		}
	}
	var end time.Time
	if timeout > 0 {
		end = time.Now().Add(timeout)
	}
	for {
		chunk := waitChunk
		if !end.IsZero() {
			chunk = time.Until(end)
		}
		inv, err := q.d.drv.InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: max(chunk, time.Nanosecond)})
		switch {
		case err == nil:
			if terr := inv.TerminalError(); terr != nil {
				return nil, terr
			}
			return inv, nil
		case errors.Is(err, ErrTimeout) && end.IsZero() && ctx.Err() == nil:
			continue // no limit: wait another chunk
		case errors.Is(err, ErrTimeout):
			return nil, fmt.Errorf("result %s: waited %s: %w", id, timeout.Round(time.Millisecond), ErrTimeout)
		}
		return nil, plane.InvocationNotFound(ctxError(err), id)
	}
}

// waitChunk is the length of one driver wait when the caller asked for no limit.
const waitChunk = 10 * time.Minute

// ctxError makes an error caused by ctx's deadline match ErrTimeout too, so that every
// "the wait ended" error answers to errors.Is(err, ErrTimeout).
func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrTimeout) {
		return fmt.Errorf("%w (%w)", ErrTimeout, err)
	}
	return err
}

// Cancel moves the queued invocation id to cancelled and reports whether it did. On a
// running or terminal invocation it changes nothing and returns false (a running attempt
// finishes; see Kill). Errors: ErrNotFound.
func (q *Queue) Cancel(ctx context.Context, id string) (bool, error) {
	ok, err := q.d.drv.InvocationCancel(ctx, id)
	return ok, plane.InvocationNotFound(err, id)
}

// Kill ends the running invocation id as killed and revokes its lease, reporting whether it
// did: the worker's later Ack, Nack, Post and Heartbeat get ErrLeaseLost, and Working
// cancels its handler's context at the next heartbeat. On any other state it changes
// nothing and returns false. Errors: ErrNotFound.
func (q *Queue) Kill(ctx context.Context, id string) (bool, error) {
	ok, err := q.d.drv.InvocationKill(ctx, id)
	return ok, plane.InvocationNotFound(err, id)
}

// WaitReleased waits until the worker that ran invocation id when it was killed (or when
// its lease expired) confirms that its handler returned — for `lakeshore worker`, that the
// command's process group is gone — and returns the attempt it confirmed. Kill returns at
// once; the worker notices at its next heartbeat (within WorkerOptions.HeartbeatInterval,
// a third of the lease by default), cancels the handler, and confirms when it returns (an
// exec command gets SIGTERM, then SIGKILL after its grace period). opts.Timeout bounds the
// wait (default TopicTimeoutDefault, 5 s; negative: until ctx ends). A worker that dies
// without confirming (SIGKILL) never confirms: on Linux its commands die with it.
// Only a confirmation of the attempt the invocation last ran, by the worker that ran it
// (Invocation.Worker), counts; other values on the topic are logged and ignored.
// Errors: ErrNotFound; ErrTimeout when no confirmation came in time.
func (q *Queue) WaitReleased(ctx context.Context, id string, opts *ListenOptions) (attempt int, err error) {
	inv, err := q.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	topic, err := q.d.topicOf(inv.Namespace, inv.Queue, ReleasedTopicPrefix+id)
	if err != nil {
		return 0, err
	}
	timeout := TopicTimeoutDefault
	if opts != nil && opts.Timeout != 0 {
		timeout = opts.Timeout
	}
	end := time.Now().Add(timeout)
	since := FromStart
	for {
		left := &ListenOptions{Timeout: -1}
		if timeout > 0 {
			if left.Timeout = time.Until(end); left.Timeout <= 0 {
				break
			}
		}
		f, ok, err := topic.Listen(ctx, since, left)
		if err != nil {
			return 0, ctxError(err)
		}
		if !ok {
			break
		}
		since = f.Seq
		if releasedBy(f.Value, inv) {
			return inv.Attempt, nil
		}
		q.d.cfg.Logger.WarnContext(ctx, "ignored a release confirmation that does not match the invocation's attempt and worker",
			logKeyJobID, id)
	}
	return 0, fmt.Errorf("wait for the release of %s: no worker confirmed it: %w", id, ErrTimeout)
}

// releasedBy reports whether v, a value of the release topic, confirms the attempt inv
// last ran, by the worker that ran it: {"id": inv.ID, "attempt": inv.Attempt, "worker":
// inv.Worker}. Other values (a stale attempt's, a forger's) are not a confirmation.
func releasedBy(v any, inv *Invocation) bool {
	m, isMap := v.(map[string]any)
	if !isMap {
		return false
	}
	id, _ := m["id"].(string)
	attempt, _ := m["attempt"].(int64)
	worker, _ := m["worker"].(string)
	return id == inv.ID && inv.Attempt > 0 && attempt == int64(inv.Attempt) && worker == inv.Worker
}

// Count returns the number of the queue's invocations in state, counted from the rows that
// get claimed (so it agrees with what claimers see); cheap at any depth.
// Errors: *InvalidError for an unknown state.
func (q *Queue) Count(ctx context.Context, state State) (int64, error) {
	if _, err := plane.ParseState(string(state)); err != nil {
		return 0, err
	}
	return q.d.drv.InvocationCount(ctx, &plane.CountParams{Namespace: q.opts.Namespace, Queue: q.name, State: state})
}

// Len returns the number of queued invocations: Count(ctx, StateQueued).
func (q *Queue) Len(ctx context.Context) (int64, error) { return q.Count(ctx, StateQueued) }

// Get returns invocation id as stored now: state, attempt, timestamps, result or error.
// Errors: ErrNotFound (unknown or trimmed).
func (q *Queue) Get(ctx context.Context, id string) (*Invocation, error) {
	inv, err := q.d.drv.InvocationGet(ctx, id)
	if err != nil {
		return nil, plane.InvocationNotFound(err, id)
	}
	return &Invocation{Invocation: *inv}, nil
}

// Trim deletes the queue's terminal invocations, with their journals, that finished more
// than olderThan ago, freeing their keys, and returns how many it deleted. olderThan 0
// trims every terminal invocation of the queue but those still holding their keys for a
// dedup window (SubmitOptions.UniqueFor), kept until the window ends. The plane also trims on its own after its
// retention (7 days by default). Errors: *InvalidError for a negative olderThan.
func (q *Queue) Trim(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, plane.Invalid("trim age", olderThan, "use a duration ≥ 0")
	}
	return q.d.drv.InvocationTrim(ctx, &plane.TrimParams{
		Namespace:      q.opts.Namespace,
		Queue:          q.name,
		FinishedBefore: trimCutoff(q.d.cfg.Now(), olderThan),
	})
}
