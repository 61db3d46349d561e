package lakeshore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// Claim claims one job in the handle's order (QueueOptions.Kind) and gives it a lease with a
// fresh fencing token. It returns (nil, nil) when nothing is claimable, after waiting up to
// opts.Wait for a job (nil opts: no wait). Exactly one claimer wins a given invocation.
// The job must then be settled (Ack, Nack, PostFinal) or heartbeated within its lease,
// else it is re-queued (or ends as timeout when no attempts remain).
// Errors: *InvalidError for bad options; ctx's error when ctx ends the wait.
func (q *Queue) Claim(ctx context.Context, opts *ClaimOptions) (*Job, error) {
	jobs, err := q.claim(ctx, 1, opts)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return jobs[0], nil
}

// ClaimMany claims up to n (≥ 1) jobs at once, in the handle's order, each with its own
// lease. It returns an empty slice when nothing is claimable after waiting up to opts.Wait
// for the first job; it does not wait to fill the batch. Errors: as Claim.
func (q *Queue) ClaimMany(ctx context.Context, n int, opts *ClaimOptions) ([]*Job, error) {
	if n < 1 {
		return nil, plane.Invalid("claim count", n, "use a number ≥ 1")
	}
	return q.claim(ctx, n, opts)
}

// claim claims up to n jobs from q (and from the queues also names, of q's namespace, in
// one claim over all of them: plane.ClaimParams.Queues).
func (q *Queue) claim(ctx context.Context, n int, opts *ClaimOptions, also ...string) ([]*Job, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	var o ClaimOptions
	if opts != nil {
		o = *opts
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = q.opts.LeaseTTL
	}
	params := q.claimParams(n, o)
	params.Queues = also
	if o.Wait < 0 {
		params.Wait = waitChunk
	}
	for {
		got, err := q.d.drv.InvocationClaimMany(ctx, params)
		if err != nil {
			return nil, err
		}
		if len(got) == 0 && o.Wait < 0 && ctx.Err() == nil {
			continue // no limit: wait another chunk
		}
		jobs := make([]*Job, len(got))
		for i, j := range got {
			jobs[i] = newJob(j, o.LeaseTTL)
		}
		return jobs, nil
	}
}

// claimParams are the plane's params of a claim of n jobs with o (LeaseTTL already
// defaulted).
func (q *Queue) claimParams(n int, o ClaimOptions) *plane.ClaimParams {
	return &plane.ClaimParams{
		Namespace:    q.opts.Namespace,
		Queue:        q.name,
		Kind:         q.opts.Kind,
		Temperature:  q.opts.Temperature,
		Max:          n,
		LeaseTTL:     o.LeaseTTL,
		Wait:         o.Wait,
		Worker:       q.d.cfg.WorkerID,
		Offers:       o.Offers,
		WarmHostKeys: o.WarmHostKeys,
	}
}

// Ack settles job as succeeded with result (encoded with the wire codec; nil is allowed):
// the invocation's END frame carries it and Result returns it. Errors: ErrLeaseLost when
// the caller no longer holds the lease (expired and re-claimed, or killed) — nothing
// changes; *InvalidError for a nil job, or when result does not encode or exceeds 16 MiB —
// nothing changes, the job stays claimed.
func (q *Queue) Ack(ctx context.Context, job *Job, result any) error {
	if err := checkJob(job); err != nil {
		return err
	}
	p, err := ackParams(job, result)
	if err != nil {
		return err
	}
	return q.settle(ctx, p)
}

// ackParams are the settle params of an ack of job with result. Errors: *InvalidError when
// result does not encode.
func ackParams(job *Job, result any) (plane.SettleParams, error) {
	b, err := wire.Marshal(result)
	if err != nil {
		return plane.SettleParams{}, encodeError("result", result, err)
	}
	return plane.SettleParams{ID: job.ID, Token: job.token, Outcome: plane.OutcomeSucceeded, Result: b}, nil
}

// nackParams are the settle params of a nack of job with cause.
func nackParams(job *Job, cause error, retry bool) plane.SettleParams {
	var limited *RateLimitedError
	if errors.As(cause, &limited) { // "slow down": back to the queue, the attempt not counted
		return plane.SettleParams{ID: job.ID, Token: job.token, Outcome: plane.OutcomeRateLimited,
			RetryDelay: limited.Delay(), RateLimitKey: limited.heldKey(), Error: errorInfo(cause)}
	}
	outcome := plane.OutcomeFailed
	switch {
	case retry && errors.Is(cause, ErrTimedOut):
		outcome = plane.OutcomeTimedOut
	case retry:
		outcome = plane.OutcomeRetry
	}
	return plane.SettleParams{ID: job.ID, Token: job.token, Outcome: outcome, Error: errorInfo(cause)}
}

// Nack settles job as a failed attempt with cause (nil: the message "nack"). With retry the
// invocation is re-queued after a backoff (exponential from 1 s, capped at 5 min) while
// attempts remain, else it ends as failed; without retry it ends as failed at once. The
// ERROR frame and Result's *TerminalError carry cause's text and type: the ErrorType() of
// an error in cause's chain that has one (a *PanicError's is "panic"), else "error".
// A retried cause that matches ErrTimedOut (the attempt ran out of a worker-side time limit)
// ends the attempt as an attempt timeout: re-queued while attempts remain, else the
// invocation ends as timeout, not failed.
// Errors: ErrLeaseLost when the caller no longer holds the lease; nothing changes;
// *InvalidError for a nil job.
func (q *Queue) Nack(ctx context.Context, job *Job, cause error, retry bool) error {
	if err := checkJob(job); err != nil {
		return err
	}
	return q.settle(ctx, nackParams(job, cause, retry))
}

// checkJob refuses a nil *Job with an *InvalidError.
func checkJob(job *Job) error {
	if job == nil {
		return plane.Invalid("job", nil, "pass the *Job that Claim returned, not nil")
	}
	return nil
}

func (q *Queue) settle(ctx context.Context, p plane.SettleParams) error {
	errs, err := q.d.drv.InvocationSettleMany(ctx, []plane.SettleParams{p})
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		return fmt.Errorf("settle %s: the plane returned %d results for 1", p.ID, len(errs))
	}
	if errs[0] != nil {
		return fmt.Errorf("settle %s: %w", p.ID, plane.InvocationNotFound(errs[0], p.ID))
	}
	return nil
}

// Heartbeat extends job's lease by its lease TTL from now and returns the new expiry.
// Working heartbeats on its own. Errors: ErrLeaseLost when the lease expired and the job
// was claimed again, or the job was killed: the worker should stop working on it;
// *InvalidError for a nil job.
func (q *Queue) Heartbeat(ctx context.Context, job *Job) (time.Time, error) {
	if err := checkJob(job); err != nil {
		return time.Time{}, err
	}
	res, err := q.d.drv.InvocationHeartbeatMany(ctx, []plane.HeartbeatParams{{ID: job.ID, Token: job.token, LeaseTTL: job.leaseTTL}})
	if err != nil {
		return time.Time{}, err
	}
	if len(res) != 1 {
		return time.Time{}, fmt.Errorf("heartbeat %s: the plane returned %d results for 1", job.ID, len(res))
	}
	if res[0].Err != nil {
		return time.Time{}, fmt.Errorf("heartbeat %s: %w", job.ID, res[0].Err)
	}
	return res[0].LeaseExpiresAt, nil
}

// Post appends value (encoded with the wire codec) to job's journal as a VALUE frame, which
// Stream readers receive live, and returns the frame's seq. Errors: ErrLeaseLost (not the
// lease holder), ErrJournalClosed (the job already ended), *InvalidError (a nil job, or a
// value that does not encode or exceeds 16 MiB; nothing posted).
func (q *Queue) Post(ctx context.Context, job *Job, value any) (int64, error) {
	return q.post(ctx, job, value, false)
}

// PostFinal ends job's journal with an END frame carrying value, then acks job with value
// as its result, and returns the END frame's seq: Ack for workers that stream, one call
// instead of two. The END frame alone does not settle the job (docs/semantics.md,
// "Journals"): when the ack fails after the END was posted (ErrLeaseLost, the job was
// claimed again), the journal stays ended for that attempt and the next attempt opens it
// again. Errors: as Post, then as Ack.
func (q *Queue) PostFinal(ctx context.Context, job *Job, value any) (int64, error) {
	seq, err := q.post(ctx, job, value, true)
	if err != nil {
		return 0, err
	}
	if err := q.Ack(ctx, job, value); err != nil {
		return 0, err
	}
	return seq, nil
}

func (q *Queue) post(ctx context.Context, job *Job, value any, final bool) (int64, error) {
	if err := checkJob(job); err != nil {
		return 0, err
	}
	b, err := wire.Marshal(value)
	if err != nil {
		return 0, encodeError("frame value", value, err)
	}
	seq, err := q.d.drv.FramePost(ctx, &plane.FramePostParams{
		Journal: plane.Journal{InvocationID: job.ID},
		Token:   job.token,
		Value:   b,
		Final:   final,
	})
	if err != nil {
		return 0, fmt.Errorf("post to %s: %w", job.ID, err)
	}
	return seq, nil
}

// HandlerFunc is the work a Queue.Working call runs on a claimed job. Its result is acked
// as the job's result; an error (or a panic) nacks the job. ctx is cancelled when the
// caller's ctx is, when the job's lease is lost (context.Cause then matches ErrLeaseLost:
// the job was killed, or its lease expired and it was claimed again) and when the job's
// AttemptTimeout passes (the cause then matches ErrTimedOut).
type HandlerFunc func(ctx context.Context, job *Job) (any, error)

// Working claims one job, runs fn on it and settles it: the common worker loop, packaged.
// It returns handled=false (and no error) when nothing was claimable within opts.Wait.
// A nil fn, or an opts.HeartbeatInterval not shorter than the lease, is an *InvalidError
// returned before anything is claimed.
// Otherwise handled is true and:
//
//   - fn returned a result: the job is acked with it; err is nil, or the Ack's error (e.g.
//     ErrLeaseLost, or an *InvalidError for a result that does not encode, in which case
//     the job is nacked without retry).
//   - fn returned an error: the job is nacked with retry (without retry when the error is
//     marked Permanent) and err is fn's error.
//   - fn returned a *RateLimitedError (RateLimited): the job is handed back, claimable after
//     its RetryAfter, without consuming an attempt, its concurrency key held back as long;
//     err is fn's error.
//   - fn panicked: the panic is recovered into a *PanicError (ErrorInfo type "panic"), the
//     job is nacked with retry, and err is the *PanicError. Panics in goroutines fn starts
//     are not recovered.
//
// While fn runs, the lease is heartbeated every opts.HeartbeatInterval (default: a third of
// the lease). Settling uses a context that survives the cancellation of ctx, so a job whose
// handler was interrupted by shutdown is still nacked at once instead of waiting for its
// lease to expire. Working returns only after every goroutine it started has ended.
// A loop that should outlive failing jobs logs err and goes on while handled is true.
func (q *Queue) Working(ctx context.Context, fn HandlerFunc, opts *WorkingOptions) (handled bool, err error) {
	if fn == nil {
		return false, plane.Invalid("handler func", nil, "pass a non-nil HandlerFunc")
	}
	var o WorkingOptions
	if opts != nil {
		o = *opts
	}
	if err := o.validate(q.opts.LeaseTTL); err != nil {
		return false, err
	}
	job, err := q.Claim(ctx, &o.ClaimOptions)
	if err != nil || job == nil {
		return false, err
	}
	return true, q.work(ctx, job, fn, o.HeartbeatInterval)
}

// settleTimeout bounds the settle of a Working job once ctx is gone.
const settleTimeout = 10 * time.Second

// work runs fn on job with a heartbeat of its own: Working's half of the execution path.
func (q *Queue) work(ctx context.Context, job *Job, fn HandlerFunc, heartbeat time.Duration) error {
	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e := &execution{q: q, job: job, fn: fn, cancel: cancel, logger: q.d.cfg.Logger}
	if heartbeat == 0 {
		heartbeat = job.leaseTTL / 3
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	if heartbeat > 0 {
		wg.Go(func() { q.heartbeatLoop(jobCtx, e, heartbeat, stop) })
	}
	e.handlerDone = func() { // no heartbeat races the settle
		close(stop)
		wg.Wait()
	}
	return e.run(ctx, jobCtx)
}

// execution is one claimed job run by its handler and settled: the one path by which both
// Queue.Working and Worker execute jobs. Whoever heartbeats the job calls leaseLost when the
// plane says the lease is gone.
type execution struct {
	q      *Queue
	job    *Job
	fn     HandlerFunc
	cancel context.CancelCauseFunc // cancels jobCtx
	logger *slog.Logger
	lost   atomic.Bool // the lease is gone: settle nothing
	// renewedUntil is when the lease ends as the last heartbeat the plane accepted left it
	// (nil: none yet, the claim's job.heldUntil holds), with its monotonic reading, so that a
	// step of the machine's wall clock does not move it. Written by the job's heartbeat
	// loop, read by it and by the settle, which a Worker's heartbeats outlast.
	renewedUntil atomic.Pointer[time.Time]
	// handlerDone, when set, is called once the handler returned, before the settle.
	handlerDone func()
	// settleFn, when set, settles the job instead of Queue.settle: a Worker's settle that
	// claims the next job in the same commit.
	settleFn func(ctx context.Context, p plane.SettleParams) error
	// handedBack, when set, is called once the handler's "slow down" (RateLimited) was
	// settled: the job comes back after delay, and a Worker's ExitWhenIdle waits for it
	// (Worker.queuesEmpty).
	handedBack func(delay time.Duration)
}

// settle settles the job with p, by settleFn when set. A settle the plane could not be
// reached for (ErrUnavailable: PostgreSQL restarting or crashed, a server failing over) is
// sent again, with backoff, while the lease holds (heldUntil, and not lost), through
// Queue.settle (the first may have passed the handler's slot on, and a settle that claims
// must not count it again): the handler's outcome is kept across an outage shorter than
// the lease instead of being dropped, which left the job running until its lease expired,
// then ran it again or, its attempts spent, ended it as timed out. A repeat is fenced like
// any settle: when the first one committed and only its answer was lost, the repeat
// answers ErrLeaseLost and the job stays settled once (docs/semantics.md, "Leases").
func (e *execution) settle(ctx context.Context, p plane.SettleParams) error {
	var err error
	if e.settleFn != nil {
		err = e.settleFn(ctx, p)
	} else {
		err = e.q.settle(ctx, p)
	}
	for delay := settleRetryFirst; errors.Is(err, ErrUnavailable) && !e.lost.Load(); delay = min(2*delay, settleRetryMax) {
		left := time.Until(e.heldUntil())
		if left <= 0 {
			break
		}
		if delay == settleRetryFirst {
			e.logger.WarnContext(ctx, "the plane did not take the job's settle; sending it again while the lease holds",
				logKeyJobID, e.job.ID, logKeyAttempt, e.job.Attempt, logKeyError, err)
		}
		time.Sleep(min(delay, left))
		retryCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), e.heldUntil())
		err = e.q.settle(retryCtx, p)
		cancel()
	}
	return err
}

// The backoff of a settle sent again (execution.settle): the first delay, doubling up to
// the last.
const (
	settleRetryFirst = 100 * time.Millisecond
	settleRetryMax   = 2 * time.Second
)

// heldUntil is when the job's lease ends as far as this process knows, on its monotonic
// clock (plane.LeaseHeldUntil): the last accepted heartbeat's sending plus the lease TTL,
// else the claim's answer's arrival plus it. Never the plane's LeaseExpiresAt, which is on
// the plane's clock.
func (e *execution) heldUntil() time.Time {
	if t := e.renewedUntil.Load(); t != nil {
		return *t
	}
	return e.job.heldUntil
}

// leaseLost marks the lease lost and cancels the handler's context with cause ErrLeaseLost.
func (e *execution) leaseLost() {
	e.lost.Store(true)
	e.cancel(fmt.Errorf("job %s: %w", e.job.ID, ErrLeaseLost))
}

// renewed records a heartbeat of the job that the plane accepted, sent at sent: the lease
// holds until sent + the lease TTL at least.
func (e *execution) renewed(sent time.Time) {
	until := plane.LeaseHeldUntil(sent, e.job.leaseTTL)
	e.renewedUntil.Store(&until)
}

// unrenewed is called, at now, when a heartbeat of the job could not reach the plane and
// the next one comes after interval. When the lease will have ended by then, the plane has
// ended it or will (and re-queue the job for another worker), and whatever the handler
// does can no longer be settled: its context is cancelled as for a lost lease (cause
// ErrLeaseLost), so the attempt does not run on beside the next one. Reports whether it was.
func (e *execution) unrenewed(now time.Time, interval time.Duration) bool {
	if now.Add(interval).Before(e.heldUntil()) {
		return false
	}
	e.logger.Warn("the plane did not answer the job's heartbeats before its lease ended: stopping its handler (the plane re-queues the job)",
		logKeyJobID, e.job.ID, logKeyAttempt, e.job.Attempt)
	e.leaseLost()
	return true
}

// errHandlerExited is the error of a handler that ended its goroutine with runtime.Goexit
// (t.FailNow, log.Fatal-like helpers) instead of returning.
var errHandlerExited = errors.New("the handler called runtime.Goexit (e.g. t.FailNow) instead of returning")

// run runs the handler on the job under jobCtx (with the job's AttemptTimeout, and the job
// in the context for Emit), then settles it: the result acks it (an unencodable result nacks
// it without retry); an error, a panic or a runtime.Goexit nacks it, with retry unless the
// error is Permanent. Settling uses a context derived from base that survives base's
// cancellation. When the lease was lost, nothing is settled. It returns the handler's error
// (naming the job and attempt), the settle's error, or an error matching ErrLeaseLost.
func (e *execution) run(base, jobCtx context.Context) error {
	job := e.job
	ctx := jobCtx
	if job.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, job.AttemptTimeout,
			fmt.Errorf("attempt timeout %s passed: %w", job.AttemptTimeout, ErrTimedOut))
		defer cancel()
	}
	ctx = context.WithValue(ctx, jobContextKey{}, &jobContext{q: e.q, job: job})
	result, fnErr := runHandler(ctx, job, e.fn)
	if e.handlerDone != nil {
		e.handlerDone()
	}

	if e.lost.Load() {
		err := fmt.Errorf("job %s (attempt %d): its lease was lost (killed, or expired and claimed again); nothing settled: %w",
			job.ID, job.Attempt, ErrLeaseLost)
		e.logger.WarnContext(base, "job abandoned", logKeyJobID, job.ID, logKeyQueue, job.Queue, logKeyError, err)
		e.confirmReleased(base)
		return err
	}
	settleCtx, cancelSettle := context.WithTimeout(context.WithoutCancel(base), settleTimeout)
	defer cancelSettle()
	if fnErr == nil {
		p, err := ackParams(job, result)
		if err == nil {
			err = e.settle(settleCtx, p)
		}
		if errors.Is(err, ErrInvalid) {
			// The result does not encode: a bug in the handler that a retry will not fix.
			if nackErr := e.q.Nack(settleCtx, job, err, false); nackErr != nil {
				return errors.Join(err, nackErr)
			}
		}
		return err
	}
	if cause := context.Cause(jobCtx); cause != nil && errors.Is(fnErr, context.Canceled) && !errors.Is(fnErr, cause) {
		fnErr = fmt.Errorf("%w (%w)", fnErr, cause)
	}
	logPanic(base, e.logger, job, fnErr)
	// The stored error is the handler's own: the TerminalError a reader gets already names
	// the job and the attempt. The caller gets them in the returned error.
	retry := !IsPermanent(fnErr)
	var limited *RateLimitedError
	if errors.As(fnErr, &limited) && limited.keyError() != nil {
		e.logger.WarnContext(base, "rate-limited job: its key is invalid, so only the job waits (the key is not held back)",
			logKeyJobID, job.ID, logKeyQueue, job.Queue, logKeyError, limited.keyError())
	}
	p := nackParams(job, fnErr, retry)
	nackErr := e.settle(settleCtx, p)
	if errors.Is(nackErr, ErrInvalid) {
		nackErr = e.settleRefused(base, settleCtx, p, nackErr)
	}
	if nackErr == nil && e.handedBack != nil && p.Outcome == plane.OutcomeRateLimited {
		e.handedBack(p.RetryDelay)
	}
	fnErr = fmt.Errorf("job %s (attempt %d): %w", job.ID, job.Attempt, fnErr)
	if nackErr != nil {
		return errors.Join(fnErr, nackErr)
	}
	return fnErr
}

// ErrorTypeSettleRefused is the error type of an attempt whose settle the plane refused
// as invalid: the worker fails the attempt instead (a retry while attempts remain), with
// the handler's error and the refusal as its message, rather than leave the job running
// until its lease expires.
const ErrorTypeSettleRefused = "settle_refused"

// settleRefused settles the job whose settle p the plane refused as invalid (refusal) with
// one the plane takes: the attempt fails — re-queued after the backoff while attempts
// remain, else failed (failed at once when p did not retry) — recording p's error and the
// refusal. It logs the refusal and returns the fallback settle's error joined with it.
func (e *execution) settleRefused(base, ctx context.Context, p plane.SettleParams, refusal error) error {
	job := e.job
	e.logger.WarnContext(base, "the plane refused the job's settle; the attempt fails instead",
		logKeyJobID, job.ID, logKeyQueue, job.Queue, logKeyError, refusal)
	msg := "the handler's outcome"
	if p.Error != nil {
		msg = p.Error.Message
	}
	outcome := plane.OutcomeRetry
	if p.Outcome == plane.OutcomeFailed {
		outcome = plane.OutcomeFailed
	}
	fallback := plane.SettleParams{ID: job.ID, Token: job.token, Outcome: outcome, Error: &ErrorInfo{
		Type: ErrorTypeSettleRefused, Message: fmt.Sprintf("%s (its settle was refused: %v)", msg, refusal)}}
	// Queue.settle, not settleFn: the first settle may have passed the handler's slot on
	// already, and a settle that claims must not count the slot again.
	if err := e.q.settle(ctx, fallback); err != nil {
		return errors.Join(refusal, err)
	}
	return refusal
}

// ReleasedTopicPrefix starts the name of the topic on which a worker confirms that the
// handler of a job whose lease it lost (the job was killed, or its lease expired) has
// returned: topic ReleasedTopicPrefix+id of the job's queue gets one value per such
// attempt, {"id", "attempt", "worker"}. Queue.WaitReleased (and `lakeshore kill --wait`)
// wait for it.
const ReleasedTopicPrefix = "lakeshore.released."

// confirmReleased posts that the handler of a job whose lease was lost has returned: for
// an exec command, that its process group is gone.
func (e *execution) confirmReleased(base context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(base), settleTimeout)
	defer cancel()
	topic, err := e.q.d.topicOf(e.job.Namespace, e.job.Queue, ReleasedTopicPrefix+e.job.ID)
	if err == nil {
		_, err = topic.Post(ctx, map[string]any{"id": e.job.ID, "attempt": int64(e.job.Attempt), "worker": e.q.d.cfg.WorkerID})
	}
	if err != nil {
		e.logger.WarnContext(base, "could not confirm the release of a lost job", logKeyJobID, e.job.ID, logKeyError, err)
	}
}

// logPanic logs the whole stack of a handler's panic (err's *PanicError), which the stored
// ErrorInfo leaves out.
func logPanic(ctx context.Context, logger *slog.Logger, job *Job, err error) {
	var p *PanicError
	if !errors.As(err, &p) {
		return
	}
	logger.ErrorContext(ctx, "handler panicked", logKeyJobID, job.ID, logKeyQueue, job.Queue, logKeyAttempt, job.Attempt,
		logKeyPanic, fmt.Sprint(p.Value), logKeyStack, string(p.Stack))
}

// runHandler runs fn on its own goroutine and waits for it, turning a panic into a
// *PanicError and a runtime.Goexit into errHandlerExited, so that the job is settled
// whichever way the handler ends.
func runHandler(ctx context.Context, job *Job, fn HandlerFunc) (result any, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		returned := false
		defer func() {
			if r := recover(); r != nil {
				result, err = nil, newPanicError(r)
			} else if !returned {
				result, err = nil, errHandlerExited
			}
		}()
		result, err = fn(ctx, job)
		returned = true
	}()
	<-done
	return result, err
}

// heartbeatLoop extends the lease of e's job every interval until stop closes, and marks
// the lease lost (cancelling the handler, cause ErrLeaseLost) when the plane says so.
func (q *Queue) heartbeatLoop(ctx context.Context, e *execution, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		_, err := q.Heartbeat(ctx, e.job)
		switch {
		case err == nil:
			e.renewed(sent)
		case errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound):
			e.leaseLost()
			return
		case ctx.Err() != nil:
			return
		default:
			q.d.cfg.Logger.WarnContext(ctx, "heartbeat failed", logKeyJobID, e.job.ID, logKeyError, err)
			if e.unrenewed(time.Now(), interval) {
				return
			}
		}
	}
}

// Log keys.
const (
	logKeyJobID   = "job_id"
	logKeyError   = "error"
	logKeyAttempt = "attempt"
	logKeyPanic   = "panic"
	logKeyStack   = "stack"
)
