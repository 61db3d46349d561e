package sqliteplane

import (
	"database/sql"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

type head = planekit.Head

// head reads the transition fields of invocation id; nil when there is none.
func (t *wtx) head(id string) (*head, error) {
	return planekit.ReadHead(t.w.st.rowByID.QueryRowContext(t.ctx, id), true, id)
}

// holds applies plane.Holds, the fencing check, to h (Head.Holds): the first result is
// ErrLeaseLost when token does not hold the lease (an expired lease or an overdue attempt is
// ended on the spot), the second a SQL failure.
func (t *wtx) holds(h *head, token string) (error, error) {
	return h.Holds(token, t.ms, t.expire)
}

// expire ends h as e decides (Head.End; the writer's random source draws its backoff), and
// reports whether it did: nothing is done when h no longer qualifies.
func (t *wtx) expire(h *head, e planekit.Expiry) (bool, error) {
	return h.End(e, t.w.d.cfg.Backoff, t.w.rand.Float64, t.apply)
}

// apply writes the transition tr (decided by plane's policy) to h (planekit.Apply): a retry
// re-queues it, any other state finishes it, with result when it succeeded.
func (t *wtx) apply(h *head, tr plane.Transition, result []byte) error {
	return planekit.Apply(transitions{t}, h, tr, result, t.ms)
}

// finished records that invocation id moved from state from to the terminal state to
// (planekit.Finished).
func (t *wtx) finished(id, namespace, queue string, priority float64, from, to int) {
	planekit.Finished(transitions{t}, id, namespace, queue, priority, from, to)
}

// transitions are the writes of a transition in the writer's transaction
// (planekit.Transitions).
type transitions struct{ t *wtx }

func (w transitions) End(h *head, state int, result, errBlob []byte) error {
	if _, err := w.t.w.st.setTerminal.ExecContext(w.t.ctx, state, result, errBlob, w.t.ms, h.Seq); err != nil {
		return fmt.Errorf("finish invocation %s: %w", h.ID, err)
	}
	return nil
}

// Requeue stores h delayed (out of the claim indexes until the writer promotes it) when
// it is due later than now, else queued.
func (w transitions) Requeue(h *head, dueMS int64, errBlob []byte, refunded int) (int, error) {
	t := w.t
	state := planekit.StateQueued
	if dueMS > t.ms {
		state = planekit.StateDelayed
	}
	if _, err := t.w.st.setQueued.ExecContext(t.ctx, state, dueMS, errBlob, refunded, h.Seq); err != nil {
		return 0, fmt.Errorf("requeue invocation %s: %w", h.ID, err)
	}
	if state == planekit.StateDelayed {
		t.delayed(dueMS)
	} else {
		t.markClaimable(h.Namespace, h.Queue)
	}
	return state, nil
}

func (w transitions) HoldKey(h *head, key string, untilMS int64) error {
	if _, err := w.t.w.st.keyHold.ExecContext(w.t.ctx, h.Namespace, h.Queue, key, untilMS); err != nil {
		return fmt.Errorf("hold concurrency key: %w", err)
	}
	return nil
}

func (w transitions) Count(namespace, queue string, state int, priority float64, n int64) {
	w.t.count(namespace, queue, state, priority, n)
}

func (w transitions) Wake(key string) { w.t.wake(key) }

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
