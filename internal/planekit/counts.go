package planekit

import (
	"cmp"
	"slices"
	"strings"
)

// CountKey names a counter of the counts table: a queue's invocations in one state
// (CountState) and priority level.
type CountKey struct {
	Namespace, Queue string
	State            int
	Priority         float64
}

// Counts are a transaction's changes of the counters, applied just before it commits.
type Counts map[CountKey]int64

// Add records a change of n invocations of a queue in state and priority level, counted
// under CountState(state), which it returns.
func (c Counts) Add(namespace, queue string, state int, priority float64, n int64) int {
	state = CountState(state)
	c[CountKey{namespace, queue, state, priority}] += n
	return state
}

// MakesRoom reports whether a change of n invocations counted in state makes room in a
// full queue: its queued count (Queued states) drops, so the submits blocked on its max
// depth (RoomKey) may go in. Both planes wake RoomKey on it.
func MakesRoom(state int, n int64) bool { return Queued(state) && n < 0 }

// Queued is the change of a queue's queued count (Queued states) that c holds.
func (c Counts) Queued(namespace, queue string) int64 {
	var n int64
	for k, delta := range c {
		if Queued(k.State) && k.Namespace == namespace && k.Queue == queue {
			n += delta
		}
	}
	return n
}

// Sorted are the keys of c's non-zero changes in (namespace, queue, state, priority) order,
// the order two transactions lock counter rows in.
func (c Counts) Sorted() []CountKey {
	keys := make([]CountKey, 0, len(c))
	for k, n := range c {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b CountKey) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Queue, b.Queue),
			cmp.Compare(a.State, b.State), cmp.Compare(a.Priority, b.Priority))
	})
	return keys
}

// CountRun gathers the count changes of consecutive rows of one (state, priority level) of
// a queue into one call of count (a batch insert's rows, each counted where it goes in):
// a row in another state or level than the run's hands the run to count first, and Flush
// hands over what is left.
type CountRun struct {
	Namespace, Queue string
	key              CountKey
	n                int64
}

// Add counts one row in state and priority.
func (r *CountRun) Add(state int, priority float64, count func(namespace, queue string, state int, priority float64, n int64)) {
	if r.n != 0 && (r.key.State != state || r.key.Priority != priority) {
		r.Flush(count)
	}
	r.key.State, r.key.Priority = state, priority
	r.n++
}

// Flush hands the run's rows to count, if any.
func (r *CountRun) Flush(count func(namespace, queue string, state int, priority float64, n int64)) {
	if r.n != 0 {
		count(r.Namespace, r.Queue, r.key.State, r.key.Priority, r.n)
		r.n = 0
	}
}
