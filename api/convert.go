package api

import (
	"math"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// MaxLeaseTTL is the longest lease a claim or heartbeat may ask for over HTTP: the plane's
// own bound, plane.LeaseTTLMax (7 days, the default retention of finished jobs). A lease
// outliving its worker by more holds a job hostage. Longer asks are 400 invalid; jobs that
// run longer heartbeat.
const MaxLeaseTTL = plane.LeaseTTLMax

// Seconds converts a duration to the wire's seconds.
func Seconds(d time.Duration) float64 { return d.Seconds() }

// Duration converts the wire's seconds to a duration. NaN and negative infinity give a
// negative duration (rejected by validation); values past the range of time.Duration
// saturate.
func Duration(s float64) time.Duration {
	switch {
	case math.IsNaN(s):
		return -1
	case s*1e9 >= math.MaxInt64:
		return math.MaxInt64
	case s*1e9 <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(math.Round(s * 1e9))
}

// NewErrorInfo converts e to its wire form (nil for nil).
func NewErrorInfo(e *plane.ErrorInfo) *ErrorInfo {
	if e == nil {
		return nil
	}
	return &ErrorInfo{Type: e.Type, Message: e.Message, Attempt: e.Attempt}
}

// Plane converts e back (nil for nil).
func (e *ErrorInfo) Plane() *plane.ErrorInfo {
	if e == nil {
		return nil
	}
	return &plane.ErrorInfo{Type: e.Type, Message: e.Message, Attempt: e.Attempt}
}

// NewSubmitInvocation converts p to its wire form.
func NewSubmitInvocation(p *plane.SubmitParams) SubmitInvocation {
	return SubmitInvocation{ID: p.ID, Payload: Value{Wire: p.Payload}, Key: p.Key, Priority: p.Priority,
		MaxAttempts: p.MaxAttempts, AttemptTimeout: Seconds(p.AttemptTimeout), Deadline: p.Deadline, Metadata: p.Metadata,
		NotBefore: p.NotBefore, Delay: Seconds(p.Delay), UniqueFor: Seconds(p.UniqueFor), Debounce: Seconds(p.Debounce), ConcurrencyKey: p.ConcurrencyKey,
		Requirement: NewRequirement(p.Requirement)}
}

// Params converts s back to plane.SubmitParams.
func (s *SubmitInvocation) Params() plane.SubmitParams {
	return plane.SubmitParams{ID: s.ID, Payload: s.Payload.Wire, Key: s.Key, Priority: s.Priority,
		MaxAttempts: s.MaxAttempts, AttemptTimeout: Duration(s.AttemptTimeout), Deadline: s.Deadline, Metadata: s.Metadata,
		NotBefore: s.NotBefore, Delay: Duration(s.Delay), UniqueFor: Duration(s.UniqueFor), Debounce: Duration(s.Debounce), ConcurrencyKey: s.ConcurrencyKey,
		Requirement: s.Requirement.Plane()}
}

// NewInvocation converts inv to its wire form.
func NewInvocation(inv *plane.Invocation) *Invocation {
	return &Invocation{ID: inv.ID, Namespace: inv.Namespace, Queue: inv.Queue, Key: inv.Key, ConcurrencyKey: inv.ConcurrencyKey, State: string(inv.State),
		Priority: inv.Priority, Payload: Value{Wire: inv.Payload}, Metadata: inv.Metadata, Attempt: inv.Attempt,
		MaxAttempts: inv.MaxAttempts, AttemptTimeout: Seconds(inv.AttemptTimeout), Deadline: inv.Deadline,
		AvailableAt: inv.AvailableAt, LeaseExpiresAt: inv.LeaseExpiresAt, Worker: inv.Worker, Result: Value{Wire: inv.Result},
		Error: NewErrorInfo(inv.Error), CreatedAt: inv.CreatedAt, StartedAt: inv.StartedAt, FinishedAt: inv.FinishedAt,
		Requirement: NewRequirement(inv.Requirement), Shape: inv.Shape}
}

// Plane converts i back to a plane.Invocation.
func (i *Invocation) Plane() *plane.Invocation {
	return &plane.Invocation{ID: i.ID, Namespace: i.Namespace, Queue: i.Queue, Key: i.Key, ConcurrencyKey: i.ConcurrencyKey, State: plane.State(i.State),
		Priority: i.Priority, Payload: i.Payload.Wire, Metadata: i.Metadata, Attempt: i.Attempt,
		MaxAttempts: i.MaxAttempts, AttemptTimeout: Duration(i.AttemptTimeout), Deadline: i.Deadline,
		AvailableAt: i.AvailableAt, LeaseExpiresAt: i.LeaseExpiresAt, Worker: i.Worker, Result: i.Result.Wire,
		Error: i.Error.Plane(), CreatedAt: i.CreatedAt, StartedAt: i.StartedAt, FinishedAt: i.FinishedAt,
		Requirement: i.Requirement.Plane(), Shape: i.Shape}
}

// NewJob converts j to its wire form.
func NewJob(j *plane.Job) Job {
	return Job{ID: j.ID, Namespace: j.Namespace, Queue: j.Queue, Key: j.Key, ConcurrencyKey: j.ConcurrencyKey, Payload: Value{Wire: j.Payload}, Metadata: j.Metadata,
		Priority: j.Priority, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, AttemptTimeout: Seconds(j.AttemptTimeout),
		Deadline: j.Deadline, Token: j.Token, LeaseExpiresAt: j.LeaseExpiresAt}
}

// Plane converts j back to a plane.Job.
func (j *Job) Plane() *plane.Job {
	return &plane.Job{ID: j.ID, Namespace: j.Namespace, Queue: j.Queue, Key: j.Key, ConcurrencyKey: j.ConcurrencyKey, Payload: j.Payload.Wire, Metadata: j.Metadata,
		Priority: j.Priority, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, AttemptTimeout: Duration(j.AttemptTimeout),
		Deadline: j.Deadline, Token: j.Token, LeaseExpiresAt: j.LeaseExpiresAt}
}

// The outcome names of Settle.Outcome.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeRetry     = "retry"
	OutcomeFailed    = "failed"
	OutcomeTimedOut  = "timed_out"
	// OutcomeRateLimited hands the job back without consuming an attempt (plane's
	// OutcomeRateLimited).
	OutcomeRateLimited = "rate_limited"
	// OutcomeReleased hands back a job its worker never ran: claimable at once, without
	// consuming an attempt (plane's OutcomeReleased).
	OutcomeReleased = "released"
)

// OutcomeRule is what Settle.Outcome may be.
const OutcomeRule = "use succeeded|retry|failed|timed_out|rate_limited|released"

// OutcomeName returns the wire name of o ("" for an unknown outcome).
func OutcomeName(o plane.Outcome) string {
	switch o {
	case plane.OutcomeSucceeded:
		return OutcomeSucceeded
	case plane.OutcomeRetry:
		return OutcomeRetry
	case plane.OutcomeFailed:
		return OutcomeFailed
	case plane.OutcomeTimedOut:
		return OutcomeTimedOut
	case plane.OutcomeRateLimited:
		return OutcomeRateLimited
	case plane.OutcomeReleased:
		return OutcomeReleased
	}
	return ""
}

// ParseOutcome returns the plane.Outcome named s. Errors: *plane.InvalidError.
func ParseOutcome(s string) (plane.Outcome, error) {
	switch s {
	case OutcomeSucceeded:
		return plane.OutcomeSucceeded, nil
	case OutcomeRetry:
		return plane.OutcomeRetry, nil
	case OutcomeFailed:
		return plane.OutcomeFailed, nil
	case OutcomeTimedOut:
		return plane.OutcomeTimedOut, nil
	case OutcomeRateLimited:
		return plane.OutcomeRateLimited, nil
	case OutcomeReleased:
		return plane.OutcomeReleased, nil
	}
	return 0, plane.Invalid("outcome", s, OutcomeRule)
}

// NewSettle converts p to its wire form.
func NewSettle(p *plane.SettleParams) Settle {
	return Settle{ID: p.ID, Token: p.Token, Outcome: OutcomeName(p.Outcome), Result: Value{Wire: p.Result}, Error: NewErrorInfo(p.Error),
		RetryDelay: Seconds(p.RetryDelay), RateLimitKey: p.RateLimitKey}
}

// Params converts s back to plane.SettleParams. Errors: *plane.InvalidError for an unknown
// outcome.
func (s *Settle) Params() (plane.SettleParams, error) {
	o, err := ParseOutcome(s.Outcome)
	if err != nil {
		return plane.SettleParams{}, err
	}
	return plane.SettleParams{ID: s.ID, Token: s.Token, Outcome: o, Result: s.Result.Wire, Error: s.Error.Plane(),
		RetryDelay: Duration(s.RetryDelay), RateLimitKey: s.RateLimitKey}, nil
}

// NewFrame converts f to its wire form.
func NewFrame(f *plane.Frame) Frame {
	return Frame{Seq: f.Seq, Kind: string(f.Kind), Value: Value{Wire: f.Value}, Attempt: f.Attempt, Time: f.Time}
}

// NewFramesResponse converts r to its wire form.
func NewFramesResponse(r *plane.FrameReadResult) *FramesResponse {
	out := &FramesResponse{Frames: make([]Frame, len(r.Frames)), Closed: r.Closed}
	for i := range r.Frames {
		out.Frames[i] = NewFrame(&r.Frames[i])
	}
	return out
}

// Plane converts r back to a plane.FrameReadResult.
func (r *FramesResponse) Plane() *plane.FrameReadResult {
	out := &plane.FrameReadResult{Frames: make([]plane.Frame, len(r.Frames)), Closed: r.Closed}
	for i, f := range r.Frames {
		out.Frames[i] = plane.Frame{Seq: f.Seq, Kind: plane.FrameKind(f.Kind), Value: f.Value.Wire, Attempt: f.Attempt, Time: f.Time}
	}
	return out
}

// NewAdmission converts a to its wire form (nil for nil).
func NewAdmission(a *plane.Admission) *Admission {
	if a == nil {
		return nil
	}
	return &Admission{MaxDepth: a.MaxDepth, OnFull: string(a.OnFull), RateLimit: a.RateLimit, Burst: a.Burst,
		DeadlineCutoff: Seconds(a.DeadlineCutoff), ConcurrencyLimit: a.ConcurrencyLimit, ConcurrencyLimits: wireOverrides(a.ConcurrencyLimits),
		KeyWeights: wireOverrides(a.KeyWeights), KeyRateLimit: a.KeyRateLimit, KeyBurst: a.KeyBurst,
		KeyRateLimits: wireOverrides(a.KeyRateLimits), KeyBursts: wireOverrides(a.KeyBursts)}
}

// wireOverrides is a per-key override map of the plane in its wire form (nil for nil).
func wireOverrides[T any](m map[string]T) map[string]*T {
	if m == nil {
		return nil
	}
	out := make(map[string]*T, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out
}

// planeOverrides is a per-key override map of the wire in the plane's form: a null value is
// no override (the key takes the queue's default, as the CLI's KEY=-), so it is left out,
// never read as 0 — which would be "no limit" for a concurrency or rate limit and an
// invalid weight or bucket. The one place that rule lives, for JSON and msgpack bodies.
func planeOverrides[T any](m map[string]*T) map[string]T {
	if m == nil {
		return nil
	}
	out := make(map[string]T, len(m))
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Plane converts a back to a plane.Admission (nil for nil).
func (a *Admission) Plane() *plane.Admission {
	if a == nil {
		return nil
	}
	return &plane.Admission{MaxDepth: a.MaxDepth, OnFull: plane.OnFull(a.OnFull), RateLimit: a.RateLimit, Burst: a.Burst,
		DeadlineCutoff: Duration(a.DeadlineCutoff), ConcurrencyLimit: a.ConcurrencyLimit, ConcurrencyLimits: planeOverrides(a.ConcurrencyLimits),
		KeyWeights: planeOverrides(a.KeyWeights), KeyRateLimit: a.KeyRateLimit, KeyBurst: a.KeyBurst,
		KeyRateLimits: planeOverrides(a.KeyRateLimits), KeyBursts: planeOverrides(a.KeyBursts)}
}

// NewQueueStats converts s to its wire form.
func NewQueueStats(s *plane.QueueStats) QueueStats {
	counts := make(map[string]int64, len(s.Counts))
	for k, v := range s.Counts {
		counts[string(k)] = v
	}
	var keys []KeyStats
	for _, k := range s.Keys {
		keys = append(keys, KeyStats{Key: k.Key, Queued: k.Queued, Running: k.Running, Limit: k.Limit, Weight: k.Weight,
			RateLimit: k.RateLimit, Burst: k.Burst, RateWait: Seconds(k.RateWait)})
	}
	return QueueStats{Namespace: s.Namespace, Queue: s.Queue, Counts: counts, Admission: NewAdmission(s.Admission), Paused: s.Paused,
		Keys: keys}
}

// Plane converts s back to a plane.QueueStats.
func (s *QueueStats) Plane() plane.QueueStats {
	counts := make(map[plane.State]int64, len(s.Counts))
	for k, v := range s.Counts {
		counts[plane.State(k)] = v
	}
	var keys []plane.KeyStats
	for _, k := range s.Keys {
		keys = append(keys, plane.KeyStats{Key: k.Key, Queued: k.Queued, Running: k.Running, Limit: k.Limit, Weight: k.Weight,
			RateLimit: k.RateLimit, Burst: k.Burst, RateWait: Duration(k.RateWait)})
	}
	return plane.QueueStats{Namespace: s.Namespace, Queue: s.Queue, Counts: counts, Admission: s.Admission.Plane(), Paused: s.Paused,
		Keys: keys}
}

// NewWorker converts w to its wire form.
func NewWorker(w *plane.WorkerInfo) Worker {
	return Worker{ID: w.ID, Namespace: w.Namespace, Host: w.Host, PID: w.PID, Queues: w.Queues, StartedAt: w.StartedAt, LastSeen: w.LastSeen,
		Provider: w.Provider, LaunchID: w.LaunchID, Running: w.Running, IdleSince: w.IdleSince,
		Offers: NewOffers(w.Offers), WarmHostKeys: w.WarmHostKeys}
}

// Plane converts w back to a plane.WorkerInfo.
func (w *Worker) Plane() plane.WorkerInfo {
	return plane.WorkerInfo{ID: w.ID, Namespace: w.Namespace, Host: w.Host, PID: w.PID, Queues: w.Queues, StartedAt: w.StartedAt, LastSeen: w.LastSeen,
		Provider: w.Provider, LaunchID: w.LaunchID, Running: w.Running, IdleSince: w.IdleSince,
		Offers: w.Offers.Offers(), WarmHostKeys: w.WarmHostKeys}
}

func permissionNames(ps []plane.Permission) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// Permissions converts permission names to plane permissions.
func Permissions(names []string) []plane.Permission {
	out := make([]plane.Permission, len(names))
	for i, n := range names {
		out[i] = plane.Permission(n)
	}
	return out
}

// NewToken converts t to its wire form, without its hash.
func NewToken(t *plane.TokenInfo) Token {
	return Token{ID: t.ID, Namespace: t.Namespace, Queue: t.Queue, Permissions: permissionNames(t.Permissions),
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
}

// Plane converts t back to a plane.TokenInfo.
func (t *Token) Plane() *plane.TokenInfo {
	return &plane.TokenInfo{ID: t.ID, Hash: t.Hash, Namespace: t.Namespace, Queue: t.Queue, Permissions: Permissions(t.Permissions),
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
}

// NewRequirement converts r to its wire form (nil for nil).
func NewRequirement(r *plane.Requirement) *Requirement {
	if r == nil {
		return nil
	}
	return &Requirement{CPUsMilli: r.MilliCPUs, MemoryBytes: r.MemoryBytes, GPUs: r.GPUs, GPUType: r.GPUType, Labels: r.Labels}
}

// Plane converts r back (nil for nil).
func (r *Requirement) Plane() *plane.Requirement {
	if r == nil {
		return nil
	}
	return &plane.Requirement{MilliCPUs: r.CPUsMilli, MemoryBytes: r.MemoryBytes, GPUs: r.GPUs, GPUType: r.GPUType, Labels: r.Labels}
}

// NewOffers converts o to its wire form (nil for nil).
func NewOffers(o *plane.Offers) *Requirement { return NewRequirement((*plane.Requirement)(o)) }

// Offers converts r, a claim's offers, back (nil for nil).
func (r *Requirement) Offers() *plane.Offers { return (*plane.Offers)(r.Plane()) }
