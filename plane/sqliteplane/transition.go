package sqliteplane

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// head is the part of an invocation row that state transitions need.
type head struct {
	seq                  int64
	id                   string
	namespace, queue     string
	state                int
	priority             float64
	attempt, maxAttempts int
	token                sql.NullString
	leaseExpiresMS       int64
	attemptDeadlineMS    int64
	nextFrame            int64
}

// head reads the transition fields of invocation id; ok is false when there is none.
func (t *wtx) head(id string) (*head, bool, error) {
	h := &head{id: id}
	err := t.w.st.rowByID.QueryRowContext(t.ctx, id).Scan(&h.seq, &h.namespace, &h.queue, &h.state,
		&h.priority, &h.attempt, &h.maxAttempts, &h.token, &h.leaseExpiresMS, &h.attemptDeadlineMS, &h.nextFrame)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read invocation %s: %w", id, err)
	}
	return h, true, nil
}

// holds checks that token is the current, unexpired lease of h and that the attempt is within
// its attempt timeout. An expired lease or an overdue attempt is ended on the spot (as
// maintenance would), so the answer never depends on when maintenance last ran: an attempt
// that outlived its timeout ends as an attempt timeout however its worker settles it.
func (t *wtx) holds(h *head, token string) (error, error) {
	if h.state != stateRunning || !h.token.Valid || h.token.String != token {
		return plane.ErrLeaseLost, nil
	}
	if h.leaseExpiresMS <= t.ms {
		return plane.ErrLeaseLost, t.expireLease(h)
	}
	if h.attemptDeadlineMS > 0 && h.attemptDeadlineMS <= t.ms {
		return plane.ErrLeaseLost, t.attemptOverdue(h)
	}
	return nil, nil
}

// attemptOverdue ends the attempt of h that outlived its attempt timeout: retried after a
// backoff while attempts remain, else timeout.
func (t *wtx) attemptOverdue(h *head) error {
	return t.apply(h, plane.AttemptOverdueTransition(h.attempt, h.maxAttempts, t.w.d.cfg.Backoff, t.w.rand.Float64), nil)
}

// expireLease ends the attempt of h whose lease ran out: re-queued at once while attempts
// remain, else timeout with the error "lease expired".
func (t *wtx) expireLease(h *head) error {
	return t.apply(h, plane.LeaseExpiredTransition(h.attempt, h.maxAttempts), nil)
}

// apply writes the transition tr (decided by plane's policy) to h: a retry re-queues it, any
// other state finishes it, with result when it succeeded.
func (t *wtx) apply(h *head, tr plane.Transition, result []byte) error {
	if !tr.Retry() {
		return t.finish(h, stateNumber(tr.State), result, tr.Error)
	}
	return t.requeue(h, tr.Error, tr.Delay)
}

// finish moves h to a terminal state. result is the success value; info the error.
func (t *wtx) finish(h *head, state int, result []byte, info *plane.ErrorInfo) error {
	var errBlob []byte
	if info != nil {
		info.Attempt = h.attempt
		errBlob = info.Encode()
	}
	if _, err := t.w.st.setTerminal.ExecContext(t.ctx, state, result, errBlob, t.ms, h.seq); err != nil {
		return fmt.Errorf("finish invocation %s: %w", h.id, err)
	}
	t.finished(h.id, h.namespace, h.queue, h.priority, h.state, state)
	h.state = state
	return nil
}

// finished records that invocation id moved from state from to the terminal state to: the
// counts, and the waiters of its result and journal.
func (t *wtx) finished(id, namespace, queue string, priority float64, from, to int) {
	t.count(namespace, queue, from, priority, -1)
	t.count(namespace, queue, to, priority, +1)
	t.wake(invocationKey(id))
	t.wake(journalKey(id))
}

// requeue puts h's ended attempt back in the queue, claimable after delay, recording info
// as the error of the attempt that ended.
func (t *wtx) requeue(h *head, info *plane.ErrorInfo, delay time.Duration) error {
	if _, err := t.w.st.setQueued.ExecContext(t.ctx, t.ms+delay.Milliseconds(), info.Encode(), h.seq); err != nil {
		return fmt.Errorf("requeue invocation %s: %w", h.id, err)
	}
	t.count(h.namespace, h.queue, h.state, h.priority, -1)
	t.count(h.namespace, h.queue, stateQueued, h.priority, +1)
	h.state = stateQueued
	if delay > 0 {
		// Parked claimers learn of a job in backoff through the hub and set a timer for it.
		t.wake(queueKey(h.namespace, h.queue))
	} else {
		t.markClaimable(h.namespace, h.queue)
	}
	return nil
}
