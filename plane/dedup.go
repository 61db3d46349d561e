package plane

import "time"

// Dedup windows (SubmitParams.UniqueFor): an idempotency key holds its invocation for a
// window instead of until the invocation is trimmed. A submit whose key names an invocation
// created within the window returns that invocation's id (Existing), enqueuing nothing:
// the first submit wins for the window (unique_for, or "throttle"). Once the window has
// passed, the submit takes the key over: the earlier invocation gives it up (its Key reads
// "" from then on; it is not otherwise touched) and a new invocation is enqueued with it.
// The store enforces it in the submit's transaction, so concurrent submits of one key make
// one invocation per window on every plane.

// UniqueForMax is the longest dedup window (366 days, as DelayMax).
const UniqueForMax = DelayMax

// DedupCutoff is the creation time at or before which an invocation no longer holds its key
// for a submit at now with window uniqueFor: the key is free when the invocation holding it
// was created at or before the cutoff. The zero time when uniqueFor is 0 (the key is held
// until its invocation is trimmed). Pure: the caller passes the plane's clock.
func DedupCutoff(now time.Time, uniqueFor time.Duration) time.Time {
	if uniqueFor <= 0 {
		return time.Time{}
	}
	return now.Add(-uniqueFor)
}

// validateUniqueFor checks a dedup window: 0 to UniqueForMax, and only with a key.
func validateUniqueFor(uniqueFor time.Duration, key string) error {
	if uniqueFor < 0 || uniqueFor > UniqueForMax {
		return Invalid("unique_for", uniqueFor, "use a duration from 0 to 366 days (0: the key holds until its invocation is trimmed)")
	}
	if uniqueFor > 0 && key == "" {
		return Invalid("unique_for", uniqueFor, "a dedup window needs an idempotency key (key)")
	}
	return nil
}
