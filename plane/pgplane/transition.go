package pgplane

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// head is the part of an invocation row that state transitions need.
type head struct {
	id                   string
	namespace, queue     string
	state                int
	priority             float64
	attempt, maxAttempts int
	token                *string
	leaseExpiresMS       int64
	attemptDeadlineMS    int64
	nextFrame            int64
	journalClosedBy      int
	keyed                bool // it has a concurrency key
}

func scanHead(s scanner) (*head, error) {
	h := &head{}
	err := s.Scan(&h.id, &h.namespace, &h.queue, &h.state, &h.priority, &h.attempt, &h.maxAttempts,
		&h.token, &h.leaseExpiresMS, &h.attemptDeadlineMS, &h.nextFrame, &h.journalClosedBy, &h.keyed)
	return h, err
}

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
		byID[h.id] = h
	}
	return byID, nil
}

// holds applies plane.Holds, the fencing check, to h: ErrLeaseLost when token does not hold
// the lease (an expired lease or an overdue attempt is ended on the spot).
func (t *tx) holds(h *head, token string) error {
	var current string
	if h.token != nil {
		current = *h.token
	}
	lost, _ := planekit.Fence(h.state, current, token, h.leaseExpiresMS, h.attemptDeadlineMS, time.UnixMilli(t.ms),
		func() error { t.expireLease(h); return nil }, func() error { t.attemptOverdue(h); return nil })
	return lost
}

// attemptOverdue ends the attempt of h that outlived its attempt timeout (plane's policy:
// retried after a backoff while attempts remain, else timeout).
func (t *tx) attemptOverdue(h *head) {
	t.apply(h, plane.AttemptOverdueTransition(h.attempt, h.maxAttempts, t.d.cfg.Backoff, t.d.float64), nil)
}

// expireLease ends the attempt of h whose lease ran out (plane's policy: re-queued at once
// while attempts remain, else timeout).
func (t *tx) expireLease(h *head) {
	t.apply(h, plane.LeaseExpiredTransition(h.attempt, h.maxAttempts), nil)
}

// apply writes what plane's policy decided for h: a retry re-queues it (waiting out the
// delay outside the claim indexes), anything else ends it with result or tr.Error.
func (t *tx) apply(h *head, tr plane.Transition, result []byte) {
	if h.keyed && h.state == planekit.StateRunning {
		t.wakeQueue(h.namespace, h.queue) // the lease ends: its key's slot frees
	}
	var errBlob []byte
	if tr.Error != nil {
		errBlob = tr.Error.Encode()
	}
	if !tr.Retry() {
		state := planekit.StateNumber(tr.State)
		t.end(h.id, int16(state), result, errBlob)
		t.finished(h.id, h.namespace, h.queue, h.priority, h.state, state)
		h.state = state
		h.token = nil
		return
	}
	available := t.ms + tr.Delay.Milliseconds()
	refunded := 0
	if tr.Refund {
		refunded = 1
		h.attempt--
	}
	t.exec(t.d.sql.setQueued, h.id, available, available > t.ms, errBlob, refunded)
	if tr.HoldKey != "" { // no claim takes from the key until the delay has passed
		t.exec(t.d.sql.keyHold, h.namespace, h.queue, tr.HoldKey, available)
	}
	t.count(h.namespace, h.queue, h.state, h.priority, -1)
	t.count(h.namespace, h.queue, planekit.StateQueued, h.priority, +1)
	h.state = planekit.StateQueued
	h.token = nil
	if available <= t.ms {
		t.wakeQueue(h.namespace, h.queue)
		t.d.floors.lower(planekit.QueueKey(h.namespace, h.queue), h.id)
	} else {
		t.wake(planekit.QueueKey(h.namespace, h.queue)) // idle claimers shorten their wait
	}
}

// finish ends h in a terminal state with info (cancel and kill, which policy does not
// decide), its attempt filled in.
func (t *tx) finish(h *head, state int, info plane.ErrorInfo) {
	info.Attempt = h.attempt
	t.apply(h, plane.Transition{State: planekit.StateName(state), Error: &info}, nil)
}

// finished records that invocation id moved from state from to the terminal state to.
func (t *tx) finished(id, namespace, queue string, priority float64, from, to int) {
	t.count(namespace, queue, from, priority, -1)
	t.count(namespace, queue, to, priority, +1)
	t.wake(planekit.InvocationKey(id))
	t.wake(planekit.JournalKey(id))
}
