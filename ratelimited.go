package lakeshore

import (
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// RateLimitedError is a handler's "slow down" answer (RateLimited): what it calls is rate
// limited. The worker hands the job back instead of failing the attempt: it is re-queued,
// claimable after RetryAfter, without consuming an attempt; when Key names a concurrency
// key of the job's queue, no claim takes from that key for as long either
// (docs/semantics.md, "Rate limits per key").
type RateLimitedError struct {
	// Key is the concurrency key to hold back ("" : only this job waits). A key the plane
	// would refuse (not 1–256 bytes of UTF-8 without NUL) is not held back: only the job
	// waits, and the worker logs a warning.
	Key string
	// RetryAfter is how long. 0 or negative means plane.RateLimitedDelayDefault (1 s);
	// above 366 days (plane.DelayMax), 366 days.
	RetryAfter time.Duration
}

// RateLimited returns the error a handler returns to say "slow down": the job goes back
// to its queue, claimable after retryAfter (0 or negative: 1 s; at most 366 days, longer
// is cut to 366 days), without consuming an attempt, and concurrency key key ("" for
// none) of the queue is held back as long. An invalid key (not 1–256 bytes of UTF-8
// without NUL) is not held back: the job alone waits, and the worker logs why.
func RateLimited(key string, retryAfter time.Duration) error {
	return &RateLimitedError{Key: key, RetryAfter: retryAfter}
}

// Delay returns the wait the worker settles: RetryAfter clamped into what the plane takes
// (0 or negative: plane.RateLimitedDelayDefault; above plane.DelayMax: plane.DelayMax).
func (e *RateLimitedError) Delay() time.Duration {
	switch {
	case e.RetryAfter <= 0:
		return plane.RateLimitedDelayDefault
	case e.RetryAfter > plane.DelayMax:
		return plane.DelayMax
	}
	return e.RetryAfter
}

// heldKey returns the key the settle holds back: Key when the plane takes it, else "".
func (e *RateLimitedError) heldKey() string {
	if e.Key == "" || e.keyError() != nil {
		return ""
	}
	return e.Key
}

// keyError returns why the plane refuses Key (nil: it takes it, or there is none).
func (e *RateLimitedError) keyError() error {
	if e.Key == "" {
		return nil
	}
	return plane.ValidateConcurrencyKey("rate_limit_key", e.Key)
}

// Error says how long the job waits and which key is held back ("rate limited: retry
// after 1m0s", with the key when there is one).
func (e *RateLimitedError) Error() string {
	after := e.Delay()
	switch {
	case e.Key == "":
		return fmt.Sprintf("rate limited: retry after %s", after)
	case e.keyError() != nil:
		return fmt.Sprintf("rate limited: invalid key %q not held back: retry after %s", e.Key, after)
	}
	return fmt.Sprintf("rate limited: key %q: retry after %s", e.Key, after)
}

// ErrorType is the type its nack records: "rate_limited".
func (e *RateLimitedError) ErrorType() string { return plane.ErrorTypeRateLimited }
