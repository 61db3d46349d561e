package sqliteplane

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

type head = planekit.Head

// head reads the transition fields of invocation id; ok is false when there is none.
func (t *wtx) head(id string) (*head, bool, error) {
	h, err := planekit.ScanHead(t.w.st.rowByID.QueryRowContext(t.ctx, id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read invocation %s: %w", id, err)
	}
	return h, true, nil
}

// holds applies plane.Holds, the fencing check, to h: the first result is ErrLeaseLost when
// token does not hold the lease (an expired lease or an overdue attempt is ended on the spot),
// the second a SQL failure.
func (t *wtx) holds(h *head, token string) (error, error) {
	return h.Fence(token, time.UnixMilli(t.ms), func(e planekit.Expiry) error {
		_, err := t.expire(h, e)
		return err
	})
}

// expire ends h as e decides (plane's policy; the writer's random source draws its
// backoff), and reports whether it did: nothing is done when h no longer qualifies.
func (t *wtx) expire(h *head, e planekit.Expiry) (bool, error) {
	tr, ok := e(h, t.w.d.cfg.Backoff, t.w.rand.Float64)
	if !ok {
		return false, nil
	}
	return true, t.apply(h, tr, nil)
}

// apply writes the transition tr (decided by plane's policy) to h: a retry re-queues it, any
// other state finishes it, with result when it succeeded.
func (t *wtx) apply(h *head, tr plane.Transition, result []byte) error {
	if !tr.Retry() {
		return t.finish(h, planekit.StateNumber(tr.State), result, tr.Error)
	}
	if err := t.requeue(h, tr.Error, tr.Delay, tr.Refund); err != nil {
		return err
	}
	if tr.HoldKey != "" { // no claim takes from the key until the delay has passed
		if _, err := t.w.st.keyHold.ExecContext(t.ctx, h.Namespace, h.Queue, tr.HoldKey, t.ms+tr.Delay.Milliseconds()); err != nil {
			return fmt.Errorf("hold concurrency key: %w", err)
		}
	}
	return nil
}

// finish moves h to a terminal state. result is the success value; info the error.
func (t *wtx) finish(h *head, state int, result []byte, info *plane.ErrorInfo) error {
	var errBlob []byte
	if info != nil {
		info.Attempt = h.Attempt
		errBlob = info.Encode()
	}
	if _, err := t.w.st.setTerminal.ExecContext(t.ctx, state, result, errBlob, t.ms, h.Seq); err != nil {
		return fmt.Errorf("finish invocation %s: %w", h.ID, err)
	}
	t.finished(h.ID, h.Namespace, h.Queue, h.Priority, h.State, state)
	h.State = state
	return nil
}

// finished records that invocation id moved from state from to the terminal state to: the
// counts, and the waiters of its result and journal.
func (t *wtx) finished(id, namespace, queue string, priority float64, from, to int) {
	t.count(namespace, queue, from, priority, -1)
	t.count(namespace, queue, to, priority, +1)
	t.wake(planekit.InvocationKey(id))
	t.wake(planekit.JournalKey(id))
}

// requeue puts h's ended attempt back in the queue, claimable after delay, recording info
// as the error of the attempt that ended; refund takes that attempt off its count.
func (t *wtx) requeue(h *head, info *plane.ErrorInfo, delay time.Duration, refund bool) error {
	due := t.ms + delay.Milliseconds()
	state := planekit.StateQueued
	if due > t.ms {
		state = planekit.StateDelayed // out of the claim indexes until the writer promotes it
	}
	refunded := 0
	if refund {
		refunded = 1
		h.Attempt--
	}
	if _, err := t.w.st.setQueued.ExecContext(t.ctx, state, due, info.Encode(), refunded, h.Seq); err != nil {
		return fmt.Errorf("requeue invocation %s: %w", h.ID, err)
	}
	t.count(h.Namespace, h.Queue, h.State, h.Priority, -1)
	t.count(h.Namespace, h.Queue, state, h.Priority, +1)
	h.State = state
	if state == planekit.StateDelayed {
		t.delayed(due)
	} else {
		t.markClaimable(h.Namespace, h.Queue)
	}
	return nil
}

// delayed notes that the transaction stored a delayed invocation due at dueMS, so the
// writer's alarm goes off for it.
func (t *wtx) delayed(dueMS int64) {
	if w := t.w; w.nextDue != dueUnknown && dueMS < w.nextDue {
		w.nextDue = dueMS
	}
}

// promoteDue makes up to limit delayed invocations whose time has come claimable, earliest
// first, and marks their queues so parked claimers get them in this transaction. When the
// writer knows that nothing is due it costs nothing; otherwise one index probe. It returns
// how many it promoted.
func (t *wtx) promoteDue(limit int) (int, error) {
	w := t.w
	if w.nextDue == dueUnknown {
		if err := t.readNextDue(); err != nil {
			return 0, err
		}
	}
	if w.nextDue > t.ms {
		return 0, nil
	}
	rs, err := w.st.promote.QueryContext(t.ctx, t.ms, limit)
	if err != nil {
		return 0, fmt.Errorf("promote delayed invocations: %w", err)
	}
	n := 0
	for rs.Next() {
		var ns, q string
		var priority float64
		if err := rs.Scan(&ns, &q, &priority); err != nil {
			rs.Close()
			return n, fmt.Errorf("promote delayed invocations: %w", err)
		}
		t.count(ns, q, planekit.StateDelayed, priority, -1)
		t.count(ns, q, planekit.StateQueued, priority, +1)
		t.markClaimable(ns, q)
		n++
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return n, fmt.Errorf("promote delayed invocations: %w", err)
	}
	return n, t.readNextDue()
}

// readNextDue reads the earliest due time of the delayed invocations into the writer.
func (t *wtx) readNextDue() error {
	var next sql.NullInt64
	if err := t.w.st.earliestDue.QueryRowContext(t.ctx).Scan(&next); err != nil {
		return fmt.Errorf("read the earliest due time: %w", err)
	}
	t.w.nextDue = dueNone
	if next.Valid {
		t.w.nextDue = max(next.Int64, 1) // 0 would read as unknown
	}
	return nil
}
