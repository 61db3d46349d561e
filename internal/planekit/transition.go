package planekit

import "github.com/lakeshore-dev/lakeshore/plane"

// Transitions are a driver's writes of a transition (Apply), in its transaction.
type Transitions interface {
	// End writes h's terminal state with result and the encoded error.
	End(h *Head, state int, result, errBlob []byte) error
	// Requeue writes h back to its queue, claimable at availableMS (how it waits until then
	// is the driver's), with the encoded error of the attempt that ended, and refunded (0
	// or 1) attempts taken off its count (h.Attempt is that less already). It returns the
	// state stored and wakes whom the driver wakes for it.
	Requeue(h *Head, availableMS int64, errBlob []byte, refunded int) (state int, err error)
	// HoldKey holds the concurrency key of h's queue back until untilMS: no claim takes
	// from it before.
	HoldKey(h *Head, key string, untilMS int64) error
	// Count adds n to the count of the invocations of (namespace, queue) in state with
	// priority.
	Count(namespace, queue string, state int, priority float64, n int64)
	// Wake wakes the waiters of key after the commit.
	Wake(key string)
}

// Apply writes the transition tr that plane's policy decided for h at nowMS (result: the
// success value) through w: a retry re-queues h, claimable after tr.Delay (its attempt
// refunded when tr.Refund; with tr.HoldKey, that concurrency key held back as long); any
// other state ends it (Finished). h follows what was written.
func Apply(w Transitions, h *Head, tr plane.Transition, result []byte, nowMS int64) error {
	var errBlob []byte
	if tr.Error != nil {
		errBlob = tr.Error.Encode()
	}
	if !tr.Retry() {
		state := StateNumber(tr.State)
		if err := w.End(h, state, result, errBlob); err != nil {
			return err
		}
		Finished(w, h.ID, h.Namespace, h.Queue, h.Priority, h.State, state)
		h.State = state
		return nil
	}
	available := nowMS + tr.Delay.Milliseconds()
	refunded := 0 // the attempts taken off the count
	if tr.Refund {
		refunded = 1
	}
	h.Attempt -= refunded
	state, err := w.Requeue(h, available, errBlob, refunded)
	if err != nil {
		return err
	}
	if tr.HoldKey != "" {
		if err := w.HoldKey(h, tr.HoldKey, available); err != nil {
			return err
		}
	}
	w.Count(h.Namespace, h.Queue, h.State, h.Priority, -1)
	w.Count(h.Namespace, h.Queue, state, h.Priority, +1)
	h.State = state
	return nil
}

// Finished counts the end of invocation id (of namespace, queue and priority) from the
// state from in the terminal state to, and wakes the waiters of its result and journal.
func Finished(w Transitions, id, namespace, queue string, priority float64, from, to int) {
	w.Count(namespace, queue, from, priority, -1)
	w.Count(namespace, queue, to, priority, +1)
	w.Wake(InvocationKey(id))
	w.Wake(JournalKey(id))
}
