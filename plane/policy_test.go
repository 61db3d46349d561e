package plane

import (
	"errors"
	"math"
	"testing"
	"time"
)

func never() float64 { panic("the backoff must not be drawn") }

func TestSettleTransition(t *testing.T) {
	b := Backoff{Base: time.Second, Max: time.Minute}
	half := func() float64 { return 0.5 }
	for _, c := range []struct {
		name             string
		p                SettleParams
		attempt, max     int
		unit             func() float64
		state            State
		delay            time.Duration
		errType, message string
	}{
		{"ack", SettleParams{Outcome: OutcomeSucceeded}, 1, 3, never, StateSucceeded, 0, "", ""},
		{"retry backs off", SettleParams{Outcome: OutcomeRetry, Error: &ErrorInfo{Type: "E", Message: "m"}}, 2, 3, half, StateQueued, 2 * time.Second, "E", "m"},
		{"retry delay overrides", SettleParams{Outcome: OutcomeRetry, RetryDelay: time.Hour}, 1, 3, never, StateQueued, time.Hour, "error", "nacked without an error"},
		{"retry exhausted fails", SettleParams{Outcome: OutcomeRetry}, 3, 3, never, StateFailed, 0, "error", "nacked without an error"},
		{"timed out retried", SettleParams{Outcome: OutcomeTimedOut, Error: &ErrorInfo{Message: "slow"}}, 1, 2, half, StateQueued, time.Second, "error", "slow"},
		{"timed out exhausted", SettleParams{Outcome: OutcomeTimedOut}, 2, 2, never, StateTimeout, 0, "error", "nacked without an error"},
		{"fail is final", SettleParams{Outcome: OutcomeFailed, Error: &ErrorInfo{Type: "X"}}, 1, 3, never, StateFailed, 0, "X", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := SettleTransition(&c.p, c.attempt, c.max, b, c.unit)
			if tr.State != c.state || tr.Delay != c.delay {
				t.Fatalf("got %s after %s, want %s after %s", tr.State, tr.Delay, c.state, c.delay)
			}
			if c.errType == "" {
				if tr.Error != nil {
					t.Fatalf("success recorded an error: %+v", tr.Error)
				}
				return
			}
			if tr.Error.Type != c.errType || tr.Error.Message != c.message || tr.Error.Attempt != c.attempt {
				t.Fatalf("error %+v, want type %q message %q attempt %d", tr.Error, c.errType, c.message, c.attempt)
			}
			if tr.Retry() != (c.state == StateQueued) {
				t.Fatal("Retry disagrees with State")
			}
		})
	}
}

func TestSettleTransitionDoesNotAliasTheCallersError(t *testing.T) {
	info := &ErrorInfo{Message: "m"}
	tr := SettleTransition(&SettleParams{Outcome: OutcomeFailed, Error: info}, 2, 3, BackoffDefault(), never)
	if info.Type != "" || info.Attempt != 0 || tr.Error == info {
		t.Fatalf("the caller's ErrorInfo was changed: %+v", info)
	}
}

func TestLeaseAndAttemptTransitions(t *testing.T) {
	tr := LeaseExpiredTransition(1, 3)
	if tr.State != StateQueued || tr.Delay != 0 || tr.Error.Type != ErrorTypeLeaseExpired {
		t.Fatalf("an expired lease with attempts left: %+v", tr)
	}
	tr = LeaseExpiredTransition(3, 3)
	if tr.State != StateTimeout || tr.Error.Message != "lease expired" || tr.Error.Attempt != 3 {
		t.Fatalf("an expired lease of the last attempt: %+v %+v", tr, tr.Error)
	}
	tr = AttemptOverdueTransition(1, 2, Backoff{Base: time.Second, Max: time.Hour}, func() float64 { return 0.5 })
	if tr.State != StateQueued || tr.Delay != time.Second || tr.Error.Type != ErrorTypeAttemptTimeout {
		t.Fatalf("an overdue attempt with attempts left: %+v", tr)
	}
	if tr := AttemptOverdueTransition(2, 2, BackoffDefault(), never); tr.State != StateTimeout {
		t.Fatalf("an overdue last attempt: %+v", tr)
	}
}

func TestClaimTransition(t *testing.T) {
	now := time.Unix(1000, 0)
	if ClaimTransition(time.Time{}, now, time.Hour, 0) != nil {
		t.Fatal("no deadline ended the job")
	}
	if ClaimTransition(now.Add(time.Minute), now, 0, 0) != nil {
		t.Fatal("a future deadline without cutoff ended the job")
	}
	if tr := ClaimTransition(now, now, 0, 1); tr == nil || tr.State != StateTimeout || tr.Error.Attempt != 1 {
		t.Fatalf("a deadline at now did not end the job: %+v", tr)
	}
	if tr := ClaimTransition(now.Add(time.Minute), now, time.Hour, 0); tr == nil || tr.Error.Type != ErrorTypeDeadline {
		t.Fatalf("a deadline inside the cutoff did not end the job: %+v", tr)
	}
	if ClaimTransition(now.Add(2*time.Hour), now, time.Hour, 0) != nil {
		t.Fatal("a deadline beyond the cutoff ended the job")
	}
}

func TestDueAt(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		s    SubmitParams
		want time.Time
	}{
		{SubmitParams{}, now},
		{SubmitParams{Delay: time.Minute}, now.Add(time.Minute)},
		{SubmitParams{NotBefore: now.Add(time.Hour)}, now.Add(time.Hour)},
		{SubmitParams{NotBefore: now.Add(-time.Hour)}, now},
		{SubmitParams{NotBefore: now.Add(time.Second), Delay: time.Minute}, now.Add(time.Minute)},
		{SubmitParams{NotBefore: now.Add(time.Hour), Delay: time.Minute}, now.Add(time.Hour)},
	} {
		if got := c.s.DueAt(now); !got.Equal(c.want) {
			t.Errorf("DueAt(%+v) = %s, want %s", c.s, got, c.want)
		}
	}
}

func TestDrawLevel(t *testing.T) {
	levels := []Level{{Priority: 0, Count: 1}, {Priority: 1, Count: 1}}
	// T=1: weights 1/e and 1, so the split point is at (1/e)/(1/e+1) ≈ 0.269.
	split := math.Exp(-1) / (math.Exp(-1) + 1)
	if DrawLevel(levels, 1, split-1e-9) != 0 || DrawLevel(levels, 1, split+1e-9) != 1 {
		t.Fatal("the draw does not split at the boltzmann weights")
	}
	// Counts weigh in: 3 jobs at priority 0 against 1 at priority 0 at any temperature.
	levels = []Level{{Priority: 0, Count: 3}, {Priority: 0, Count: 1}}
	if DrawLevel(levels, 5, 0.74) != 0 || DrawLevel(levels, 5, 0.76) != 1 {
		t.Fatal("counts do not weigh the draw")
	}
	// Tiny temperatures never overflow and pick the top level.
	levels = []Level{{Priority: -1e6, Count: 1000}, {Priority: 1e6, Count: 1}}
	for _, u := range []float64{0, 0.5, 0.999999} {
		if DrawLevel(levels, 1e-9, u) != 1 {
			t.Fatal("a cold draw did not take the highest priority")
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { DrawLevel(levels, 1, 0.3) }); allocs != 0 {
		t.Fatalf("DrawLevel allocates %v times", allocs)
	}
}

func TestAdmissionPolicy(t *testing.T) {
	now := time.Unix(1000, 0)
	a := Admission{MaxDepth: 10, RateLimit: 2, DeadlineCutoff: time.Minute}.WithDefaults()
	if err := a.CheckDeadlines("ns/q", now, []time.Time{{}, now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckDeadlines("ns/q", now, []time.Time{now.Add(time.Second)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a deadline inside the cutoff: %v", err)
	}
	if block, err := a.CheckDepth("ns/q", 8, 2, false); block || err != nil {
		t.Fatalf("a submit that fits: %v %v", block, err)
	}
	block, err := a.CheckDepth("ns/q", 8, 3, false)
	var ae *AdmissionError
	if block || !errors.As(err, &ae) || !errors.Is(err, ErrQueueFull) || ae.Fit != 2 {
		t.Fatalf("a submit past max depth: %v %v", block, err)
	}
	if _, err := a.CheckDepth("ns/q", 0, 1, true); !errors.Is(err, ErrQueueFull) {
		t.Fatal("a submit behind a line of blocked ones was let through")
	}
	blocking := a
	blocking.OnFull = OnFullBlock
	if block, err := blocking.CheckDepth("ns/q", 10, 1, false); !block || err != nil {
		t.Fatalf("a blocking queue at max depth: %v %v", block, err)
	}

	b := a.Full(now)
	if b.Tokens != 2 {
		t.Fatalf("a full bucket holds %v tokens, want the burst 2", b.Tokens)
	}
	b, err = a.Take("ns/q", b, now, 2)
	if err != nil || b.Tokens != 0 {
		t.Fatalf("take the burst: %v %+v", err, b)
	}
	if _, err := a.Take("ns/q", b, now.Add(250*time.Millisecond), 1); !errors.As(err, &ae) || ae.RetryAfter != 250*time.Millisecond {
		t.Fatalf("take after a quarter second: %v", err)
	}
	if b, err = a.Take("ns/q", b, now.Add(time.Second), 2); err != nil || b.Tokens != 0 {
		t.Fatalf("refilled after a second: %v %+v", err, b)
	}
	if b2, _ := a.Take("ns/q", b, now.Add(time.Hour), 0); b2.Tokens != 2 {
		t.Fatalf("the bucket refills past its burst: %+v", b2)
	}
	if _, err := a.Take("ns/q", a.Full(now), now, 3); !errors.As(err, &ae) || ae.RetryAfter != 0 {
		t.Fatalf("a batch larger than the burst must say it never passes: %v", err)
	}
}

// A rate so small that the wait overflows a time.Duration must still say a positive
// wait (at most DelayMax), for the queue's submit bucket and a concurrency key's: an
// overflowed negative wait made a waiting claim spin every millisecond and a refused
// submit answer a negative retry_after.
func TestRateLimitTinyRateWaitIsBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	a := Admission{RateLimit: 1e-300, Burst: 1}
	b, err := a.Take("ns/q", a.Full(now), now, 1)
	if err != nil {
		t.Fatalf("take the burst: %v", err)
	}
	var ae *AdmissionError
	if _, err := a.Take("ns/q", b, now, 1); !errors.As(err, &ae) || ae.RetryAfter != DelayMax {
		t.Fatalf("an empty bucket at 1e-300/s: %v (retry after %v), want retry after %v", err, ae.RetryAfter, DelayMax)
	}
	keyed := Admission{KeyRateLimits: map[string]float64{"tiny": 1e-300}}
	bucket, store, wait := keyed.KeyStart("tiny", -1, time.Time{}, now)
	if wait != 0 || !store {
		t.Fatalf("the first start of a fresh key waits %v (store %v)", wait, store)
	}
	if _, _, wait = keyed.KeyStart("tiny", bucket.Tokens, bucket.At, now); wait != DelayMax {
		t.Fatalf("the next start of a key at 1e-300/s waits %v, want %v", wait, DelayMax)
	}
	if w := keyed.KeyRateWait("tiny", bucket.Tokens, bucket.At, time.Time{}, now); w != DelayMax {
		t.Fatalf("KeyRateWait of a key at 1e-300/s is %v, want %v", w, DelayMax)
	}
	if _, store, wait := keyed.KeyStart("other", 3, now, now); store || wait != 0 {
		t.Fatalf("a start of a key without a rate limit: store %v, wait %v; want nothing to store, no wait", store, wait)
	}
}
