package planekit

import (
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Fence applies plane.Holds, the fencing check of a settle, heartbeat or lease-bound post, to
// an invocation in state (its lease token current, its lease and attempt deadlines in Unix
// ms) for the caller's token at now. When the caller does not hold the lease, lost is
// plane.ErrLeaseLost, and a lease found expired or an attempt found overdue is ended on the
// spot by the driver's expire or overdue (their error is err).
func Fence(state int, current, token string, leaseExpiresMS, attemptDeadlineMS int64, now time.Time,
	expire, overdue func() error) (lost, err error) {
	switch plane.Holds(state == StateRunning, current, token, FromMS(leaseExpiresMS), FromMS(attemptDeadlineMS), now) {
	case plane.FenceLost:
		return plane.ErrLeaseLost, nil
	case plane.FenceExpired:
		return plane.ErrLeaseLost, expire()
	case plane.FenceOverdue:
		return plane.ErrLeaseLost, overdue()
	}
	return nil, nil
}
