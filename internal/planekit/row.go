package planekit

import (
	"database/sql"
	"encoding/json"
	"slices"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Stored state numbers, the same in every plane's invocations table. Terminal states are
// ≥ StateSucceeded (the retention indexes rely on it). StateDelayed is sqliteplane's
// internal state of a queued invocation not yet claimable (a delayed submit, a retry in
// backoff), kept out of the claim indexes until the writer promotes it; every read reports
// it as queued. StateKeyed is the internal state of a claimable invocation with a
// concurrency key, in every plane: the plane's triggers move such a row from StateQueued
// to StateKeyed as it becomes claimable (migrations 009 and 0007), so it stays out of the
// claim indexes of unkeyed jobs and a claim reaches it through its key's counter row
// (plane/concurrency.go); every read reports it as queued, and the counts table keeps it
// under StateQueued.
//
// StateShaped is the internal state of a claimable invocation with a requirement
// (plane/placement.go), in every plane: the triggers of SQLite migration 010 and
// PostgreSQL 0008 move such a row from StateQueued to StateShaped as it becomes claimable,
// so it stays out of the claim indexes of the default shape and a claim reaches it through
// its shape (a claim whose offers satisfy it); every read reports it as queued, and the
// counts table keeps it under StateQueued.
const (
	StateShaped    = -3
	StateKeyed     = -2
	StateDelayed   = -1
	StateQueued    = 0
	StateRunning   = 1
	StateSucceeded = 2
	StateFailed    = 3
	StateCancelled = 4
	StateKilled    = 5
	StateTimeout   = 6
)

var stateNames = [...]plane.State{plane.StateQueued, plane.StateRunning, plane.StateSucceeded,
	plane.StateFailed, plane.StateCancelled, plane.StateKilled, plane.StateTimeout}

// StateName is the public state of a stored state number.
func StateName(n int) plane.State {
	if n == StateDelayed || n == StateKeyed || n == StateShaped {
		return plane.StateQueued
	}
	return stateNames[n]
}

// Queued reports whether a stored state is public "queued": claimable or delayed.
func Queued(state int) bool {
	return state == StateQueued || state == StateDelayed || state == StateKeyed || state == StateShaped
}

// CountState is the state a change of n invocations is counted under in the counts table:
// StateKeyed and StateShaped count as StateQueued (the triggers that move rows between
// them do not touch counts).
func CountState(state int) int {
	if state == StateKeyed || state == StateShaped {
		return StateQueued
	}
	return state
}

// StateNumber is the stored number of a public state (-1 for an unknown one).
func StateNumber(s plane.State) int {
	for i, n := range stateNames {
		if n == s {
			return i
		}
	}
	return -1
}

// Scanner is a row of a query result (database/sql's and pgx's rows alike).
type Scanner interface{ Scan(dest ...any) error }

// Around is a Scanner that reads Before's columns, then those its Scan is given, then
// After's: a row (ScanRow) read beside other columns of the same statement.
type Around struct {
	Scanner
	Before, After []any
}

// Scan scans Before, dest and After, in that order.
func (a Around) Scan(dest ...any) error {
	return a.Scanner.Scan(slices.Concat(a.Before, dest, a.After)...)
}

// RowColumns are the columns ScanRow reads, in order, after the row's sequence number when
// the plane stores one.
const RowColumns = `id, namespace, queue, key, state, priority, payload, metadata, attempt,
	max_attempts, attempt_timeout_ms, deadline_ms, available_ms, lease_token, lease_expires_ms,
	worker, result, error, created_ms, started_ms, finished_ms, next_frame, journal_closed, concurrency_key, requirement`

// Row is one invocations row as stored.
type Row struct {
	Seq                                         int64 // sqliteplane's rowid; 0 in pgplane
	ID, Namespace, Queue                        string
	Key                                         sql.NullString
	State                                       int
	Priority                                    float64
	Payload, Metadata                           []byte
	Attempt, MaxAttempts                        int
	AttemptTimeoutMS, DeadlineMS, AvailableMS   int64
	Token                                       sql.NullString
	LeaseExpiresMS                              int64
	Worker                                      sql.NullString
	Result, ErrorInfo                           []byte
	CreatedMS, StartedMS, FinishedMS, NextFrame int64
	// JournalClosedBy is the attempt whose final post ended the journal, 0 when none did
	// (the journal_closed column; JournalClosed is the rule that reads it).
	JournalClosedBy int
	// ConcurrencyKey is the concurrency_key column (plane/concurrency.go).
	ConcurrencyKey sql.NullString
	// Requirement is the requirement column: plane.EncodeRequirement's JSON, nil for the
	// default shape (plane/placement.go).
	Requirement []byte
}

// ScanRow reads a row of RowColumns, preceded by the sequence number when seq is true.
func ScanRow(s Scanner, seq bool) (*Row, error) {
	r := &Row{}
	dest := []any{&r.ID, &r.Namespace, &r.Queue, &r.Key, &r.State, &r.Priority, &r.Payload,
		&r.Metadata, &r.Attempt, &r.MaxAttempts, &r.AttemptTimeoutMS, &r.DeadlineMS, &r.AvailableMS,
		&r.Token, &r.LeaseExpiresMS, &r.Worker, &r.Result, &r.ErrorInfo, &r.CreatedMS, &r.StartedMS,
		&r.FinishedMS, &r.NextFrame, &r.JournalClosedBy, &r.ConcurrencyKey, &r.Requirement}
	if seq {
		dest = append([]any{&r.Seq}, dest...)
	}
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	return r, nil
}

// Terminal reports whether the invocation has finished.
func (r *Row) Terminal() bool { return r.State >= StateSucceeded }

// Invocation is the public view of the row.
func (r *Row) Invocation() *plane.Invocation {
	inv := &plane.Invocation{
		ID:             r.ID,
		Namespace:      r.Namespace,
		Queue:          r.Queue,
		Key:            r.Key.String,
		ConcurrencyKey: r.ConcurrencyKey.String,
		State:          StateName(r.State),
		Priority:       r.Priority,
		Payload:        r.Payload,
		Metadata:       DecodeMetadata(r.Metadata),
		Attempt:        r.Attempt,
		MaxAttempts:    r.MaxAttempts,
		AttemptTimeout: time.Duration(r.AttemptTimeoutMS) * time.Millisecond,
		Deadline:       FromMS(r.DeadlineMS),
		AvailableAt:    FromMS(r.AvailableMS),
		LeaseExpiresAt: FromMS(r.LeaseExpiresMS),
		Worker:         r.Worker.String,
		CreatedAt:      FromMS(r.CreatedMS),
		StartedAt:      FromMS(r.StartedMS),
		FinishedAt:     FromMS(r.FinishedMS),
	}
	if r.State == StateSucceeded {
		inv.Result = r.Result
	}
	if req, err := plane.DecodeRequirement(r.Requirement); err == nil && req != nil {
		inv.Requirement, inv.Shape = req, req.Shape()
	}
	if len(r.ErrorInfo) > 0 {
		if info, err := plane.DecodeErrorInfo(r.ErrorInfo); err == nil {
			inv.Error = &info
		}
	}
	return inv
}

// JournalClosed reports whether the invocation's journal is closed (JournalClosed).
func (r *Row) JournalClosed() bool { return JournalClosed(r.State, r.Attempt, r.JournalClosedBy) }

// TerminalFrame derives the END or ERROR frame of a terminal invocation from its row.
func (r *Row) TerminalFrame() plane.Frame {
	f := plane.Frame{Seq: r.NextFrame, Kind: plane.FrameEnd, Value: r.Result, Attempt: r.Attempt, Time: FromMS(r.FinishedMS)}
	if r.State != StateSucceeded {
		f.Kind = plane.FrameError
		f.Value = r.ErrorInfo
		if len(f.Value) == 0 {
			f.Value = plane.ErrorInfo{Type: string(stateNames[r.State]), Message: string(stateNames[r.State]), Attempt: r.Attempt}.Encode()
		}
	}
	return f
}

// FromMS is the time of Unix milliseconds ms; 0 is the zero time.
func FromMS(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// ToMS is the Unix milliseconds of t; the zero time is 0.
func ToMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Payload is the stored form of a submit's payload: p, or an empty payload for nil (both
// planes keep the column NOT NULL).
func Payload(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}

// Result is the stored result of the settle p: p.Result, or msgpack nil for an ack without
// one.
func Result(p *plane.SettleParams) []byte {
	if p.Outcome == plane.OutcomeSucceeded && p.Result == nil {
		return []byte{0xc0} // msgpack nil: an ack without a result
	}
	return p.Result
}

// EncodeMetadata is the stored form of invocation metadata (nil when empty).
func EncodeMetadata(m map[string]string) []byte {
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m) // a map[string]string always encodes
	return b
}

// DecodeMetadata reads stored metadata; nil when empty or unreadable.
func DecodeMetadata(b []byte) map[string]string {
	if len(b) == 0 {
		return nil
	}
	var m map[string]string
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// Hub keys: a waiter watches the key of what it waits for; the driver notifies it after
// the commit that changed it.

// InvocationKey is the hub key of an invocation's state.
func InvocationKey(id string) string { return "i:" + id }

// JournalKey is the hub key of a journal's frames.
func JournalKey(journal string) string { return "j:" + journal }

// QueueKey is the hub key of a queue's claimable jobs.
func QueueKey(namespace, queue string) string { return "q:" + namespace + "/" + queue }

// RoomKey is the hub key of room in a full queue.
func RoomKey(namespace, queue string) string { return "r:" + namespace + "/" + queue }

// Job is the job a claim hands out for the row's next attempt under token, its lease
// expiring at expiresMS.
func (r *Row) Job(token string, expiresMS int64) *plane.Job {
	return &plane.Job{
		ID:             r.ID,
		Namespace:      r.Namespace,
		Queue:          r.Queue,
		Key:            r.Key.String,
		ConcurrencyKey: r.ConcurrencyKey.String,
		Payload:        r.Payload,
		Metadata:       DecodeMetadata(r.Metadata),
		Priority:       r.Priority,
		Attempt:        r.Attempt + 1,
		MaxAttempts:    r.MaxAttempts,
		AttemptTimeout: time.Duration(r.AttemptTimeoutMS) * time.Millisecond,
		Deadline:       FromMS(r.DeadlineMS),
		Token:          token,
		LeaseExpiresAt: FromMS(expiresMS),
	}
}

// ClaimEnd ends r, through the driver's apply (its write of a transition), when plane's
// policy ends it at a claim instead of running it (its deadline has passed, or is nearer
// than the queue's cutoff: plane.ClaimTransition), and reports whether it did; the claim
// then leaves r.
func (r *Row) ClaimEnd(now time.Time, cutoff time.Duration, apply func(h *Head, tr plane.Transition, result []byte) error) (bool, error) {
	if r.DeadlineMS == 0 {
		return false, nil
	}
	end := plane.ClaimTransition(time.UnixMilli(r.DeadlineMS), now, cutoff, r.Attempt)
	if end == nil {
		return false, nil
	}
	return true, apply(r.Head(), *end, nil)
}

// ValidateQueue checks a queue's namespace and name.
func ValidateQueue(namespace, queue string) error {
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	return plane.ValidateName("queue name", queue)
}

// ByOrder picks the one of fifo, filo and priority that serves kind's claim order: the
// priority one for priority and boltzmann claims (both walk the priority index), fifo's
// for fifo. The drivers use it to pick a claim's statements.
func ByOrder[T any](kind plane.Kind, fifo, filo, priority T) T {
	switch kind {
	case plane.KindFILO:
		return filo
	case plane.KindPriority, plane.KindBoltzmann:
		return priority
	}
	return fifo
}
