package planekit

import (
	"context"
	"errors"
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestClaimGroup: rows go to the first request with room; a short claim notes the next due
// time on the requests without jobs, or now and Held when a due row was held; ServeClaims
// resets each run and fails every request with the transaction's error.
func TestClaimGroup(t *testing.T) {
	p := &plane.ClaimParams{Namespace: "n", Queue: "q"}
	a := &ClaimRequest{P: p, Claim: Claim{N: 1}}
	b := &ClaimRequest{P: p, Claim: Claim{N: 2}}
	reqs := []*ClaimRequest{a, b}
	if Want(reqs) != 3 {
		t.Fatalf("want %d", Want(reqs))
	}
	for i, id := range []string{"1", "2", "3"} {
		if !Assign(reqs, &Row{ID: id}) {
			t.Fatalf("row %d: no request with room", i)
		}
	}
	if Assign(reqs, &Row{ID: "4"}) || len(a.Pending) != 1 || len(b.Pending) != 2 {
		t.Fatalf("assigned: a %d, b %d pending; want 1 and 2, the fourth refused", len(a.Pending), len(b.Pending))
	}
	b.Jobs, b.Pending = []*plane.Job{{ID: "9"}, {ID: "3"}}, nil
	if OldestJob(reqs) != "3" {
		t.Fatalf("oldest %q", OldestJob(reqs))
	}
	next := int64(500)
	NoteDue(reqs, &next, false, 100)
	if a.Next != 500 || b.Next != 0 || a.Held || b.Held {
		t.Fatalf("noted: a %d %v, b %d %v; want a 500, b (with jobs) 0, neither held", a.Next, a.Held, b.Next, b.Held)
	}
	NoteDue(reqs, nil, true, 100)
	if a.Next != 100 || !a.Held || !b.Held {
		t.Fatalf("held: a %d %v, b %v; want a due now, both held", a.Next, a.Held, b.Held)
	}
	if !ClaimsAgain(b, 2, 3) || ClaimsAgain(b, 3, 3) {
		t.Fatal("a held claim short of its jobs tries again; one with all does not")
	}
	p.Wait = 1
	if ClaimsAgain(a, 0, 1) || !ClaimsAgain(a, 1, 2) {
		t.Fatal("a held claim that may wait and took nothing waits; one that took some tries again")
	}

	do := func(_ context.Context, fn func(int) error) error { return fn(0) }
	var parts [][]*ClaimRequest
	ServeClaims(context.Background(), reqs, do, nil, nil, nil, func(_ int, part []*ClaimRequest) error {
		parts = append(parts, part)
		return nil
	})
	if len(parts) != 1 || a.Held || a.Next != 0 || b.Jobs != nil {
		t.Fatalf("served: %d parts, a %v %d, b %v; want one part, every request reset", len(parts), a.Held, a.Next, b.Jobs)
	}
	failed := errors.New("failed")
	settled := false
	ServeClaims(context.Background(), reqs, do, func(int, [][]plane.SettleParams, [][]error) error { settled = true; return nil }, nil, nil,
		func(_ int, part []*ClaimRequest) error {
			part[0].Jobs = []*plane.Job{{ID: "1"}}
			return failed
		})
	if !settled || a.Err != failed || b.Err != failed || a.Jobs != nil {
		t.Fatalf("failed: settled %v, errors %v %v, a's jobs %v; want the settles first, every request failed, no jobs", settled, a.Err, b.Err, a.Jobs)
	}
}

// TestLevelsHead: one level is one probe; several give the smallest id (fifo) or the
// largest (filo) of the levels' heads.
func TestLevelsHead(t *testing.T) {
	heads := map[float64]*Row{3: {ID: "05"}, 2: {ID: "02"}, 1: {ID: "09"}}
	for _, c := range []struct {
		kind      plane.Kind
		low, high float64
		want      string
		probes    int
	}{{plane.KindFIFO, 2, 2, "02", 1}, {plane.KindFIFO, 1, 3, "02", 3}, {plane.KindFILO, 1, 3, "09", 3}} {
		probes := 0
		got, err := LevelsHead(c.kind, c.low, c.high, func(priority float64) (*Row, error) {
			probes++
			return heads[priority], nil
		}, func(below float64) (float64, bool, error) {
			for _, p := range []float64{3, 2, 1} {
				if p < below && p >= c.low {
					return p, true, nil
				}
			}
			return 0, false, nil
		})
		if err != nil || got == nil || got.ID != c.want || probes != c.probes {
			t.Fatalf("%v %v..%v: head %v, %d probes, err %v; want %s, %d probes", c.kind, c.low, c.high, got, probes, err, c.want, c.probes)
		}
	}
}

// TestHandoffsServe: a waiter that gets jobs is delivered them after the commit; one that
// gets none is put back (requeue) or answered with none; the keys where one got none are
// due (a job comes due later) or idle.
func TestHandoffsServe(t *testing.T) {
	for _, requeue := range []bool{true, false} {
		var ws Waiters[Waiter]
		p := &plane.ClaimParams{Namespace: "n", Queue: "q"}
		w1, w2 := NewWaiter(p, ClaimOf(p)), NewWaiter(p, ClaimOf(p))
		key := QueueKey("n", "q")
		ws.Park(key, &w1)
		ws.Park(key, &w2)
		var h Handoffs
		if h.Marked() || h.MarkClaimable("n", "q") != key || !h.Marked() {
			t.Fatal("marked")
		}
		left := 1
		due, idle, err := h.Serve(&ws, requeue, func(w *Waiter) ([]*plane.Job, int64, error) {
			if left == 0 {
				return nil, 0, nil
			}
			left--
			return []*plane.Job{{ID: "j"}}, 0, nil
		})
		if err != nil || due != nil {
			t.Fatalf("requeue %v: due %v, err %v", requeue, due, err)
		}
		if _, ok := idle[key]; ok == requeue {
			t.Fatalf("requeue %v: idle %v; want the key idle only without requeue", requeue, idle)
		}
		h.Deliver(true, nil)
		if got := <-w1.Deliver; len(got) != 1 {
			t.Fatalf("requeue %v: first waiter got %v", requeue, got)
		}
		if requeue {
			if ws.Take(key) != &w2 {
				t.Fatal("the waiter that got nothing is not back in line")
			}
		} else if got := <-w2.Deliver; got != nil {
			t.Fatalf("the waiter that got nothing got %v; want none", got)
		}
	}
}
