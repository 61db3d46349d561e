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
//
// Debounce (SubmitParams.Debounce) is the other window: the last submit wins, and the start
// waits until the key has been quiet for the window. A debounced submit of a key is due
// Debounce after it (added to any Delay). While the invocation holding the key is still
// waiting for that time — queued, not yet claimable — a later debounced submit of the key
// replaces its payload and metadata, pushes its due time to Debounce after the new submit,
// and returns its id (Existing). Once the holder is claimable, running or finished, the
// submit takes the key over (the holder gives it up, as when a UniqueFor window passed) and
// enqueues a new debounced invocation. The store decides in the submit's transaction, so of
// concurrent submits one wins and the rest are folded into it; within one batch the later
// payload of a key wins.

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

// Debounced folds a later debounced submit of a key within one batch into the first: its
// payload, metadata and due-time options win. Drivers call it on their copy of the batch.
func Debounced(first, later *SubmitParams) {
	first.Payload, first.Metadata = later.Payload, later.Metadata
	first.Delay, first.NotBefore, first.Debounce = later.Delay, later.NotBefore, later.Debounce
}

// validateDebounce checks a debounce window: 0 to UniqueForMax, only with a key, and not
// with a dedup window (the first submit cannot win and the last too).
func validateDebounce(debounce, uniqueFor time.Duration, key string) error {
	if debounce < 0 || debounce > UniqueForMax {
		return Invalid("debounce", debounce, "use a duration from 0 to 366 days (0: no debounce)")
	}
	if debounce > 0 && key == "" {
		return Invalid("debounce", debounce, "a debounce window needs an idempotency key (key)")
	}
	if debounce > 0 && uniqueFor > 0 {
		return Invalid("debounce", debounce, "use either unique_for (the first submit wins) or debounce (the last wins), not both")
	}
	return nil
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
