package planekit

import (
	"cmp"
	"database/sql"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// HeadColumns are the columns ScanHead reads, in order, after the row's sequence number
// when the plane stores one.
const HeadColumns = `id, namespace, queue, state, priority, attempt, max_attempts, lease_token,
	lease_expires_ms, attempt_deadline_ms, next_frame, journal_closed, concurrency_key`

// Head is the part of an invocation row that state transitions need.
type Head struct {
	Seq                  int64 // sqliteplane's rowid; 0 in pgplane
	ID                   string
	Namespace, Queue     string
	State                int
	Priority             float64
	Attempt, MaxAttempts int
	Token                sql.NullString
	LeaseExpiresMS       int64
	AttemptDeadlineMS    int64
	NextFrame            int64
	JournalClosedBy      int
	ConcurrencyKey       sql.NullString // its concurrency key (Valid: it has one)
}

// Keyed reports whether the row has a concurrency key.
func (h *Head) Keyed() bool { return h.ConcurrencyKey.Valid }

// CountedInKey reports whether the row counts in its concurrency key's counter row: it has
// a key and is claimable under it (StateKeyed) or running.
func (h *Head) CountedInKey() bool {
	return h.Keyed() && (h.State == StateKeyed || h.State == StateRunning)
}

// ScanHead reads a row of HeadColumns, preceded by the sequence number when seq is true.
func ScanHead(s Scanner, seq bool) (*Head, error) {
	h := &Head{}
	dest := []any{&h.ID, &h.Namespace, &h.Queue, &h.State, &h.Priority, &h.Attempt, &h.MaxAttempts,
		&h.Token, &h.LeaseExpiresMS, &h.AttemptDeadlineMS, &h.NextFrame, &h.JournalClosedBy, &h.ConcurrencyKey}
	if seq {
		dest = append([]any{&h.Seq}, dest...)
	}
	return h, s.Scan(dest...)
}

// Head is the head of the row, for a transition of a claim's candidate.
func (r *Row) Head() *Head {
	return &Head{Seq: r.Seq, ID: r.ID, Namespace: r.Namespace, Queue: r.Queue, State: r.State, Priority: r.Priority,
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Token: r.Token, LeaseExpiresMS: r.LeaseExpiresMS,
		NextFrame: r.NextFrame, JournalClosedBy: r.JournalClosedBy, ConcurrencyKey: r.ConcurrencyKey}
}

// Fence is Fence for h: lost is plane.ErrLeaseLost when token does not hold h's lease at now,
// and a lease found expired or an attempt found overdue is ended on the spot by the
// driver's end, with LeaseExpired or AttemptOverdue (its error is err).
func (h *Head) Fence(token string, now time.Time, end func(Expiry) error) (lost, err error) {
	return Fence(h.State, h.Token.String, token, h.LeaseExpiresMS, h.AttemptDeadlineMS, now,
		func() error { return end(LeaseExpired) }, func() error { return end(AttemptOverdue) })
}

// End ends h as e decides (plane's policy, with backoff and the driver's draw) through the
// driver's apply (its write of a transition), unless h no longer qualifies (its row changed
// since it was found), and reports whether it did.
func (h *Head) End(e Expiry, backoff plane.Backoff, draw func() float64, apply func(h *Head, tr plane.Transition, result []byte) error) (bool, error) {
	tr, ok := e(h, backoff, draw)
	if !ok {
		return false, nil
	}
	return true, apply(h, tr, nil)
}

// Holds is the fencing check of a driver's settle, heartbeat or lease-bound post of h for
// token at nowMS (Fence), with a lease found expired or an attempt found overdue ended on
// the spot by the driver's expire (End with its backoff, draw and apply).
func (h *Head) Holds(token string, nowMS int64, expire func(h *Head, e Expiry) (bool, error)) (lost, err error) {
	return h.Fence(token, time.UnixMilli(nowMS), func(e Expiry) error {
		_, err := expire(h, e)
		return err
	})
}

// Expiry is how maintenance (and a fencing check that finds it) ends an invocation: the
// transition plane's policy decides for h (with backoff and the driver's draw), ok false
// when h no longer qualifies (its row changed since it was found).
type Expiry func(h *Head, backoff plane.Backoff, draw func() float64) (tr plane.Transition, ok bool)

// LeaseExpired ends a running invocation whose lease ran out: re-queued at once while
// attempts remain, else timeout (an Expiry).
func LeaseExpired(h *Head, _ plane.Backoff, _ func() float64) (plane.Transition, bool) {
	if h.State != StateRunning {
		return plane.Transition{}, false
	}
	return plane.LeaseExpiredTransition(h.Attempt, h.MaxAttempts), true
}

// AttemptOverdue ends a running invocation that outlived its attempt timeout: retried
// after a backoff while attempts remain, else timeout (an Expiry).
func AttemptOverdue(h *Head, backoff plane.Backoff, draw func() float64) (plane.Transition, bool) {
	if h.State != StateRunning {
		return plane.Transition{}, false
	}
	return plane.AttemptOverdueTransition(h.Attempt, h.MaxAttempts, backoff, draw), true
}

// DeadlinePassed ends a queued invocation whose deadline passed (an Expiry).
func DeadlinePassed(h *Head, _ plane.Backoff, _ func() float64) (plane.Transition, bool) {
	return plane.DeadlineTransition(h.Attempt), Queued(h.State)
}

// Settle is the settle p of the invocation h (nil: none) in a driver's transaction: an id
// outside p's scope answers as unknown, holds fences it, and apply writes what plane's
// policy decides (with backoff and the driver's draw). logical is the caller's error
// (plane.ErrNotFound, plane.ErrLeaseLost), err a SQL failure.
func Settle(p *plane.SettleParams, h *Head, holds func(h *Head, token string) (lost, err error), backoff plane.Backoff,
	draw func() float64, apply func(h *Head, tr plane.Transition, result []byte) error,
) (logical, err error) {
	if h == nil || !p.Scope.Covers(h.Namespace, h.Queue) {
		return plane.ErrNotFound, nil
	}
	if lost, err := holds(h, p.Token); lost != nil || err != nil {
		return lost, err
	}
	return nil, apply(h, plane.SettleTransition(p, h.Attempt, h.MaxAttempts, backoff, draw), Result(p))
}

// Heartbeat is the heartbeat p of the invocation h (nil: none) in a driver's transaction at
// nowMS: an id outside p's scope answers as unknown, holds fences it, and setLease writes
// the lease's new expiry, which the result carries. err is a SQL failure.
func Heartbeat(p *plane.HeartbeatParams, h *Head, nowMS int64, holds func(h *Head, token string) (lost, err error),
	setLease func(h *Head, expiresMS int64) error,
) (plane.HeartbeatResult, error) {
	if h == nil || !p.Scope.Covers(h.Namespace, h.Queue) {
		return plane.HeartbeatResult{Err: plane.ErrNotFound}, nil
	}
	if lost, err := holds(h, p.Token); lost != nil || err != nil {
		return plane.HeartbeatResult{Err: lost}, err
	}
	h.LeaseExpiresMS = nowMS + cmp.Or(p.LeaseTTL, plane.LeaseTTLDefault).Milliseconds()
	return plane.HeartbeatResult{LeaseExpiresAt: FromMS(h.LeaseExpiresMS)}, setLease(h, h.LeaseExpiresMS)
}

// HeartbeatMany is the heartbeats params in a driver's transaction at nowMS, in order, each
// on the head head returns for its id (nil: none); see Heartbeat. err is a SQL failure.
func HeartbeatMany(params []plane.HeartbeatParams, nowMS int64, head func(id string) (*Head, error),
	holds func(h *Head, token string) (lost, err error), setLease func(h *Head, expiresMS int64) error,
) ([]plane.HeartbeatResult, error) {
	out := make([]plane.HeartbeatResult, len(params))
	for i := range params {
		h, err := head(params[i].ID)
		if err != nil {
			return nil, err
		}
		if out[i], err = Heartbeat(&params[i], h, nowMS, holds, setLease); err != nil {
			return nil, err
		}
	}
	return out, nil
}
