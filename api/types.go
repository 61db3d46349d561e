package api

//go:generate go run github.com/tinylib/msgp -file types.go -o types_gen.go -io=false -tests=false -unexported=false

//msgp:newtime
//msgp:limit arrays:1000000 maps:100000

import "time"

// The bodies of the API. Field names are the same in both encodings (the `msg` tag for
// msgpack, `json` for JSON). Durations are seconds; times are msgpack timestamps or RFC 3339
// strings; Value fields are wire values (see Value). Every body is encoded and decoded by
// the msgp-generated code of types_gen.go in msgpack and by encoding/json/v2 semantics in
// JSON (unknown members refused, names matched case-sensitively).

// SubmitInvocation is one invocation of a batch submit: plane.SubmitParams on the wire.
type SubmitInvocation struct {
	// ID is a client-made ULID that makes the submit safe to repeat; "" lets the server
	// make one.
	ID string `json:"id,omitzero" msg:"id,omitempty"`
	// Payload is the job's argument (absent: nil).
	Payload Value `json:"payload,omitzero" msg:"payload,omitzero"`
	// Key is the idempotency key, unique per queue.
	Key string `json:"key,omitzero" msg:"key,omitempty"`
	// Priority orders priority and boltzmann claims; higher first.
	Priority float64 `json:"priority,omitzero" msg:"priority,omitempty"`
	// MaxAttempts bounds claims; 0: the plane's default (3).
	MaxAttempts int `json:"max_attempts,omitzero" msg:"max_attempts,omitempty"`
	// AttemptTimeout bounds one running attempt, in seconds; 0: none.
	AttemptTimeout float64 `json:"attempt_timeout,omitzero" msg:"attempt_timeout,omitempty"`
	// Deadline ends the invocation as timeout if it is still queued then.
	Deadline time.Time `json:"deadline,omitzero" msg:"deadline,omitzero"`
	// Metadata holds free-form headers.
	Metadata map[string]string `json:"metadata,omitzero" msg:"metadata,omitempty"`
	// NotBefore delays the invocation until this time of the plane's clock.
	NotBefore time.Time `json:"not_before,omitzero" msg:"not_before,omitzero"`
	// Delay delays the invocation by this many seconds from the plane's now (≥ 0); with
	// NotBefore the later time wins.
	Delay float64 `json:"delay,omitzero" msg:"delay,omitempty"`
	// UniqueFor is the dedup window of Key in seconds (plane/dedup.go): within it a second
	// submit of the key returns the first id; after it a new invocation takes the key.
	// 0: the key holds until its invocation is trimmed.
	UniqueFor float64 `json:"unique_for,omitzero" msg:"unique_for,omitempty"`
	// Debounce is the debounce window of Key in seconds (plane/dedup.go): due this long
	// after the submit; a later debounced submit of the key while it still waits replaces
	// its payload and metadata and pushes it back. 0: none. Not with UniqueFor.
	Debounce float64 `json:"debounce,omitzero" msg:"debounce,omitempty"`
	// ConcurrencyKey groups the invocation for its queue's concurrency limits and fair share
	// (plane/concurrency.go): 1–256 bytes of UTF-8 without NUL; absent: none.
	ConcurrencyKey string `json:"concurrency_key,omitzero" msg:"concurrency_key,omitempty"`
	// Requirement is what the invocation needs from its worker (plane.Requirement): only a
	// claim whose offers satisfy it takes it; absent: the default shape, which every claim
	// takes. Not with ConcurrencyKey.
	Requirement *Requirement `json:"requirement,omitzero" msg:"requirement,omitempty"`
}

// Requirement is plane.Requirement (and, as a claim's offers, plane.Offers) on the wire: a
// zero or absent field asks for (offers) nothing.
type Requirement struct {
	// CPUsMilli is the CPU count × 1000 (0.5 CPU is 500), 0–1,024,000.
	CPUsMilli int64 `json:"cpus_milli,omitzero" msg:"cpus_milli,omitempty"`
	// MemoryBytes is memory in bytes, 0–2^50.
	MemoryBytes int64 `json:"memory_bytes,omitzero" msg:"memory_bytes,omitempty"`
	// GPUs is the GPU count, 0–1024.
	GPUs int64 `json:"gpus,omitzero" msg:"gpus,omitempty"`
	// GPUType is the GPU model ("a100"): 1-63 of [A-Za-z0-9_./-], starting with a letter or
	// digit; absent: any (offers: none named).
	GPUType string `json:"gpu_type,omitzero" msg:"gpu_type,omitempty"`
	// Labels must all be offered with equal values (at most 32; keys as GPUType, values
	// 0–255 bytes without control characters).
	Labels map[string]string `json:"labels,omitzero" msg:"labels,omitempty"`
}

// SubmitRequest is the body of POST /v1/namespaces/{ns}/queues/{queue}/invocations: one
// invocation (the fields of SubmitInvocation) and MaxWait.
type SubmitRequest struct {
	ID             string            `json:"id,omitzero" msg:"id,omitempty"`
	Payload        Value             `json:"payload,omitzero" msg:"payload,omitzero"`
	Key            string            `json:"key,omitzero" msg:"key,omitempty"`
	Priority       float64           `json:"priority,omitzero" msg:"priority,omitempty"`
	MaxAttempts    int               `json:"max_attempts,omitzero" msg:"max_attempts,omitempty"`
	AttemptTimeout float64           `json:"attempt_timeout,omitzero" msg:"attempt_timeout,omitempty"`
	Deadline       time.Time         `json:"deadline,omitzero" msg:"deadline,omitzero"`
	Metadata       map[string]string `json:"metadata,omitzero" msg:"metadata,omitempty"`
	NotBefore      time.Time         `json:"not_before,omitzero" msg:"not_before,omitzero"`
	Delay          float64           `json:"delay,omitzero" msg:"delay,omitempty"`
	UniqueFor      float64           `json:"unique_for,omitzero" msg:"unique_for,omitempty"`
	Debounce       float64           `json:"debounce,omitzero" msg:"debounce,omitempty"`
	ConcurrencyKey string            `json:"concurrency_key,omitzero" msg:"concurrency_key,omitempty"`
	Requirement    *Requirement      `json:"requirement,omitzero" msg:"requirement,omitempty"`
	// MaxWait bounds how long a submit to a full queue with on_full=block waits for room,
	// in seconds. 0: the server's long-poll limit.
	MaxWait float64 `json:"max_wait,omitzero" msg:"max_wait,omitempty"`
}

// Invocation returns the invocation r describes.
func (r *SubmitRequest) Invocation() SubmitInvocation {
	return SubmitInvocation{ID: r.ID, Payload: r.Payload, Key: r.Key, Priority: r.Priority, MaxAttempts: r.MaxAttempts,
		AttemptTimeout: r.AttemptTimeout, Deadline: r.Deadline, Metadata: r.Metadata, NotBefore: r.NotBefore, Delay: r.Delay,
		UniqueFor: r.UniqueFor, Debounce: r.Debounce, ConcurrencyKey: r.ConcurrencyKey, Requirement: r.Requirement}
}

// SubmitBatchRequest is the body of POST …/invocations/batch: invocations of one queue,
// enqueued all-or-nothing.
type SubmitBatchRequest struct {
	Invocations []SubmitInvocation `json:"invocations" msg:"invocations"`
	// MaxWait: as in SubmitRequest.
	MaxWait float64 `json:"max_wait,omitzero" msg:"max_wait,omitempty"`
}

// SubmitResult is the outcome of one submit.
type SubmitResult struct {
	ID string `json:"id" msg:"id"`
	// Existing is true when the key or id already existed and nothing was enqueued.
	Existing bool `json:"existing" msg:"existing"`
}

// SubmitBatchResponse is the answer of a batch submit, one result per invocation.
type SubmitBatchResponse struct {
	Results []SubmitResult `json:"results" msg:"results"`
}

// ErrorInfo is plane.ErrorInfo on the wire: how an attempt ended.
type ErrorInfo struct {
	// Type classifies the error, e.g. "error", "panic", "lease_expired", "killed".
	Type string `json:"type" msg:"type"`
	// Message is the error text.
	Message string `json:"message" msg:"message"`
	// Attempt is the attempt (1-based) that ended with this error.
	Attempt int `json:"attempt,omitzero" msg:"attempt"`
}

// Invocation is plane.Invocation on the wire. State is queued, running, succeeded, failed,
// cancelled, killed or timeout.
type Invocation struct {
	ID             string `json:"id" msg:"id"`
	Namespace      string `json:"namespace" msg:"namespace"`
	Queue          string `json:"queue" msg:"queue"`
	Key            string `json:"key,omitzero" msg:"key,omitempty"`
	ConcurrencyKey string `json:"concurrency_key,omitzero" msg:"concurrency_key,omitempty"`
	// Requirement is what the invocation waits for a worker to offer; Shape its shape key
	// (plane.Requirement.Shape). Both absent: the default shape.
	Requirement *Requirement `json:"requirement,omitzero" msg:"requirement,omitempty"`
	Shape       string       `json:"shape,omitzero" msg:"shape,omitempty"`
	// CapableWorkers is, for a queued invocation with a requirement read by GET
	// …/invocations/{id}, how many live registered workers of its queue offer what it
	// requires (plane.CapableWorkers); 0: no capable worker (it waits). Absent otherwise.
	CapableWorkers *int              `json:"capable_workers,omitzero" msg:"capable_workers,omitempty"`
	State          string            `json:"state" msg:"state"`
	Priority       float64           `json:"priority" msg:"priority"`
	Payload        Value             `json:"payload,omitzero" msg:"payload,omitzero"`
	Metadata       map[string]string `json:"metadata,omitzero" msg:"metadata,omitempty"`
	Attempt        int               `json:"attempt" msg:"attempt"`
	MaxAttempts    int               `json:"max_attempts" msg:"max_attempts"`
	AttemptTimeout float64           `json:"attempt_timeout,omitzero" msg:"attempt_timeout,omitempty"`
	Deadline       time.Time         `json:"deadline,omitzero" msg:"deadline,omitzero"`
	AvailableAt    time.Time         `json:"available_at,omitzero" msg:"available_at,omitzero"`
	LeaseExpiresAt time.Time         `json:"lease_expires_at,omitzero" msg:"lease_expires_at,omitzero"`
	Worker         string            `json:"worker,omitzero" msg:"worker,omitempty"`
	Result         Value             `json:"result,omitzero" msg:"result,omitzero"`
	Error          *ErrorInfo        `json:"error,omitzero" msg:"error,omitempty"`
	CreatedAt      time.Time         `json:"created_at,omitzero" msg:"created_at,omitzero"`
	StartedAt      time.Time         `json:"started_at,omitzero" msg:"started_at,omitzero"`
	FinishedAt     time.Time         `json:"finished_at,omitzero" msg:"finished_at,omitzero"`
}

// ListResponse answers GET …/invocations: one page, newest or oldest first, without
// payloads and results. Next is the cursor of the following page ("" on the last page).
type ListResponse struct {
	Invocations []Invocation `json:"invocations" msg:"invocations"`
	Next        string       `json:"next" msg:"next"`
}

// WaitResponse answers GET /v1/invocations/{id}/wait: Done with the terminal invocation,
// or Done false (and no invocation) when the wait ended first.
type WaitResponse struct {
	Done       bool        `json:"done" msg:"done"`
	Invocation *Invocation `json:"invocation,omitzero" msg:"invocation,omitempty"`
}

// ClaimRequest is the body of POST …/claim (plane.ClaimParams). Kind is fifo (default),
// filo, priority or boltzmann.
type ClaimRequest struct {
	Kind        string  `json:"kind,omitzero" msg:"kind,omitempty"`
	Temperature float64 `json:"temperature,omitzero" msg:"temperature,omitempty"`
	Max         int     `json:"max,omitzero" msg:"max,omitempty"`
	// LeaseTTL and Wait are seconds. LeaseTTL is at most MaxLeaseTTL; the server caps Wait
	// at its long-poll limit.
	LeaseTTL float64 `json:"lease_ttl,omitzero" msg:"lease_ttl,omitempty"`
	Wait     float64 `json:"wait,omitzero" msg:"wait,omitempty"`
	Worker   string  `json:"worker,omitzero" msg:"worker,omitempty"`
	// Queues names further queues of the path's namespace to claim from besides the path's
	// queue (plane.ClaimParams.Queues): the claim waits on all of them at once and takes
	// from whichever has work first, the first queue tried turning from claim to claim. At
	// most 64 distinct names with the path's; the token must be allowed to consume each.
	Queues []string `json:"queues,omitzero" msg:"queues,omitempty"`
	// Offers is what the claiming worker offers (plane.Offers): the claim takes only
	// invocations whose requirement they satisfy; absent: only invocations without one.
	Offers *Requirement `json:"offers,omitzero" msg:"offers,omitempty"`
	// WarmHostKeys are the host keys the worker is warm for (plane.ClaimParams.WarmHostKeys):
	// their jobs go first, within plane.WarmHeadStart of the order. At most 16.
	WarmHostKeys []string `json:"warm_host_keys,omitzero" msg:"warm_host_keys,omitempty"`
}

// Job is plane.Job on the wire: a claimed invocation with its lease.
type Job struct {
	ID             string            `json:"id" msg:"id"`
	Namespace      string            `json:"namespace" msg:"namespace"`
	Queue          string            `json:"queue" msg:"queue"`
	Key            string            `json:"key,omitzero" msg:"key,omitempty"`
	ConcurrencyKey string            `json:"concurrency_key,omitzero" msg:"concurrency_key,omitempty"`
	Payload        Value             `json:"payload" msg:"payload"`
	Metadata       map[string]string `json:"metadata,omitzero" msg:"metadata,omitempty"`
	Priority       float64           `json:"priority" msg:"priority"`
	Attempt        int               `json:"attempt" msg:"attempt"`
	MaxAttempts    int               `json:"max_attempts" msg:"max_attempts"`
	AttemptTimeout float64           `json:"attempt_timeout,omitzero" msg:"attempt_timeout,omitempty"`
	Deadline       time.Time         `json:"deadline,omitzero" msg:"deadline,omitzero"`
	Token          string            `json:"token" msg:"token"`
	LeaseExpiresAt time.Time         `json:"lease_expires_at" msg:"lease_expires_at"`
}

// ClaimResponse is the answer of a claim: the claimed jobs, empty when none came.
type ClaimResponse struct {
	Jobs []Job `json:"jobs" msg:"jobs"`
}

// SettleRequest is the body of POST /v1/invocations/{id}/settle. Outcome is succeeded,
// retry, failed, timed_out, rate_limited or released (a job the worker never ran: claimable
// at once, its attempt not counted); RetryDelay is seconds; RateLimitKey (with
// rate_limited) is the concurrency key held back as long.
type SettleRequest struct {
	Token        string     `json:"token" msg:"token"`
	Outcome      string     `json:"outcome" msg:"outcome"`
	Result       Value      `json:"result,omitzero" msg:"result,omitzero"`
	Error        *ErrorInfo `json:"error,omitzero" msg:"error,omitempty"`
	RetryDelay   float64    `json:"retry_delay,omitzero" msg:"retry_delay,omitempty"`
	RateLimitKey string     `json:"rate_limit_key,omitzero" msg:"rate_limit_key,omitempty"`
}

// Settle is one ack or nack of POST /v1/settle (plane.SettleParams): SettleRequest with
// the invocation's id.
type Settle struct {
	ID           string     `json:"id" msg:"id"`
	Token        string     `json:"token" msg:"token"`
	Outcome      string     `json:"outcome" msg:"outcome"`
	Result       Value      `json:"result,omitzero" msg:"result,omitzero"`
	Error        *ErrorInfo `json:"error,omitzero" msg:"error,omitempty"`
	RetryDelay   float64    `json:"retry_delay,omitzero" msg:"retry_delay,omitempty"`
	RateLimitKey string     `json:"rate_limit_key,omitzero" msg:"rate_limit_key,omitempty"`
}

// SettlesRequest is the body of POST /v1/settle.
type SettlesRequest struct {
	Settles []Settle `json:"settles" msg:"settles"`
}

// ItemResponse is the per-item answer of a batch: nil Error when that item succeeded.
type ItemResponse struct {
	Error *ErrorBody `json:"error,omitzero" msg:"error,omitempty"`
}

// SettlesResponse is the answer of POST /v1/settle, one result per settle.
type SettlesResponse struct {
	Results []ItemResponse `json:"results" msg:"results"`
}

// SettleAndClaimRequest is the body of POST …/settle-and-claim
// (plane.Driver.InvocationSettleAndClaim): the settles, then a claim from the path's queue,
// in one transaction. Settles may name invocations of any queue the token may consume.
type SettleAndClaimRequest struct {
	Settles []Settle     `json:"settles" msg:"settles"`
	Claim   ClaimRequest `json:"claim" msg:"claim"`
}

// SettleAndClaimResponse answers POST …/settle-and-claim: one result per settle, and the
// claimed jobs (empty when none came).
type SettleAndClaimResponse struct {
	Results []ItemResponse `json:"results" msg:"results"`
	Jobs    []Job          `json:"jobs" msg:"jobs"`
}

// EmptyResponse answers a call that has nothing to report beyond success: {}.
type EmptyResponse struct{}

// HeartbeatRequest is the body of POST /v1/invocations/{id}/heartbeat. LeaseTTL is seconds
// (0: the plane's default), at most MaxLeaseTTL.
type HeartbeatRequest struct {
	Token    string  `json:"token" msg:"token"`
	LeaseTTL float64 `json:"lease_ttl,omitzero" msg:"lease_ttl,omitempty"`
}

// HeartbeatResponse answers POST /v1/invocations/{id}/heartbeat: the new lease expiry.
type HeartbeatResponse struct {
	LeaseExpiresAt time.Time `json:"lease_expires_at" msg:"lease_expires_at"`
}

// Heartbeat extends one lease in POST /v1/heartbeat (plane.HeartbeatParams).
type Heartbeat struct {
	ID       string  `json:"id" msg:"id"`
	Token    string  `json:"token" msg:"token"`
	LeaseTTL float64 `json:"lease_ttl,omitzero" msg:"lease_ttl,omitempty"`
}

// HeartbeatsRequest is the body of POST /v1/heartbeat.
type HeartbeatsRequest struct {
	Heartbeats []Heartbeat `json:"heartbeats" msg:"heartbeats"`
}

// HeartbeatResult is the outcome of one heartbeat of a batch.
type HeartbeatResult struct {
	LeaseExpiresAt time.Time  `json:"lease_expires_at,omitzero" msg:"lease_expires_at,omitzero"`
	Error          *ErrorBody `json:"error,omitzero" msg:"error,omitempty"`
}

// HeartbeatsResponse is the answer of POST /v1/heartbeat, one result per heartbeat.
type HeartbeatsResponse struct {
	Results []HeartbeatResult `json:"results" msg:"results"`
}

// PostRequest is the body of POST /v1/invocations/{id}/frames (Token required) and of POST
// …/topics/{topic}/frames (no token): plane.FramePostParams.
type PostRequest struct {
	Token string `json:"token,omitzero" msg:"token,omitempty"`
	Value Value  `json:"value,omitzero" msg:"value,omitzero"`
	Final bool   `json:"final,omitzero" msg:"final,omitempty"`
}

// PostResponse is the answer of a post: the new frame's seq.
type PostResponse struct {
	Seq int64 `json:"seq" msg:"seq"`
}

// Frame is plane.Frame on the wire. Kind is VALUE, END or ERROR.
type Frame struct {
	Seq     int64     `json:"seq" msg:"seq"`
	Kind    string    `json:"kind" msg:"kind"`
	Value   Value     `json:"value" msg:"value"`
	Attempt int       `json:"attempt,omitzero" msg:"attempt,omitempty"`
	Time    time.Time `json:"time" msg:"time"`
}

// FramesResponse is the answer of the frames routes (plane.FrameReadResult); no frames and
// Closed false: nothing yet.
type FramesResponse struct {
	Frames []Frame `json:"frames" msg:"frames"`
	Closed bool    `json:"closed" msg:"closed"`
}

// StreamEvent is one item of a live frame stream in msgpack (GET …/stream with Accept:
// application/msgpack): a frame, a keep-alive ping, or the error that ends the stream.
type StreamEvent struct {
	Frame *Frame     `json:"frame,omitzero" msg:"frame,omitempty"`
	Ping  bool       `json:"ping,omitzero" msg:"ping,omitempty"`
	Error *ErrorBody `json:"error,omitzero" msg:"error,omitempty"`
}

// ChangedResponse answers cancel, kill, admission delete and token revoke.
type ChangedResponse struct {
	Changed bool `json:"changed" msg:"changed"`
}

// CountResponse answers GET …/count.
type CountResponse struct {
	Count int64 `json:"count" msg:"count"`
}

// TrimRequest is the body of POST /v1/trim.
type TrimRequest struct {
	Namespace      string    `json:"namespace,omitzero" msg:"namespace,omitempty"`
	Queue          string    `json:"queue,omitzero" msg:"queue,omitempty"`
	FinishedBefore time.Time `json:"finished_before" msg:"finished_before"`
}

// TrimResponse answers POST /v1/trim.
type TrimResponse struct {
	Deleted int64 `json:"deleted" msg:"deleted"`
}

// Admission is plane.Admission on the wire (DeadlineCutoff in seconds; OnFull reject or
// block).
type Admission struct {
	MaxDepth       int64   `json:"max_depth,omitzero" msg:"max_depth,omitempty"`
	OnFull         string  `json:"on_full,omitzero" msg:"on_full,omitempty"`
	RateLimit      float64 `json:"rate_limit,omitzero" msg:"rate_limit,omitempty"`
	Burst          int64   `json:"burst,omitzero" msg:"burst,omitempty"`
	DeadlineCutoff float64 `json:"deadline_cutoff,omitzero" msg:"deadline_cutoff,omitempty"`
	// ConcurrencyLimit is the most running invocations per concurrency key; 0: no limit.
	ConcurrencyLimit int64 `json:"concurrency_limit,omitzero" msg:"concurrency_limit,omitempty"`
	// ConcurrencyLimits overrides ConcurrencyLimit per key (0: no limit for that key).
	//
	// In the four per-key maps (ConcurrencyLimits, KeyWeights, KeyRateLimits, KeyBursts) a
	// null value (JSON null, msgpack nil) is no override: the key takes the queue's default,
	// as the CLI's KEY=- (Plane drops it; answers never carry one).
	ConcurrencyLimits map[string]*int64 `json:"concurrency_limits,omitzero" msg:"concurrency_limits,omitempty"`
	// KeyWeights weighs the keys' fair share of claims (> 0; default 1).
	KeyWeights map[string]*float64 `json:"key_weights,omitzero" msg:"key_weights,omitempty"`
	// KeyRateLimit is the starts per second of each key (a token bucket per key of size
	// KeyBurst); 0: no limit.
	KeyRateLimit float64 `json:"key_rate_limit,omitzero" msg:"key_rate_limit,omitempty"`
	KeyBurst     int64   `json:"key_burst,omitzero" msg:"key_burst,omitempty"`
	// KeyRateLimits overrides KeyRateLimit per key (0: no rate limit for that key).
	KeyRateLimits map[string]*float64 `json:"key_rate_limits,omitzero" msg:"key_rate_limits,omitempty"`
	// KeyBursts overrides the bucket size per key (≥ 1).
	KeyBursts map[string]*int64 `json:"key_bursts,omitzero" msg:"key_bursts,omitempty"`
}

// AdmissionResponse answers the admission routes; Admission is null when the queue has
// none.
type AdmissionResponse struct {
	Admission *Admission `json:"admission" msg:"admission"`
}

// QueueStats is plane.QueueStats on the wire: counts by state name.
type QueueStats struct {
	Namespace string           `json:"namespace" msg:"namespace"`
	Queue     string           `json:"queue" msg:"queue"`
	Counts    map[string]int64 `json:"counts" msg:"counts"`
	Admission *Admission       `json:"admission,omitzero" msg:"admission,omitempty"`
	// Paused is true while the queue is paused (PUT …/pause): it accepts submits, and no
	// claim takes its invocations. Absent when false.
	Paused bool `json:"paused,omitzero" msg:"paused,omitempty"`
	// Keys are the queue's concurrency keys with jobs claimable or running, or held back
	// by a worker's "slow down" (rate_wait > 0), the most running first (at most 100).
	// Absent when none.
	Keys []KeyStats `json:"keys,omitzero" msg:"keys,omitempty"`
}

// KeyStats is plane.KeyStats on the wire: one concurrency key's claimable (queued) and
// running jobs, its limit (0: none) and weight, its rate limit (starts per second and
// bucket size; absent when none) and rate wait.
type KeyStats struct {
	Key       string  `json:"key" msg:"key"`
	Queued    int64   `json:"queued" msg:"queued"`
	Running   int64   `json:"running" msg:"running"`
	Limit     int64   `json:"limit" msg:"limit"`
	Weight    float64 `json:"weight" msg:"weight"`
	RateLimit float64 `json:"rate_limit,omitzero" msg:"rate_limit,omitempty"`
	Burst     int64   `json:"burst,omitzero" msg:"burst,omitempty"`
	// RateWait is seconds from the read until the key may start its next job as far as
	// its rate limit and any worker's "slow down" hold go (plane.KeyStats.RateWait);
	// absent when it may start now.
	RateWait float64 `json:"rate_wait,omitzero" msg:"rate_wait,omitempty"`
}

// QueuesResponse answers GET /v1/queues.
type QueuesResponse struct {
	Queues []QueueStats `json:"queues" msg:"queues"`
}

// WorkerRegisterRequest is the body of PUT /v1/namespaces/{ns}/workers/{id}.
type WorkerRegisterRequest struct {
	Host      string    `json:"host" msg:"host"`
	PID       int       `json:"pid" msg:"pid"`
	Queues    []string  `json:"queues" msg:"queues"`
	StartedAt time.Time `json:"started_at" msg:"started_at"`
	// Provider and LaunchID say who launched the worker (empty when started by hand).
	Provider string `json:"provider,omitzero" msg:"provider,omitempty"`
	LaunchID string `json:"launch_id,omitzero" msg:"launch_id,omitempty"`
	// Running is how many jobs the worker runs now; IdleSince when its last job ended
	// (absent while one runs).
	Running   int       `json:"running,omitzero" msg:"running,omitempty"`
	IdleSince time.Time `json:"idle_since,omitzero" msg:"idle_since,omitzero"`
	// Offers and WarmHostKeys are what the worker offers and the host keys it is warm for
	// (plane.WorkerInfo); absent: nothing.
	Offers       *Requirement `json:"offers,omitzero" msg:"offers,omitempty"`
	WarmHostKeys []string     `json:"warm_host_keys,omitzero" msg:"warm_host_keys,omitempty"`
}

// Worker is plane.WorkerInfo on the wire.
type Worker struct {
	ID        string    `json:"id" msg:"id"`
	Namespace string    `json:"namespace" msg:"namespace"`
	Host      string    `json:"host" msg:"host"`
	PID       int       `json:"pid" msg:"pid"`
	Queues    []string  `json:"queues" msg:"queues"`
	StartedAt time.Time `json:"started_at" msg:"started_at"`
	LastSeen  time.Time `json:"last_seen" msg:"last_seen"`
	Provider  string    `json:"provider,omitzero" msg:"provider,omitempty"`
	LaunchID  string    `json:"launch_id,omitzero" msg:"launch_id,omitempty"`
	Running   int       `json:"running" msg:"running"`
	IdleSince time.Time `json:"idle_since,omitzero" msg:"idle_since,omitzero"`
	// Offers and WarmHostKeys are what the worker registered it offers and is warm for.
	Offers       *Requirement `json:"offers,omitzero" msg:"offers,omitempty"`
	WarmHostKeys []string     `json:"warm_host_keys,omitzero" msg:"warm_host_keys,omitempty"`
}

// WorkersResponse answers GET /v1/workers.
type WorkersResponse struct {
	Workers []Worker `json:"workers" msg:"workers"`
}

// Token is plane.TokenInfo on the wire. Hash (SHA-256 of the secret) is returned only by
// the lookup route. Permissions are submit, consume, read and admin.
type Token struct {
	ID          string    `json:"id" msg:"id"`
	Hash        []byte    `json:"hash,omitzero" msg:"hash,omitempty"`
	Namespace   string    `json:"namespace" msg:"namespace"`
	Queue       string    `json:"queue" msg:"queue"`
	Permissions []string  `json:"permissions" msg:"permissions"`
	CreatedAt   time.Time `json:"created_at,omitzero" msg:"created_at,omitzero"`
	ExpiresAt   time.Time `json:"expires_at,omitzero" msg:"expires_at,omitzero"`
	RevokedAt   time.Time `json:"revoked_at,omitzero" msg:"revoked_at,omitzero"`
}

// TokenCreateRequest is the body of POST /v1/tokens. With Hash set the server stores that
// hash (the client keeps the secret); without it the server makes a random secret and
// returns it once in TokenCreateResponse.Secret. TTL (seconds) sets the expiry when > 0.
type TokenCreateRequest struct {
	ID          string    `json:"id,omitzero" msg:"id,omitempty"`
	Hash        []byte    `json:"hash,omitzero" msg:"hash,omitempty"`
	Namespace   string    `json:"namespace" msg:"namespace"`
	Queue       string    `json:"queue" msg:"queue"`
	Permissions []string  `json:"permissions" msg:"permissions"`
	CreatedAt   time.Time `json:"created_at,omitzero" msg:"created_at,omitzero"`
	ExpiresAt   time.Time `json:"expires_at,omitzero" msg:"expires_at,omitzero"`
	TTL         float64   `json:"ttl,omitzero" msg:"ttl,omitempty"`
}

// TokenCreateResponse answers POST /v1/tokens.
type TokenCreateResponse struct {
	Token Token `json:"token" msg:"token"`
	// Secret is the bearer secret, shown this once; empty when the client sent a hash.
	Secret string `json:"secret,omitzero" msg:"secret,omitempty"`
}

// TokenLookupRequest is the body of POST /v1/tokens/lookup (Driver.TokenGet).
type TokenLookupRequest struct {
	Hash []byte `json:"hash" msg:"hash"`
}

// TokensResponse answers GET /v1/tokens (no hashes).
type TokensResponse struct {
	Tokens []Token `json:"tokens" msg:"tokens"`
}

// HealthResponse answers /healthz and /readyz.
type HealthResponse struct {
	Status string `json:"status" msg:"status"`
}

// ErrorBody is the one error body of the API: {code, message, details}. Code is a plane
// sentinel's stable code ("not_found", "invalid", …) or one of the server's own codes;
// Details carry the fields of *plane.InvalidError, *plane.TerminalError and
// *plane.AdmissionError so a client rebuilds the same error.
type ErrorBody struct {
	Code    string        `json:"code" msg:"code"`
	Message string        `json:"message" msg:"message"`
	Details *ErrorDetails `json:"details,omitzero" msg:"details,omitempty"`
}

// ErrorDetails are the typed fields of an error, by the code it has.
type ErrorDetails struct {
	// invalid (*plane.InvalidError): the field (in JSON terms), the offending value
	// (a string, number or bool) and the rule.
	Field string `json:"field,omitzero" msg:"field,omitempty"`
	Value any    `json:"value,omitzero" msg:"value,omitempty"`
	Rule  string `json:"rule,omitzero" msg:"rule,omitempty"`
	// failed, cancelled, timed_out (*plane.TerminalError).
	ID    string     `json:"id,omitzero" msg:"id,omitempty"`
	State string     `json:"state,omitzero" msg:"state,omitempty"`
	Info  *ErrorInfo `json:"info,omitzero" msg:"info,omitempty"`
	// queue_full, rate_limited (*plane.AdmissionError). RetryAfter is seconds.
	Queue      string  `json:"queue,omitzero" msg:"queue,omitempty"`
	Fit        int64   `json:"fit,omitzero" msg:"fit,omitempty"`
	RetryAfter float64 `json:"retry_after,omitzero" msg:"retry_after,omitempty"`
	Detail     string  `json:"detail,omitzero" msg:"detail,omitempty"`
	// Cause is what ended a blocked submit's wait: "deadline" (the wait's time ran out) or
	// "canceled".
	Cause string `json:"cause,omitzero" msg:"cause,omitempty"`
}
