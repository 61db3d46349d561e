package pgplane

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

type head = planekit.Head

func scanHead(s scanner) (*head, error) { return planekit.ScanHead(s, false) }

// head locks and reads the transition fields of invocation id; nil when there is none.
func (t *tx) head(id string) (*head, error) {
	h, err := scanHead(t.queryRow(t.d.sql.head, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read invocation %s: %w", id, err)
	}
	return h, nil
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
	byID := make(map[string]*head, len(heads))
	for _, h := range heads {
		byID[h.ID] = h
	}
	return byID, nil
}

// holds applies plane.Holds, the fencing check, to h: ErrLeaseLost when token does not hold
// the lease (an expired lease or an overdue attempt is ended on the spot). It never fails
// (writes are queued): err is always nil.
func (t *tx) holds(h *head, token string) (lost, err error) {
	return h.Fence(token, time.UnixMilli(t.ms), func(e planekit.Expiry) error { t.expire(h, e); return nil })
}

// expire ends h as e decides (plane's policy), unless h no longer qualifies, and reports
// whether it did.
func (t *tx) expire(h *head, e planekit.Expiry) bool {
	tr, ok := e(h, t.d.cfg.Backoff, t.d.float64)
	if ok {
		t.apply(h, tr, nil)
	}
	return ok
}

// apply writes what plane's policy decided for h: a retry re-queues it (waiting out the
// delay outside the claim indexes), anything else ends it with result or tr.Error.
func (t *tx) apply(h *head, tr plane.Transition, result []byte) {
	t.changesCounter(h, tr.Retry()) // an end is counted by its terminal write (setTerminalManyKeyed)
	if h.Keyed() && h.State == planekit.StateRunning {
		t.wakeQueue(h.Namespace, h.Queue) // the lease ends: its key's slot frees
	}
	var errBlob []byte
	if tr.Error != nil {
		errBlob = tr.Error.Encode()
	}
	if !tr.Retry() {
		state := planekit.StateNumber(tr.State)
		t.end(h, int16(state), result, errBlob)
		t.finished(h.ID, h.Namespace, h.Queue, h.Priority, h.State, state)
		h.State = state
		h.Token = sql.NullString{}
		return
	}
	available := t.ms + tr.Delay.Milliseconds()
	refunded := 0
	if tr.Refund {
		refunded = 1
		h.Attempt--
	}
	t.exec(t.d.sql.setQueued, h.ID, available, available > t.ms, errBlob, refunded)
	if tr.HoldKey != "" { // no claim takes from the key until the delay has passed
		// Its row locked in key order with the job's own key's (which the worker need not
		// have named): the hold writes a second key's row.
		t.unorderedCounts = true
		t.changesKey(keyRef{h.Namespace, h.Queue, tr.HoldKey})
		t.exec(t.d.sql.keyHold, h.Namespace, h.Queue, tr.HoldKey, available)
	}
	t.count(h.Namespace, h.Queue, h.State, h.Priority, -1)
	t.count(h.Namespace, h.Queue, planekit.StateQueued, h.Priority, +1)
	h.State = planekit.StateQueued
	h.Token = sql.NullString{}
	if available <= t.ms {
		t.wakeQueue(h.Namespace, h.Queue)
		t.d.floors.Lower(planekit.QueueKey(h.Namespace, h.Queue), h.ID)
	} else {
		t.wake(planekit.QueueKey(h.Namespace, h.Queue)) // idle claimers shorten their wait
	}
}

// finish ends h in a terminal state with info (cancel and kill, which policy does not
// decide), its attempt filled in.
func (t *tx) finish(h *head, state int, info plane.ErrorInfo) {
	info.Attempt = h.Attempt
	t.apply(h, plane.Transition{State: planekit.StateName(state), Error: &info}, nil)
}

// finished records that invocation id moved from state from to the terminal state to.
func (t *tx) finished(id, namespace, queue string, priority float64, from, to int) {
	t.count(namespace, queue, from, priority, -1)
	t.count(namespace, queue, to, priority, +1)
	t.wake(planekit.InvocationKey(id))
	t.wake(planekit.JournalKey(id))
}
