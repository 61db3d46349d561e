package lakeshore

import (
	"context"
	"iter"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// ErrorTypeBadPayload is the ErrorInfo.Type of a job whose payload does not decode into its
// Func's input type. Such a job fails at once, without retry: no attempt would decode it.
const ErrorTypeBadPayload = "bad_payload"

// Func binds a typed Go function to a queue — the Go form of a @udf decorator — and gives
// both sides from one value: producers call Submit, Call and Result with typed values;
// RunWorker runs the function on the queue's jobs (a *Func is a Handler). In and Out ride
// the wire codec (structs by their msgpack tags, as wire.Marshal writes them).
//
// Body kinds: a plain function (NewFunc), whose return value is the result, and a streaming
// function (NewStreamFunc), which emits values while it runs — each a VALUE frame that
// Stream readers get live — and returns the result. An error from the body nacks the job
// with retry (mark it Permanent to fail at once); a panic nacks it with retry. A payload
// that does not decode into In fails the job without retry, with ErrorInfo type
// "bad_payload" and a message naming the type. Safe for concurrent use.
type Func[In, Out any] struct {
	q  *Queue
	fn HandlerFunc
}

// NewFunc binds body to queue (opts: the handle's namespace and claim order; nil for
// defaults). Errors: *InvalidError for a bad queue name or options.
func NewFunc[In, Out any](d *Dispatch, queue string, body func(ctx context.Context, in In) (Out, error), opts *QueueOptions) (*Func[In, Out], error) {
	return bindFunc[In, Out](d, queue, body == nil, opts, func(ctx context.Context, _ *Queue, _ *Job, in In) (any, error) {
		return body(ctx, in)
	})
}

// NewStreamFunc binds a streaming body to queue: each value body passes to emit is appended
// to the job's journal as a VALUE frame (emit returns the post's error, e.g. ErrLeaseLost
// once the job was killed) and body's return value is the result. Errors: as NewFunc.
func NewStreamFunc[In, Out, V any](d *Dispatch, queue string, body func(ctx context.Context, in In, emit func(V) error) (Out, error), opts *QueueOptions) (*Func[In, Out], error) {
	return bindFunc[In, Out](d, queue, body == nil, opts, func(ctx context.Context, q *Queue, job *Job, in In) (any, error) {
		emit := func(v V) error {
			_, err := q.Post(ctx, job, v)
			return err
		}
		return body(ctx, in, emit)
	})
}

// bindFunc is the binding NewFunc and NewStreamFunc share: d and the body checked (noBody:
// the body is nil), the queue's handle made with opts, and run called on each job with its
// payload decoded into In (a payload that does not, fails the job: decodeInput).
func bindFunc[In, Out any](d *Dispatch, queue string, noBody bool, opts *QueueOptions, run func(ctx context.Context, q *Queue, job *Job, in In) (any, error)) (*Func[In, Out], error) {
	if d == nil {
		return nil, plane.Invalid("dispatch", nil, "pass the *Dispatch that Open or New returned, not nil")
	}
	if noBody {
		return nil, plane.Invalid("body", nil, "pass a non-nil function")
	}
	q, err := d.Queue(queue, opts)
	if err != nil {
		return nil, err
	}
	fn := func(ctx context.Context, job *Job) (any, error) {
		var in In
		if err := decodeInput(job, &in); err != nil {
			return nil, err
		}
		return run(ctx, q, job, in)
	}
	return &Func[In, Out]{q: q, fn: fn}, nil
}

// payloadError is a payload that does not decode into a Func's input type.
type payloadError struct{ err error }

func (e *payloadError) Error() string     { return "bad payload: " + e.err.Error() }
func (e *payloadError) Unwrap() error     { return e.err }
func (e *payloadError) ErrorType() string { return ErrorTypeBadPayload }

func decodeInput(job *Job, into any) error {
	if err := job.Decode(into); err != nil {
		return Permanent(&payloadError{err: err})
	}
	return nil
}

// Binding returns the queue and the function, for RunWorker.
func (f *Func[In, Out]) Binding() HandlerBinding {
	if f == nil {
		return HandlerBinding{} // RunWorker reports the missing func
	}
	return HandlerBinding{Queue: f.q.Name(), QueueOptions: &f.q.opts, Func: f.fn}
}

// Queue returns the handle on f's queue, for the verbs Func does not wrap (Get, Cancel,
// Kill, Count, …).
func (f *Func[In, Out]) Queue() *Queue { return f.q }

// Submit enqueues in and returns the invocation id. Errors: as Queue.Submit.
func (f *Func[In, Out]) Submit(ctx context.Context, in In, opts *SubmitOptions) (string, error) {
	return f.q.Submit(ctx, in, opts)
}

// Result waits until invocation id is terminal and returns its result as an Out.
// Errors: as Queue.Result.
func (f *Func[In, Out]) Result(ctx context.Context, id string, opts *ResultOptions) (Out, error) {
	var out Out
	err := f.q.Result(ctx, id, &out, opts)
	return out, err
}

// Call submits in and waits for the result: the typed one-line RPC. It returns the
// invocation id with the outcome, so a caller whose wait timed out can wait again with
// Result. Errors: as Queue.Call.
func (f *Func[In, Out]) Call(ctx context.Context, in In, opts *CallOptions) (Out, string, error) {
	var out Out
	id, err := f.q.Call(ctx, in, &out, opts)
	return out, id, err
}

// Stream returns the VALUE frames of invocation id (the values a streaming body emitted),
// live, from cursor since (FromStart for all); decode each with Frame.Decode. Errors: as
// Queue.Stream.
func (f *Func[In, Out]) Stream(ctx context.Context, id string, since int64, opts *StreamOptions) iter.Seq2[Frame, error] {
	return f.q.Stream(ctx, id, since, opts)
}
