package plane

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"
)

// Concurrency keys (docs/semantics.md, "Concurrency keys and fair share"). A submit may
// carry a concurrency key (SubmitParams.ConcurrencyKey, e.g. a tenant); the queue's
// admission block limits how many invocations of one key run (hold a lease) at once
// (Admission.ConcurrencyLimit, with per-key overrides) and weighs the keys' shares of the
// claims (Admission.KeyWeights). The planes keep one counter row per (queue, key) in the
// same transactions as the invocations, so a claim picks among the keys below their limit
// without reading the invocations of a saturated key, and among those the one whose turn
// it is (the smallest pass; each claim advances its key's pass by 1/weight).

// ConcurrencyKeyRule is what a concurrency key may be. An empty key is no key, on every
// surface: SubmitParams.ConcurrencyKey "" (Go's zero value), HTTP "concurrency_key": "",
// the CLI's --concurrency-key "", Python's concurrency_key="" and RateLimited(key="") — a
// job without a key, never limited (SubmitParams.Validate checks only a non-empty one).
const ConcurrencyKeyRule = "use 1–256 bytes of UTF-8 without NUL"

// ConcurrencyKeyMax is the longest concurrency key, in bytes.
const ConcurrencyKeyMax = 256

// ConcurrencyOverridesMax bounds the per-key overrides of one admission block
// (ConcurrencyLimits, KeyWeights, KeyRateLimits and KeyBursts each).
const ConcurrencyOverridesMax = 10000

// KeyWeightMin and KeyWeightMax bound a key's weight (Admission.KeyWeights); default 1.
const (
	KeyWeightMin = 1e-6
	KeyWeightMax = 1e6
)

// ConcurrencyUnlimited is the stored limit of a key without one: larger than any number of
// running invocations.
const ConcurrencyUnlimited int64 = 1 << 62

// ValidateConcurrencyKey checks a non-empty concurrency key against ConcurrencyKeyRule.
// Errors: *InvalidError naming field.
func ValidateConcurrencyKey(field, key string) error {
	if len(key) == 0 || len(key) > ConcurrencyKeyMax || !utf8.ValidString(key) {
		return Invalid(field, key, ConcurrencyKeyRule)
	}
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return Invalid(field, key, ConcurrencyKeyRule)
		}
	}
	return nil
}

// validateConcurrency checks the concurrency fields of an admission block.
func (a Admission) validateConcurrency() error {
	if a.ConcurrencyLimit < 0 {
		return Invalid("concurrency_limit", a.ConcurrencyLimit, "use a number ≥ 0 (0: no limit)")
	}
	if a.KeyRateLimit < 0 || math.IsNaN(a.KeyRateLimit) || math.IsInf(a.KeyRateLimit, 0) {
		return Invalid("key_rate_limit", a.KeyRateLimit, "use starts per second per key ≥ 0 (0: no limit)")
	}
	if a.KeyBurst < 0 {
		return Invalid("key_burst", a.KeyBurst, "use a number ≥ 0 (0: the key rate limit rounded up)")
	}
	for _, m := range []struct {
		field, verb string
		keys        int
	}{
		{"concurrency_limits", "override", len(a.ConcurrencyLimits)},
		{"key_weights", "weigh", len(a.KeyWeights)},
		{"key_rate_limits", "override", len(a.KeyRateLimits)},
		{"key_bursts", "override", len(a.KeyBursts)},
	} {
		if m.keys > ConcurrencyOverridesMax {
			return Invalid(m.field, fmt.Sprintf("of %d keys", m.keys), fmt.Sprintf("%s at most %d keys", m.verb, ConcurrencyOverridesMax))
		}
	}
	for _, k := range slices.Sorted(mapKeys(a.ConcurrencyLimits)) {
		if err := ValidateConcurrencyKey("concurrency_limits key", k); err != nil {
			return err
		}
		if n := a.ConcurrencyLimits[k]; n < 0 {
			return Invalid("concurrency_limits["+k+"]", n, "use a number ≥ 0 (0: no limit)")
		}
	}
	for _, k := range slices.Sorted(mapKeys(a.KeyWeights)) {
		if err := ValidateConcurrencyKey("key_weights key", k); err != nil {
			return err
		}
		// Each claim adds 1/weight to the key's pass: a weight below KeyWeightMin made it
		// overflow (PostgreSQL refused every claim of the queue) or swamp the other keys'
		// steps in the float's rounding.
		if w := a.KeyWeights[k]; !(w >= KeyWeightMin) || math.IsInf(w, 0) || w > KeyWeightMax {
			return Invalid("key_weights["+k+"]", w, "use a weight ≥ 0.000001 and ≤ 1000000 (default 1)")
		}
	}
	for _, k := range slices.Sorted(mapKeys(a.KeyRateLimits)) {
		if err := ValidateConcurrencyKey("key_rate_limits key", k); err != nil {
			return err
		}
		if r := a.KeyRateLimits[k]; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return Invalid("key_rate_limits["+k+"]", r, "use starts per second ≥ 0 (0: no limit for that key)")
		}
	}
	for _, k := range slices.Sorted(mapKeys(a.KeyBursts)) {
		if err := ValidateConcurrencyKey("key_bursts key", k); err != nil {
			return err
		}
		if n := a.KeyBursts[k]; n < 1 {
			return Invalid("key_bursts["+k+"]", n, "use a bucket size ≥ 1 (remove the key for its rate rounded up)")
		}
	}
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// KeyLimit is one row of a queue's stored concurrency limits: the limit and weight of Key,
// or, with Key "", of every key without an override. Limit is ConcurrencyUnlimited for no
// limit; Weight is > 0.
type KeyLimit struct {
	Key    string
	Limit  int64
	Weight float64
}

// KeyLimits returns the rows a plane stores for a's concurrency limits and weights: the
// default row (Key "") first, then one per key with an override, sorted by key. A plane
// stores them with the block and looks a key's row up (falling back to the default row)
// when the key's counter row is made.
func (a Admission) KeyLimits() []KeyLimit {
	limit := func(n int64) int64 {
		if n == 0 {
			return ConcurrencyUnlimited
		}
		return n
	}
	out := []KeyLimit{{Key: "", Limit: limit(a.ConcurrencyLimit), Weight: 1}}
	keys := slices.Sorted(mapKeys(a.ConcurrencyLimits))
	for k := range a.KeyWeights {
		if _, ok := a.ConcurrencyLimits[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		n, ok := a.ConcurrencyLimits[k]
		if !ok {
			n = a.ConcurrencyLimit
		}
		out = append(out, KeyLimit{Key: k, Limit: limit(n), Weight: cmp.Or(a.KeyWeights[k], 1)})
	}
	return out
}

// KeyTurnFirst reports whether, in the claim order of kind, the head of the key whose
// turn it is (keyed) goes before the head of the queue's jobs without a key (unkeyed):
// fifo takes the older, filo the newer, priority and boltzmann the higher priority, then
// the older. Ids order by submit time.
func KeyTurnFirst(kind Kind, keyedID string, keyedPriority float64, unkeyedID string, unkeyedPriority float64) bool {
	switch kind {
	case KindFILO:
		return keyedID > unkeyedID
	case KindPriority, KindBoltzmann:
		if keyedPriority != unkeyedPriority {
			return keyedPriority > unkeyedPriority
		}
	}
	return keyedID < unkeyedID
}

// KeyStatsMax bounds the keys QueueStats lists per queue.
const KeyStatsMax = 100

// AddKeyStats adds k, a key of the queue (namespace, queue), to the stats of that queue
// (adding the queue when stats has none), keeping at most KeyStatsMax keys per queue: the
// caller passes the keys of each queue most running first.
func AddKeyStats(stats []QueueStats, namespace, queue string, k KeyStats) []QueueStats {
	for i := range stats {
		if stats[i].Namespace == namespace && stats[i].Queue == queue {
			if len(stats[i].Keys) < KeyStatsMax {
				stats[i].Keys = append(stats[i].Keys, k)
			}
			return stats
		}
	}
	return append(stats, QueueStats{Namespace: namespace, Queue: queue, Counts: map[State]int64{}, Keys: []KeyStats{k}})
}

// KeyStats is the state of one concurrency key of a queue.
type KeyStats struct {
	Key string
	// Queued is how many of the key's invocations are claimable now (delayed ones and those
	// in retry backoff are not counted).
	Queued int64
	// Running is how many hold a lease now.
	Running int64
	// Limit is the key's concurrency limit; 0 means none.
	Limit int64
	// Weight is the key's share weight (1 unless overridden).
	Weight float64
	// RateLimit is the key's starts per second (Admission.KeyRate); 0 means none.
	RateLimit float64
	// Burst is the key's token bucket size; 0 without a rate limit.
	Burst int64
	// RateWait is how long after the read until a claim may start the key's next job as far
	// as rates go: until its token bucket has a token, or until a worker's "slow down"
	// answer (OutcomeRateLimited) stops holding it back, whichever is later. 0: now. Its
	// concurrency limit may still hold it back (Running against Limit).
	RateWait time.Duration
}

// KeyRateWait is KeyStats.RateWait of concurrency key key under a at now: tokens and at
// are its bucket as stored (tokens < 0: never drawn, full), heldUntil the end of a "slow
// down" hold (zero: none).
func (a Admission) KeyRateWait(key string, tokens float64, at, heldUntil, now time.Time) time.Duration {
	_, _, wait := a.KeyStart(key, tokens, at, now)
	return max(wait, heldUntil.Sub(now), 0)
}

// KeyBucketHold reports whether a hold of concurrency key key until heldUntil is one a
// claim set because the key's token bucket under a was empty (KeyStart's wait): it ends no
// later than the moment the bucket (tokens and at as stored) has a token again under a's
// rate, give or take the millisecond the planes store. A "slow down" hold that lasts
// longer (OutcomeRateLimited) is not. A change of the key's rate ends such a hold
// (planekit.EndBucketHolds): the next claim draws from the bucket under the new rate.
func (a Admission) KeyBucketHold(key string, tokens float64, at, heldUntil time.Time) bool {
	rate, _ := a.KeyRate(key)
	if rate <= 0 || tokens < 0 || tokens >= 1 {
		return false
	}
	ready := float64(at.UnixMilli()) + (1-tokens)/rate*1000
	return float64(heldUntil.UnixMilli()) <= math.Ceil(ready)+1
}

// KeyRateSettled reports whether concurrency key key has no rate state left to keep under
// a at now: its token bucket (tokens and at as stored; tokens < 0: never drawn) is full
// again, or the key has no rate limit, and no "slow down" hold (heldUntil; zero: none) is
// running. A key's counter row outlives its last queued or running job until then, so that
// the key's next job starts under the bucket and the hold; maintenance drops it after.
func (a Admission) KeyRateSettled(key string, tokens float64, at, heldUntil, now time.Time) bool {
	if heldUntil.After(now) {
		return false
	}
	rate, burst := a.KeyRate(key)
	if rate <= 0 || tokens < 0 {
		return true
	}
	keyed := Admission{RateLimit: rate, Burst: burst}
	return keyed.refilled(TokenBucket{Tokens: tokens, At: at}, now) >= float64(burst)
}

// KeyRate returns the rate limit of concurrency key key under a: its starts per second
// (KeyRateLimits[key], else KeyRateLimit; 0: none) and its bucket size (KeyBursts[key],
// else KeyBurst for a key without a rate override, else the rate rounded up, at least 1;
// 0 when the key has no rate limit).
func (a Admission) KeyRate(key string) (rate float64, burst int64) {
	rate, burst = a.KeyRateLimit, a.KeyBurst
	if r, ok := a.KeyRateLimits[key]; ok {
		rate, burst = r, 0
	}
	if b, ok := a.KeyBursts[key]; ok {
		burst = b
	}
	if rate <= 0 {
		return 0, 0
	}
	if burst <= 0 {
		burst = defaultBurst(rate)
	}
	return rate, burst
}

// KeyStart draws one start from concurrency key key's token bucket under its rate limit
// (KeyRate; the queue's Take, written once): tokens and at are the bucket as stored
// (tokens < 0: never drawn, full). It returns the bucket to store, store true, and 0; or,
// when the key has no token, the wait until it has one (the bucket unchanged). Without a
// rate limit for the key it returns the bucket as given, store false (a start changes
// nothing in it: the claim need not write it) and 0.
func (a Admission) KeyStart(key string, tokens float64, at, now time.Time) (bucket TokenBucket, store bool, wait time.Duration) {
	rate, burst := a.KeyRate(key)
	bucket = TokenBucket{Tokens: tokens, At: at}
	if rate <= 0 {
		return bucket, false, 0
	}
	if tokens < 0 {
		bucket = TokenBucket{Tokens: float64(burst), At: now}
	}
	keyed := Admission{RateLimit: rate, Burst: burst}
	next, err := keyed.Take("", bucket, now, 1)
	var refused *AdmissionError
	if errors.As(err, &refused) {
		return bucket, true, max(refused.RetryAfter, time.Millisecond)
	}
	return next, true, 0
}
