package plane

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"time"
)

// OnFull is what a submit does when its queue is at MaxDepth.
type OnFull string

// The full-queue policies.
const (
	// OnFullReject fails the submit at once with ErrQueueFull.
	OnFullReject OnFull = "reject"
	// OnFullBlock waits until claims or cancels make room (woken by notification, admitted
	// in arrival order) or the caller's context ends (then ErrQueueFull).
	OnFullBlock OnFull = "block"
)

// Admission is a queue's admission block: its depth and rate limits. It is stored in the
// plane and enforced inside the submit transaction, so it holds across every process and
// plane that uses the queue. A submit whose key already exists bypasses every limit.
type Admission struct {
	// MaxDepth limits the queued invocations; 0 means no limit.
	MaxDepth int64 `json:"max_depth,omitempty" msgpack:"max_depth,omitempty"`
	// OnFull is the policy at MaxDepth. Defaults to OnFullReject.
	OnFull OnFull `json:"on_full,omitempty" msgpack:"on_full,omitempty"`
	// RateLimit is the sustained submits per second (a token bucket); 0 means no limit.
	RateLimit float64 `json:"rate_limit,omitempty" msgpack:"rate_limit,omitempty"`
	// Burst is the bucket size: submits allowed at once after idling. Defaults to
	// max(1, ceil(RateLimit)), and then follows the rate: a set that gives back the
	// default burst read from the plane (the block read, its rate changed) keeps it
	// following, while a burst set explicitly stays (docs/semantics.md, "Admission").
	Burst int64 `json:"burst,omitempty" msgpack:"burst,omitempty"`
	// DeadlineCutoff rejects a submit whose deadline is nearer than this, and at claim ends
	// (as timeout) a job whose deadline is nearer than this instead of starting it. 0: none.
	DeadlineCutoff time.Duration `json:"deadline_cutoff,omitempty" msgpack:"deadline_cutoff,omitempty"`
	// ConcurrencyLimit is the most invocations of one concurrency key (SubmitParams's
	// ConcurrencyKey) that run at once: a claim skips the keys at their limit. 0: no limit.
	// Invocations without a key are never limited. Enforced at claim, not at submit.
	ConcurrencyLimit int64 `json:"concurrency_limit,omitempty" msgpack:"concurrency_limit,omitempty"`
	// ConcurrencyLimits overrides ConcurrencyLimit for the keys it names (0: no limit for
	// that key). At most ConcurrencyOverridesMax keys.
	ConcurrencyLimits map[string]int64 `json:"concurrency_limits,omitempty" msgpack:"concurrency_limits,omitempty"`
	// KeyWeights weighs the fair share of the keys it names (> 0; a key without a weight
	// weighs 1): among keys below their limit, claims go to the keys in proportion to their
	// weights (round-robin when all weigh the same). At most ConcurrencyOverridesMax keys.
	KeyWeights map[string]float64 `json:"key_weights,omitempty" msgpack:"key_weights,omitempty"`
	// KeyRateLimit is the sustained starts per second of each concurrency key (a token
	// bucket per key, stored in the plane and shared by every claimer); 0: no limit. A
	// key whose bucket is empty is skipped by claims until it has a token.
	KeyRateLimit float64 `json:"key_rate_limit,omitempty" msgpack:"key_rate_limit,omitempty"`
	// KeyBurst is each key's bucket size: starts allowed at once after idling. Defaults to
	// max(1, ceil(KeyRateLimit)), and then follows the key rate as Burst follows RateLimit.
	KeyBurst int64 `json:"key_burst,omitempty" msgpack:"key_burst,omitempty"`
	// KeyRateLimits overrides KeyRateLimit for the keys it names (starts per second ≥ 0; 0:
	// no rate limit for that key). An overridden key's bucket holds max(1, ceil(its rate))
	// starts unless KeyBursts names it. At most ConcurrencyOverridesMax keys.
	KeyRateLimits map[string]float64 `json:"key_rate_limits,omitempty" msgpack:"key_rate_limits,omitempty"`
	// KeyBursts overrides the bucket size of the keys it names (≥ 1), under their rate
	// (KeyRateLimits, else KeyRateLimit); a key without a rate has no bucket. At most
	// ConcurrencyOverridesMax keys.
	KeyBursts map[string]int64 `json:"key_bursts,omitempty" msgpack:"key_bursts,omitempty"`
}

// WithDefaults returns a with OnFull and Burst filled in.
func (a Admission) WithDefaults() Admission {
	if a.OnFull == "" {
		a.OnFull = OnFullReject
	}
	if a.Burst == 0 && a.RateLimit > 0 {
		a.Burst = defaultBurst(a.RateLimit)
	}
	if a.KeyBurst == 0 && a.KeyRateLimit > 0 {
		a.KeyBurst = defaultBurst(a.KeyRateLimit)
	}
	return a
}

// defaultBurst is a rate's bucket when none is given: the rate rounded up, at least 1, at
// most 2^62 (a rate too large for an int64 saturates instead of wrapping around).
func defaultBurst(rate float64) int64 {
	return int64(max(1, min(math.Ceil(rate), 1<<62)))
}

// Validate checks a. Errors: *InvalidError naming the field and what is allowed.
func (a Admission) Validate() error {
	switch {
	case a.MaxDepth < 0:
		return Invalid("max_depth", a.MaxDepth, "use a number ≥ 0 (0: no limit)")
	case a.OnFull != "" && a.OnFull != OnFullReject && a.OnFull != OnFullBlock:
		return Invalid("on_full", string(a.OnFull), "use reject|block")
	case a.RateLimit < 0 || math.IsNaN(a.RateLimit) || math.IsInf(a.RateLimit, 0):
		return Invalid("rate_limit", a.RateLimit, "use submits per second ≥ 0 (0: no limit)")
	case a.Burst < 0:
		return Invalid("burst", a.Burst, "use a number ≥ 0 (0: the rate limit rounded up)")
	case a.DeadlineCutoff < 0:
		return Invalid("deadline_cutoff", a.DeadlineCutoff, "use a duration ≥ 0 (0: none)")
	}
	return a.validateConcurrency()
}

// AdmissionParams name a queue and, for a set, its admission block.
type AdmissionParams struct {
	Namespace string
	Queue     string
	Admission Admission
	// IfMatch, when not empty, makes the set conditional: it applies only while the
	// queue's block is the one of that tag (AdmissionTag of what the caller read; "none":
	// no block), else nothing changes and the answer is ErrChanged. A read, a change and a
	// conditional set, repeated on ErrChanged, merge a change into the block without losing
	// a concurrent one (`lakeshore queue set` does so).
	IfMatch string
}

// AdmissionTagNone is the AdmissionTag of a queue with no admission block.
const AdmissionTagNone = "none"

// AdmissionTag names the content of an admission block for a conditional set
// (AdmissionParams.IfMatch) and HTTP's ETag: 16 hex digits of the SHA-256 of its fields with
// defaults filled in and the deadline cutoff in the milliseconds the planes store (fmt's
// %+v, which prints maps in key order and a nil map as an empty one), so equal blocks, as
// read from any plane or through HTTP's seconds, have equal tags; nil gives
// AdmissionTagNone.
func AdmissionTag(a *Admission) string {
	if a == nil {
		return AdmissionTagNone
	}
	n := a.WithDefaults()
	n.DeadlineCutoff = n.DeadlineCutoff.Round(time.Millisecond)
	sum := sha256.Sum256(fmt.Appendf(nil, "%+v", n))
	return hex.EncodeToString(sum[:8])
}

// AdmissionError is a submit refused by a queue's admission block. It matches ErrQueueFull
// (depth) or ErrRateLimited (rate).
type AdmissionError struct {
	// Sentinel is ErrQueueFull or ErrRateLimited.
	Sentinel *Error
	// Queue is "namespace/queue".
	Queue string
	// Fit is how many of the submitted invocations would have been admitted.
	Fit int64
	// RetryAfter is how long until the submit could pass (rate limit); 0 when unknown.
	RetryAfter time.Duration
	// Detail says what limit refused it.
	Detail string
	// Cause is what ended a blocked wait (the caller's context), if anything.
	Cause error
}

func (e *AdmissionError) Error() string {
	msg := fmt.Sprintf("%s: queue %s: %s", e.Sentinel.Message, e.Queue, e.Detail)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf("; retry after %s", e.RetryAfter.Round(time.Millisecond))
	}
	if e.Cause != nil {
		msg += fmt.Sprintf(" (gave up waiting: %v)", e.Cause)
	}
	return msg
}

// Is matches the sentinel.
func (e *AdmissionError) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Sentinel.Code
}

// Unwrap returns the cause of a given-up wait.
func (e *AdmissionError) Unwrap() error { return e.Cause }
