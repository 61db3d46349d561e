package planekit

import (
	"context"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestClaimWaitingWokenWhenItTriedBeforeAQuietCommit: the interleaving of
// planetest's Placement/WaitingClaimWoken seen once at load 15 on PostgreSQL, forced. A
// capable claim reads nothing (the submit has not committed), and before it parks, the
// submit's handoff serves the only parked claim, an offer-less one, which gets nothing, so
// the queue's key is idle; pgplane then woke no waiter of the key in this process, and the
// capable claim, parked a moment later, slept until its poll (5 s, more than the suite's
// 2 s) with the job waiting. A claim between its watch and its park is now arriving, and
// the key is not left quiet: the claim is woken and takes the job. With Handoffs.Quiet
// returning idle as is (the old rule), the claim sleeps out its whole wait.
func TestClaimWaitingWokenWhenItTriedBeforeAQuietCommit(t *testing.T) {
	hub := NewHub()
	var ws Waiters[Waiter]
	key := QueueKey("n", "q")
	plainP := &plane.ClaimParams{Namespace: "n", Queue: "q", Wait: time.Hour}
	plain := NewWaiter(plainP, ClaimOf(plainP))
	ws.Park(key, &plain) // the offer-less claim, parked first

	job := &plane.Job{ID: "a100"}
	submitted := false
	// The submit as pgplane's do runs it: handoff before the commit, wake after it.
	submit := func() {
		var h Handoffs
		h.MarkClaimable("n", "q")
		_, idle, err := h.Serve(&ws, false, func(w *Waiter) ([]*plane.Job, int64, error) {
			return nil, 0, nil // the offer-less claim cannot take the shaped job
		})
		if err != nil {
			t.Errorf("serve: %v", err)
		}
		if _, ok := idle[key]; !ok {
			t.Errorf("the key is not idle after the offer-less claim got nothing: %v", idle)
		}
		submitted = true // committed
		h.Deliver(true, nil)
		hub.NotifyExcept(map[string]struct{}{key: {}}, h.Quiet(&ws, idle))
	}

	p := &plane.ClaimParams{Namespace: "n", Queue: "q", Wait: 10 * time.Second, Offers: &plane.Offers{GPUs: 1, GPUType: "a100"}}
	tries := 0
	start := time.Now()
	jobs, _, err := ClaimWaiting(p, hub, &ws, time.Now, func(w *Waiter) ([]*plane.Job, int64, bool, bool, error) {
		tries++
		if !submitted {
			// Read before the submit's commit: nothing. The submit commits before this
			// claim parks (ClaimWaiting parks it after the try, as pgplane's claim does).
			submit()
			return nil, 0, false, true, nil
		}
		return []*plane.Job{job}, 0, false, true, nil
	}, func(changed <-chan struct{}, wait time.Duration, deliver <-chan []*plane.Job) ([]*plane.Job, error) {
		return Sleep(context.Background(), nil, changed, deliver, wait, 0)
	})
	if err != nil || len(jobs) != 1 || jobs[0] != job || tries != 2 {
		t.Fatalf("after %v: jobs %v, tries %d, err %v; want the job at the second try, woken by the submit's commit", time.Since(start), jobs, tries, err)
	}
	if <-plain.Deliver != nil {
		t.Fatal("the offer-less claim was handed a job")
	}
	if len(ws.arriving) != 0 || len(ws.parkedAt) != 0 || len(ws.byQueue) != 0 {
		t.Fatalf("left behind: arriving %v, parked %v %v", ws.arriving, ws.parkedAt, ws.byQueue)
	}
}

// TestWaitersQuiet: a key stays quiet after a handoff that began at seq only while no
// claim of it is arriving and none parked after seq; a waiter parked before was seen.
func TestWaitersQuiet(t *testing.T) {
	var ws Waiters[int]
	idle := map[string]struct{}{"k": {}, "other": {}}
	a, b := 1, 2
	ws.Park("k", &a)
	seq := ws.Seq()
	if got := ws.Quiet(idle, seq); len(got) != 2 {
		t.Fatalf("parked before the handoff began: quiet %v; want both keys", got)
	}
	ws.Arrive("k")
	if got := ws.Quiet(idle, seq); len(got) != 1 {
		t.Fatalf("a claim arriving: quiet %v; want only other", got)
	}
	ws.Arrived("k", &b, true)
	if got := ws.Quiet(idle, seq); len(got) != 1 {
		t.Fatalf("a claim parked after the handoff began: quiet %v; want only other", got)
	}
	if ws.Unpark("k", &a); !ws.Unpark("k", &b) {
		t.Fatal("the waiter Arrived parked is not parked")
	}
	if got := ws.Quiet(idle, seq); len(got) != 2 || len(ws.parkedAt) != 0 || len(ws.arriving) != 0 {
		t.Fatalf("all gone: quiet %v, parked %v, arriving %v; want both keys, nothing kept", got, ws.parkedAt, ws.arriving)
	}
}

// TestNotifyExceptWakesClaimsOverSeveralQueues: a quiet key's one-key waiters stay asleep,
// its waiters of several keys (claims over several queues, which no handoff serves) do not.
func TestNotifyExceptWakesClaimsOverSeveralQueues(t *testing.T) {
	hub := NewHub()
	one, releaseOne := hub.Watch("k")
	defer releaseOne()
	several, releaseSeveral := hub.WatchAny([]string{"j", "k"})
	defer releaseSeveral()
	hub.NotifyExcept(map[string]struct{}{"k": {}}, map[string]struct{}{"k": {}})
	select {
	case <-several:
	default:
		t.Fatal("the claim over several queues was not woken")
	}
	select {
	case <-one:
		t.Fatal("a one-key waiter of a quiet key was woken")
	default:
	}
}
