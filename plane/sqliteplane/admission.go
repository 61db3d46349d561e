package sqliteplane

import (
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
)

type admission = planekit.Admission

// admission returns the admission block of a queue (nil: none), from the writer's cache when
// it holds it (planekit.Cached). The caller may update the returned block's token bucket in
// place, after writing it in the same transaction.
func (t *wtx) admission(namespace, queue string) (*admission, error) {
	return planekit.Cached(t.w.admissions, [2]string{namespace, queue}, func() (*admission, error) {
		return planekit.ScanAdmission(t.w.st.admission.QueryRowContext(t.ctx, namespace, queue))
	})
}

// queued returns the queued count of a queue as this transaction sees it: the committed
// count (cached by the writer for queues with a depth limit) plus this transaction's changes.
func (t *wtx) queued(namespace, queue string) (int64, error) {
	n, err := planekit.Cached(t.w.queued, [2]string{namespace, queue}, func() (n int64, err error) {
		if err = t.w.st.queuedCount.QueryRowContext(t.ctx, namespace, queue).Scan(&n); err != nil {
			return 0, fmt.Errorf("count queued: %w", err)
		}
		return n, nil
	})
	if err != nil {
		return 0, err
	}
	return n + t.counts.Queued(namespace, queue), nil
}

// flushBuckets writes the token buckets this transaction drew from, once each.
func (t *wtx) flushBuckets() error {
	for key, a := range t.buckets {
		if _, err := t.w.st.admissionTokens.ExecContext(t.ctx, a.Tokens, a.TokensMS, key[0], key[1]); err != nil {
			return fmt.Errorf("rate limit: %w", err)
		}
	}
	clear(t.buckets)
	return nil
}

// admit applies a's limits (plane's admission policy, planekit.Admission.Admit) to n new
// invocations with the given deadlines. It returns the caller's error
// (*plane.AdmissionError, *plane.InvalidError, planekit.ErrBlocked) or a SQL failure.
// Nothing is written unless every limit passes.
func (t *wtx) admit(namespace, queue string, a *admission, n int64, deadlines []time.Time, ahead bool) (error, error) {
	bucket, refused, err := a.Admit(namespace, queue, t.now, n, deadlines, ahead,
		func() (int64, error) { return t.queued(namespace, queue) })
	if refused != nil || err != nil || bucket == nil {
		return refused, err
	}
	// The cached block is the bucket's state; the row is written once before commit.
	a.Tokens, a.TokensMS = bucket.Tokens, t.ms
	if t.buckets == nil {
		t.buckets = make(map[[2]string]*admission)
	}
	t.buckets[[2]string{namespace, queue}] = a
	return nil, nil
}
