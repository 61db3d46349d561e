package planekit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestTryEach: a try runs before once (its first), narrows p to each queue in the order
// given, stops at the first with jobs, and with none is due at the earliest next time.
func TestTryEach(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	p := &plane.ClaimParams{Namespace: "n", Queues: []string{"a", "b", "c"}}
	befores := 0
	var seen []string
	next := map[string]int64{"a": 0, "b": now.UnixMilli() + 500, "c": now.UnixMilli() + 200}
	jobs := map[string][]*plane.Job{}
	do := func(_ context.Context, fn func(t int) error) error { return fn(0) }
	try := TryEach(p, func(int) error { befores++; return nil }, do, func() time.Time { return now },
		func(_ int, one *plane.ClaimParams) ([]*plane.Job, int64, error) {
			if one.Queues != nil || one.Namespace != "n" {
				t.Fatalf("narrowed params %+v", one)
			}
			seen = append(seen, one.Queue)
			if j := jobs[one.Queue]; len(j) > 0 {
				return j, 0, nil
			}
			return nil, next[one.Queue], nil
		})
	got, due, err := try(context.Background(), []string{"a", "b", "c"})
	if err != nil || got != nil || due != 200*time.Millisecond {
		t.Fatalf("empty try: jobs %v, due %v, err %v; want none, 200ms (c's), nil", got, due, err)
	}
	jobs["b"] = []*plane.Job{{ID: "j"}}
	seen = nil
	got, _, err = try(context.Background(), []string{"c", "b", "a"})
	if err != nil || len(got) != 1 || got[0].ID != "j" || len(seen) != 2 {
		t.Fatalf("try: jobs %v, queues tried %v, err %v; want b's job after c, b", got, seen, err)
	}
	if befores != 1 {
		t.Fatalf("before ran %d times; want once, in the first try", befores)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := try(ctx, []string{"a"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended ctx: err %v", err)
	}
}

// TestDueIn: a due time from now, at least a millisecond; none known is 0.
func TestDueIn(t *testing.T) {
	now := time.UnixMilli(5000)
	for _, c := range []struct {
		next int64
		want time.Duration
	}{{0, 0}, {5250, 250 * time.Millisecond}, {5000, time.Millisecond}, {4000, time.Millisecond}} {
		if got := DueIn(c.next, now); got != c.want {
			t.Errorf("DueIn(%d) = %v; want %v", c.next, got, c.want)
		}
	}
	until := time.Now().Add(time.Hour)
	if got := WaitLeft(until, time.Now().UnixMilli()+100, time.Now()); got > 100*time.Millisecond || got <= 0 {
		t.Errorf("WaitLeft with a job due sooner = %v; want about 100ms", got)
	}
}

// TestAwait: a waiter the sleep ends is unparked; one a transaction took waits for its
// delivery; a timeout is no error, and again reports whether the wait is still ahead.
func TestAwait(t *testing.T) {
	var ws Waiters[Waiter]
	p := &plane.ClaimParams{Queue: "q"}
	w := NewWaiter(p, ClaimOf(p))
	ws.Park("k", &w)
	jobs, again, err := ws.Await("k", &w, w.Deliver, time.Now().Add(time.Hour), func() ([]*plane.Job, error) { return nil, plane.ErrTimeout }, func() {})
	if jobs != nil || !again || err != nil || ws.Take("k") != nil {
		t.Fatalf("timed out: jobs %v, again %v, err %v; want none, again, nil, unparked", jobs, again, err)
	}
	ws.Park("k", &w)
	taken := ws.Take("k")
	Deliver([]Handoff[Waiter]{{Waiter: taken, Jobs: []*plane.Job{{ID: "j"}}}}, true, nil)
	jobs, again, err = ws.Await("k", &w, w.Deliver, time.Now(), func() ([]*plane.Job, error) { return nil, context.Canceled }, func() {})
	if len(jobs) != 1 || again || err != nil {
		t.Fatalf("taken: jobs %v, again %v, err %v; want the delivered job", jobs, again, err)
	}
	// A transaction takes the waiter, its wait ends meanwhile, and the transaction finds it
	// nothing and would put it back: the wait returns at once, with no jobs, and the waiter
	// is not left in line. (It waited, until a later hand-off, ignoring its context: a
	// fresh-clone CI run hung 25 minutes in httpplane's conformance run.)
	ws.Park("k", &w)
	taken = ws.Take("k")
	done := make(chan struct{})
	go func() {
		defer close(done)
		jobs, again, err = ws.Await("k", &w, w.Deliver, time.Now(), func() ([]*plane.Job, error) { return nil, context.Canceled }, func() {})
	}()
	for {
		ws.mu.Lock()
		_, left := ws.left[&w]
		ws.mu.Unlock()
		if left {
			break
		}
		time.Sleep(time.Millisecond)
	}
	Requeue(&ws, "k", taken)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Await still waits for a waiter put back after its wait ended")
	}
	if jobs != nil || again || !errors.Is(err, context.Canceled) || ws.Take("k") != nil || len(ws.left) != 0 {
		t.Fatalf("put back after leaving: jobs %v, again %v, err %v, parked %v; want none, the context's error, not parked", jobs, again, err, ws.byQueue)
	}
	// Put back while its wait goes on: it keeps its place at the head of the line.
	ws.Park("k", &w)
	taken = ws.Take("k")
	Requeue(&ws, "k", taken)
	if ws.Take("k") != &w || len(w.Deliver) != 0 {
		t.Fatal("a waiter put back while still waiting is not at the head of the line, or was answered")
	}
	if c := ClaimOf(p); c.N != 1 || c.Lease != plane.LeaseTTLDefault || c.Kind != plane.KindFIFO {
		t.Fatalf("ClaimOf(zero) = %+v", c)
	}
}
