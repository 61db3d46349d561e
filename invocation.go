package lakeshore

import (
	"fmt"
	"reflect"

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
	if err := checkInto(into); err != nil {
		return err
	}
	if err := wire.Unmarshal(inv.Payload, into); err != nil {
		return fmt.Errorf("decode payload of %s into %T: %w", inv.ID, into, err)
	}
	return nil
}

// DecodeResult decodes the result of a succeeded invocation into into, a pointer.
// Errors: the invocation's Err when it ended without success; an *InvalidError (Is
// ErrInvalid) naming the state while it is still live (queued or running: there is no
// result yet; wait for it with Queue.Result), or when into is not a non-nil pointer.
func (inv *Invocation) DecodeResult(into any) error {
	if err := checkInto(into); err != nil {
		return err
	}
	if !inv.State.Terminal() {
		return &InvalidError{Field: "invocation", Value: inv.ID,
			Rule: fmt.Sprintf("it is %s and has no result until it succeeds; wait for it with Queue.Result", inv.State)}
	}
	if err := inv.Err(); err != nil {
		return err
	}
	if err := wire.Unmarshal(inv.Result, into); err != nil {
		return fmt.Errorf("decode result of %s into %T: %w", inv.ID, into, err)
	}
	return nil
}

// checkInto refuses a decoding target that is not a non-nil pointer, before any work.
// Errors: an *InvalidError (Is ErrInvalid) that also matches wire.ErrUnsupported, as the
// codec's own refusal does.
func checkInto(into any) error {
	if rv := reflect.ValueOf(into); rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &intoError{InvalidError{Field: "into", Value: fmt.Sprintf("%T", into), Rule: "into must be a non-nil pointer, e.g. &v"}}
	}
	return nil
}

// intoError is the *InvalidError of a bad decoding target; it matches wire.ErrUnsupported too.
type intoError struct{ InvalidError }

func (e *intoError) Is(target error) bool {
	return target == wire.ErrUnsupported || e.InvalidError.Is(target)
}

func (e *intoError) As(target any) bool {
	if p, ok := target.(**InvalidError); ok {
		*p = &e.InvalidError
		return true
	}
	return false
}
