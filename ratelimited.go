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
	// Key is the concurrency key to hold back ("" : only this job waits).
	Key string
	// RetryAfter is how long; 0 means plane.RateLimitedDelayDefault (1 s).
	RetryAfter time.Duration
}

// RateLimited returns the error a handler returns to say "slow down": the job goes back
// to its queue, claimable after retryAfter (0: 1 s; at most 366 days), without consuming
// an attempt, and concurrency key key ("" for none) of the queue is held back as long.
func RateLimited(key string, retryAfter time.Duration) error {
	return &RateLimitedError{Key: key, RetryAfter: retryAfter}
}

func (e *RateLimitedError) Error() string {
	after := e.RetryAfter
	if after <= 0 {
		after = plane.RateLimitedDelayDefault
	}
	if e.Key == "" {
		return fmt.Sprintf("rate limited: retry after %s", after)
	}
	return fmt.Sprintf("rate limited: key %q: retry after %s", e.Key, after)
}

// ErrorType is the type its nack records: "rate_limited".
func (e *RateLimitedError) ErrorType() string { return plane.ErrorTypeRateLimited }
