package plane

import (
	"fmt"
	"strings"
	"time"
)

// State is the lifecycle state of an invocation:
//
//	submit → queued → (claim) → running → succeeded | failed | timeout | killed
//	queued → cancelled (cancel)     queued → timeout (deadline passed before claim)
//	running → queued (nack with retry, or lease expired, while attempts remain)
type State string

// The states. Queued and running are live; the rest are terminal and never change again.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
	StateKilled    State = "killed"
	StateTimeout   State = "timeout"
)

// States lists every state, live ones first: a new slice each call.
func States() []State {
	return []State{StateQueued, StateRunning, StateSucceeded, StateFailed, StateCancelled, StateKilled, StateTimeout}
}

// Terminal reports whether s is a final state.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateCancelled, StateKilled, StateTimeout:
		return true
	}
	return false
}

// ParseState returns the State named s, or an *InvalidError listing the states.
func ParseState(s string) (State, error) {
	for _, st := range States() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", Invalid("state", s, "use "+stateList())
}

func stateList() string {
	states := States()
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, "|")
}

// Kind is the claim order a claiming handle asks for. It is not stored on the queue.
type Kind string

// The claim orders.
const (
	// KindFIFO claims the oldest submit first (by id).
	KindFIFO Kind = "fifo"
	// KindFILO claims the newest submit first.
	KindFILO Kind = "filo"
	// KindPriority claims the highest priority first, ties oldest first.
	KindPriority Kind = "priority"
	// KindBoltzmann draws a priority level with probability ∝ count(level)·exp(p/T), then
	// the oldest job of that level.
	KindBoltzmann Kind = "boltzmann"
)

// ParseKind returns the Kind named s ("" means fifo), or an *InvalidError naming the kinds.
func ParseKind(s string) (Kind, error) {
	switch Kind(s) {
	case "":
		return KindFIFO, nil
	case KindFIFO, KindFILO, KindPriority, KindBoltzmann:
		return Kind(s), nil
	}
	return "", &InvalidError{Field: "kind", Value: s, Rule: "use fifo|priority|filo|boltzmann",
		Message: fmt.Sprintf("unknown queue kind %q; use fifo|priority|filo|boltzmann", s)}
}

// FrameKind is the kind of a journal frame.
type FrameKind string

// The frame kinds.
const (
	// FrameValue is a value posted by a worker or a topic publisher.
	FrameValue FrameKind = "VALUE"
	// FrameEnd closes a journal; on an invocation its value is the result.
	FrameEnd FrameKind = "END"
	// FrameError closes an invocation's journal with its ErrorInfo (msgpack-encoded).
	FrameError FrameKind = "ERROR"
)

// Frame is one entry of a journal. Seq is 0-based and dense per journal.
type Frame struct {
	Seq     int64
	Kind    FrameKind
	Value   []byte // wire-encoded value; for ERROR an encoded ErrorInfo
	Attempt int    // the invocation attempt that posted it (0 on topics)
	Time    time.Time
}

// Journal names a frame journal: an invocation's (InvocationID set) or a topic's
// (Namespace, Queue and Topic set).
type Journal struct {
	InvocationID string
	Namespace    string
	Queue        string
	Topic        string
}

// Invocation is one job as stored: its identity, state and outcome.
type Invocation struct {
	ID string // the invocation id, a ULID
	// Namespace and Queue name the queue it was submitted to.
	Namespace string
	Queue     string
	Key       string // idempotency key; "" when none
	// ConcurrencyKey is the key of the queue's concurrency limits and fair share; "" when
	// none.
	ConcurrencyKey string
	// Requirement is what the invocation needs from its worker (plane/placement.go); nil
	// for the default shape.
	Requirement *Requirement
	// Shape is Requirement's shape key ("" for the default shape): invocations of one shape
	// wait for a claim whose offers satisfy it.
	Shape    string
	State    State             // queued, running, or how it ended
	Priority float64           // as submitted; orders priority and boltzmann claims
	Payload  []byte            // wire-encoded
	Metadata map[string]string // the envelope's free-form headers
	// Attempt counts the claims so far, starting at 1 on the first claim (0 while never
	// claimed); a claim handed back by a "slow down" answer (OutcomeRateLimited) is not
	// counted. MaxAttempts bounds it (1 to MaxAttemptsMax).
	Attempt     int
	MaxAttempts int
	// AttemptTimeout bounds one running attempt; 0 means none.
	AttemptTimeout time.Duration
	// Deadline ends a still-queued invocation as timeout; zero means none.
	Deadline time.Time
	// AvailableAt is when a queued invocation becomes claimable (retry backoff).
	AvailableAt time.Time
	// LeaseExpiresAt is when the current lease ends (running only).
	LeaseExpiresAt time.Time
	Worker         string     // who holds the lease (running) or last held it
	Result         []byte     // wire-encoded result (succeeded only)
	Error          *ErrorInfo // the error it ended with; while queued for a retry, its last attempt's
	CreatedAt      time.Time  // when it was submitted, by the plane's clock
	StartedAt      time.Time  // start of the latest attempt
	FinishedAt     time.Time  // when it became terminal
}

// TerminalError returns the error a waiter gets for a terminal, unsuccessful invocation, or
// nil when inv succeeded or is still live.
func (inv *Invocation) TerminalError() error {
	if !inv.State.Terminal() || inv.State == StateSucceeded {
		return nil
	}
	e := &TerminalError{ID: inv.ID, State: inv.State}
	if inv.Error != nil {
		e.Info = *inv.Error
	}
	return e
}

// Job is a claimed invocation as the worker sees it, with the fencing token that every
// settle, post and heartbeat must name.
type Job struct {
	ID        string
	Namespace string
	Queue     string
	Key       string
	// ConcurrencyKey is the invocation's concurrency key ("" when none).
	ConcurrencyKey string
	Payload        []byte
	Metadata       map[string]string
	Priority       float64
	Attempt        int
	MaxAttempts    int
	AttemptTimeout time.Duration
	Deadline       time.Time
	// Token is the lease's fencing token, fresh and random for every claim.
	Token          string
	LeaseExpiresAt time.Time
}

// QueueStats is the number of invocations of one queue in each state.
type QueueStats struct {
	Namespace string
	Queue     string
	Counts    map[State]int64
	// Admission is the queue's admission block, nil when it has none.
	Admission *Admission
	// Paused is true while the queue is paused (Driver.QueuePause): it accepts submits,
	// and no claim takes its invocations.
	Paused bool
	// Keys are the queue's concurrency keys with jobs claimable or running now, or held
	// back by a worker's "slow down" hold (OutcomeRateLimited; its RateWait says how
	// long, also for a key whose only job waits out the hold, or that has no job), the
	// most running first, then by key; at most KeyStatsMax of them (nil: none), those with
	// jobs claimable kept before those that only run some, so a key holding back a due job
	// is listed whenever any is (a worker's ExitWhenIdle reads their Queued).
	Keys []KeyStats
}
