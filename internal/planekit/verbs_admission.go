package planekit

import (
	"context"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// QueueAdmissionSet implements plane.Driver. Setting a block refills its token bucket and
// replaces the queue's concurrency limits (admissionChanged). The block returned is the
// row as written, completed as a read completes it (fromColumns).
func (v Verbs) QueueAdmissionSet(ctx context.Context, p *plane.AdmissionParams) (*plane.Admission, error) {
	if err := ValidateQueue(p.Namespace, p.Queue); err != nil {
		return nil, err
	}
	if err := p.Admission.Validate(); err != nil {
		return nil, err
	}
	var written *plane.Admission
	err := v.db.Write(ctx, func(t Tx) error {
		// The stored block, as a submit reads it (PostgreSQL locks its row to the commit): for
		// a conditional set, and for a burst that follows the rate (StoredBlock).
		stored, err := t.Admission(p.Namespace, p.Queue)
		if err != nil {
			return fmt.Errorf("read admission: %w", err)
		}
		if p.IfMatch != "" { // conditional: the block read in this transaction must be the caller's
			var current *plane.Admission
			if stored != nil {
				current = &stored.Admission
			}
			if plane.AdmissionTag(current) != p.IfMatch {
				return plane.ErrChanged
			}
		}
		block := StoredBlock(p.Admission, stored)
		a := block.WithDefaults()
		concurrency := EncodeConcurrency(block)
		if _, err := t.Exec(v.st.AdmissionSet, p.Namespace, p.Queue, a.MaxDepth, string(a.OnFull), a.RateLimit, block.Burst,
			a.DeadlineCutoff.Milliseconds(), t.Now().UnixMilli(), float64(a.Burst), concurrency); err != nil {
			return fmt.Errorf("set admission: %w", err)
		}
		row := plane.Admission{MaxDepth: a.MaxDepth, RateLimit: a.RateLimit, Burst: block.Burst}
		if _, err := fromColumns(&row, string(a.OnFull), a.DeadlineCutoff.Milliseconds(), concurrency); err != nil {
			return err
		}
		written = &row
		return admissionChanged(t, v.st, p.Namespace, p.Queue, a.KeyLimits(), stored, a)
	})
	if err != nil {
		return nil, err
	}
	return written, nil
}

// QueueAdmissionGet implements plane.Driver: nil when the queue has no block.
func (v Verbs) QueueAdmissionGet(ctx context.Context, namespace, queue string) (*plane.Admission, error) {
	if err := ValidateQueue(namespace, queue); err != nil {
		return nil, err
	}
	if err := v.p.CheckOpen(); err != nil {
		return nil, err
	}
	a, err := ScanAdmission(v.db.QueryRow(ctx, v.st.AdmissionGet, namespace, queue))
	if err != nil || a == nil {
		return nil, v.db.Failure(ctx, err)
	}
	return &a.Admission, nil
}

// QueueAdmissionDelete implements plane.Driver.
func (v Verbs) QueueAdmissionDelete(ctx context.Context, namespace, queue string) (bool, error) {
	if err := ValidateQueue(namespace, queue); err != nil {
		return false, err
	}
	var deleted bool
	err := v.db.Write(ctx, func(t Tx) error {
		stored, err := t.Admission(namespace, queue)
		if err != nil {
			return fmt.Errorf("read admission: %w", err)
		}
		n, err := t.Exec(v.st.AdmissionDelete, namespace, queue)
		if err != nil {
			return fmt.Errorf("delete admission: %w", err)
		}
		deleted = n > 0
		return admissionChanged(t, v.st, namespace, queue, nil, stored, plane.Admission{})
	})
	return deleted, err
}

// admissionChanged follows a write of a queue's admission block in t: it replaces the
// queue's concurrency limits (nil: none) and applies them to its key counters
// (SetKeyLimits), drops what the plane caches of the block (Tx.AdmissionChanged), and
// wakes the queue's blocked submits (a raised limit makes room). A key whose rate changed
// from the block stored before (nil: none) to after is no longer held back by its bucket
// under the old rate (EndBucketHolds).
func admissionChanged(t Tx, st *Statements, namespace, queue string, limits []plane.KeyLimit, stored *Admission, after plane.Admission) error {
	if err := SetKeyLimits(t, st, namespace, queue, limits); err != nil {
		return err
	}
	var before plane.Admission
	if stored != nil {
		before = stored.Admission
	}
	if err := EndBucketHolds(t, st, namespace, queue, before, after); err != nil {
		return err
	}
	t.AdmissionChanged(namespace, queue)
	t.Wake(RoomKey(namespace, queue))
	return nil
}

// EndBucketHolds ends, in t, the holds of queue (namespace, queue)'s concurrency keys whose
// rate changed from before to after (plane.Admission.KeyRate) and that a claim set because
// the key's token bucket was empty under before (plane.Admission.KeyBucketHold): such a hold
// lasted until the bucket refilled at the old rate, so a rate raised or removed did not
// apply until then (a key held 100 s at 0.01/s stayed held after a raise to 10/s). The
// next claim draws from the bucket under the new rate and holds the key again if it must.
// A worker's "slow down" hold that lasts longer is kept. It runs after SetKeyLimits, which
// on PostgreSQL has locked the queue's counter rows in key order.
func EndBucketHolds(t Tx, st *Statements, namespace, queue string, before, after plane.Admission) error {
	if before.KeyRateLimit == 0 && len(before.KeyRateLimits) == 0 {
		return nil // no key had a rate: no claim held one for its bucket
	}
	type held struct {
		key              string
		tokens           float64
		tokensMS, nextMS int64
	}
	rs, err := t.Query(st.KeysHeld, namespace, queue, t.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("concurrency keys: %w", err)
	}
	rows, err := Collect(rs, "concurrency keys", func(s Scanner) (held, error) {
		var h held
		err := s.Scan(&h.key, &h.tokens, &h.tokensMS, &h.nextMS)
		return h, err
	})
	if err != nil {
		return err
	}
	for _, h := range rows {
		oldRate, oldBurst := before.KeyRate(h.key)
		newRate, newBurst := after.KeyRate(h.key)
		if oldRate == newRate && oldBurst == newBurst {
			continue
		}
		if !before.KeyBucketHold(h.key, h.tokens, time.UnixMilli(h.tokensMS), time.UnixMilli(h.nextMS)) {
			continue
		}
		if _, err := t.Exec(st.KeyHoldEnd, namespace, queue, h.key, h.nextMS); err != nil {
			return fmt.Errorf("concurrency keys: %w", err)
		}
	}
	return nil
}
