package lakeshore

import (
	"fmt"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// State is the lifecycle state of an invocation (an alias of plane.State):
//
//	submit → queued → (claim) → running → succeeded | failed | timeout | killed
//	queued → cancelled (Cancel)     queued → timeout (deadline passed before a claim)
//	running → queued (Nack with retry, or lease expired, while attempts remain)
//
// State.Terminal reports whether a state is final.
type State = plane.State

// The states. Queued and running are live; the others are terminal and never change again.
const (
	StateQueued    = plane.StateQueued
	StateRunning   = plane.StateRunning
	StateSucceeded = plane.StateSucceeded
	StateFailed    = plane.StateFailed
	StateCancelled = plane.StateCancelled
	StateKilled    = plane.StateKilled
	StateTimeout   = plane.StateTimeout
)

// Invocation is one invocation as stored, as Queue.Get returns it: the fields of
// plane.Invocation (ID, State, Attempt, MaxAttempts, Priority, Key, Metadata, timestamps,
// Worker, the encoded Payload and Result, and Error) plus decoding helpers.
type Invocation struct {
	plane.Invocation
}

// Err returns the error a waiter gets for the invocation: nil while it is live or when it
// succeeded, else a *TerminalError matching ErrFailed, ErrCancelled or ErrTimedOut.
func (inv *Invocation) Err() error { return inv.TerminalError() }

// DecodePayload decodes the payload into into, a pointer (as for wire.Unmarshal).
func (inv *Invocation) DecodePayload(into any) error {
	if err := wire.Unmarshal(inv.Payload, into); err != nil {
		return fmt.Errorf("decode payload of %s into %T: %w", inv.ID, into, err)
	}
	return nil
}

// DecodeResult decodes the result of a succeeded invocation into into, a pointer.
// Errors: the invocation's Err when it ended without success; an error naming the state
// while it is still live (queued or running: there is no result yet).
func (inv *Invocation) DecodeResult(into any) error {
	if !inv.State.Terminal() {
		return fmt.Errorf("result of %s: invocation is %s, no result yet", inv.ID, inv.State)
	}
	if err := inv.Err(); err != nil {
		return err
	}
	if err := wire.Unmarshal(inv.Result, into); err != nil {
		return fmt.Errorf("decode result of %s into %T: %w", inv.ID, into, err)
	}
	return nil
}
