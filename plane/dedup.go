package plane

import (
	"fmt"
	"strconv"
	"time"
)

// Dedup windows (SubmitParams.UniqueFor): an idempotency key holds its invocation for a
// window instead of until the invocation is trimmed. A submit whose key names an invocation
// created within the window returns that invocation's id (Existing), enqueuing nothing:
// the first submit wins for the window (unique_for, or "throttle"). Once the window has
// passed, the submit takes the key over: the earlier invocation gives it up (its Key reads
// "" from then on; it is not otherwise touched) and a new invocation is enqueued with it —
// when the earlier invocation was itself submitted with a window (DedupFrees): a key held
// by an ordinary submit (no window) is never taken over, so its client's retry still finds
// its own invocation. The store enforces it in the submit's transaction, so concurrent submits of one key make
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
// was itself submitted with a window (DedupFrees) and created at or before the cutoff. The
// zero time when uniqueFor is 0 (the key is held until its invocation is trimmed). Pure:
// the caller passes the plane's clock.
func DedupCutoff(now time.Time, uniqueFor time.Duration) time.Time {
	if uniqueFor <= 0 {
		return time.Time{}
	}
	return now.Add(-uniqueFor)
}

// KeyHeldUntil is when the dedup window of the submit s, stored at created, ends (ms since
// the epoch): created + s.UniqueFor, or 0 when s has no dedup window. The plane stores it
// with the invocation (NULL for 0) and never trims the invocation before it while it still
// holds its key, so a finished holder is not trimmed out from under its window (retention,
// InvocationTrim): a submit within the window finds it however long ago it finished. A
// holder that gives its key up (a later submit took it over) gives the hold up with it.
// Debounce needs none: a debounced holder gives its key up once claimable, so by the time
// it is finished (and can be trimmed) the next debounced submit takes the key over anyway.
func KeyHeldUntil(s *SubmitParams, created time.Time) int64 {
	if s.UniqueFor <= 0 || s.Key == "" {
		return 0
	}
	return created.Add(s.UniqueFor).UnixMilli()
}

// MetaUniqueFor is the metadata key that marks an invocation submitted with a dedup window
// (UniqueFor), its value the window in seconds, as MetaDebounce marks a debounced one. The
// plane sets it (DebounceMetadata).
const MetaUniqueFor = "lakeshore.unique_for"

// DedupFrees reports whether the invocation holding a key — its metadata, and created its
// creation time — gives the key up to a submit whose window's cutoff (DedupCutoff) is
// cutoff: only a holder that was itself submitted with a window (marked MetaUniqueFor or
// MetaDebounce) and created at or before the cutoff. An ordinary holder (no window) keeps
// its key until it is trimmed, whatever the later submit's window, so a client retrying
// its keyed submit always finds its own invocation. An invocation stored before the mark
// existed counts as ordinary.
func DedupFrees(metadata map[string]string, created, cutoff time.Time) bool {
	if cutoff.IsZero() || created.After(cutoff) {
		return false
	}
	_, unique := metadata[MetaUniqueFor]
	_, debounced := metadata[MetaDebounce]
	return unique || debounced
}

// MetaDebounce is the metadata key that marks an invocation submitted with a debounce
// window, its value the window in seconds. Only an invocation that carries it is folded
// into (or has its key taken over) by a later debounced submit of its key: a debounced
// submit never rewrites the payload or shortens the delay of an ordinary invocation
// holding the key (Debounce). The plane sets it (DebounceMetadata); a later fold keeps it.
const MetaDebounce = "lakeshore.debounce"

// WindowMarkRule is why a submit's (or a schedule's) own metadata may not hold MetaDebounce
// or MetaUniqueFor: the marks say that the plane stored the invocation with that window,
// and a later submit of its key folds into it or takes the key over on their word alone
// (Debounce, DedupFrees), so a mark given by hand — or copied from a debounced job's
// metadata into an ordinary submit — let a debounced submit rewrite an ordinary job's
// payload and shorten its delay, or a dedup window take its key.
const WindowMarkRule = `the keys "lakeshore.debounce" and "lakeshore.unique_for" are the plane's marks of a submit with a window; give the window (debounce, unique_for) instead, or drop them when copying a job's metadata`

// DebounceMetadata is the metadata a submit stores: s.Metadata as it is without a window,
// else a copy marked with its window: MetaDebounce for a debounce window, MetaUniqueFor for
// a dedup window (the two are exclusive).
func DebounceMetadata(s *SubmitParams) map[string]string {
	key, window := MetaDebounce, s.Debounce
	if s.UniqueFor > 0 {
		key, window = MetaUniqueFor, s.UniqueFor
	}
	if window <= 0 {
		return s.Metadata
	}
	m := make(map[string]string, len(s.Metadata)+1)
	for k, v := range s.Metadata {
		m[k] = v
	}
	m[key] = strconv.FormatFloat(window.Seconds(), 'f', -1, 64)
	return m
}

// DebounceAction is what a debounced submit does about the invocation holding its key.
type DebounceAction int

const (
	// DebounceInsert: no invocation holds the key; insert one.
	DebounceInsert DebounceAction = iota
	// DebounceFold: the holder is a debounced invocation still waiting for its first start
	// (never attempted, its due time ahead): give it the submit's payload, metadata and due
	// time, and answer its id (Existing).
	DebounceFold
	// DebounceTakeOver: the holder is a debounced invocation that is claimable, running,
	// retrying or finished: it gives the key up, and a new invocation is inserted.
	DebounceTakeOver
	// DebounceExisting: the holder was not submitted with a debounce window: the submit
	// answers its id (Existing) as any keyed submit does and changes nothing — a debounced
	// submit never rewrites an ordinary invocation's payload or shortens its delay.
	DebounceExisting
)

// Debounce decides what a debounced submit does about the invocation holding its key (a
// driver that finds none inserts: DebounceInsert): metadata is the holder's metadata
// (MetaDebounce marks a debounced one); delayed whether it is queued and not yet
// claimable; attempt its attempt; dueAfterNow whether its due time is still ahead of the
// plane's now.
func Debounce(metadata map[string]string, delayed bool, attempt int, dueAfterNow bool) DebounceAction {
	if _, marked := metadata[MetaDebounce]; !marked {
		return DebounceExisting
	}
	if delayed && attempt == 0 && dueAfterNow {
		return DebounceFold
	}
	return DebounceTakeOver
}

// validateBatchDebounce checks that the submits of one key in a batch are all debounced or
// none are (a dedup window counts as not debounced): a batch folds a key's submits into one
// invocation, which cannot both wait for quiet and not.
func validateBatchDebounce(invs []SubmitParams) error {
	debounced := map[string]bool{}
	for i := range invs {
		s := &invs[i]
		if s.Key == "" {
			continue
		}
		d := s.Debounce > 0
		if first, seen := debounced[s.Key]; seen && first != d {
			return Invalid(fmt.Sprintf("invocations[%d].debounce", i), s.Debounce,
				"in one batch, the submits of a key are all debounced or none are")
		}
		debounced[s.Key] = d
	}
	return nil
}

// Debounced folds a later debounced submit of a key within one batch into the first: its
// payload, metadata and due-time options win. Drivers call it on their copy of the batch.
func Debounced(first, later *SubmitParams) {
	first.Payload, first.Metadata = later.Payload, later.Metadata // DebounceMetadata marks it at insert
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
