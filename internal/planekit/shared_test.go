package planekit

import (
	"errors"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestFence: a caller without the lease loses it, and an expired lease or an overdue
// attempt found by the check is ended by the driver's ending, once.
func TestFence(t *testing.T) {
	now := time.UnixMilli(10_000)
	ended := ""
	expire := func() error { ended += "expire"; return nil }
	overdue := func() error { ended += "overdue"; return nil }
	for _, c := range []struct {
		name              string
		state             int
		token             string
		lease, deadline   int64
		lost, wantEndedBy string
	}{
		{"held", StateRunning, "t", 20_000, 0, "", ""},
		{"other token", StateRunning, "u", 20_000, 0, "lost", ""},
		{"not running", StateQueued, "t", 20_000, 0, "lost", ""},
		{"lease expired", StateRunning, "t", 9_000, 0, "lost", "expire"},
		{"attempt overdue", StateRunning, "t", 20_000, 9_000, "lost", "overdue"},
	} {
		ended = ""
		lost, err := Fence(c.state, "t", c.token, c.lease, c.deadline, now, expire, overdue)
		if err != nil || (lost != nil) != (c.lost != "") || lost != nil && !errors.Is(lost, plane.ErrLeaseLost) {
			t.Fatalf("%s: lost %v, err %v", c.name, lost, err)
		}
		if ended != c.wantEndedBy {
			t.Fatalf("%s: ended by %q, want %q", c.name, ended, c.wantEndedBy)
		}
	}
	failed := errors.New("storage")
	if _, err := Fence(StateRunning, "t", "t", 9_000, 0, now, func() error { return failed }, overdue); err != failed {
		t.Fatalf("the ending's failure is returned: %v", err)
	}
}

// TestPostCheck: a post's checks go in order: terminal, fencing, closed by a final post.
func TestPostCheck(t *testing.T) {
	holds := func() (error, error) { return nil, nil }
	lostLease := func() (error, error) { return plane.ErrLeaseLost, nil }
	if l, _ := PostCheck(StateSucceeded, 1, 0, lostLease); !errors.Is(l, plane.ErrJournalClosed) {
		t.Fatalf("terminal first: %v", l)
	}
	if l, _ := PostCheck(StateRunning, 1, 1, lostLease); !errors.Is(l, plane.ErrLeaseLost) {
		t.Fatalf("fencing before a closed journal: %v", l)
	}
	if l, _ := PostCheck(StateRunning, 1, 1, holds); !errors.Is(l, plane.ErrJournalClosed) {
		t.Fatalf("a journal its attempt closed takes no more: %v", l)
	}
	if l, err := PostCheck(StateRunning, 2, 1, holds); l != nil || err != nil {
		t.Fatalf("a new attempt posts: %v %v", l, err)
	}
}

// TestWaitersServe: keys are served one at a time, first come first served, until the
// waiters or the jobs run out; keys marked by a claim are served too.
func TestWaitersServe(t *testing.T) {
	var c Waiters[int]
	one, two, three := 1, 2, 3
	c.Park("a", &one)
	c.Park("a", &two)
	c.Park("b", &three)
	claimable := map[string]struct{}{"a": {}}
	var served []int
	err := c.Serve(claimable, func(*int) string { return "" }, func(key string, w *int) (bool, error) {
		served = append(served, *w)
		if key == "a" {
			claimable["b"] = struct{}{} // a claim marks another queue
			return *w == 1, nil         // one job for the first waiter of a, none after
		}
		return true, nil
	})
	if err != nil || len(claimable) != 0 {
		t.Fatalf("err %v, left %v", err, claimable)
	}
	if len(served) != 3 || served[0] != 1 || served[1] != 2 || served[2] != 3 {
		t.Fatalf("served %v, want [1 2 3]", served)
	}
}

// TestWaitersServeClasses: after a waiter gets nothing, the key's waiters of its class are
// passed over (and keep their places) while a waiter of another class is still tried.
func TestWaitersServeClasses(t *testing.T) {
	var c Waiters[string]
	x1, x2, y := "x1", "x2", "y"
	for _, w := range []*string{&x1, &x2, &y} {
		c.Park("q", w)
	}
	var served []string
	err := c.Serve(map[string]struct{}{"q": {}}, func(w *string) string { return (*w)[:1] }, func(key string, w *string) (bool, error) {
		served = append(served, *w)
		if *w == "x1" {
			c.PutBack(key, w) // nothing for x's offers
			return false, nil
		}
		return true, nil
	})
	if err != nil || len(served) != 2 || served[0] != "x1" || served[1] != "y" {
		t.Fatalf("served %v (err %v), want [x1 y]", served, err)
	}
	if w := c.Take("q"); w != &x1 {
		t.Fatalf("first left %v, want x1 back at the head", w)
	}
	if w := c.Take("q"); w != &x2 {
		t.Fatalf("next left %v, want x2 passed over in its place", w)
	}
}

// TestCollect: rows are collected in order, an empty result is an empty slice, and the
// rows are closed.
func TestCollect(t *testing.T) {
	rs := &fakeRows{values: []string{"x", "y"}}
	got, err := Collect(rs, "read", func(s Scanner) (v string, err error) { return v, s.Scan(&v) })
	if err != nil || len(got) != 2 || got[0] != "x" || got[1] != "y" || !rs.closed {
		t.Fatalf("got %v, err %v, closed %v", got, err, rs.closed)
	}
	got, err = Collect(&fakeRows{}, "read", func(s Scanner) (v string, err error) { return v, s.Scan(&v) })
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty: %#v, %v", got, err)
	}
}

type fakeRows struct {
	values []string
	at     int
	closed bool
}

func (r *fakeRows) Next() bool { r.at++; return r.at <= len(r.values) }
func (r *fakeRows) Scan(dest ...any) error {
	*dest[0].(*string) = r.values[r.at-1]
	return nil
}
func (r *fakeRows) Err() error { return nil }
func (r *fakeRows) Close()     { r.closed = true }
