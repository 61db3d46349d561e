package planekit

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestBatchableAcks: only acks of ids that appear once, by unscoped callers, and only two
// or more of them, go in one batched ack.
func TestBatchableAcks(t *testing.T) {
	ok, fail := plane.OutcomeSucceeded, plane.OutcomeFailed
	params := []plane.SettleParams{
		{ID: "a", Outcome: ok}, {ID: "b", Outcome: ok}, {ID: "b", Outcome: ok},
		{ID: "c", Outcome: fail}, {ID: "d", Outcome: ok, Scope: plane.Scope{Namespace: "n"}}, {ID: "e", Outcome: ok},
	}
	if got := BatchableAcks(params); !slices.Equal(got, []int{0, 5}) {
		t.Fatalf("BatchableAcks = %v, want [0 5]", got)
	}
	if got := BatchableAcks(params[:3]); got != nil {
		t.Fatalf("one batchable ack: %v, want none", got)
	}
	if got := BatchableAcks(params[:1]); got != nil {
		t.Fatalf("one settle: %v, want none", got)
	}
}

// TestCountRun: consecutive rows of one state and level are counted in one call.
func TestCountRun(t *testing.T) {
	type call struct {
		state    int
		priority float64
		n        int64
	}
	var calls []call
	count := func(namespace, queue string, state int, priority float64, n int64) {
		if namespace != "ns" || queue != "q" {
			t.Fatalf("counted %s/%s", namespace, queue)
		}
		calls = append(calls, call{state, priority, n})
	}
	r := CountRun{Namespace: "ns", Queue: "q"}
	r.Flush(count) // nothing yet
	for _, c := range []call{{0, 1, 0}, {0, 1, 0}, {-1, 1, 0}, {-1, 2, 0}, {-1, 2, 0}, {-1, 2, 0}} {
		r.Add(c.state, c.priority, count)
	}
	r.Flush(count)
	r.Flush(count) // flushed already
	if want := []call{{0, 1, 2}, {-1, 1, 1}, {-1, 2, 3}}; !slices.Equal(calls, want) {
		t.Fatalf("calls = %v, want %v", calls, want)
	}
}

// TestCached: a value read once is kept; a failed read is not.
func TestCached(t *testing.T) {
	cache := map[string]int{}
	reads := 0
	read := func() (int, error) { reads++; return 7, nil }
	for range 2 {
		if v, err := Cached(cache, "k", read); v != 7 || err != nil {
			t.Fatalf("Cached = %d, %v", v, err)
		}
	}
	boom := errors.New("boom")
	if _, err := Cached(cache, "other", func() (int, error) { return 0, boom }); err != boom {
		t.Fatalf("err = %v", err)
	}
	if _, kept := cache["other"]; kept || reads != 1 {
		t.Fatalf("reads %d, cache %v", reads, cache)
	}
}

// TestInOrder: a page's rows come in the order of its ids, an id without a row left out.
func TestInOrder(t *testing.T) {
	rows := []*Row{{ID: "b"}, {ID: "a"}}
	page := InOrder(nil, []string{"a", "trimmed", "b"}, rows)
	if len(page) != 2 || page[0].ID != "a" || page[1].ID != "b" {
		t.Fatalf("page = %v", page)
	}
}

// TestQueues: each queue of a group once, in the order they first come.
func TestQueues(t *testing.T) {
	group := []*plane.SubmitManyParams{{Namespace: "n", Queue: "b"}, {Namespace: "n", Queue: "a"}, {Namespace: "n", Queue: "b"}, {Namespace: "m", Queue: "b"}}
	ns, qs := Queues(group, func(p *plane.SubmitManyParams) *plane.SubmitManyParams { return p })
	if !slices.Equal(ns, []string{"n", "n", "m"}) || !slices.Equal(qs, []string{"b", "a", "b"}) {
		t.Fatalf("Queues = %v, %v", ns, qs)
	}
}

// TestKeyCounts: rows of one key are counted in one entry, claimable and running apart.
func TestKeyCounts(t *testing.T) {
	var k KeyCounts
	k.Add("n", "q", "x", true)
	k.Add("n", "q", "y", false)
	k.Add("n", "q", "x", false)
	k.Add("n", "q", "x", true)
	if !slices.Equal(k.Keys, []string{"x", "y"}) || !slices.Equal(k.Queued, []int64{2, 0}) || !slices.Equal(k.Running, []int64{1, 1}) {
		t.Fatalf("KeyCounts = %+v", k)
	}
	var s KeySet
	s.Add(KeyRef{"n", "q", "x"})
	s.Add(KeyRef{"n", "q", "x"})
	if ns, qs, keys := s.Columns(); len(ns) != 1 || qs[0] != "q" || keys[0] != "x" {
		t.Fatalf("Columns = %v %v %v", ns, qs, keys)
	}
}

// TestURLParams: each parameter is taken out, checked and set, and one that contradicts its
// Config field is refused.
func TestURLParams(t *testing.T) {
	p := URLParams{"schema": "jobs", "poll_only": "true", "poll_interval": "2s", "other": "x"}
	var schema string
	var pollOnly bool
	var interval time.Duration
	positive := func(d time.Duration) bool { return d > 0 }
	if err := errors.Join(p.String("schema", &schema, func(string, string) error { return nil }), p.Bool("poll_only", &pollOnly),
		p.Duration("poll_interval", &interval, "positive", positive), p.Duration("absent", &interval, "positive", positive)); err != nil {
		t.Fatal(err)
	}
	if schema != "jobs" || !pollOnly || interval != 2*time.Second || len(p) != 1 {
		t.Fatalf("got %q %v %v, left %v", schema, pollOnly, interval, p)
	}
	other := "else"
	var invalid *plane.InvalidError
	err := URLParams{"schema": "jobs"}.String("schema", &other, func(string, string) error { return nil })
	if !errors.As(err, &invalid) || invalid.Field != "database URL parameter schema" {
		t.Fatalf("a contradicting parameter: %v", err)
	}
	pollOnly = true
	if err := (URLParams{"poll_only": "false"}).Bool("poll_only", &pollOnly); !errors.As(err, &invalid) {
		t.Fatalf("false against a Config true: %v", err)
	}
	if err := (URLParams{"poll_interval": "-1s"}).Duration("poll_interval", &interval, "positive", positive); !errors.As(err, &invalid) || invalid.Rule != "positive" {
		t.Fatalf("a refused duration: %v", err)
	}
}

// TestNotifyExcept: the waiters of the keys are woken but those of the keys left out.
func TestNotifyExcept(t *testing.T) {
	h := NewHub()
	a, releaseA := h.Watch("a")
	defer releaseA()
	b, releaseB := h.Watch("b")
	defer releaseB()
	h.NotifyExcept(map[string]struct{}{"a": {}, "b": {}}, map[string]struct{}{"b": {}})
	select {
	case <-a:
	default:
		t.Fatal("a not woken")
	}
	select {
	case <-b:
		t.Fatal("b woken")
	default:
	}
}

// TestClaimEnd: a candidate past its deadline is ended through apply, one without a
// deadline is not.
func TestClaimEnd(t *testing.T) {
	now := time.UnixMilli(10_000)
	var ended []plane.Transition
	apply := func(h *Head, tr plane.Transition, result []byte) error { ended = append(ended, tr); return nil }
	if ok, err := (&Row{ID: "a"}).ClaimEnd(now, 0, apply); ok || err != nil || len(ended) != 0 {
		t.Fatalf("no deadline: %v %v %v", ok, err, ended)
	}
	if ok, err := (&Row{ID: "b", DeadlineMS: 5_000}).ClaimEnd(now, 0, apply); !ok || err != nil || len(ended) != 1 || ended[0].State != plane.StateTimeout {
		t.Fatalf("deadline passed: %v %v %v", ok, err, ended)
	}
}
