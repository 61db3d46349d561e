package plane

import (
	"cmp"
	"context"
	"path"
	"slices"
	"time"
)

// Driver is the boundary between what users call and where state lives (the shape of
// River's riverdriver). It is batch-first: submit many, claim many, settle many, read frames
// from a cursor. Payloads, results and frame values are wire-encoded bytes; drivers never
// decode them. Every driver passes the conformance suite in plane/planetest.
//
// Waiting operations (a claim with Wait, InvocationWait, FrameRead with Wait) wait by
// notification and end early when ctx ends (returning ctx's error).
//
// Implementations are safe for concurrent use.
type Driver interface {
	// InvocationSubmitMany enqueues invocations into one queue, all in one transaction.
	// A submit whose key (or ID) already exists in the queue returns the existing id with
	// Existing set and enqueues nothing, bypassing admission. The queue's admission block
	// applies to the new ones all-or-nothing. Errors: *InvalidError, *AdmissionError (Is
	// ErrQueueFull or ErrRateLimited); nothing is written on error.
	InvocationSubmitMany(ctx context.Context, params *SubmitManyParams) ([]SubmitResult, error)

	// InvocationClaimMany claims up to Max claimable invocations in the order of Kind and
	// gives each a fresh lease. With Wait > 0 and nothing claimable it waits up to Wait for
	// one, and returns an empty slice (no error) when none came.
	InvocationClaimMany(ctx context.Context, params *ClaimParams) ([]*Job, error)

	// InvocationSettleMany acks or nacks claimed invocations, each fenced by its token.
	// The result has one entry per param: nil, or ErrLeaseLost / ErrNotFound for that one.
	// The returned error is for the whole call (nothing settled).
	InvocationSettleMany(ctx context.Context, params []SettleParams) ([]error, error)

	// InvocationSettleAndClaim settles claimed invocations and claims the next ones in the
	// same transaction: one durable commit per job for a worker that takes its next job as
	// it finishes the last. Settle has InvocationSettleMany's per-item results (nil,
	// ErrLeaseLost, ErrNotFound); Claim is InvocationClaimMany's params and answer.
	//
	// A stale token (the lease expired and the job moved on, or it was killed) fences its
	// settle exactly as InvocationSettleMany does: ErrLeaseLost for that item, nothing
	// changed. The claim still happens: the caller holds no lease on that job either way,
	// so its slot is free for the next one.
	//
	// With Claim.Wait > 0 and nothing claimable, the settles are committed first, then the
	// claim waits as InvocationClaimMany does; ctx ending during that wait returns the
	// settle results, no jobs and no error (the settles are done). The returned error is
	// for the whole call: nothing was settled or claimed. Errors: *InvalidError (a bad
	// settle or claim param).
	InvocationSettleAndClaim(ctx context.Context, settle []SettleParams, claim *ClaimParams) ([]error, []*Job, error)

	// InvocationHeartbeatMany extends leases. One result per param: the new lease expiry,
	// or ErrLeaseLost (the lease expired, moved to another claim, or the job was killed).
	InvocationHeartbeatMany(ctx context.Context, params []HeartbeatParams) ([]HeartbeatResult, error)

	// InvocationGet returns one invocation. Errors: ErrNotFound.
	InvocationGet(ctx context.Context, id string) (*Invocation, error)

	// InvocationWait waits until invocation id is terminal and returns it. Errors:
	// ErrNotFound, ErrTimeout when Timeout passes first (nothing changes).
	InvocationWait(ctx context.Context, params *WaitParams) (*Invocation, error)

	// InvocationCancel moves a queued invocation to cancelled and reports whether it did; on
	// a running or terminal one it changes nothing and returns false. Errors: ErrNotFound.
	InvocationCancel(ctx context.Context, id string) (bool, error)

	// InvocationKill ends a running invocation as killed and revokes its lease, reporting
	// whether it did; on any other state it returns false. Errors: ErrNotFound.
	InvocationKill(ctx context.Context, id string) (bool, error)

	// InvocationList pages through the invocations of one queue, newest or oldest first,
	// optionally filtered by state and key prefix. A page ends with Next, the cursor to pass
	// as After for the following page ("" on the last page). Listing reads indexes only: a
	// page costs O(Limit) whatever the queue's size. Errors: *InvalidError.
	InvocationList(ctx context.Context, params *ListParams) (*ListPage, error)

	// InvocationCount counts the invocations of one queue in one state, from the rows that
	// get claimed.
	InvocationCount(ctx context.Context, params *CountParams) (int64, error)

	// QueueStatsList returns counts by state for every queue of a namespace ("" for all).
	QueueStatsList(ctx context.Context, namespace string) ([]QueueStats, error)

	// DemandList returns the demand of every (queue, shape) of a namespace ("" for all):
	// each queue with invocations has its default shape listed, and every shape submitted
	// to it (ShapeDemand), in SortDemand's order. It reads counters and one index probe per
	// listed shape with claimable jobs, never the queued jobs themselves. Errors:
	// *InvalidError (a bad namespace).
	DemandList(ctx context.Context, namespace string) ([]ShapeDemand, error)

	// InvocationTrim deletes terminal invocations (and their journals) that finished before
	// params.FinishedBefore, freeing their keys, but not one still holding its key for a
	// dedup window (KeyHeldUntil): it is kept until the window ends. It returns how many it
	// deleted.
	InvocationTrim(ctx context.Context, params *TrimParams) (int64, error)

	// FramePost appends a frame to a journal and returns its seq. On an invocation's journal
	// it needs the lease token; Final there appends END with Value and ends the journal for
	// the running attempt without settling the job (its settle follows; docs/semantics.md).
	// On a topic's journal Final appends END and closes the topic.
	// Errors: ErrLeaseLost, ErrJournalClosed, ErrNotFound, *InvalidError.
	FramePost(ctx context.Context, params *FramePostParams) (int64, error)

	// FrameRead returns up to Limit frames with seq > Since. With Wait > 0 and no such frame
	// it waits up to Wait for one and returns an empty result when none came.
	// Errors: ErrNotFound (unknown invocation; a topic that does not exist yet is empty).
	FrameRead(ctx context.Context, params *FrameReadParams) (*FrameReadResult, error)

	// QueueAdmissionSet stores the admission block of a queue, replacing any earlier one,
	// and returns the block as stored, as QueueAdmissionGet would read it right after
	// (defaults filled in: a burst that follows the rate; a null per-key override left
	// out): the set's own block, never one a racing set wrote.
	// Errors: *InvalidError; ErrChanged (a conditional set, IfMatch).
	QueueAdmissionSet(ctx context.Context, params *AdmissionParams) (*Admission, error)

	// QueueAdmissionGet returns the admission block of a queue, or nil when it has none.
	QueueAdmissionGet(ctx context.Context, namespace, queue string) (*Admission, error)

	// QueueAdmissionDelete removes the admission block of a queue and reports whether
	// there was one.
	QueueAdmissionDelete(ctx context.Context, namespace, queue string) (bool, error)

	// QueuePause pauses (params.Paused) or resumes a queue and reports whether that changed
	// its state. A paused queue accepts submits (admission still applies) but no claim takes
	// its invocations: claims answer nothing, and claims that wait keep waiting (a
	// handoff skips the queue too). Running invocations are not touched: they settle,
	// heartbeat and post as before, and a retry re-queues behind the pause. Resuming makes
	// the queue's queued invocations claimable at once and wakes its waiting claimers.
	// QueueStatsList reports Paused. Errors: *InvalidError (a bad namespace or queue name).
	QueuePause(ctx context.Context, params *PauseParams) (bool, error)

	// QueueProviderSet attaches a provider to a queue (ProviderRef: the provider's name and
	// launch policy), replacing any earlier one. It is stored as given (defaults are not
	// filled in). Errors: *InvalidError (a bad namespace, queue name, provider or policy;
	// nothing is stored).
	QueueProviderSet(ctx context.Context, params *ProviderParams) error

	// QueueProviderGet returns the provider of a queue, or nil when it has none.
	QueueProviderGet(ctx context.Context, namespace, queue string) (*ProviderRef, error)

	// QueueProviderDelete detaches the provider of a queue and reports whether there was
	// one. The queue's workers are not touched: a supervisor stops acting for it.
	QueueProviderDelete(ctx context.Context, namespace, queue string) (bool, error)

	// QueueProviderList lists the queues with a provider in a namespace ("" for every
	// namespace), ordered by namespace then queue.
	QueueProviderList(ctx context.Context, namespace string) ([]QueueProvider, error)

	// LeaseAcquire takes the named lease (namespace, name) for params.Holder when it is
	// free, expired, or already held by Holder, and sets its expiry to now + TTL on the
	// plane's clock; it returns true then. It returns false (no error) while another
	// holder's lease has not expired. Errors: *InvalidError.
	LeaseAcquire(ctx context.Context, params *LeaseParams) (bool, error)

	// LeaseRelease frees the named lease if holder holds it; otherwise it changes nothing.
	// Errors: *InvalidError.
	LeaseRelease(ctx context.Context, namespace, name, holder string) error

	// ScheduleSet stores a schedule (plane.Schedule), replacing the one of the same namespace
	// and name, and returns it as stored. Its next fire is the first tick of its rule after
	// the plane's clock now (none while Paused); a replaced schedule keeps its created
	// time and last fire. The plane's maintenance fires it (Schedule's doc). Creating one
	// in a namespace at its cap (CheckScheduleCount) is refused. Errors: *InvalidError,
	// ErrLimitExceeded (nothing is stored).
	ScheduleSet(ctx context.Context, s *Schedule) (*Schedule, error)

	// ScheduleList pages through the schedules of a namespace ("" for every namespace),
	// ordered by namespace then name: a page of at most Limit, and Next, the cursor to pass
	// as After for the following page ("" on the last). A page costs O(Limit) whatever the
	// number of schedules. ListSchedules follows the cursor. Errors: *InvalidError (a bad
	// namespace, name, cursor or limit).
	ScheduleList(ctx context.Context, params *ScheduleListParams) (*SchedulePage, error)

	// ScheduleDelete removes a schedule and reports whether there was one. Its fires
	// already submitted are ordinary invocations and stay.
	ScheduleDelete(ctx context.Context, namespace, name string) (bool, error)

	// SchedulePause pauses (paused true) or resumes a schedule, returns it and reports
	// whether that changed it. A resumed schedule fires from the first tick after the
	// plane's clock now: the ticks that passed while it was paused are skipped. Pausing a
	// paused schedule (or resuming a running one) changes nothing and reports false, as
	// QueuePause does. Errors: ErrNotFound (no such schedule), *InvalidError.
	SchedulePause(ctx context.Context, namespace, name string, paused bool) (*Schedule, bool, error)

	// WorkerRegister records or refreshes a live worker (LastSeen = now).
	WorkerRegister(ctx context.Context, info *WorkerInfo) error

	// WorkerList lists the workers seen within params.SeenWithin, oldest start first.
	WorkerList(ctx context.Context, params *WorkerListParams) ([]WorkerInfo, error)

	// WorkerRemove deletes a worker's registration (on clean shutdown). Workers are keyed
	// by (namespace, id): a worker of one namespace can never touch another's.
	WorkerRemove(ctx context.Context, namespace, id string) error

	// TokenCreate stores an access token (its hash). Errors: *InvalidError.
	TokenCreate(ctx context.Context, token *TokenInfo) error

	// TokenGet returns the token whose secret hashes to hash. Errors: ErrNotFound.
	TokenGet(ctx context.Context, hash []byte) (*TokenInfo, error)

	// TokenList returns every stored token, revoked ones included, oldest first.
	TokenList(ctx context.Context) ([]TokenInfo, error)

	// TokenRevoke revokes token id and reports whether it was live. Errors: ErrNotFound.
	TokenRevoke(ctx context.Context, id string) (bool, error)

	// Maintain runs one maintenance pass now (schedule fires, lease expiry, attempt
	// timeouts, deadlines, retention) instead of waiting for the timer.
	Maintain(ctx context.Context) error

	// Close stops background work, waits for it, and releases the plane. Safe to call twice.
	Close() error
}

// SubmitManyParams are the arguments of Driver.InvocationSubmitMany.
type SubmitManyParams struct {
	Namespace   string
	Queue       string
	Invocations []SubmitParams
	// Recheck, when set, is called before each attempt of a submit blocked by a full queue
	// (Admission.OnFull block) that follows a wait; its error ends the submit, which writes
	// nothing. A server sets it to look the caller's token up again, so that a token revoked
	// or expired while its submit waited for room submits nothing (as persist's
	// Admission.Recheck for a data put). It is not sent over HTTP. nil: no check.
	Recheck func() error
}

// SubmitParams describe one invocation to enqueue.
type SubmitParams struct {
	// ID, when set, is a client-chosen ULID that makes the submit safe to retry: a second
	// submit with the same ID returns it with Existing set. Empty: the plane makes one.
	ID string
	// Payload is the wire-encoded payload, at most MaxValueBytes.
	Payload []byte
	// Key is the idempotency key ("" for none): 1–512 bytes of UTF-8 without NUL.
	Key string
	// Priority orders priority and boltzmann claims; higher first. Not NaN.
	Priority float64
	// MaxAttempts bounds claims: 1 to MaxAttemptsMax, or 0 for MaxAttemptsDefault.
	MaxAttempts int
	// AttemptTimeout bounds one running attempt. 0 means none.
	AttemptTimeout time.Duration
	// Deadline ends the invocation as timeout if it is still queued then. Zero: none.
	Deadline time.Time
	// Metadata is the envelope's free-form headers.
	Metadata map[string]string
	// NotBefore delays the invocation: it is queued but not claimable before this time
	// (as measured by the plane's clock). Zero: claimable at once.
	NotBefore time.Time
	// Delay delays the invocation by this long from the plane's clock at submit; when both
	// are set the later of NotBefore and now+Delay wins. 0: no delay. Not negative.
	Delay time.Duration
	// UniqueFor is the dedup window of Key (plane/dedup.go): within it a second submit of
	// the key returns the first invocation; after it the submit takes the key over and
	// enqueues a new one. 0: the key holds until its invocation is trimmed. Needs Key; at
	// most UniqueForMax.
	UniqueFor time.Duration
	// Debounce makes the submit of Key wait for quiet (plane/dedup.go): the invocation is
	// due Debounce after the submit, and a later debounced submit of the key while it is
	// still waiting replaces its payload and metadata and pushes its due time back (the
	// last wins, returned as Existing). 0: no debounce. Needs Key, not with UniqueFor; at
	// most UniqueForMax.
	Debounce time.Duration
	// ConcurrencyKey groups the invocation with others of its queue for the queue's
	// concurrency limits and fair share (Admission.ConcurrencyLimit, KeyWeights; plane/
	// concurrency.go). "": none (never limited). ConcurrencyKeyRule says what it may be.
	ConcurrencyKey string
	// Requirement is what the invocation needs from its worker (plane/placement.go): only a
	// claim whose Offers satisfy it takes the invocation. nil (or zero): the default shape,
	// which every claim takes. Not with ConcurrencyKey (refused: a keyed claim does not
	// match requirements yet).
	Requirement *Requirement
}

// SubmitResult is the outcome of one submit.
type SubmitResult struct {
	ID string
	// Existing is true when the key or ID already existed and nothing was enqueued.
	Existing bool
}

// PauseParams are the arguments of Driver.QueuePause.
type PauseParams struct {
	Namespace string
	Queue     string
	// Paused pauses the queue when true, resumes it when false.
	Paused bool
}

// Validate checks the namespace and queue name. Errors: *InvalidError.
func (p *PauseParams) Validate() error {
	if err := ValidateNamespace(p.Namespace); err != nil {
		return err
	}
	return ValidateName("queue name", p.Queue)
}

// MarkPaused sets Paused on the stats of the queues in paused (keyed by namespace and
// queue), adds the paused queues that have no stats yet (no invocations, no admission
// block), and sorts stats by namespace, then queue. Every plane's QueueStatsList ends
// with it.
func MarkPaused(stats []QueueStats, paused map[[2]string]bool) []QueueStats {
	seen := make(map[[2]string]bool, len(paused))
	for i := range stats {
		key := [2]string{stats[i].Namespace, stats[i].Queue}
		if paused[key] {
			stats[i].Paused = true
			seen[key] = true
		}
	}
	for key, p := range paused {
		if !p || seen[key] {
			continue
		}
		stats = append(stats, QueueStats{Namespace: key[0], Queue: key[1], Counts: map[State]int64{}, Paused: true})
	}
	slices.SortFunc(stats, func(a, b QueueStats) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Queue, b.Queue))
	})
	return stats
}

// ClaimParams are the arguments of Driver.InvocationClaimMany.
type ClaimParams struct {
	Namespace string
	Queue     string
	// Queues names further queues of Namespace the claim may take from besides Queue: it
	// waits on all of them at once and takes from whichever has work first (its jobs all
	// come from that one queue). Which queue is tried first rotates from claim to claim,
	// so a queue that always has work cannot starve the others. A name repeated, or equal
	// to Queue, counts once; at most ClaimQueuesLimit names in all with Queue. nil: Queue
	// alone.
	Queues []string
	Kind   Kind
	// Temperature is the boltzmann temperature, > 0 and finite. Ignored for other kinds.
	Temperature float64
	// Max is how many to claim at most; 0 means 1.
	Max int
	// LeaseTTL is how long the lease lives without a heartbeat. 0 means LeaseTTLDefault.
	LeaseTTL time.Duration
	// Wait is how long to wait when nothing is claimable. 0 returns at once.
	Wait time.Duration
	// Worker identifies the claimer (free text, shown by Get).
	Worker string
	// Offers is what the claiming worker offers (plane/placement.go): the claim takes only
	// invocations whose Requirement they satisfy. nil (or zero): it takes only invocations
	// without a requirement (the default shape).
	Offers *Offers
	// WarmHostKeys are the host keys the claiming worker is warm for (it ran their
	// set-up; plane/placement.go, WarmFirst): among the jobs it may take, those whose
	// metadata's MetaHostKey is one of them go first, within WarmHeadStart of the
	// order. At most WarmHostKeysMax, each as HostKeyRule says; nil: no preference.
	WarmHostKeys []string
}

// Outcome is how a settle ends an attempt.
type Outcome int

// The outcomes.
const (
	// OutcomeSucceeded acks: the invocation succeeds with Result.
	OutcomeSucceeded Outcome = iota + 1
	// OutcomeRetry nacks with retry: re-queued after a backoff while attempts remain,
	// else failed.
	OutcomeRetry
	// OutcomeFailed nacks without retry: failed at once.
	OutcomeFailed
	// OutcomeTimedOut nacks an attempt that ran out of time (a worker-side timeout):
	// re-queued after a backoff while attempts remain, else ended as timeout — the same
	// end as an attempt past its AttemptTimeout.
	OutcomeTimedOut
	// OutcomeRateLimited hands the job back because something it calls is rate limited (a
	// worker's "slow down"): re-queued, claimable after RetryDelay (or
	// RateLimitedDelayDefault), without consuming an attempt; RateLimitKey, when set, holds
	// that concurrency key of the queue back for the same time (plane/concurrency.go).
	OutcomeRateLimited
	// OutcomeReleased hands back a job its worker claimed but never ran (a claim whose
	// caller went away, a worker that began to drain): re-queued, claimable at once, without
	// consuming an attempt and without holding any concurrency key back. RetryDelay and
	// RateLimitKey are ignored. The recorded error is p.Error (default type "released").
	OutcomeReleased
)

// RateLimitedDelayDefault is how long an OutcomeRateLimited settle without a RetryDelay
// holds the job (and its RateLimitKey) back.
const RateLimitedDelayDefault = time.Second

// SettleParams settle one claimed invocation.
type SettleParams struct {
	ID      string
	Token   string
	Outcome Outcome
	// Result is the wire-encoded result (OutcomeSucceeded).
	Result []byte
	// Error is the error (OutcomeRetry, OutcomeFailed, OutcomeRateLimited, OutcomeReleased).
	// Attempt is filled in by the plane.
	Error *ErrorInfo
	// RetryDelay overrides the backoff for OutcomeRetry when > 0, and is the wait of
	// OutcomeRateLimited (at most UniqueForMax).
	RetryDelay time.Duration
	// RateLimitKey is, for OutcomeRateLimited, the concurrency key of the job's queue that
	// no claim takes from until RetryDelay has passed ("" : only this job waits).
	RateLimitKey string
	// Scope is the caller's scope: an invocation outside it answers ErrNotFound, exactly
	// like an unknown id. The zero Scope covers every invocation.
	Scope Scope
}

// HeartbeatParams extend one lease.
type HeartbeatParams struct {
	ID    string
	Token string
	// LeaseTTL is the new lease length from now. 0 means LeaseTTLDefault.
	LeaseTTL time.Duration
	// Scope is the caller's scope, as in SettleParams.
	Scope Scope
}

// Scope limits a settle or heartbeat to the invocations of the namespaces and queues an
// access token covers, so the server need not read an invocation to authorize a write to
// it: the driver checks Covers on the row it locks for the write anyway, and an invocation
// outside the scope answers ErrNotFound, exactly like an unknown id, so a token cannot
// learn which ids exist elsewhere (nor change them). Namespace and Queue are glob patterns
// as path.Match reads them; "" matches every name. The zero Scope covers everything.
type Scope struct {
	Namespace string
	Queue     string
}

// Covers reports whether s covers the queue (namespace, queue).
func (s Scope) Covers(namespace, queue string) bool {
	return globCovers(s.Namespace, namespace) && globCovers(s.Queue, queue)
}

func globCovers(pattern, name string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// HeartbeatResult is the outcome of one heartbeat.
type HeartbeatResult struct {
	LeaseExpiresAt time.Time
	Err            error // nil, ErrLeaseLost or ErrNotFound
}

// WaitParams are the arguments of Driver.InvocationWait.
type WaitParams struct {
	ID string
	// Timeout bounds the wait. 0 checks once without waiting.
	Timeout time.Duration
}

// ListParams are the arguments of Driver.InvocationList.
type ListParams struct {
	Namespace string
	Queue     string
	// State filters by state; "" lists every state.
	State State
	// KeyPrefix keeps only invocations whose idempotency key starts with it; "" keeps all.
	KeyPrefix string
	// After is the cursor from the previous page's Next; "" starts at the newest (or the
	// oldest with Oldest set).
	After string
	// Limit caps the page; 0 means ListLimitDefault, at most ListLimitMax.
	Limit int
	// Oldest lists oldest first; the default is newest first.
	Oldest bool
}

// ListPage is one page of Driver.InvocationList.
type ListPage struct {
	// Invocations are the page's invocations, without payload, result or metadata bytes
	// larger than needed for a listing (drivers may leave Payload and Result nil).
	Invocations []*Invocation
	// Next is the cursor of the following page; "" when this page is the last.
	Next string
}

// CountParams are the arguments of Driver.InvocationCount.
type CountParams struct {
	Namespace string
	Queue     string
	State     State
}

// TrimParams are the arguments of Driver.InvocationTrim.
type TrimParams struct {
	// Namespace and Queue restrict the trim; empty means all.
	Namespace string
	Queue     string
	// FinishedBefore: terminal invocations that finished before it are deleted.
	FinishedBefore time.Time
}

// FramePostParams are the arguments of Driver.FramePost.
type FramePostParams struct {
	Journal Journal
	// Token is the lease token (invocation journals only).
	Token string
	// Value is the wire-encoded value, at most MaxValueBytes.
	Value []byte
	// Final appends END with Value and closes the journal: a topic for good, an
	// invocation's for its running attempt (the job is settled by its ack).
	Final bool
}

// FrameReadParams are the arguments of Driver.FrameRead.
type FrameReadParams struct {
	Journal Journal
	// Since is the cursor: frames with seq > Since are returned. -1 reads from the start.
	Since int64
	// Limit caps the frames returned; 0 means FrameReadLimitDefault.
	Limit int
	// Wait is how long to wait when there is no frame after Since. 0 returns at once.
	Wait time.Duration
}

// FrameReadResult is what Driver.FrameRead returns.
type FrameReadResult struct {
	Frames []Frame
	// Closed is true when the journal is closed: a topic after its END frame, an
	// invocation once it is terminal (its END or ERROR frame is then the last frame).
	Closed bool
}

// Defaults shared by every plane.
const (
	// LeaseTTLDefault is the lease length of a claim or heartbeat that names none.
	LeaseTTLDefault = 30 * time.Second
	// LeaseTTLMax is the longest lease a claim or heartbeat may ask for (7 days): enough
	// for a job that cannot heartbeat, short enough that a dead worker's job comes back.
	LeaseTTLMax = 7 * 24 * time.Hour
	// MaxAttemptsDefault bounds claims of an invocation submitted without MaxAttempts.
	MaxAttemptsDefault = 3
	// MaxAttemptsMax is the largest MaxAttempts a submit or schedule may ask for (10,000):
	// with the default backoff (capped at 5 minutes) about 35 days of retries, far beyond
	// peers' defaults (River's and asynq's 25), while a typo (1e9) or an overflowing number
	// is refused rather than stored (PostgreSQL keeps the count in an integer column).
	MaxAttemptsMax = 10_000
	// MaxValueBytes is the largest payload, result or frame value (16 MiB). Larger values
	// are rejected: pass a storage key instead of the bytes.
	MaxValueBytes = 16 << 20
	// ListLimitDefault is the page size of an InvocationList without a Limit.
	ListLimitDefault = 100
	// ListLimitMax is the largest page of InvocationList.
	ListLimitMax = 1000
	// FrameReadLimitDefault caps one FrameRead without a Limit.
	FrameReadLimitDefault = 1000
	// RetentionDefault is how long terminal invocations and their journals are kept.
	RetentionDefault = 7 * 24 * time.Hour
	// NamespaceDefault is the namespace of a queue opened without one.
	NamespaceDefault = "default"
)
