package lakeshore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// settler sends the settles of a Worker's handlers (all of one claim) in batches: each
// batch is the settles that gathered while the previous one was being committed, sent in ONE
// Driver.InvocationSettleAndClaim together with a claim for as many jobs as slots are
// free (the slots of the settled jobs, handed over with their settles, and any other free
// slot). A burn-down at concurrency N thus costs about one durable commit per batch for
// both the acks and the next claims, where settling each job on its own costs one commit
// per settle (shared only by what the plane's group commit happens to gather) plus one per
// refill claim.
//
// The claim never waits: an empty queue is the claim loop's to wait on, with the slots the
// settler did not fill. It claims nothing once claimCtx ended (drain) or MaxJobs is
// reached; a plane without InvocationSettleAndClaim (ErrNotImplemented) gets the settles
// through InvocationSettleMany from then on.
type settler struct {
	w             *Worker
	g             *claimGroup     // the worker's one claim: its queues
	base          context.Context // settle calls: a settleTimeout from it
	claimCtx      context.Context // claiming is allowed while it lasts
	runCtx        context.Context // the jobs it claims run under it
	handlers      *sync.WaitGroup
	requests      chan *settleRequest
	done          chan struct{}
	unimplemented bool // the plane has no InvocationSettleAndClaim
}

// claimParams are the params of a claim of n jobs from the settler's queues.
func (s *settler) claimParams(n int) *plane.ClaimParams {
	p := s.g.bindings[0].q.claimParams(n, ClaimOptions{LeaseTTL: s.w.o.LeaseTTL, Offers: s.w.o.Offers})
	p.Queues = s.g.also()
	return p
}

// settleRequest is one handler's settle; its slot passes to the settler with it.
type settleRequest struct {
	p     plane.SettleParams
	reply chan error // buffered: the settler never blocks on it
}

func (w *Worker) newSettler(base, claimCtx, runCtx context.Context, g *claimGroup, handlers *sync.WaitGroup) *settler {
	s := &settler{w: w, g: g, base: base, claimCtx: claimCtx, runCtx: runCtx, handlers: handlers,
		requests: make(chan *settleRequest, w.o.Concurrency), done: make(chan struct{})}
	go s.loop()
	return s
}

// stop ends the loop once no handler is left: every request was answered.
func (s *settler) stop() {
	close(s.requests)
	<-s.done
}

// settle hands p (and the handler's slot) to the settler and waits for its answer.
// handedOff reports whether the slot passed: false when p is refused before sending (bad
// params, answered with the *InvalidError; the caller nacks or gives up, and releases its
// slot itself) or when ctx ended before the settler took it.
func (s *settler) settle(ctx context.Context, p plane.SettleParams) (handedOff bool, err error) {
	if err := p.Validate(); err != nil {
		// One bad settle must not fail the batch it would join.
		return false, fmt.Errorf("settle %s: %w", p.ID, err)
	}
	r := &settleRequest{p: p, reply: make(chan error, 1)}
	select {
	case s.requests <- r:
	case <-ctx.Done():
		return false, fmt.Errorf("settle %s: %w", p.ID, context.Cause(ctx))
	}
	// The answer always comes: each call of the loop is bounded by settleTimeout. Waiting
	// for it unconditionally keeps this handler counted while the loop may start the jobs
	// it claims with this settle.
	return true, <-r.reply
}

func (s *settler) loop() {
	defer close(s.done)
	var batch []*settleRequest
	for {
		first, ok := <-s.requests
		if !ok {
			return
		}
		batch = append(batch[:0], first)
	gather:
		for {
			select {
			case r, ok := <-s.requests:
				if !ok {
					break gather
				}
				batch = append(batch, r)
			default:
				break gather
			}
		}
		s.send(batch)
		clear(batch)
	}
}

// send settles batch, claiming jobs for the freed slots (and free ones) in the same call,
// starts the claimed jobs, releases the slots left over, and answers every request.
func (s *settler) send(batch []*settleRequest) {
	w := s.w
	held := len(batch) // the settled jobs' slots
	params := make([]plane.SettleParams, len(batch))
	for i, r := range batch {
		params[i] = r.p
	}
	ctx, cancel := context.WithTimeout(s.base, settleTimeout)
	defer cancel()

	var errs []error
	var jobs []*plane.Job
	var err error
	claimed := false
	if !s.unimplemented && s.claimCtx.Err() == nil {
	fill:
		for held < w.o.BatchSize {
			select {
			case w.slots <- struct{}{}:
				held++
			default:
				break fill
			}
		}
		if n := w.reserve(min(held, w.o.BatchSize)); n > 0 {
			claimed = true
			errs, jobs, err = w.d.drv.InvocationSettleAndClaim(ctx, params,
				s.claimParams(n))
			w.resolve(n, len(jobs))
			if errors.Is(err, ErrNotImplemented) {
				s.unimplemented, claimed = true, false
			}
		}
	}
	if !claimed {
		errs, err = w.d.drv.InvocationSettleMany(ctx, params)
	}
	if errors.Is(err, ErrInvalid) && len(params) > 1 {
		// The plane refused the call for one of the settles: settle each on its own so that
		// the others are not failed with it.
		errs, err = make([]error, len(params)), nil
		for i := range params {
			errs[i] = s.w.d.settleOne(ctx, params[i])
		}
	} else if err == nil && len(errs) != len(params) {
		err = fmt.Errorf("the plane returned %d settle results for %d", len(errs), len(params))
	}

	// Start what was claimed before answering: the waiting handlers keep the handler group
	// counted while the new jobs join it.
	if len(jobs) > 0 {
		w.idle(s.g, false)
	}
	for _, j := range jobs {
		job := newJob(j, w.o.LeaseTTL)
		w.start(s.claimCtx, s.runCtx, s.g.binding(job), job, s.handlers, s)
	}
	w.release(held - len(jobs))
	for i, r := range batch {
		switch {
		case err != nil:
			r.reply <- fmt.Errorf("settle %s: %w", r.p.ID, err)
		case errs[i] != nil:
			r.reply <- fmt.Errorf("settle %s: %w", r.p.ID, errs[i])
		default:
			r.reply <- nil
		}
	}
}

// settleOne settles p alone; its result is the per-item error or the call's.
func (d *Dispatch) settleOne(ctx context.Context, p plane.SettleParams) error {
	errs, err := d.drv.InvocationSettleMany(ctx, []plane.SettleParams{p})
	switch {
	case err != nil:
		return err
	case len(errs) != 1:
		return fmt.Errorf("the plane returned %d settle results for 1", len(errs))
	}
	return errs[0]
}
