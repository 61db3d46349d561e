package planekit

import (
	"slices"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// KeyTurn is a ready concurrency key whose turn it is: its token bucket and, when the
// driver read it with the key, the head of its claimable jobs in the claim's order.
type KeyTurn struct {
	Key    string
	Bucket plane.TokenBucket
	Head   *Row
}

// KeyedClaim is a claim transaction's side of ClaimKeyed: its reads, its starts and its
// writes, in the driver's SQL.
type KeyedClaim interface {
	// Turns reads up to n ready keys whose turn it is, leaving out skip.
	Turns(n int, skip []string) ([]KeyTurn, error)
	// Head reads the head of a key read without one; nil leaves the key out of the claim
	// (skip): it has none, or another transaction holds it.
	Head(k *KeyTurn) (*Row, error)
	// Unkeyed returns the next unkeyed candidate in the claim's order (nil: none), and
	// Drop drops it once it is started or ended.
	Unkeyed() (*Row, error)
	Drop()
	// Hold holds key back until untilMS (Unix ms): its token bucket is empty.
	Hold(key string, untilMS int64) error
	// Start starts r, or ends it by its deadline instead (false).
	Start(r *Row) (bool, error)
	// EndRound writes the round's starts before the next read, then stores the token
	// buckets of drawn, the keys started under a rate limit.
	EndRound(drawn []string, buckets map[string]plane.TokenBucket) error
}

// ClaimKeyed claims, until taken reports want, from a queue with a concurrency key ready.
// Each round takes the ready keys whose turn it is (turns in the first round when the
// caller read them, else c.Turns); a key whose token bucket is empty (a.KeyStart) is held
// back until it has a token; then, in kind's order, it takes the earlier of the next
// unkeyed candidate and the next of the keys' heads (plane.KeyTurnFirst), at most one job
// per key per round, and ends the round (c.EndRound), so the next round's read leaves a
// key at its limit out. With single (SQLite: one key read a round, nothing locked), a round
// takes one job, and a round whose key was held back takes none: the next reads the next
// key.
func ClaimKeyed(c KeyedClaim, kind plane.Kind, a plane.Admission, now time.Time, want int, taken func() int, turns []KeyTurn, single bool) error {
	skip := []string{} // keys left out: no head, or another transaction holds it
	ms := now.UnixMilli()
	var heads []*Row                         // the round's heads, in kind's order
	var buckets map[string]plane.TokenBucket // the round's keys drawn from (nil until one is)
	for first := true; taken() < want; first = false {
		if !first || turns == nil {
			var err error
			if turns, err = c.Turns(want-taken(), skip); err != nil {
				return err
			}
		}
		heads = heads[:0]
		clear(buckets)
		keys, held := 0, 0
		for i := range turns {
			k := &turns[i]
			bucket, store, wait := a.KeyStart(k.Key, k.Bucket.Tokens, k.Bucket.At, now)
			if wait > 0 {
				// The key's bucket is empty: held back until it has a token.
				if err := c.Hold(k.Key, ms+wait.Milliseconds()); err != nil {
					return err
				}
				held++
				continue
			}
			keys++
			head := k.Head
			if head == nil {
				var err error
				if head, err = c.Head(k); err != nil {
					return err
				}
			}
			if head == nil {
				skip = append(skip, k.Key)
				continue
			}
			if store {
				if buckets == nil {
					buckets = map[string]plane.TokenBucket{}
				}
				buckets[k.Key] = bucket // drawn from: stored with the claim
			}
			heads = append(heads, head)
		}
		if single && held > 0 {
			continue
		}
		slices.SortFunc(heads, func(x, y *Row) int {
			if plane.KeyTurnFirst(kind, x.ID, x.Priority, y.ID, y.Priority) {
				return -1
			}
			return 1
		})
		unkeyed, err := c.Unkeyed()
		if err != nil {
			return err
		}
		if len(heads) == 0 && unkeyed == nil {
			if keys > 0 || held > 0 {
				continue // those keys are skipped or held back now: try the next ones
			}
			return nil
		}
		var drawn []string
		for taken() < want && (len(heads) > 0 || unkeyed != nil) {
			if len(heads) == 0 || unkeyed != nil && !plane.KeyTurnFirst(kind, heads[0].ID, heads[0].Priority, unkeyed.ID, unkeyed.Priority) {
				c.Drop()
				if _, err := c.Start(unkeyed); err != nil {
					return err
				}
				if single {
					break
				}
				if unkeyed, err = c.Unkeyed(); err != nil {
					return err
				}
				continue
			}
			r := heads[0]
			heads = heads[1:]
			started, err := c.Start(r)
			if err != nil {
				return err
			}
			if _, ok := buckets[r.ConcurrencyKey.String]; started && ok {
				drawn = append(drawn, r.ConcurrencyKey.String)
			}
			if single {
				break
			}
		}
		if err := c.EndRound(drawn, buckets); err != nil {
			return err
		}
	}
	return nil
}

// ClaimRows takes a claim's candidates in its order until taken reports want: rows, or
// when read is set the first more reads (up to the jobs still wanted). start starts each
// row or ends it by its deadline (false); when one was ended, or again says so (a fifo
// claim short from its floor reads from the start), the starts are written (written, so
// the next read does not see them claimable) and more read; the last starts are written
// before it returns.
func ClaimRows(rows []*Row, read bool, want int, taken func() int, start func(*Row) (bool, error),
	written func() error, more func(n int) ([]*Row, error), again func() bool,
) error {
	for {
		if read {
			if taken() >= want {
				return nil
			}
			var err error
			if rows, err = more(want - taken()); err != nil {
				return err
			}
		}
		read = true
		skipped := false
		for _, r := range rows {
			ok, err := start(r)
			if err != nil {
				return err
			}
			skipped = skipped || !ok
		}
		if err := written(); err != nil {
			return err
		}
		if !again() && (!skipped || len(rows) == 0 || taken() >= want) {
			return nil
		}
	}
}

// Start is what a start of r's new attempt under a fresh lease (expiring at expiresMS)
// does beside the write of its row, on both planes: a new lease token, r moved from the
// queued count to the running one (count), and the claim's job.
func Start(r *Row, now time.Time, expiresMS int64, count func(namespace, queue string, state int, priority float64, n int64)) (token string, job *plane.Job) {
	token = plane.NewToken(now)
	count(r.Namespace, r.Queue, StateQueued, r.Priority, -1)
	count(r.Namespace, r.Queue, StateRunning, r.Priority, +1)
	return token, r.Job(token, expiresMS)
}
