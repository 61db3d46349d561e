package planekit

import (
	"fmt"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// SetKeyLimits replaces, in t, the stored concurrency limits of a queue (plane.Admission's
// KeyLimits; nil: none) and applies them to the queue's key counters at once
// (Statements.KeyLimitsDelete, KeyLimitInsert, KeyLimitsApply). A raised limit may make
// keys claimable, so the queue's claimers are served (Tx.Claimable). A write of an
// admission block runs it (admissionChanged).
func SetKeyLimits(t Tx, st *Statements, namespace, queue string, limits []plane.KeyLimit) error {
	if _, err := t.Exec(st.KeyLimitsDelete, namespace, queue); err != nil {
		return fmt.Errorf("set concurrency limits: %w", err)
	}
	for _, l := range limits {
		if _, err := t.Exec(st.KeyLimitInsert, namespace, queue, l.Key, l.Limit, l.Weight); err != nil {
			return fmt.Errorf("set concurrency limits: %w", err)
		}
	}
	if _, err := t.Exec(st.KeyLimitsApply, namespace, queue); err != nil {
		return fmt.Errorf("set concurrency limits: %w", err)
	}
	t.Claimable(namespace, queue)
	return nil
}
