package plane

import (
	"cmp"
	"fmt"
	"math"
	"time"
)

// Policy: the pure rules every driver applies to its rows (sqliteplane, the reference driver
// of planetest, pgplane). Drivers read a row, ask these functions what happens to it, and
// write the answer; none of them touches storage, a clock or a random source of its own.

// Backoff is the retry delay policy: exponential from Base, capped at Max, with up to
// Jitter (a fraction, 0–1) of random spread. The zero value means BackoffDefault.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// BackoffDefault returns the default backoff: exponential from 1 s, capped at 5 min, ±10%
// jitter. A function, so no caller can change the default under every other.
func BackoffDefault() Backoff {
	return Backoff{Base: time.Second, Max: 5 * time.Minute, Jitter: 0.1}
}

// Delay returns the delay before attempt+1, after attempt (1-based) failed. unit is a
// uniform random number in [0,1) for the jitter.
func (b Backoff) Delay(attempt int, unit float64) time.Duration {
	if b.Base == 0 && b.Max == 0 {
		b = BackoffDefault()
	}
	d := float64(b.Base) * math.Pow(2, float64(max(attempt-1, 0)))
	if b.Max > 0 && d > float64(b.Max) {
		d = float64(b.Max)
	}
	d *= 1 + b.Jitter*(2*unit-1)
	return time.Duration(d)
}

// DueAt returns when an invocation submitted at now with s becomes claimable: the later of
// s.NotBefore and now+s.Delay, and now when neither is set (or both are in the past).
func (s *SubmitParams) DueAt(now time.Time) time.Time {
	due := now.Add(max(s.Delay, 0) + max(s.Debounce, 0))
	if s.NotBefore.After(due) {
		due = s.NotBefore
	}
	return due
}

// Transition is what happens to an invocation row: the state it moves to and, for a retry,
// how long until it is claimable again.
type Transition struct {
	// State is StateQueued for a retry, else the terminal state.
	State State
	// Delay is, for a retry, the wait before the invocation is claimable again.
	Delay time.Duration
	// Error is the error to record (nil on success), with its Attempt set.
	Error *ErrorInfo
	// Refund re-queues without consuming the attempt that ended (OutcomeRateLimited,
	// OutcomeReleased): the driver takes one off the invocation's attempt count.
	Refund bool
	// HoldKey is a concurrency key of the invocation's queue that no claim takes from
	// until Delay has passed (OutcomeRateLimited's RateLimitKey); "" for none.
	HoldKey string
}

// Retry reports whether t re-queues the invocation.
func (t Transition) Retry() bool { return t.State == StateQueued }

// The error types the plane records itself.
const (
	// ErrorTypeLeaseExpired: the attempt's lease ran out without a heartbeat.
	ErrorTypeLeaseExpired = "lease_expired"
	// ErrorTypeAttemptTimeout: the attempt outlived its AttemptTimeout.
	ErrorTypeAttemptTimeout = "attempt_timeout"
	// ErrorTypeRateLimited: the worker handed the job back as rate limited
	// (OutcomeRateLimited); the attempt was not counted.
	ErrorTypeRateLimited = "rate_limited"
	// ErrorTypeDeadline: the deadline passed (or came nearer than the queue's cutoff)
	// before the invocation ran.
	ErrorTypeDeadline = "deadline"
	// ErrorTypeKilled: the invocation was killed while running.
	ErrorTypeKilled = "killed"
	// ErrorTypeCancelled: the invocation was cancelled while queued.
	ErrorTypeCancelled = "cancelled"
	// ErrorTypeError: a nack that named no type.
	ErrorTypeError = "error"
)

// Fence is the answer of the fencing check Holds.
type Fence int

const (
	// FenceHeld: the token holds the running attempt's lease.
	FenceHeld Fence = iota
	// FenceLost: the invocation is not running, or runs under another attempt's token.
	FenceLost
	// FenceExpired: the token's lease ran out. The driver ends the attempt on the spot with
	// LeaseExpiredTransition (as maintenance would), then answers ErrLeaseLost.
	FenceExpired
	// FenceOverdue: the attempt outlived its attempt timeout. The driver ends it on the spot
	// with AttemptOverdueTransition, then answers ErrLeaseLost.
	FenceOverdue
)

// Holds is the fencing check every driver applies, to the row it locked, before a settle,
// a heartbeat or a frame posted under a lease: does token (the caller's) hold the lease of
// the running attempt whose stored token is leaseToken ("" when none), its lease expiring at
// leaseExpires and its attempt deadline attemptDeadline (zero: none), at now? An expired
// lease or an overdue attempt is ended by the driver on the spot, so the answer never
// depends on when maintenance last ran: an attempt that outlived its timeout ends as an
// attempt timeout however its worker settles it.
func Holds(running bool, leaseToken, token string, leaseExpires, attemptDeadline, now time.Time) Fence {
	switch {
	case !running || leaseToken == "" || leaseToken != token:
		return FenceLost
	case !leaseExpires.After(now):
		return FenceExpired
	case !attemptDeadline.IsZero() && !attemptDeadline.After(now):
		return FenceOverdue
	}
	return FenceHeld
}

// failAttempt ends attempt of maxAttempts with info: a retry after delay() while attempts
// remain, else final. delay is called only for a retry.
func failAttempt(attempt, maxAttempts int, info ErrorInfo, final State, delay func() time.Duration) Transition {
	info.Attempt = attempt
	if attempt < maxAttempts {
		return Transition{State: StateQueued, Delay: delay(), Error: &info}
	}
	return Transition{State: final, Error: &info}
}

// SettleTransition returns what the settle p does to the running attempt attempt (1-based)
// of maxAttempts, once the driver checked that p's token holds the lease:
//   - OutcomeSucceeded: succeeded.
//   - OutcomeRetry: re-queued after p.RetryDelay (or b's backoff) while attempts remain,
//     else failed.
//   - OutcomeTimedOut: the same, but ending as timeout.
//   - OutcomeFailed: failed at once.
//   - OutcomeRateLimited: re-queued after p.RetryDelay (or RateLimitedDelayDefault) with the
//     attempt refunded, however many attempts remain; p.RateLimitKey held back as long.
//   - OutcomeReleased: re-queued, claimable at once, with the attempt refunded (it never
//     ran), however many attempts remain; no key held back.
//
// unit draws a uniform number in [0,1) for the backoff's jitter; it is called only when
// the backoff is used. A nack without an error records {type "error"}.
func SettleTransition(p *SettleParams, attempt, maxAttempts int, b Backoff, unit func() float64) Transition {
	if p.Outcome == OutcomeSucceeded {
		return Transition{State: StateSucceeded}
	}
	info := ErrorInfo{Type: ErrorTypeError, Message: "nacked without an error"}
	if p.Error != nil {
		info = *p.Error
		info.Type = cmp.Or(info.Type, ErrorTypeError)
		info.Message = CutErrorMessage(info.Message)
	}
	delay := func() time.Duration {
		if p.RetryDelay > 0 {
			return p.RetryDelay
		}
		return b.Delay(attempt, unit())
	}
	switch p.Outcome {
	case OutcomeRateLimited:
		if p.Error == nil {
			info = ErrorInfo{Type: ErrorTypeRateLimited, Message: "rate limited by its worker"}
		}
		info.Attempt = attempt
		return Transition{State: StateQueued, Delay: cmp.Or(p.RetryDelay, RateLimitedDelayDefault), Error: &info,
			Refund: true, HoldKey: p.RateLimitKey}
	case OutcomeReleased:
		if p.Error == nil {
			info = ErrorInfo{Type: ErrorTypeReleased, Message: "released unrun by its worker"}
		}
		info.Attempt = attempt
		return Transition{State: StateQueued, Error: &info, Refund: true}
	case OutcomeRetry:
		return failAttempt(attempt, maxAttempts, info, StateFailed, delay)
	case OutcomeTimedOut:
		return failAttempt(attempt, maxAttempts, info, StateTimeout, delay)
	default:
		info.Attempt = attempt
		return Transition{State: StateFailed, Error: &info}
	}
}

// LeaseExpiredTransition returns what an expired lease does to attempt of maxAttempts:
// re-queued at once while attempts remain (the worker is presumed dead, not the job at
// fault), else timeout with the error "lease expired".
func LeaseExpiredTransition(attempt, maxAttempts int) Transition {
	return failAttempt(attempt, maxAttempts, ErrorInfo{Type: ErrorTypeLeaseExpired, Message: "lease expired"},
		StateTimeout, func() time.Duration { return 0 })
}

// AttemptOverdueTransition returns what an attempt past its AttemptTimeout becomes: retried
// after b's backoff while attempts remain, else timeout. unit is as in SettleTransition.
func AttemptOverdueTransition(attempt, maxAttempts int, b Backoff, unit func() float64) Transition {
	return failAttempt(attempt, maxAttempts, ErrorInfo{Type: ErrorTypeAttemptTimeout, Message: "attempt timed out"},
		StateTimeout, func() time.Duration { return b.Delay(attempt, unit()) })
}

// DeadlineTransition returns what a passed deadline does to a queued invocation whose
// attempts so far are attempt: timeout without running.
func DeadlineTransition(attempt int) Transition {
	return Transition{State: StateTimeout, Error: &ErrorInfo{Type: ErrorTypeDeadline,
		Message: "deadline passed before the invocation ran", Attempt: attempt}}
}

// ClaimTransition returns, for a queued invocation about to be claimed at now, the
// transition that ends it instead of starting it — its deadline has passed, or is nearer
// than the queue's deadline cutoff — or nil to start it. A zero deadline never ends it.
func ClaimTransition(deadline, now time.Time, cutoff time.Duration, attempt int) *Transition {
	if deadline.IsZero() {
		return nil
	}
	if !deadline.After(now) {
		t := DeadlineTransition(attempt)
		return &t
	}
	if cutoff > 0 && deadline.Sub(now) < cutoff {
		return &Transition{State: StateTimeout, Error: &ErrorInfo{Type: ErrorTypeDeadline, Attempt: attempt,
			Message: fmt.Sprintf("deadline nearer than the queue's cutoff %s at claim", cutoff)}}
	}
	return nil
}

// Level is one priority level of a queue's claimable invocations, for the boltzmann draw.
type Level struct {
	Priority float64
	// Count is how many claimable invocations have this priority (> 0).
	Count int64
}

// DrawLevel returns the index in levels of the level drawn by u (uniform in [0,1)) with
// weights Count·exp((Priority − pmax)/temperature): a job of priority p is drawn with
// probability ∝ exp(p/T). Subtracting pmax keeps every weight in (0, Count] so no
// temperature overflows. It allocates nothing; levels must not be empty.
func DrawLevel(levels []Level, temperature, u float64) int {
	pmax := math.Inf(-1)
	for _, l := range levels {
		pmax = max(pmax, l.Priority)
	}
	weight := func(l Level) float64 { return float64(l.Count) * math.Exp((l.Priority-pmax)/temperature) }
	var total float64
	for _, l := range levels {
		total += weight(l)
	}
	x := u * total
	for i, l := range levels {
		w := weight(l)
		if x < w {
			return i
		}
		x -= w
	}
	// Rounding left x at the top: take the last level with weight.
	for i := len(levels) - 1; i >= 0; i-- {
		if weight(levels[i]) > 0 {
			return i
		}
	}
	return 0
}

// TokenBucket is the state of a rate-limited queue's token bucket: Tokens available at At.
type TokenBucket struct {
	Tokens float64
	At     time.Time
}

// Full returns the bucket of a freshly set admission block: Burst tokens at now.
func (a Admission) Full(now time.Time) TokenBucket {
	return TokenBucket{Tokens: float64(a.Burst), At: now}
}

// CheckDeadlines refuses (*InvalidError) a deadline nearer than a's DeadlineCutoff at now.
// queue is "namespace/queue", for the message.
func (a Admission) CheckDeadlines(queue string, now time.Time, deadlines []time.Time) error {
	if a.DeadlineCutoff <= 0 {
		return nil
	}
	for _, dl := range deadlines {
		if !dl.IsZero() && dl.Sub(now) < a.DeadlineCutoff {
			return Invalid("deadline", dl.Format(time.RFC3339Nano), fmt.Sprintf(
				"queue %s admits only deadlines at least %s away (its deadline cutoff)", queue, a.DeadlineCutoff))
		}
	}
	return nil
}

// CheckDepth applies a's MaxDepth to n new invocations of a queue holding queued: nil when
// they fit; block true when the submit must wait for room (OnFullBlock); else an
// *AdmissionError (Is ErrQueueFull). ahead reports that earlier blocked submits wait in line,
// which makes a new one wait (or fail) behind them even when it would fit.
func (a Admission) CheckDepth(queue string, queued, n int64, ahead bool) (block bool, err error) {
	if a.MaxDepth <= 0 || (queued+n <= a.MaxDepth && !ahead) {
		return false, nil
	}
	if a.OnFull == OnFullBlock {
		return true, nil
	}
	fit := max(0, a.MaxDepth-queued)
	return false, &AdmissionError{Sentinel: ErrQueueFull, Queue: queue, Fit: fit,
		Detail: fmt.Sprintf("%d queued of max depth %d; %d of the %d submitted would fit", queued, a.MaxDepth, fit, n)}
}

// Take draws n tokens from bucket b at now under a's RateLimit and returns the bucket after
// the draw, or b unchanged and an *AdmissionError (Is ErrRateLimited, with RetryAfter when
// waiting can help) when fewer than n tokens are available. Without a rate limit it
// returns b, nil. RetryAfter is at most DelayMax: a rate so small (1e-300/s) that the
// wait does not fit a time.Duration still gives a positive wait, not an overflowed
// negative one that a claimer would take as "at once" and spin on.
func (a Admission) Take(queue string, b TokenBucket, now time.Time, n int64) (TokenBucket, error) {
	if a.RateLimit <= 0 {
		return b, nil
	}
	tokens := a.refilled(b, now)
	if float64(n) > tokens {
		e := &AdmissionError{Sentinel: ErrRateLimited, Queue: queue, Fit: int64(tokens),
			Detail: fmt.Sprintf("rate limit %g/s with burst %d: %d submitted, %d would pass now", a.RateLimit, a.Burst, n, int64(tokens))}
		if n > a.Burst {
			e.Detail += "; a batch larger than the burst never passes: split it"
		} else {
			wait := (float64(n) - tokens) / a.RateLimit
			e.RetryAfter = time.Duration(math.Min(wait, DelayMax.Seconds()) * float64(time.Second))
		}
		return b, e
	}
	return TokenBucket{Tokens: tokens - float64(n), At: now}, nil
}

// refilled is the tokens bucket b holds at now under a's RateLimit (at most Burst).
func (a Admission) refilled(b TokenBucket, now time.Time) float64 {
	elapsed := float64(now.Sub(b.At).Milliseconds()) / 1000
	return math.Min(float64(a.Burst), b.Tokens+max(elapsed, 0)*a.RateLimit)
}

// MaintenanceReport counts what one maintenance pass did.
type MaintenanceReport struct {
	// LeasesExpired are running attempts whose lease ran out (re-queued or timed out).
	LeasesExpired int
	// AttemptsOverdue are running attempts past their attempt timeout.
	AttemptsOverdue int
	// DeadlinesPassed are queued invocations ended as timeout by their deadline.
	DeadlinesPassed int
	// Promoted are delayed or backed-off invocations that became claimable.
	Promoted int
	// Trimmed are terminal invocations deleted by retention.
	Trimmed int
	// TopicsTrimmed are topics deleted by retention.
	TopicsTrimmed int
	// WorkersTrimmed are registrations of workers not seen within retention, deleted.
	WorkersTrimmed int
	// TokensTrimmed are tokens revoked or expired more than retention ago, deleted.
	TokensTrimmed int
	// SchedulesFired are the invocations schedules submitted (a fire whose key existed
	// already counts too).
	SchedulesFired int
}
