package planekit

import (
	"context"
	"fmt"

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
		return admissionChanged(t, v.st, p.Namespace, p.Queue, a.KeyLimits())
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
		n, err := t.Exec(v.st.AdmissionDelete, namespace, queue)
		if err != nil {
			return fmt.Errorf("delete admission: %w", err)
		}
		deleted = n > 0
		return admissionChanged(t, v.st, namespace, queue, nil)
	})
	return deleted, err
}

// admissionChanged follows a write of a queue's admission block in t: it replaces the
// queue's concurrency limits (nil: none) and applies them to its key counters
// (SetKeyLimits), drops what the plane caches of the block (Tx.AdmissionChanged), and
// wakes the queue's blocked submits (a raised limit makes room).
func admissionChanged(t Tx, st *Statements, namespace, queue string, limits []plane.KeyLimit) error {
	if err := SetKeyLimits(t, st, namespace, queue, limits); err != nil {
		return err
	}
	t.AdmissionChanged(namespace, queue)
	t.Wake(RoomKey(namespace, queue))
	return nil
}
