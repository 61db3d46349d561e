package sqliteplane

import (
	"database/sql"
	"encoding/json"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Stored state numbers. Terminal states are ≥ stateSucceeded (the retention index relies on it).
// stateDelayed is internal: a queued invocation not yet claimable (a delayed submit, a retry
// in backoff), kept out of the claim indexes until the writer promotes it to stateQueued;
// every read reports it as queued.
const (
	stateDelayed   = -1
	stateQueued    = 0
	stateRunning   = 1
	stateSucceeded = 2
	stateFailed    = 3
	stateCancelled = 4
	stateKilled    = 5
	stateTimeout   = 6
)

var stateNames = [...]plane.State{plane.StateQueued, plane.StateRunning, plane.StateSucceeded,
	plane.StateFailed, plane.StateCancelled, plane.StateKilled, plane.StateTimeout}

// stateName is the public state of a stored state number.
func stateName(n int) plane.State {
	if n == stateDelayed {
		return plane.StateQueued
	}
	return stateNames[n]
}

// queued reports whether a stored state is public "queued": claimable or delayed.
func queued(state int) bool { return state == stateQueued || state == stateDelayed }

func stateNumber(s plane.State) int {
	for i, n := range stateNames {
		if n == s {
			return i
		}
	}
	return -1
}

// rowColumns are the columns scanRow reads, in order.
const rowColumns = `seq, id, namespace, queue, key, state, priority, payload, metadata, attempt,
	max_attempts, attempt_timeout_ms, deadline_ms, available_ms, lease_token, lease_expires_ms,
	worker, result, error, created_ms, started_ms, finished_ms, next_frame`

// row is one invocations row as stored.
type row struct {
	seq                                         int64
	id, namespace, queue                        string
	key                                         sql.NullString
	state                                       int
	priority                                    float64
	payload, metadata                           []byte
	attempt, maxAttempts                        int
	attemptTimeoutMS, deadlineMS, availableMS   int64
	token                                       sql.NullString
	leaseExpiresMS                              int64
	worker                                      sql.NullString
	result, errorInfo                           []byte
	createdMS, startedMS, finishedMS, nextFrame int64
}

type scanner interface{ Scan(dest ...any) error }

func scanRow(s scanner) (*row, error) {
	r := &row{}
	err := s.Scan(&r.seq, &r.id, &r.namespace, &r.queue, &r.key, &r.state, &r.priority, &r.payload,
		&r.metadata, &r.attempt, &r.maxAttempts, &r.attemptTimeoutMS, &r.deadlineMS, &r.availableMS,
		&r.token, &r.leaseExpiresMS, &r.worker, &r.result, &r.errorInfo, &r.createdMS, &r.startedMS,
		&r.finishedMS, &r.nextFrame)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (r *row) terminal() bool { return r.state >= stateSucceeded }

func (r *row) invocation() *plane.Invocation {
	inv := &plane.Invocation{
		ID:             r.id,
		Namespace:      r.namespace,
		Queue:          r.queue,
		Key:            r.key.String,
		State:          stateName(r.state),
		Priority:       r.priority,
		Payload:        r.payload,
		Metadata:       decodeMetadata(r.metadata),
		Attempt:        r.attempt,
		MaxAttempts:    r.maxAttempts,
		AttemptTimeout: time.Duration(r.attemptTimeoutMS) * time.Millisecond,
		Deadline:       fromMS(r.deadlineMS),
		AvailableAt:    fromMS(r.availableMS),
		LeaseExpiresAt: fromMS(r.leaseExpiresMS),
		Worker:         r.worker.String,
		Result:         r.result,
		CreatedAt:      fromMS(r.createdMS),
		StartedAt:      fromMS(r.startedMS),
		FinishedAt:     fromMS(r.finishedMS),
	}
	if r.state == stateSucceeded {
		inv.Result = r.result
	}
	if len(r.errorInfo) > 0 {
		if info, err := plane.DecodeErrorInfo(r.errorInfo); err == nil {
			inv.Error = &info
		}
	}
	return inv
}

// terminalFrame derives the END or ERROR frame of a terminal invocation from its row.
func (r *row) terminalFrame() plane.Frame {
	f := plane.Frame{Seq: r.nextFrame, Kind: plane.FrameEnd, Value: r.result, Attempt: r.attempt, Time: fromMS(r.finishedMS)}
	if r.state != stateSucceeded {
		f.Kind = plane.FrameError
		f.Value = r.errorInfo
		if len(f.Value) == 0 {
			f.Value = plane.ErrorInfo{Type: string(stateNames[r.state]), Message: string(stateNames[r.state]), Attempt: r.attempt}.Encode()
		}
	}
	return f
}

func fromMS(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func toMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func encodeMetadata(m map[string]string) []byte {
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m) // a map[string]string always encodes
	return b
}

func decodeMetadata(b []byte) map[string]string {
	if len(b) == 0 {
		return nil
	}
	var m map[string]string
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}
