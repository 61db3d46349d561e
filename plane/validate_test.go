package plane

import (
	"errors"
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
