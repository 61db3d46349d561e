package lakeshore

import (
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// Job is a claimed invocation as its worker sees it: identity, attempt, envelope and the
// encoded payload. It carries the lease's fencing token, which Ack, Nack, Post and Heartbeat
// present on the worker's behalf: only the current holder of a running invocation may
// settle it. A Job is a value; it is not updated by Heartbeat or by other workers.
type Job struct {
	// ID is the invocation id.
	ID string
	// Namespace and Queue name the queue the job was claimed from.
	Namespace string
	Queue     string
	// Key is the idempotency key it was submitted with ("" for none).
	Key string
	// ConcurrencyKey is the concurrency key it was submitted with ("" for none).
	ConcurrencyKey string
	// Attempt is this claim's number, starting at 1; MaxAttempts bounds it.
	Attempt     int
	MaxAttempts int
	// Priority is the priority it was submitted with.
	Priority float64
	// Metadata are the envelope's free-form headers.
	Metadata map[string]string
	// AttemptTimeout bounds this attempt (0: none); Working cancels the handler's context
	// when it passes.
	AttemptTimeout time.Duration
	// Deadline is the envelope's deadline (zero: none).
	Deadline time.Time
	// LeaseExpiresAt is when the lease granted by the claim ends unless heartbeated.
	LeaseExpiresAt time.Time

	payload  []byte
	token    string
	leaseTTL time.Duration
	// heldUntil is when the lease ends as the claim's answer left it, on this process's
	// monotonic clock: its arrival plus leaseTTL (plane.LeaseHeldUntil). Written once, by
	// newJob; the execution keeps the later renewals (execution.heldUntil).
	heldUntil time.Time
}

func newJob(j *plane.Job, leaseTTL time.Duration) *Job {
	return &Job{
		ID:             j.ID,
		Namespace:      j.Namespace,
		Queue:          j.Queue,
		Key:            j.Key,
		ConcurrencyKey: j.ConcurrencyKey,
		Attempt:        j.Attempt,
		MaxAttempts:    j.MaxAttempts,
		Priority:       j.Priority,
		Metadata:       j.Metadata,
		AttemptTimeout: j.AttemptTimeout,
		Deadline:       j.Deadline,
		LeaseExpiresAt: j.LeaseExpiresAt,
		payload:        j.Payload,
		token:          j.Token,
		leaseTTL:       leaseTTL,
		heldUntil:      plane.LeaseHeldUntil(time.Now(), leaseTTL),
	}
}

// Decode decodes the payload into into, a pointer (as for wire.Unmarshal).
// Errors: the codec's (wire.ErrMalformed, or a type mismatch).
func (j *Job) Decode(into any) error {
	if err := checkInto(into); err != nil {
		return err
	}
	if err := wire.Unmarshal(j.payload, into); err != nil {
		return fmt.Errorf("decode payload of %s into %T: %w", j.ID, into, err)
	}
	return nil
}

// Payload returns the payload in its generic form, as wire.Decode returns it (nil, bool,
// int64, uint64, float32, float64, string, []byte, []any, map[string]any, time.Time or a
// wire extension type).
func (j *Job) Payload() (any, error) {
	v, err := wire.Decode(j.payload)
	if err != nil {
		return nil, fmt.Errorf("decode payload of %s: %w", j.ID, err)
	}
	return v, nil
}

// RawPayload returns the payload's wire encoding (msgpack). The caller must not modify it.
func (j *Job) RawPayload() []byte { return j.payload }
