package plane

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestErrorsNameWireFields: validation errors name fields as the HTTP API spells them.
func TestErrorsNameWireFields(t *testing.T) {
	one := func(s SubmitParams) error {
		return (&SubmitManyParams{Namespace: "n", Queue: "q", Invocations: []SubmitParams{s}}).Validate()
	}
	for _, c := range []struct {
		err   error
		field string
	}{
		{one(SubmitParams{Key: "a\x00b"}), "key"},
		{one(SubmitParams{MaxAttempts: -1}), "max_attempts"},
		{one(SubmitParams{AttemptTimeout: -1}), "attempt_timeout"},
		{(&SubmitManyParams{Namespace: "n", Queue: "q", Invocations: []SubmitParams{{}, {Priority: nan()}}}).Validate(), "invocations[1].priority"},
		{(&ClaimParams{Namespace: "n", Queue: "q", Kind: "sideways"}).Validate(), "kind"},
		{(&ClaimParams{Namespace: "n", Queue: "q", Kind: KindFIFO, LeaseTTL: 8 * 24 * time.Hour}).Validate(), "lease_ttl"},
		{(&ClaimParams{Namespace: "n", Queue: "q", Kind: KindFIFO, Max: -1}).Validate(), "max"},
		{(&ListParams{Namespace: "n", Queue: "q", KeyPrefix: "\x00"}).Validate(), "key_prefix"},
		{(&WorkerInfo{ID: "w", PID: -1}).Validate(), "pid"},
		{Admission{OnFull: "drop"}.Validate(), "on_full"},
	} {
		var ie *InvalidError
		if !errors.As(c.err, &ie) {
			t.Errorf("want an *InvalidError on %s, got %v", c.field, c.err)
			continue
		}
		if ie.Field != c.field {
			t.Errorf("field %q, want %q (%v)", ie.Field, c.field, c.err)
		}
	}
}

func nan() float64 { var z float64; return z / z }

// TestPathIDs: a worker or token id is a segment of an HTTP path (DELETE …/workers/{id},
// DELETE /v1/tokens/{id}), so an id with an empty, "." or ".." part between slashes, which
// path cleaning would change, is refused: stored, it could never be named over HTTP again.
func TestPathIDs(t *testing.T) {
	t.Parallel()
	hash := make([]byte, 32)
	token := func(id string) *TokenInfo {
		return &TokenInfo{ID: id, Hash: hash, Namespace: "*", Queue: "*", Permissions: []Permission{PermissionRead}}
	}
	for _, id := range []string{"..", ".", "x/../victim", "a//b", "/a", "a/", "a/./b"} {
		if err := (&WorkerInfo{ID: id}).Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("worker id %q: %v, want invalid", id, err)
		}
		err := token(id).Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `no empty, "." or ".." part between slashes`) {
			t.Errorf("token id %q: %v, want invalid saying why", id, err)
		}
	}
	for _, id := range []string{"host:42", "a/b", "..a", "a..", "x/.y", "%2e%2e", "01ARZ3NDEKTSV4RRFFQ69G5FAV"} {
		if err := (&WorkerInfo{ID: id}).Validate(); err != nil {
			t.Errorf("worker id %q: %v", id, err)
		}
		if err := token(id).Validate(); err != nil {
			t.Errorf("token id %q: %v", id, err)
		}
	}
}
