package planekit

import (
	"testing"

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

// TestWaiters: parked claims are taken in arrival order; unpark tells a taken waiter.
func TestWaiters(t *testing.T) {
	var w Waiters[int]
	a, b := new(int), new(int)
	w.Park("q", a)
	w.Park("q", a) // once only
	w.Park("q", b)
	if got := w.Take("q"); got != a {
		t.Fatal("first come, first served")
	}
	if w.Unpark("q", a) {
		t.Fatal("a taken waiter is no longer parked")
	}
	w.PutBack("q", a)
	if got := w.Take("q"); got != a {
		t.Fatal("a waiter put back is at the head")
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
