package planekit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestLines: blocked submits are admitted first come, first served.
func TestLines(t *testing.T) {
	var l Lines
	a, b, c := l.Join("q"), l.Join("q"), l.Join("q")
	isOpen := func(tk *Ticket) bool {
		select {
		case <-tk.Turn:
			return true
		default:
			return false
		}
	}
	if !isOpen(a) || isOpen(b) || isOpen(c) {
		t.Fatal("only the head of a line has its turn")
	}
	if l.Ahead("q", a) || !l.Ahead("q", b) {
		t.Fatal("Ahead: someone else is at the head")
	}
	l.Leave("q", b) // leaving from the middle hands no turn
	if isOpen(c) {
		t.Fatal("c got a turn before a left")
	}
	l.Leave("q", a)
	if !isOpen(c) || l.Ahead("q", c) {
		t.Fatal("the turn passes to the next in line")
	}
	l.Leave("q", c)
	if d := l.Join("q"); !isOpen(d) {
		t.Fatal("an empty line gives the turn at once")
	}
}

// TestWaiters: parked claims are taken in arrival order; unpark tells a taken waiter; a
// waiter put back goes to the head of the line, unless its wait ended while it was taken.
func TestWaiters(t *testing.T) {
	var w Waiters[int]
	a, b := new(int), new(int)
	w.Park("q", a)
	w.Park("q", a) // once only
	w.Park("q", b)
	if got := w.Take("q"); got != a {
		t.Fatal("first come, first served")
	}
	if !w.PutBack("q", a) {
		t.Fatal("a waiter still waiting is put back")
	}
	if got := w.Take("q"); got != a {
		t.Fatal("a waiter put back is at the head")
	}
	if w.Unpark("q", a) {
		t.Fatal("a taken waiter is no longer parked")
	}
	if w.PutBack("q", a) {
		t.Fatal("a waiter whose wait ended while taken is put back: nothing would answer it")
	}
	if !w.Unpark("q", b) || w.Take("q") != nil {
		t.Fatal("b unparks itself, leaving none")
	}
}

// TestRow: the public views of a stored row.
func TestRow(t *testing.T) {
	r := &Row{ID: "01J", Namespace: "n", Queue: "q", State: StateDelayed, Attempt: 1, MaxAttempts: 3,
		Metadata: EncodeMetadata(map[string]string{"k": "v"}), CreatedMS: 5, NextFrame: 4}
	inv := r.Invocation()
	if inv.State != plane.StateQueued || inv.Metadata["k"] != "v" || inv.CreatedAt.UnixMilli() != 5 || !inv.FinishedAt.IsZero() {
		t.Fatalf("invocation %+v", inv)
	}
	if r.Terminal() {
		t.Fatal("a delayed row is not terminal")
	}
	r.State, r.Result, r.ErrorInfo = StateKilled, []byte{1}, nil
	if f := r.TerminalFrame(); f.Kind != plane.FrameError || f.Seq != 4 || len(f.Value) == 0 {
		t.Fatalf("killed frame %+v", f)
	}
	if inv := r.Invocation(); inv.Result != nil {
		t.Fatal("only a succeeded invocation reports its result")
	}
	if j := r.Job("tok", 9); j.Attempt != 2 || j.Token != "tok" || j.LeaseExpiresAt.UnixMilli() != 9 {
		t.Fatalf("job %+v", j)
	}
}

// TestWatchAny: a waiter of several keys wakes at the first Notify of any of them (or
// NotifyAll), not of other keys; released, it leaves nothing behind.
func TestWatchAny(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	h := NewHub()
	ch, release := h.WatchAny([]string{"a", "b"})
	h.Notify(map[string]struct{}{"c": {}})
	if closed(ch) {
		t.Fatal("woken by a key it does not watch")
	}
	h.Notify(map[string]struct{}{"b": {}})
	if !closed(ch) {
		t.Fatal("not woken by one of its keys")
	}
	h.Notify(map[string]struct{}{"a": {}}) // a second wake-up of the same waiter is harmless
	release()
	if h.Waiting() {
		t.Fatal("a released waiter is still listed")
	}
	ch, release = h.WatchAny([]string{"a", "b"})
	h.NotifyAll()
	if !closed(ch) {
		t.Fatal("not woken by NotifyAll")
	}
	release()
	ch, release = h.WatchAny([]string{"a", "b"})
	release()
	if h.Waiting() || closed(ch) {
		t.Fatal("released before any wake-up: listed, or woken")
	}
}

// TestRotation: each queue is tried first once in every len(queues) orders.
func TestRotation(t *testing.T) {
	var r Rotation
	firsts := map[string]int{}
	for range 9 {
		o := r.Order([]string{"a", "b", "c"})
		if len(o) != 3 {
			t.Fatalf("order %v: not every queue", o)
		}
		firsts[o[0]]++
	}
	if firsts["a"] != 3 || firsts["b"] != 3 || firsts["c"] != 3 {
		t.Fatalf("first queues %v, want each 3 times", firsts)
	}
}

// submitBlockedThenRetried runs SubmitBlocking on a queue found full at the first try,
// whose retry cancels the caller's context and answers retry(ctx); it returns whether the
// submit is still in its line, and its error.
func submitBlockedThenRetried(t *testing.T, retry func(ctx context.Context) error) (bool, error) {
	var l Lines
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	calls := 0
	_, err := SubmitBlocking(ctx, &plane.SubmitManyParams{Namespace: "n", Queue: "q"}, &l, NewHub(), nil,
		func(context.Context, <-chan struct{}, time.Duration) error { return nil },
		func(tk *Ticket) ([]plane.SubmitResult, error) {
			calls++
			if calls == 1 {
				return nil, ErrBlocked
			}
			cancel() // the context ends while the retry runs
			return nil, retry(ctx)
		})
	return l.Ahead(RoomKey("n", "q"), nil), err
}

// TestSubmitBlockingContextEndsInRetry: a submit that found its queue full and whose
// context ends while a retry's transaction runs reports the full queue, not the context's
// error alone (the retry failed for the context, not for the storage).
func TestSubmitBlockingContextEndsInRetry(t *testing.T) {
	inLine, err := submitBlockedThenRetried(t, func(ctx context.Context) error { return ctx.Err() })
	if !errors.Is(err, plane.ErrQueueFull) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the full queue with the context's error as its cause", err)
	}
	if inLine {
		t.Fatal("the submit left its line")
	}
}

// TestSubmitBlockingStorageFailsInRetry: a retry that fails for the storage while the
// caller's context also ends reports the storage's error, not a full queue.
func TestSubmitBlockingStorageFailsInRetry(t *testing.T) {
	storage := errors.New("disk I/O error")
	_, err := submitBlockedThenRetried(t, func(context.Context) error { return storage })
	if !errors.Is(err, storage) || errors.Is(err, plane.ErrQueueFull) {
		t.Fatalf("got %v, want the storage's error", err)
	}
}
