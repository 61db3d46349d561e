package pgplane

import (
	"database/sql"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

type head = planekit.Head

func scanHead(s scanner) (*head, error) { return planekit.ScanHead(s, false) }

// head locks and reads the transition fields of invocation id; nil when there is none.
func (t *tx) head(id string) (*head, error) {
	return planekit.ReadHead(t.queryRow(t.d.sql.head, id), false, id)
}

// heads locks and reads the heads of ids (in id order, so concurrent callers lock alike).
func (t *tx) heads(sql string, args ...any) ([]*head, error) {
	rows, err := t.query(sql, args...)
	if err != nil {
		return nil, err
	}
	return planekit.Collect(rows, "read invocations", scanHead)
}

// headsByID locks and reads the heads of ids (in id order), by id.
func (t *tx) headsByID(ids []string) (map[string]*head, error) {
	heads, err := t.heads(t.d.sql.headMany, ids)
	if err != nil {
		return nil, err
	}
	return planekit.ByID(heads, func(h *head) string { return h.ID }), nil
}

// holds applies plane.Holds, the fencing check, to h (Head.Holds): ErrLeaseLost when token
// does not hold the lease (an expired lease or an overdue attempt is ended on the spot). It
// never fails (writes are queued): err is always nil.
func (t *tx) holds(h *head, token string) (lost, err error) {
	return h.Holds(token, t.ms, t.expire)
}

// expire ends h as e decides (Head.End), unless h no longer qualifies, and reports whether
// it did. The writes are queued: it never fails (err is always nil).
func (t *tx) expire(h *head, e planekit.Expiry) (bool, error) {
	return h.End(e, t.d.cfg.Backoff, t.d.rand.Float64, t.apply)
}

// apply writes what plane's policy decided for h (planekit.Apply): a retry re-queues it
// (waiting out the delay outside the claim indexes), anything else ends it with result or
// tr.Error. The writes are queued: it never fails (err is always nil).
func (t *tx) apply(h *head, tr plane.Transition, result []byte) error {
	t.changesCounter(h, tr.Retry()) // an end is counted by its terminal write (setTerminalManyKeyed)
	if h.Keyed() && h.State == planekit.StateRunning {
		t.wakeQueue(h.Namespace, h.Queue) // the lease ends: its key's slot frees
	}
	_ = planekit.Apply(transitions{t}, h, tr, result, t.ms)
	h.Token = sql.NullString{}
	return nil
}

// transitions are the queued writes of a transition (planekit.Transitions).
type transitions struct{ t *tx }

func (w transitions) End(h *head, state int, result, errBlob []byte) error {
	w.t.end(h, int16(state), result, errBlob)
	return nil
}

// Requeue stores h queued, and waiting (out of the claim indexes until a promote) when it
// is due later than now: then its queue's idle claimers shorten their wait, else they are
// woken.
func (w transitions) Requeue(h *head, availableMS int64, errBlob []byte, refunded int) (int, error) {
	t := w.t
	t.exec(t.d.sql.setQueued, h.ID, availableMS, availableMS > t.ms, errBlob, refunded)
	if availableMS <= t.ms {
		t.wakeQueue(h.Namespace, h.Queue)
		t.d.floors.Lower(planekit.QueueKey(h.Namespace, h.Queue), h.ID)
	} else {
		t.wake(planekit.QueueKey(h.Namespace, h.Queue))
	}
	return planekit.StateQueued, nil
}

// HoldKey writes the key's counter row, locked in key order with the job's own key's
// (which the worker need not have named).
func (w transitions) HoldKey(h *head, key string, untilMS int64) error {
	w.t.unorderedCounts = true
	w.t.counted.Add(planekit.KeyRef{Namespace: h.Namespace, Queue: h.Queue, Key: key})
	w.t.exec(w.t.d.sql.keyHold, h.Namespace, h.Queue, key, untilMS)
	return nil
}

func (w transitions) Count(namespace, queue string, state int, priority float64, n int64) {
	w.t.count(namespace, queue, state, priority, n)
}

func (w transitions) Wake(key string) { w.t.wake(key) }
