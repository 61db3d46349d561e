package api

import (
	"math"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

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

// SubmitInvocation is one invocation to enqueue: plane.SubmitParams on the wire.
type SubmitInvocation struct {
	ID             string            `json:"id,omitempty" msgpack:"id,omitempty"`
	Payload        []byte            `json:"payload,omitempty" msgpack:"payload,omitempty"`
	Key            string            `json:"key,omitempty" msgpack:"key,omitempty"`
	Priority       float64           `json:"priority,omitempty" msgpack:"priority,omitempty"`
	MaxAttempts    int               `json:"max_attempts,omitempty" msgpack:"max_attempts,omitempty"`
	AttemptTimeout float64           `json:"attempt_timeout,omitempty" msgpack:"attempt_timeout,omitempty"`
	Deadline       time.Time         `json:"deadline,omitzero" msgpack:"deadline,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty" msgpack:"metadata,omitempty"`
}

// NewSubmitInvocation converts p to its wire form.
func NewSubmitInvocation(p *plane.SubmitParams) SubmitInvocation {
	return SubmitInvocation{ID: p.ID, Payload: p.Payload, Key: p.Key, Priority: p.Priority,
		MaxAttempts: p.MaxAttempts, AttemptTimeout: Seconds(p.AttemptTimeout), Deadline: p.Deadline, Metadata: p.Metadata}
}

// Params converts s back to plane.SubmitParams.
func (s *SubmitInvocation) Params() plane.SubmitParams {
	return plane.SubmitParams{ID: s.ID, Payload: s.Payload, Key: s.Key, Priority: s.Priority,
		MaxAttempts: s.MaxAttempts, AttemptTimeout: Duration(s.AttemptTimeout), Deadline: s.Deadline, Metadata: s.Metadata}
}

// SubmitRequest is the body of POST /v1/submit: one invocation.
type SubmitRequest struct {
	Namespace string `json:"namespace" msgpack:"namespace"`
	Queue     string `json:"queue" msgpack:"queue"`
	SubmitInvocation
	// MaxWait bounds how long a submit to a full queue with on_full=block waits for room,
	// in seconds. 0: the server's long-poll limit.
	MaxWait float64 `json:"max_wait,omitempty" msgpack:"max_wait,omitempty"`
}

// SubmitBatchRequest is the body of POST /v1/submit/batch: invocations of one queue,
// enqueued all-or-nothing.
type SubmitBatchRequest struct {
	Namespace   string             `json:"namespace" msgpack:"namespace"`
	Queue       string             `json:"queue" msgpack:"queue"`
	Invocations []SubmitInvocation `json:"invocations" msgpack:"invocations"`
	// MaxWait: as in SubmitRequest.
	MaxWait float64 `json:"max_wait,omitempty" msgpack:"max_wait,omitempty"`
}

// SubmitResult is the outcome of one submit.
type SubmitResult struct {
	ID       string `json:"id" msgpack:"id"`
	Existing bool   `json:"existing" msgpack:"existing"`
}

// SubmitBatchResponse is the answer of POST /v1/submit/batch, one result per invocation.
type SubmitBatchResponse struct {
	Results []SubmitResult `json:"results" msgpack:"results"`
}

// Invocation is plane.Invocation on the wire.
type Invocation struct {
	ID             string            `json:"id" msgpack:"id"`
	Namespace      string            `json:"namespace" msgpack:"namespace"`
	Queue          string            `json:"queue" msgpack:"queue"`
	Key            string            `json:"key,omitempty" msgpack:"key,omitempty"`
	State          plane.State       `json:"state" msgpack:"state"`
	Priority       float64           `json:"priority" msgpack:"priority"`
	Payload        []byte            `json:"payload,omitempty" msgpack:"payload,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty" msgpack:"metadata,omitempty"`
	Attempt        int               `json:"attempt" msgpack:"attempt"`
	MaxAttempts    int               `json:"max_attempts" msgpack:"max_attempts"`
	AttemptTimeout float64           `json:"attempt_timeout,omitempty" msgpack:"attempt_timeout,omitempty"`
	Deadline       time.Time         `json:"deadline,omitzero" msgpack:"deadline,omitempty"`
	AvailableAt    time.Time         `json:"available_at,omitzero" msgpack:"available_at,omitempty"`
	LeaseExpiresAt time.Time         `json:"lease_expires_at,omitzero" msgpack:"lease_expires_at,omitempty"`
	Worker         string            `json:"worker,omitempty" msgpack:"worker,omitempty"`
	Result         []byte            `json:"result,omitempty" msgpack:"result,omitempty"`
	Error          *plane.ErrorInfo  `json:"error,omitempty" msgpack:"error,omitempty"`
	CreatedAt      time.Time         `json:"created_at,omitzero" msgpack:"created_at,omitempty"`
	StartedAt      time.Time         `json:"started_at,omitzero" msgpack:"started_at,omitempty"`
	FinishedAt     time.Time         `json:"finished_at,omitzero" msgpack:"finished_at,omitempty"`
}

// NewInvocation converts inv to its wire form.
func NewInvocation(inv *plane.Invocation) *Invocation {
	return &Invocation{ID: inv.ID, Namespace: inv.Namespace, Queue: inv.Queue, Key: inv.Key, State: inv.State,
		Priority: inv.Priority, Payload: inv.Payload, Metadata: inv.Metadata, Attempt: inv.Attempt,
		MaxAttempts: inv.MaxAttempts, AttemptTimeout: Seconds(inv.AttemptTimeout), Deadline: inv.Deadline,
		AvailableAt: inv.AvailableAt, LeaseExpiresAt: inv.LeaseExpiresAt, Worker: inv.Worker, Result: inv.Result,
		Error: inv.Error, CreatedAt: inv.CreatedAt, StartedAt: inv.StartedAt, FinishedAt: inv.FinishedAt}
}

// Plane converts i back to a plane.Invocation.
func (i *Invocation) Plane() *plane.Invocation {
	return &plane.Invocation{ID: i.ID, Namespace: i.Namespace, Queue: i.Queue, Key: i.Key, State: i.State,
		Priority: i.Priority, Payload: i.Payload, Metadata: i.Metadata, Attempt: i.Attempt,
		MaxAttempts: i.MaxAttempts, AttemptTimeout: Duration(i.AttemptTimeout), Deadline: i.Deadline,
		AvailableAt: i.AvailableAt, LeaseExpiresAt: i.LeaseExpiresAt, Worker: i.Worker, Result: i.Result,
		Error: i.Error, CreatedAt: i.CreatedAt, StartedAt: i.StartedAt, FinishedAt: i.FinishedAt}
}

// ClaimRequest is the body of POST /v1/claim (plane.ClaimParams).
type ClaimRequest struct {
	Namespace   string     `json:"namespace" msgpack:"namespace"`
	Queue       string     `json:"queue" msgpack:"queue"`
	Kind        plane.Kind `json:"kind,omitempty" msgpack:"kind,omitempty"`
	Temperature float64    `json:"temperature,omitempty" msgpack:"temperature,omitempty"`
	Max         int        `json:"max,omitempty" msgpack:"max,omitempty"`
	// LeaseTTL and Wait are seconds. The server caps Wait at its long-poll limit.
	LeaseTTL float64 `json:"lease_ttl,omitempty" msgpack:"lease_ttl,omitempty"`
	Wait     float64 `json:"wait,omitempty" msgpack:"wait,omitempty"`
	Worker   string  `json:"worker,omitempty" msgpack:"worker,omitempty"`
}

// Job is plane.Job on the wire.
type Job struct {
	ID             string            `json:"id" msgpack:"id"`
	Namespace      string            `json:"namespace" msgpack:"namespace"`
	Queue          string            `json:"queue" msgpack:"queue"`
	Key            string            `json:"key,omitempty" msgpack:"key,omitempty"`
	Payload        []byte            `json:"payload,omitempty" msgpack:"payload,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty" msgpack:"metadata,omitempty"`
	Priority       float64           `json:"priority" msgpack:"priority"`
	Attempt        int               `json:"attempt" msgpack:"attempt"`
	MaxAttempts    int               `json:"max_attempts" msgpack:"max_attempts"`
	AttemptTimeout float64           `json:"attempt_timeout,omitempty" msgpack:"attempt_timeout,omitempty"`
	Deadline       time.Time         `json:"deadline,omitzero" msgpack:"deadline,omitempty"`
	Token          string            `json:"token" msgpack:"token"`
	LeaseExpiresAt time.Time         `json:"lease_expires_at" msgpack:"lease_expires_at"`
}

// NewJob converts j to its wire form.
func NewJob(j *plane.Job) Job {
	return Job{ID: j.ID, Namespace: j.Namespace, Queue: j.Queue, Key: j.Key, Payload: j.Payload, Metadata: j.Metadata,
		Priority: j.Priority, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, AttemptTimeout: Seconds(j.AttemptTimeout),
		Deadline: j.Deadline, Token: j.Token, LeaseExpiresAt: j.LeaseExpiresAt}
}

// Plane converts j back to a plane.Job.
func (j *Job) Plane() *plane.Job {
	return &plane.Job{ID: j.ID, Namespace: j.Namespace, Queue: j.Queue, Key: j.Key, Payload: j.Payload, Metadata: j.Metadata,
		Priority: j.Priority, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, AttemptTimeout: Duration(j.AttemptTimeout),
		Deadline: j.Deadline, Token: j.Token, LeaseExpiresAt: j.LeaseExpiresAt}
}

// ClaimResponse is the answer of POST /v1/claim: the claimed jobs, empty when none came.
type ClaimResponse struct {
	Jobs []Job `json:"jobs" msgpack:"jobs"`
}

// Settle is one ack or nack (plane.SettleParams). Outcome is "succeeded", "retry" or
// "failed".
type Settle struct {
	ID         string           `json:"id" msgpack:"id"`
	Token      string           `json:"token" msgpack:"token"`
	Outcome    string           `json:"outcome" msgpack:"outcome"`
	Result     []byte           `json:"result,omitempty" msgpack:"result,omitempty"`
	Error      *plane.ErrorInfo `json:"error,omitempty" msgpack:"error,omitempty"`
	RetryDelay float64          `json:"retry_delay,omitempty" msgpack:"retry_delay,omitempty"`
}

// The outcome names of Settle.Outcome.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeRetry     = "retry"
	OutcomeFailed    = "failed"
	OutcomeTimedOut  = "timed_out"
)

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
	}
	return 0, plane.Invalid("outcome", s, "use succeeded|retry|failed|timed_out")
}

// NewSettle converts p to its wire form.
func NewSettle(p *plane.SettleParams) Settle {
	return Settle{ID: p.ID, Token: p.Token, Outcome: OutcomeName(p.Outcome), Result: p.Result, Error: p.Error,
		RetryDelay: Seconds(p.RetryDelay)}
}

// Params converts s back to plane.SettleParams. Errors: *plane.InvalidError for an unknown
// outcome.
func (s *Settle) Params() (plane.SettleParams, error) {
	o, err := ParseOutcome(s.Outcome)
	if err != nil {
		return plane.SettleParams{}, err
	}
	return plane.SettleParams{ID: s.ID, Token: s.Token, Outcome: o, Result: s.Result, Error: s.Error,
		RetryDelay: Duration(s.RetryDelay)}, nil
}

// SettleRequest is the body of POST /v1/settle.
type SettleRequest struct {
	Settles []Settle `json:"settles" msgpack:"settles"`
}

// ItemResponse is the per-item answer of a batch: nil Error when that item succeeded.
type ItemResponse struct {
	Error *ErrorBody `json:"error,omitempty" msgpack:"error,omitempty"`
}

// SettleResponse is the answer of POST /v1/settle, one result per settle.
type SettleResponse struct {
	Results []ItemResponse `json:"results" msgpack:"results"`
}

// Heartbeat extends one lease (plane.HeartbeatParams). LeaseTTL is seconds.
type Heartbeat struct {
	ID       string  `json:"id" msgpack:"id"`
	Token    string  `json:"token" msgpack:"token"`
	LeaseTTL float64 `json:"lease_ttl,omitempty" msgpack:"lease_ttl,omitempty"`
}

// HeartbeatRequest is the body of POST /v1/heartbeat.
type HeartbeatRequest struct {
	Heartbeats []Heartbeat `json:"heartbeats" msgpack:"heartbeats"`
}

// HeartbeatResult is the outcome of one heartbeat.
type HeartbeatResult struct {
	LeaseExpiresAt time.Time  `json:"lease_expires_at,omitzero" msgpack:"lease_expires_at,omitempty"`
	Error          *ErrorBody `json:"error,omitempty" msgpack:"error,omitempty"`
}

// HeartbeatResponse is the answer of POST /v1/heartbeat, one result per heartbeat.
type HeartbeatResponse struct {
	Results []HeartbeatResult `json:"results" msgpack:"results"`
}

// Journal names an invocation's journal (InvocationID) or a topic's.
type Journal struct {
	InvocationID string `json:"invocation_id,omitempty" msgpack:"invocation_id,omitempty"`
	Namespace    string `json:"namespace,omitempty" msgpack:"namespace,omitempty"`
	Queue        string `json:"queue,omitempty" msgpack:"queue,omitempty"`
	Topic        string `json:"topic,omitempty" msgpack:"topic,omitempty"`
}

// PostRequest is the body of POST /v1/post (plane.FramePostParams).
type PostRequest struct {
	Journal Journal `json:"journal" msgpack:"journal"`
	Token   string  `json:"token,omitempty" msgpack:"token,omitempty"`
	Value   []byte  `json:"value,omitempty" msgpack:"value,omitempty"`
	Final   bool    `json:"final,omitempty" msgpack:"final,omitempty"`
}

// PostResponse is the answer of POST /v1/post: the new frame's seq.
type PostResponse struct {
	Seq int64 `json:"seq" msgpack:"seq"`
}

// Frame is plane.Frame on the wire.
type Frame struct {
	Seq     int64           `json:"seq" msgpack:"seq"`
	Kind    plane.FrameKind `json:"kind" msgpack:"kind"`
	Value   []byte          `json:"value,omitempty" msgpack:"value,omitempty"`
	Attempt int             `json:"attempt,omitempty" msgpack:"attempt,omitempty"`
	Time    time.Time       `json:"time" msgpack:"time"`
}

// FramesResponse is the answer of the frames routes (plane.FrameReadResult).
type FramesResponse struct {
	Frames []Frame `json:"frames" msgpack:"frames"`
	Closed bool    `json:"closed" msgpack:"closed"`
}

// NewFramesResponse converts r to its wire form.
func NewFramesResponse(r *plane.FrameReadResult) *FramesResponse {
	out := &FramesResponse{Frames: make([]Frame, len(r.Frames)), Closed: r.Closed}
	for i, f := range r.Frames {
		out.Frames[i] = Frame{Seq: f.Seq, Kind: f.Kind, Value: f.Value, Attempt: f.Attempt, Time: f.Time}
	}
	return out
}

// Plane converts r back to a plane.FrameReadResult.
func (r *FramesResponse) Plane() *plane.FrameReadResult {
	out := &plane.FrameReadResult{Frames: make([]plane.Frame, len(r.Frames)), Closed: r.Closed}
	for i, f := range r.Frames {
		out.Frames[i] = plane.Frame{Seq: f.Seq, Kind: f.Kind, Value: f.Value, Attempt: f.Attempt, Time: f.Time}
	}
	return out
}

// StreamEvent is one item of a live frame stream in msgpack (GET …/stream with Accept:
// application/msgpack): a frame, a keep-alive ping, or the error that ends the stream.
type StreamEvent struct {
	Frame *Frame     `json:"frame,omitempty" msgpack:"frame,omitempty"`
	Ping  bool       `json:"ping,omitempty" msgpack:"ping,omitempty"`
	Error *ErrorBody `json:"error,omitempty" msgpack:"error,omitempty"`
}

// ChangedResponse answers cancel, kill, admission delete and token revoke.
type ChangedResponse struct {
	Changed bool `json:"changed" msgpack:"changed"`
}

// CountResponse answers GET /v1/queues/{namespace}/{queue}/count.
type CountResponse struct {
	Count int64 `json:"count" msgpack:"count"`
}

// TrimRequest is the body of POST /v1/trim.
type TrimRequest struct {
	Namespace      string    `json:"namespace,omitempty" msgpack:"namespace,omitempty"`
	Queue          string    `json:"queue,omitempty" msgpack:"queue,omitempty"`
	FinishedBefore time.Time `json:"finished_before" msgpack:"finished_before"`
}

// TrimResponse answers POST /v1/trim.
type TrimResponse struct {
	Deleted int64 `json:"deleted" msgpack:"deleted"`
}

// Admission is plane.Admission on the wire (DeadlineCutoff in seconds).
type Admission struct {
	MaxDepth       int64        `json:"max_depth,omitempty" msgpack:"max_depth,omitempty"`
	OnFull         plane.OnFull `json:"on_full,omitempty" msgpack:"on_full,omitempty"`
	RateLimit      float64      `json:"rate_limit,omitempty" msgpack:"rate_limit,omitempty"`
	Burst          int64        `json:"burst,omitempty" msgpack:"burst,omitempty"`
	DeadlineCutoff float64      `json:"deadline_cutoff,omitempty" msgpack:"deadline_cutoff,omitempty"`
}

// NewAdmission converts a to its wire form (nil for nil).
func NewAdmission(a *plane.Admission) *Admission {
	if a == nil {
		return nil
	}
	return &Admission{MaxDepth: a.MaxDepth, OnFull: a.OnFull, RateLimit: a.RateLimit, Burst: a.Burst,
		DeadlineCutoff: Seconds(a.DeadlineCutoff)}
}

// Plane converts a back to a plane.Admission (nil for nil).
func (a *Admission) Plane() *plane.Admission {
	if a == nil {
		return nil
	}
	return &plane.Admission{MaxDepth: a.MaxDepth, OnFull: a.OnFull, RateLimit: a.RateLimit, Burst: a.Burst,
		DeadlineCutoff: Duration(a.DeadlineCutoff)}
}

// AdmissionResponse answers GET /v1/queues/{namespace}/{queue}/admission; Admission is
// null when the queue has none.
type AdmissionResponse struct {
	Admission *Admission `json:"admission" msgpack:"admission"`
}

// QueueStats is plane.QueueStats on the wire.
type QueueStats struct {
	Namespace string                `json:"namespace" msgpack:"namespace"`
	Queue     string                `json:"queue" msgpack:"queue"`
	Counts    map[plane.State]int64 `json:"counts" msgpack:"counts"`
	Admission *Admission            `json:"admission,omitempty" msgpack:"admission,omitempty"`
}

// QueuesResponse answers GET /v1/queues.
type QueuesResponse struct {
	Queues []QueueStats `json:"queues" msgpack:"queues"`
}

// WorkersResponse answers GET /v1/workers.
type WorkersResponse struct {
	Workers []plane.WorkerInfo `json:"workers" msgpack:"workers"`
}

// Token is plane.TokenInfo on the wire. Hash (SHA-256 of the secret) is sent by a client
// that made its own secret, and returned only by the lookup route.
type Token struct {
	ID          string             `json:"id" msgpack:"id"`
	Hash        []byte             `json:"hash,omitempty" msgpack:"hash,omitempty"`
	Namespace   string             `json:"namespace" msgpack:"namespace"`
	Queue       string             `json:"queue" msgpack:"queue"`
	Permissions []plane.Permission `json:"permissions" msgpack:"permissions"`
	CreatedAt   time.Time          `json:"created_at,omitzero" msgpack:"created_at,omitempty"`
	ExpiresAt   time.Time          `json:"expires_at,omitzero" msgpack:"expires_at,omitempty"`
	RevokedAt   time.Time          `json:"revoked_at,omitzero" msgpack:"revoked_at,omitempty"`
}

// NewToken converts t to its wire form, without its hash.
func NewToken(t *plane.TokenInfo) Token {
	return Token{ID: t.ID, Namespace: t.Namespace, Queue: t.Queue, Permissions: t.Permissions,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
}

// Plane converts t back to a plane.TokenInfo.
func (t *Token) Plane() *plane.TokenInfo {
	return &plane.TokenInfo{ID: t.ID, Hash: t.Hash, Namespace: t.Namespace, Queue: t.Queue, Permissions: t.Permissions,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
}

// TokenCreateRequest is the body of POST /v1/tokens. With Hash set the server stores that
// hash (the client keeps the secret); without it the server makes a random secret and
// returns it once in TokenCreateResponse.Secret. TTL (seconds) sets ExpiresAt when > 0.
type TokenCreateRequest struct {
	Token
	TTL float64 `json:"ttl,omitempty" msgpack:"ttl,omitempty"`
}

// TokenCreateResponse answers POST /v1/tokens.
type TokenCreateResponse struct {
	Token Token `json:"token" msgpack:"token"`
	// Secret is the bearer secret, shown this once; empty when the client sent a hash.
	Secret string `json:"secret,omitempty" msgpack:"secret,omitempty"`
}

// TokenLookupRequest is the body of POST /v1/tokens/lookup (Driver.TokenGet).
type TokenLookupRequest struct {
	Hash []byte `json:"hash" msgpack:"hash"`
}

// TokensResponse answers GET /v1/tokens (no hashes).
type TokensResponse struct {
	Tokens []Token `json:"tokens" msgpack:"tokens"`
}

// HealthResponse answers /healthz and /readyz.
type HealthResponse struct {
	Status string `json:"status" msgpack:"status"`
}
