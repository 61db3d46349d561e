package plane

import (
	"context"
	"time"
)

// ErrorTypeReleased: a job claimed for a caller that went away (a cancelled claim, a
// long-poll whose connection closed), given back at once.
const ErrorTypeReleased = "released"

// releaseTimeout bounds the settle that gives abandoned jobs back.
const releaseTimeout = 10 * time.Second

// ReleaseAbandoned gives back the jobs of a claim whose caller went away before it got
// them: each is settled as OutcomeReleased — re-queued claimable at once, so another
// claimer takes it now instead of after its lease expires, and its attempt is not
// counted (it never ran: a job with one attempt is not failed by a caller that went away).
// The one rule for the server (a long-poll whose connection closed) and the HTTP client (a
// claim answered after its ctx ended). It runs on a context detached from ctx's
// cancellation (ctx is usually the one that ended), bounded by releaseTimeout. A job whose
// lease is already gone is skipped by the plane (its settle answers ErrLeaseLost).
func ReleaseAbandoned(ctx context.Context, drv Driver, jobs []*Job) error {
	if len(jobs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	params := make([]SettleParams, len(jobs))
	for i, j := range jobs {
		params[i] = SettleParams{ID: j.ID, Token: j.Token, Outcome: OutcomeReleased,
			Error: &ErrorInfo{Type: ErrorTypeReleased, Message: "claimed for a caller that went away"}}
	}
	_, err := drv.InvocationSettleMany(ctx, params)
	return err
}
