package lakeshore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Defaults of WorkerOptions.
const (
	// ConcurrencyDefault is how many handlers a worker runs at once without
	// WorkerOptions.Concurrency.
	ConcurrencyDefault = 1
	// ClaimWaitDefault is how long one claim waits for a job before the worker looks again
	// at its limits (drain, idle, MaxJobs).
	ClaimWaitDefault = time.Second
	// SettleTimeoutDefault bounds one settle (ack or nack) after its handler returned.
	SettleTimeoutDefault = settleTimeout
)

// Handler is work that RunWorker runs: a queue and what to do with each job claimed from
// it. HandlerBinding (made by Handle) and *Func are Handlers.
type Handler interface {
	// Binding returns the queue and the function RunWorker runs on its jobs.
	Binding() HandlerBinding
}

// HandlerBinding binds a HandlerFunc to a queue. It is a Handler.
type HandlerBinding struct {
	// Queue is the queue's name.
	Queue string
	// QueueOptions configure the claiming handle (namespace, claim order). The lease comes
	// from WorkerOptions.LeaseTTL. Defaults to nil: the Dispatch's namespace, fifo.
	QueueOptions *QueueOptions
	// Func runs on every job claimed from Queue. Its result acks the job; an error nacks it
	// with retry (without retry when marked Permanent); a panic nacks it with retry.
	Func HandlerFunc
}

// Binding returns b.
func (b HandlerBinding) Binding() HandlerBinding { return b }

// Handle binds fn to queue with the default queue options.
func Handle(queue string, fn HandlerFunc) HandlerBinding {
	return HandlerBinding{Queue: queue, Func: fn}
}

// WorkerOptions configure a Worker (NewWorker, RunWorker). A nil *WorkerOptions means all
// defaults.
type WorkerOptions struct {
	// BatchSize caps how many jobs one claim takes, at most plane.ClaimMaxLimit. Defaults to
	// Concurrency (capped so): a worker with free slots fills them in one claim.
	BatchSize int

	// ClaimWait is how long one claim waits for a job (by notification) before the worker
	// looks again at its limits. Defaults to ClaimWaitDefault (1 s). The queues of one
	// namespace and claim order are served by one claim that waits on all of them at once
	// (plane.ClaimParams.Queues); with handlers in several namespaces or orders, the
	// default is divided among those claims.
	ClaimWait time.Duration

	// Concurrency is how many handlers run at once. Defaults to ConcurrencyDefault (1).
	Concurrency int

	// ExitWhenIdle makes RunWorker return nil once a claim on every queue came back empty
	// while no handler was running and no queue it serves has a job due now that a
	// concurrency key holds back (the key's rate limit or "slow down" hold, or the key at
	// its concurrency limit), nor a schedule with a tick due that the plane's maintenance
	// has not fired yet: such a job or tick counts as work, so the worker waits for it
	// (claiming again every exitIdlePoll) rather than leave it with no worker. So does a job
	// its handler answered "slow down" (RateLimited): only delayed, it is run again once
	// its delay ends (one cancelled or deleted meanwhile no longer counts). A job waiting out a retry backoff or a delay it was submitted with,
	// or in a paused queue, does not count as work. Defaults to false: wait for work until
	// stopped.
	ExitWhenIdle bool

	// HeartbeatInterval is how often the leases of running jobs are extended, all in one
	// batch, from a goroutine apart from the handlers; it also bounds how long a killed job's
	// handler keeps running before its context is cancelled. Defaults to LeaseTTL / 3.
	HeartbeatInterval time.Duration

	// ID identifies the worker in the registry (Driver.WorkerList) and as the claimer of its
	// jobs. Defaults to a fresh ULID.
	ID string

	// LaunchID is the provider's launch id the worker registers with (WorkerInfo.LaunchID),
	// so a supervisor matches it to its launch. Defaults to the LAKESHORE_LAUNCH_ID
	// environment variable, which a provider sets (docs/providers.md); "" when started by
	// hand.
	LaunchID string

	// LeaseTTL is the lease of every claim and heartbeat. Defaults to LeaseTTLDefault (30 s).
	LeaseTTL time.Duration

	// Logger receives the worker's warnings (failed heartbeats, lost leases, settle errors)
	// and debug lines. Defaults to the Dispatch's Config.Logger.
	Logger *slog.Logger

	// MaxJobs makes RunWorker return nil after it claimed this many jobs and they settled.
	// Defaults to 0: no limit.
	MaxJobs int

	// Offers is what the worker offers to the jobs it claims (docs/semantics.md,
	// "Placement"): it takes only jobs whose SubmitOptions.Requirement these satisfy, and
	// always jobs without one. Defaults to the LAKESHORE_OFFERS environment variable in
	// `lakeshore worker --offers` form (plane.ParseOffers), which a provider sets for a
	// worker it launches for a shape (docs/providers.md, "Launching by shape"); else nil:
	// only jobs without a requirement, so a worker that states nothing never takes a GPU
	// job. A bad LAKESHORE_OFFERS fails the worker's start.
	Offers *Offers

	// offersErr is a bad LAKESHORE_OFFERS, reported by validate.
	offersErr error
	// WarmHostKeys are host keys (fabric.HostKey) the worker is warm for — it ran their
	// set-up — so its claims take their jobs first (docs/semantics.md, "Placement": within
	// plane.WarmHeadStart of the order). Registered with the worker. At most 16. Defaults
	// to nil: no preference.
	WarmHostKeys []string

	// Provider is the name of the provider that launched the worker (WorkerInfo.Provider).
	// Defaults to the LAKESHORE_PROVIDER environment variable; "" when started by hand.
	Provider string

	// Once makes RunWorker handle exactly one job and return nil: it waits for a job (until
	// ctx ends, or not at all with ExitWhenIdle), runs it, settles it. It implies
	// Concurrency 1 and MaxJobs 1 (a MaxJobs above 1 with it is refused, as Python's
	// run_worker refuses it). Defaults to false.
	Once bool

	// OnHostSetup runs once, in Start, before the worker registers or claims anything (load
	// a model once per process here, not in a global by hand): no handler runs before it
	// returned. Its error fails Start (and RunWorker), not the jobs: they stay queued for
	// another worker. Defaults to nil (nothing). The Python SDK's
	// lakeshore.lifecycle.on_host_setup is the same phase. A panic in it fails Start as a
	// *PanicError.
	OnHostSetup func(ctx context.Context) error

	// OnRunSetup runs before every handler, with the job's context; its error fails that
	// attempt as the handler's error would (nack with retry), and the handler does not run.
	// Defaults to nil.
	OnRunSetup func(ctx context.Context, job *Job) error

	// OnShutdown runs once when the worker stops (drained, cancelled or at its limits),
	// after the last handler settled and before it deregisters, with a context that is not
	// cancelled with Start's. A panic in it is logged and the worker still deregisters.
	// Defaults to nil.
	OnShutdown func(ctx context.Context)
}

// WorkerPhase is a worker's phase (Worker.Phase), named as the Python SDK's
// lakeshore.lifecycle.phase() names them.
type WorkerPhase string

// The phases of a worker.
const (
	// PhaseSetup: not started, or OnHostSetup running.
	PhaseSetup WorkerPhase = "setup"
	// PhaseReady: claiming and running jobs.
	PhaseReady WorkerPhase = "ready"
	// PhaseDraining: stopping (nothing new is claimed) or stopped.
	PhaseDraining WorkerPhase = "draining"
)

func (o *WorkerOptions) withDefaults(d *Dispatch, nBindings int) WorkerOptions {
	var out WorkerOptions
	if o != nil {
		out = *o
	}
	if out.Once {
		out.Concurrency = 1
		if out.MaxJobs == 0 {
			out.MaxJobs = 1 // more is refused by validate
		}
	}
	out.Concurrency = cmp.Or(out.Concurrency, ConcurrencyDefault)
	if out.BatchSize == 0 {
		out.BatchSize = min(out.Concurrency, plane.ClaimMaxLimit) // what one claim may take
	}
	out.LeaseTTL = cmp.Or(out.LeaseTTL, LeaseTTLDefault)
	out.HeartbeatInterval = cmp.Or(out.HeartbeatInterval, out.LeaseTTL/3)
	if out.ClaimWait == 0 {
		out.ClaimWait = ClaimWaitDefault / time.Duration(max(1, nBindings))
	}
	if out.ID == "" {
		out.ID = d.topics.New(d.cfg.Now())
	}
	if out.Logger == nil {
		out.Logger = d.cfg.Logger
	}
	out.LaunchID = cmp.Or(out.LaunchID, os.Getenv("LAKESHORE_LAUNCH_ID"))
	out.Provider = cmp.Or(out.Provider, os.Getenv("LAKESHORE_PROVIDER"))
	if env := os.Getenv("LAKESHORE_OFFERS"); out.Offers == nil && env != "" {
		out.Offers, out.offersErr = plane.ParseOffers("$LAKESHORE_OFFERS", env)
	}
	return out
}

func (o *WorkerOptions) validate() error {
	switch {
	case o.Concurrency < 0:
		return plane.Invalid("concurrency", o.Concurrency, "use a number ≥ 1, or 0 for the default (1)")
	case o.BatchSize < 0 || o.BatchSize > plane.ClaimMaxLimit:
		return plane.Invalid("batch size", o.BatchSize, fmt.Sprintf("use a number from 1 to %d, or 0 for the concurrency (at most %d)", plane.ClaimMaxLimit, plane.ClaimMaxLimit))
	case o.LeaseTTL < 0 || o.LeaseTTL > plane.LeaseTTLMax:
		return plane.Invalid("lease TTL", o.LeaseTTL, fmt.Sprintf("use a duration from 0 (the default, %s) to %s; heartbeat to keep a longer job", LeaseTTLDefault, plane.LeaseTTLMax))
	case o.HeartbeatInterval < 0 || o.HeartbeatInterval >= o.LeaseTTL:
		return plane.Invalid("heartbeat interval", o.HeartbeatInterval, "use a duration shorter than the lease, or 0 for a third of it")
	case o.ClaimWait < 0:
		return plane.Invalid("claim wait", o.ClaimWait, "use a duration > 0, or 0 for the default (1s)")
	case o.MaxJobs < 0:
		return plane.Invalid("max jobs", o.MaxJobs, "use a number ≥ 0 (0: no limit)")
	case o.Once && o.MaxJobs > 1:
		return plane.Invalid("max jobs", o.MaxJobs, "use 1 or 0 with once, which runs one job (or drop once)")
	case o.offersErr != nil:
		return o.offersErr
	}
	if err := o.Offers.Validate("offers"); err != nil {
		return err
	}
	return plane.ValidateWarmHostKeys(o.WarmHostKeys)
}

// Errors that end a worker's contexts, told apart with context.Cause.
var (
	// errDraining stops claiming (Stop).
	errDraining = errors.New("worker draining")
	// errWorkerStopped cancels running handlers (StopAndCancel).
	errWorkerStopped = errors.New("worker stopped: running handlers cancelled")
)

// Worker claims jobs from the queues of its handlers and runs each on its handler, up to
// WorkerOptions.Concurrency at once, from Start until it is stopped. It:
//
//   - claims in batches (up to the free handler slots, WorkerOptions.BatchSize at most),
//     waiting by notification when the queues are empty; the queues of one namespace and
//     claim order are served by one claim that waits on all of them at once and takes
//     from whichever has work first, fair across them (plane.ClaimParams.Queues); a
//     sequential worker (concurrency 1, one such claim) claims its next job with the
//     settle of the last, in one commit (Driver.InvocationSettleAndClaim); a wider such
//     worker sends the settles that gathered meanwhile in one such call with a claim for
//     the slots they free, so a burn-down costs about one commit per batch;
//   - acks a handler's result; nacks its error with retry (without retry when marked
//     Permanent, e.g. a payload that does not decode into a Func's input), its panic with
//     retry (ErrorInfo type "panic"), and a handler that ends its goroutine with
//     runtime.Goexit (t.FailNow) with retry — the job is never left running;
//   - heartbeats the leases of all running jobs in one batch every
//     WorkerOptions.HeartbeatInterval (a third of the lease by default) from its own
//     goroutine; when a heartbeat finds a lease lost (the job was killed, or its lease
//     expired and it was claimed again) it cancels that handler's context with cause
//     ErrLeaseLost and settles nothing for it;
//   - cancels a handler's context when the job's AttemptTimeout passes;
//   - registers itself in the plane's worker registry (id, host, pid, queues, start) and
//     refreshes the entry at each heartbeat, removing it when it stops.
//
// Jobs run through the same execution path as Queue.Working. A Worker handles no signals:
// a program maps its signals to Stop (drain) and StopAndCancel, as the lakeshore CLI does.
// Safe for concurrent use.
type Worker struct {
	d        *Dispatch
	o        WorkerOptions
	bindings []*binding
	groups   []*claimGroup // one claim loop each
	slots    chan struct{} // a token per running handler

	mu       sync.Mutex
	running  map[string]*runningJob
	reserved int // jobs claimed or being claimed, against MaxJobs
	pending  int // of reserved, those of claims still in flight (some may come back)
	// budgetWake is closed (and replaced) whenever a claim in flight resolves: a claim
	// loop that found the MaxJobs budget held by such claims waits on it — some may come
	// back unspent — rather than stopping with jobs left to claim.
	budgetWake chan struct{}
	idleAt     time.Time // when the last running job ended (zero: none has), for the registry
	// handedBack: with ExitWhenIdle, the jobs this worker's handlers handed back with a
	// "slow down" (RateLimited), by id, until this worker claims them again (start) or
	// queuesEmpty finds them claimed or ended: while one still waits out its delay the
	// worker is not idle. Bounded by the jobs handed back and not yet claimed again.
	handedBack map[string]*handedBackJob
	// mayBeRegistered: some registration of this worker may have been stored (it succeeded,
	// or failed in a way that does not say it was refused), so stopping removes it; a worker
	// every registration of which was refused (its token lacks consume) has nothing to remove.
	mayBeRegistered bool
	fatal           error // what stopped the claimers (the plane closed), returned by Err

	phase        WorkerPhase             // guarded by mu
	started      bool                    // guarded by mu
	stopClaiming context.CancelCauseFunc // set by Start, guarded by mu
	stopRun      context.CancelCauseFunc // set by Start, guarded by mu
	// setupDone is closed when Start's OnHostSetup returns (nil when none ran), so a Stop
	// called meanwhile waits for it; guarded by mu.
	setupDone chan struct{}
	// stopCause and stopCancel are a Stop asked while OnHostSetup ran, applied by Start
	// once it returns; guarded by mu.
	stopCause  error
	stopCancel bool
	done       chan struct{} // closed when the worker has stopped
	err        error         // why it stopped, set before done closes
}

// NewWorker returns a Worker that runs handlers on d's queues, configured by opts (nil: all
// defaults). Nothing runs until Start. Errors: *InvalidError for a nil d, no handlers, a nil
// handler or handler func, two handlers on one queue, a bad queue name or bad options.
func NewWorker(d *Dispatch, handlers []Handler, opts *WorkerOptions) (*Worker, error) {
	if len(handlers) == 0 {
		return nil, plane.Invalid("handlers", nil, "pass at least one handler")
	}
	if d == nil {
		return nil, plane.Invalid("dispatch", nil, "pass the *Dispatch that Open or New returned, not nil")
	}
	o := opts.withDefaults(d, len(handlers))
	if err := o.validate(); err != nil {
		return nil, err
	}
	w := &Worker{d: d, o: o, running: map[string]*runningJob{}, slots: make(chan struct{}, o.Concurrency), done: make(chan struct{}), phase: PhaseSetup,
		budgetWake: make(chan struct{})}
	seen := map[string]bool{}
	for _, h := range handlers {
		if h == nil {
			return nil, plane.Invalid("handlers", nil, "pass non-nil handlers")
		}
		b := h.Binding()
		if b.Func == nil {
			return nil, plane.Invalid("handler func", b.Queue, "bind a non-nil HandlerFunc")
		}
		q, err := d.Queue(b.Queue, b.QueueOptions)
		if err != nil {
			return nil, err
		}
		q.opts.LeaseTTL = o.LeaseTTL
		name := q.Namespace() + "/" + q.Name()
		if seen[name] {
			return nil, plane.Invalid("handlers", name, "bind one handler per queue")
		}
		seen[name] = true
		fn := b.Func
		if setup := o.OnRunSetup; setup != nil {
			handler := fn
			fn = func(ctx context.Context, job *Job) (any, error) {
				if err := setup(ctx, job); err != nil {
					return nil, fmt.Errorf("run setup: %w", err)
				}
				return handler(ctx, job)
			}
		}
		w.bindings = append(w.bindings, &binding{q: q, fn: fn})
	}
	// One claim per namespace and claim order, over its queues: at most
	// plane.ClaimQueuesLimit of them a claim (the plane refuses more), so a worker of more
	// queues of one order has one claim per group of them, taken in turn. Before
	// 2026-12-07 one claim named every queue, and a worker of more than 64 was refused at
	// every claim.
	byClaim := map[[3]string]*claimGroup{}
	for _, b := range w.bindings {
		o := b.q.opts
		k := [3]string{o.Namespace, string(o.Kind), strconv.FormatFloat(o.Temperature, 'g', -1, 64)}
		g := byClaim[k]
		if g == nil || len(g.bindings) == plane.ClaimQueuesLimit {
			g = &claimGroup{byQueue: map[string]*binding{}}
			byClaim[k] = g
			w.groups = append(w.groups, g)
		}
		g.bindings = append(g.bindings, b)
		g.byQueue[b.q.Name()] = b
		b.group = g
	}
	if opts == nil || opts.ClaimWait == 0 {
		w.o.ClaimWait = ClaimWaitDefault / time.Duration(len(w.groups))
	}
	return w, nil
}

// claimGroup is the handlers one claim serves: those of one namespace and claim order,
// claimed from with one claim over all their queues (plane.ClaimParams.Queues).
type claimGroup struct {
	bindings []*binding
	byQueue  map[string]*binding
	empty    bool // the last claim came back empty (guarded by Worker.mu)
}

// claim claims up to n jobs from the group's queues.
func (g *claimGroup) claim(ctx context.Context, n int, opts *ClaimOptions) ([]*Job, error) {
	return g.bindings[0].q.claim(ctx, n, opts, g.also()...)
}

// also names the group's queues after the first.
func (g *claimGroup) also() []string {
	if len(g.bindings) == 1 {
		return nil
	}
	out := make([]string, 0, len(g.bindings)-1)
	for _, b := range g.bindings[1:] {
		out = append(out, b.q.Name())
	}
	return out
}

// name names the group's queues for logs.
func (g *claimGroup) name() string {
	return strings.Join(append([]string{g.bindings[0].q.Name()}, g.also()...), ",")
}

// binding returns the handler of a job the group claimed.
func (g *claimGroup) binding(job *Job) *binding {
	if b := g.byQueue[job.Queue]; b != nil {
		return b
	}
	return g.bindings[0] // not reached: a claim takes only from the queues it names
}

// ID returns the worker's id in the registry (WorkerOptions.ID, or the ULID it was given).
func (w *Worker) ID() string { return w.o.ID }

// Phase returns the worker's phase: PhaseSetup until OnHostSetup returned, PhaseReady
// while it claims, PhaseDraining once it stops claiming.
func (w *Worker) Phase() WorkerPhase {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.phase
}

func (w *Worker) setPhase(p WorkerPhase) {
	w.mu.Lock()
	w.phase = p
	w.mu.Unlock()
}

// Start registers the worker and starts claiming and running jobs in the background; it
// returns at once. ctx is the worker's lifetime: when it ends, running handlers are
// cancelled, their jobs nacked with retry, and the worker stops with ctx's error (Err).
// The worker also stops on its own when WorkerOptions.Once or MaxJobs is reached, when
// ExitWhenIdle finds no work, and when the plane refuses it for good (closed, unauthorized):
// Done tells when. With WorkerOptions.OnHostSetup, Start runs it first and returns its
// error (wrapped) without starting: the worker registers and claims nothing.
// Errors: an error when the worker was already started; OnHostSetup's.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("start worker: already started; make a new Worker to run again")
	}
	if w.o.OnHostSetup != nil {
		w.started = true // a second Start while the set-up runs is refused
		setupDone := make(chan struct{})
		w.setupDone = setupDone
		w.mu.Unlock()
		err := callHook(func() error { return w.o.OnHostSetup(ctx) })
		w.mu.Lock()
		w.setupDone = nil
		close(setupDone)
		if err != nil {
			w.started, w.stopCause, w.stopCancel = false, nil, false
			w.mu.Unlock()
			return fmt.Errorf("start worker: host setup: %w", err)
		}
	}
	w.phase = PhaseReady
	runCtx, stopRun := context.WithCancelCause(ctx)
	claimCtx, stopClaiming := context.WithCancelCause(runCtx)
	w.started, w.stopRun, w.stopClaiming = true, stopRun, stopClaiming
	if w.stopCause != nil { // stopped while the set-up ran: claim nothing
		if w.stopCancel {
			stopRun(w.stopCause)
		} else {
			stopClaiming(w.stopCause)
		}
	}
	w.mu.Unlock()
	go func() {
		defer close(w.done)
		defer stopRun(nil)
		w.err = w.run(ctx, runCtx, claimCtx, stopClaiming)
	}()
	return nil
}

// Stop drains the worker: it claims nothing more, lets running handlers finish and settle,
// deregisters, and returns Err once it has stopped. When ctx ends first, Stop returns ctx's
// error and the worker goes on draining (call StopAndCancel to cancel the handlers). Stop
// on a worker never started returns nil. A Stop (or StopAndCancel) called while Start runs
// OnHostSetup waits for it: the worker then claims nothing, runs OnShutdown and stops (nil
// when the set-up failed: it never started).
func (w *Worker) Stop(ctx context.Context) error {
	return w.stop(ctx, errDraining, false)
}

// StopAndCancel stops claiming and cancels the running handlers' contexts (their jobs are
// nacked with retry, or settled with whatever the handlers return), then waits for the
// worker to stop, as Stop.
func (w *Worker) StopAndCancel(ctx context.Context) error {
	return w.stop(ctx, errWorkerStopped, true)
}

func (w *Worker) stop(ctx context.Context, cause error, cancelRunning bool) error {
	w.mu.Lock()
	started, stopClaiming, stopRun, setupDone := w.started, w.stopClaiming, w.stopRun, w.setupDone
	if setupDone != nil {
		// OnHostSetup runs in Start: Start applies the stop once it returns (the worker
		// then claims nothing), and this waits for the set-up, then for the worker.
		if w.stopCause == nil || cancelRunning {
			w.stopCause, w.stopCancel = cause, w.stopCancel || cancelRunning
		}
		w.mu.Unlock()
		select {
		case <-setupDone:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
		started, stopClaiming, stopRun = w.started, w.stopClaiming, w.stopRun
	}
	w.mu.Unlock()
	if !started || stopClaiming == nil {
		return nil // not started, or its OnHostSetup failed
	}
	if cancelRunning {
		w.o.Logger.Info("worker cancelling running jobs", logKeyWorkerID, w.o.ID)
		stopRun(cause)
	} else {
		w.o.Logger.Info("worker draining: running jobs finish, nothing new is claimed", logKeyWorkerID, w.o.ID)
		stopClaiming(cause)
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done returns a channel closed when the worker has stopped: told to, or on its own.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Err returns why the worker stopped, once Done is closed: nil when it was stopped or
// reached its limits (Once, MaxJobs, ExitWhenIdle); an error matching ErrClosed (or
// ErrUnauthorized, ErrForbidden, ErrInvalid) when the plane refused it; Start's ctx's error
// when that ended it. Before Done is closed it returns nil.
func (w *Worker) Err() error {
	select {
	case <-w.done:
		return w.err
	default:
		return nil
	}
}

// RunWorker runs a Worker until it stops: NewWorker, Start(ctx), and wait. It returns nil
// when the worker reached its limits (opts.Once, MaxJobs, ExitWhenIdle), an error matching
// ErrClosed when the plane closed, and ctx's error when ctx ends (running handlers are then
// cancelled and their jobs nacked with retry). It returns only after every goroutine it
// started has ended. To drain on a signal, use NewWorker and Stop instead.
// Errors: as NewWorker.
func RunWorker(ctx context.Context, d *Dispatch, handlers []Handler, opts *WorkerOptions) error {
	w, err := NewWorker(d, handlers, opts)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-w.Done()
	return w.Err()
}

// callHook runs a lifecycle hook, turning its panic into a *PanicError as runHandler does
// a handler's: a hook's panic is its failure (OnHostSetup's fails Start; OnShutdown's is
// logged), never a crash of the worker's goroutine, nor a set-up left unfinished for a
// Stop waiting on it. OnRunSetup runs inside the handler, under runHandler.
func callHook(hook func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	return hook()
}

type binding struct {
	q     *Queue
	fn    HandlerFunc
	group *claimGroup // the claim that serves it
}

type runningJob struct {
	e *execution
}

func (w *Worker) run(ctx, runCtx, claimCtx context.Context, stopClaiming context.CancelCauseFunc) error {
	info := w.info()
	w.register(ctx, info)

	hbStop := make(chan struct{})
	var hb sync.WaitGroup
	hb.Go(func() { w.heartbeatLoop(context.WithoutCancel(ctx), info, hbStop) })

	var claimers, handlers sync.WaitGroup
	var settler *settler
	if len(w.groups) == 1 && w.o.Concurrency > 1 {
		settler = w.newSettler(context.WithoutCancel(ctx), claimCtx, runCtx, w.groups[0], &handlers)
	}
	for _, g := range w.groups {
		claimers.Go(func() { w.claimLoop(claimCtx, runCtx, stopClaiming, g, &handlers, settler) })
	}
	claimers.Wait()
	w.setPhase(PhaseDraining)
	handlers.Wait()
	if settler != nil {
		settler.stop() // every handler had its answer: nothing is pending
	}
	if w.o.OnShutdown != nil {
		err := callHook(func() error { w.o.OnShutdown(context.WithoutCancel(ctx)); return nil })
		var p *PanicError
		if errors.As(err, &p) {
			// As Python's run_shutdown logs a raising hook: the worker still deregisters.
			w.o.Logger.ErrorContext(ctx, "shutdown hook panicked", logKeyWorkerID, w.o.ID,
				logKeyPanic, fmt.Sprint(p.Value), logKeyStack, string(p.Stack))
		}
	}
	close(hbStop)
	hb.Wait()

	w.mu.Lock()
	registered := w.mayBeRegistered
	w.mu.Unlock()
	if registered {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		if err := w.d.drv.WorkerRemove(rmCtx, info.Namespace, info.ID); err != nil && !errors.Is(err, ErrNotImplemented) {
			w.o.Logger.WarnContext(ctx, "worker deregistration failed", logKeyWorkerID, info.ID, logKeyError, err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fatal != nil {
		return w.fatal
	}
	return ctx.Err()
}

func (w *Worker) info() *plane.WorkerInfo {
	host, _ := os.Hostname()
	queues := make([]string, len(w.bindings))
	for i, b := range w.bindings {
		queues[i] = b.q.Name()
	}
	return &plane.WorkerInfo{
		ID:        w.o.ID,
		Namespace: w.bindings[0].q.Namespace(),
		Host:      cmp.Or(host, "localhost"),
		PID:       os.Getpid(),
		Queues:    queues,
		StartedAt: w.d.cfg.Now(),
		Provider:  w.o.Provider,
		LaunchID:  w.o.LaunchID,
		Offers:    w.o.Offers,
		// WarmHostKeys: what the worker is warm for, registered so a listing shows it.
		WarmHostKeys: w.o.WarmHostKeys,
	}
}

func (w *Worker) register(ctx context.Context, info *plane.WorkerInfo) {
	w.mu.Lock()
	info.Running, info.IdleSince = len(w.running), time.Time{}
	if info.Running == 0 {
		info.IdleSince = cmp.Or(w.idleAt, info.StartedAt)
	}
	w.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	err := w.d.drv.WorkerRegister(rctx, info)
	if err != nil && !errors.Is(err, ErrNotImplemented) {
		w.o.Logger.WarnContext(ctx, "worker registration failed", logKeyWorkerID, info.ID, logKeyError, err)
	}
	if !registrationRefused(err) {
		w.mu.Lock()
		w.mayBeRegistered = true
		w.mu.Unlock()
	}
}

// registrationRefused reports whether err says the plane refused a registration outright,
// storing nothing: the token may not register (forbidden, unauthorized), the registration
// is invalid or over the namespace's cap, or the plane has no registry. Any other error (a
// timeout, an outage) may hide a registration that was stored.
func registrationRefused(err error) bool {
	return err != nil && (errors.Is(err, ErrForbidden) || errors.Is(err, ErrUnauthorized) ||
		errors.Is(err, ErrInvalid) || errors.Is(err, ErrLimitExceeded) || errors.Is(err, ErrNotImplemented))
}

// reserve takes up to n jobs from the MaxJobs budget for a claim and returns how many it
// took; the claim reports what it got with resolve.
func (w *Worker) reserve(n int) int {
	if w.o.MaxJobs == 0 {
		return n
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n = min(n, w.o.MaxJobs-w.reserved)
	w.reserved += n
	w.pending += n
	return n
}

// resolve ends a claim that reserved n jobs of the MaxJobs budget and claimed got of
// them: the rest goes back to the budget, and the claim loops waiting on it look again.
func (w *Worker) resolve(n, got int) {
	if w.o.MaxJobs == 0 || n == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reserved -= n - got
	w.pending -= n
	close(w.budgetWake)
	w.budgetWake = make(chan struct{})
}

// budgetWait tells a claim loop whose reserve got nothing whether MaxJobs jobs were
// claimed (spent: none of the budget is left nor held by a claim in flight), else returns
// a channel closed when it should look again: at once when some budget is free now, else
// when a claim in flight resolves.
func (w *Worker) budgetWait() (spent bool, wake <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.reserved >= w.o.MaxJobs && w.pending == 0:
		return true, nil
	case w.reserved < w.o.MaxJobs:
		ch := make(chan struct{})
		close(ch)
		return false, ch
	}
	return false, w.budgetWake
}

// idle records whether g's claim came back empty and reports whether the worker is idle:
// every claim's last answer was empty and nothing runs.
func (w *Worker) idle(g *claimGroup, empty bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	g.empty = empty
	if !empty || len(w.running) > 0 {
		return false
	}
	for _, o := range w.groups {
		if !o.empty {
			return false
		}
	}
	return true
}

func (w *Worker) claimLoop(ctx, runCtx context.Context, stopClaiming context.CancelCauseFunc, g *claimGroup, handlers *sync.WaitGroup, s *settler) {
	wait := w.o.ClaimWait
	if w.o.Once && !w.o.ExitWhenIdle && len(w.groups) == 1 {
		wait = -1 // until a job comes or ctx ends (with several claims, one must not hold the only slot)
	}
	// checkedEmpty: the last claim came back empty and queuesEmpty then found nothing due.
	// The check runs after the claim, so a schedule's fire (or a key's release) that
	// landed between the two is claimable yet invisible to the check (the tick is no
	// longer due, the job no longer held): an idle worker stops only when a claim made
	// after an empty check comes back empty too.
	checkedEmpty := false
	failures := 0 // claims failed in a row for a transient reason (claimRetryDelay)
	for ctx.Err() == nil {
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
	fill:
		for n < w.o.BatchSize {
			select {
			case w.slots <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		got := w.reserve(n)
		w.release(n - got)
		if got == 0 {
			spent, wake := w.budgetWait()
			if spent {
				stopClaiming(nil) // MaxJobs reached
				return
			}
			// Another claim (a settle-and-claim) holds the rest of the budget and may come
			// back with fewer jobs than it reserved: wait for it, not stop with jobs left.
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
			continue
		}
		claimWait := wait
		if w.o.ExitWhenIdle {
			claimWait = 0
		}
		jobs, err := g.claim(ctx, got, &ClaimOptions{Wait: claimWait, LeaseTTL: w.o.LeaseTTL, Offers: w.o.Offers, WarmHostKeys: w.o.WarmHostKeys})
		w.resolve(got, len(jobs))
		w.release(got - len(jobs))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrClosed) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden) || errors.Is(err, ErrInvalid) {
				// Retrying cannot help: the plane is gone, or refuses this worker for good.
				w.mu.Lock()
				w.fatal = cmp.Or(w.fatal, fmt.Errorf("claim from %s: %w", g.name(), err))
				w.mu.Unlock()
				stopClaiming(err)
				return
			}
			failures++
			delay := claimRetryDelay(failures)
			w.o.Logger.WarnContext(ctx, "claim failed", logKeyQueue, g.name(), logKeyError, err, "retry_in", delay)
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
			continue
		}
		failures = 0
		if len(jobs) == 0 {
			if w.o.ExitWhenIdle && w.idle(g, true) {
				empty, err := w.queuesEmpty(ctx)
				if err == nil && empty && checkedEmpty {
					stopClaiming(nil)
					return
				}
				if err == nil && empty {
					checkedEmpty = true // claim once more: see checkedEmpty
					continue
				}
				checkedEmpty = false
				if err != nil && ctx.Err() == nil {
					w.o.Logger.WarnContext(ctx, "count the queued jobs", logKeyQueue, g.name(), logKeyError, err)
				}
				// Jobs are due but a concurrency key holds them back (its rate limit, its
				// limit): look again shortly.
				select {
				case <-ctx.Done():
				case <-time.After(exitIdlePoll):
				}
				continue
			}
			if w.o.ExitWhenIdle {
				checkedEmpty = false // a running job or another group: check again once idle
				// Another queue or a running job may still bring work: look again shortly.
				select {
				case <-ctx.Done():
				case <-time.After(min(wait, idlePoll)):
				}
			}
			continue
		}
		checkedEmpty = false
		w.idle(g, false)
		for _, job := range jobs {
			w.start(ctx, runCtx, g.binding(job), job, handlers, s)
		}
	}
}

// Delays of the claim loop.
const (
	// claimRetryMin and claimRetryMax bound the wait before claiming again after a claim
	// failed for a transient reason (claimRetryDelay); the Python worker's
	// CLAIM_RETRY_MIN and CLAIM_RETRY_MAX.
	claimRetryMin = 250 * time.Millisecond
	claimRetryMax = 10 * time.Second
	idlePoll      = 50 * time.Millisecond
	// exitIdlePoll is how often an ExitWhenIdle worker whose claims come back empty while
	// jobs are queued (not claimable yet) claims and counts again.
	exitIdlePoll = 200 * time.Millisecond
)

// claimRetryDelay is the wait before the next claim after failures (≥ 1) claims in a row
// failed for a transient reason (the plane unreachable, busy, stopping): claimRetryMin
// doubled per failure up to claimRetryMax, of which a random half to all (jitter: workers
// that failed together do not come back together). The Python worker's
// _claim_retry_delay.
func claimRetryDelay(failures int) time.Duration {
	full := claimRetryMin << min(max(failures, 1)-1, 16)
	full = min(full, claimRetryMax)
	return full/2 + rand.N(full/2+1)
}

// queuesEmpty reports whether no queue the worker serves has a job due now that only a
// concurrency key keeps from being claimed: held back by the key's rate limit (or a
// worker's "slow down" hold) or the key at its concurrency limit (KeyStats.Queued of
// QueueStatsList; delayed jobs and those in retry backoff are not counted), and no
// schedule of a served queue has a tick due that the plane's maintenance has not fired yet
// (it submits the fire within its interval: Schedule.NextFire not after now, not paused).
// What ExitWhenIdle waits for besides empty claims and no running handler, with a job its
// handlers handed back with a "slow down" (handedBackWaits). A paused queue counts as
// empty: no claim takes its jobs until it is resumed.
func (w *Worker) queuesEmpty(ctx context.Context) (bool, error) {
	served := map[string]map[string]bool{} // namespace → queue
	pausedQueues := map[[2]string]bool{}   // namespace, queue
	for _, g := range w.groups {
		for _, b := range g.bindings {
			ns := b.q.opts.Namespace
			if served[ns] == nil {
				served[ns] = map[string]bool{}
			}
			served[ns][b.q.Name()] = true
		}
	}
	for ns, queues := range served {
		stats, err := w.d.drv.QueueStatsList(ctx, ns)
		if err != nil {
			return false, err
		}
		paused := map[string]bool{}
		for _, st := range stats {
			if !queues[st.Queue] {
				continue
			}
			if st.Paused {
				paused[st.Queue] = true
				pausedQueues[[2]string{ns, st.Queue}] = true
				continue
			}
			for _, k := range st.Keys {
				if k.Queued > 0 {
					return false, nil
				}
			}
		}
		schedules, err := plane.ListSchedules(ctx, w.d.drv, ns)
		if err != nil {
			return false, err
		}
		now := w.d.cfg.Now()
		for _, sc := range schedules {
			if queues[sc.Queue] && !paused[sc.Queue] && !sc.Paused && !sc.NextFire.IsZero() && !sc.NextFire.After(now) {
				return false, nil
			}
		}
	}
	back, err := w.handedBackWaits(ctx, pausedQueues)
	return !back && err == nil, err
}

// handedBackWaits reports whether a job this worker's handler handed back with a "slow
// down" (RateLimited) still waits out its delay: it is the worker's unfinished work, not an
// idle queue, so ExitWhenIdle waits for it. It waits while the job reads as queued (before
// its due time, and after while the plane's clock is behind this one's or its key at its
// limit); one claimed since (by any worker), ended (cancelled, deleted, trimmed) is
// forgotten at once, whatever its due time, so a job cancelled during a long "slow down"
// does not keep the worker. One this worker may not read (a token without read) waits
// until its due time alone, then is forgotten. One of a paused queue (paused: namespace,
// queue) does not count, as the paused queue's other jobs do not: no claim takes it until
// the queue is resumed. An entry is also dropped when this worker claims the job again
// (Worker.start), so the map holds only jobs handed back and not claimed since.
func (w *Worker) handedBackWaits(ctx context.Context, paused map[[2]string]bool) (bool, error) {
	w.mu.Lock()
	back := maps.Clone(w.handedBack)
	w.mu.Unlock()
	maps.DeleteFunc(back, func(_ string, h *handedBackJob) bool {
		return paused[[2]string{h.q.opts.Namespace, h.q.Name()}]
	})
	now := w.d.cfg.Now()
	for id, h := range back { // the first that still waits answers: one read per poll while one does
		inv, err := h.q.Get(ctx, id)
		switch {
		case errors.Is(err, ErrForbidden), errors.Is(err, ErrUnauthorized):
			if now.Before(h.due) {
				return true, nil
			}
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return false, err
		case inv.State == plane.StateQueued:
			return true, nil
		}
		w.mu.Lock()
		if w.handedBack[id] == h { // not handed back again since the read
			delete(w.handedBack, id)
		}
		w.mu.Unlock()
	}
	return false, nil
}

// handedBackJob is an entry of Worker.handedBack: the queue to read the job from and when
// its delay ends by this worker's clock (a new entry for each hand-back, so a read of an
// older one never forgets a newer one).
type handedBackJob struct {
	q   *Queue
	due time.Time
}

func (w *Worker) release(n int) {
	for range n {
		<-w.slots
	}
}

// start runs job on b's handler in a goroutine holding one slot. A sequential worker
// (concurrency 1, one claim) settles the job and claims the next one in the same commit
// (Driver.InvocationSettleAndClaim) while claimCtx lets it claim and MaxJobs allows; the
// goroutine then runs that job on the same slot: one durable commit per job. A wider worker
// with one claim hands its settles to s, which sends those that gathered meanwhile in one
// InvocationSettleAndClaim together with a claim for the slots they free (and any other
// free slot): one commit per batch for the acks and the next claims.
func (w *Worker) start(claimCtx, runCtx context.Context, b *binding, job *Job, handlers *sync.WaitGroup, s *settler) {
	jobCtx, cancel := context.WithCancelCause(runCtx)
	r := &runningJob{e: &execution{q: b.q, job: job, fn: b.fn, cancel: cancel, logger: w.o.Logger}}
	if w.o.ExitWhenIdle {
		r.e.handedBack = func(delay time.Duration) {
			w.mu.Lock()
			if w.handedBack == nil {
				w.handedBack = map[string]*handedBackJob{}
			}
			w.handedBack[job.ID] = &handedBackJob{q: b.q, due: w.d.cfg.Now().Add(delay)}
			w.mu.Unlock()
		}
	}
	var next *Job
	handedOff := false // the slot passed to s with the settle
	switch {
	case s != nil:
		r.e.settleFn = func(ctx context.Context, p plane.SettleParams) error {
			var err error
			handedOff, err = s.settle(ctx, p)
			return err
		}
	case len(w.groups) == 1 && w.o.Concurrency == 1:
		r.e.settleFn = func(ctx context.Context, p plane.SettleParams) error {
			var err error
			next, err = w.settleAndClaim(ctx, claimCtx, b, p)
			return err
		}
	}
	w.mu.Lock()
	delete(w.handedBack, job.ID) // claimed again: no longer waited for (handedBackWaits); nil without ExitWhenIdle
	w.running[job.ID] = r
	w.mu.Unlock()
	handlers.Go(func() {
		w.run1(runCtx, jobCtx, cancel, r)
		switch {
		case next != nil:
			w.idle(b.group, false)
			w.start(claimCtx, runCtx, b.group.binding(next), next, handlers, s) // the slot passes to the next job
		case !handedOff:
			w.release(1)
		}
	})
}

// run1 runs one job's execution and logs how it ended.
func (w *Worker) run1(runCtx, jobCtx context.Context, cancel context.CancelCauseFunc, r *runningJob) {
	job := r.e.job
	defer cancel(nil)
	defer func() {
		w.mu.Lock()
		delete(w.running, job.ID)
		if len(w.running) == 0 {
			w.idleAt = w.d.cfg.Now()
		}
		w.mu.Unlock()
	}()
	err := r.e.run(runCtx, jobCtx)
	switch {
	case err == nil, errors.Is(err, ErrLeaseLost):
		// Lost leases were logged by the execution.
	case errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed):
		w.o.Logger.WarnContext(runCtx, "settle failed", logKeyJobID, job.ID, logKeyQueue, job.Queue, logKeyError, err)
	case errors.As(err, new(*RateLimitedError)):
		w.o.Logger.DebugContext(runCtx, "job rate limited: re-queued, its attempt kept", logKeyJobID, job.ID, logKeyQueue, job.Queue,
			logKeyAttempt, job.Attempt, logKeyError, err)
	default:
		w.o.Logger.DebugContext(runCtx, "job failed", logKeyJobID, job.ID, logKeyQueue, job.Queue,
			logKeyAttempt, job.Attempt, logKeyError, err)
	}
}

// settleAndClaim settles p and, while claimCtx allows claiming and MaxJobs is not reached,
// claims the next job of b's claim (any of its queues) in the same commit (without waiting: an empty queue is the claim
// loop's to wait on). It returns the claimed job (nil for none) and the settle's error.
func (w *Worker) settleAndClaim(ctx, claimCtx context.Context, b *binding, p plane.SettleParams) (*Job, error) {
	if claimCtx.Err() != nil || w.reserve(1) == 0 {
		return nil, b.q.settle(ctx, p)
	}
	claim := b.group.bindings[0].q.claimParams(1, ClaimOptions{LeaseTTL: w.o.LeaseTTL, Offers: w.o.Offers, WarmHostKeys: w.o.WarmHostKeys})
	claim.Queues = b.group.also()
	errs, jobs, err := w.d.drv.InvocationSettleAndClaim(ctx, []plane.SettleParams{p}, claim)
	if errors.Is(err, ErrNotImplemented) {
		w.resolve(1, 0)
		return nil, b.q.settle(ctx, p)
	}
	var next *Job
	if len(jobs) > 0 {
		next = newJob(jobs[0], w.o.LeaseTTL)
	}
	w.resolve(1, min(len(jobs), 1))
	switch {
	case err != nil:
		return next, err
	case len(errs) != 1:
		return next, fmt.Errorf("settle %s: the plane returned %d results for 1", p.ID, len(errs))
	case errs[0] != nil:
		return next, fmt.Errorf("settle %s: %w", p.ID, errs[0])
	}
	return next, nil
}

// heartbeatLoop extends the leases of every running job in one batch per tick, cancels the
// handlers whose leases were lost, and refreshes the worker's registration.
func (w *Worker) heartbeatLoop(ctx context.Context, info *plane.WorkerInfo, stop <-chan struct{}) {
	t := time.NewTicker(w.o.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.heartbeat(ctx)
		w.register(ctx, info)
	}
}

func (w *Worker) heartbeat(ctx context.Context) {
	w.mu.Lock()
	rs := make([]*runningJob, 0, len(w.running))
	params := make([]plane.HeartbeatParams, 0, len(w.running))
	for _, r := range w.running {
		if r.e.lost.Load() {
			continue
		}
		rs = append(rs, r)
		params = append(params, plane.HeartbeatParams{ID: r.e.job.ID, Token: r.e.job.token, LeaseTTL: w.o.LeaseTTL})
	}
	w.mu.Unlock()
	if len(params) == 0 {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, w.o.HeartbeatInterval)
	defer cancel()
	sent := time.Now()
	res, err := w.d.drv.InvocationHeartbeatMany(hctx, params)
	if err == nil && len(res) != len(params) {
		err = fmt.Errorf("the plane returned %d heartbeat results for %d", len(res), len(params))
	}
	if err != nil {
		w.o.Logger.WarnContext(ctx, "heartbeat failed", logKeyWorkerID, w.o.ID, logKeyError, err)
		for _, r := range rs {
			r.e.unrenewed(time.Now(), w.o.HeartbeatInterval)
		}
		return
	}
	for i, r := range rs {
		switch e := res[i].Err; {
		case e == nil:
			r.e.renewed(sent)
		case errors.Is(e, ErrLeaseLost) || errors.Is(e, ErrNotFound):
			r.e.leaseLost()
		default:
			r.e.unrenewed(time.Now(), w.o.HeartbeatInterval)
		}
	}
}

// jobContext is what the execution path puts in a handler's context, for Emit.
type jobContext struct {
	q   *Queue
	job *Job
}

type jobContextKey struct{}

// Emit appends value (encoded with the wire codec) as a VALUE frame to the journal of the
// job whose handler a Worker (or Queue.Working) called with ctx, and returns the frame's
// seq: Stream readers receive it live. Errors: an error when ctx is not a handler's;
// otherwise as Queue.Post (ErrLeaseLost, ErrJournalClosed, *InvalidError).
func Emit(ctx context.Context, value any) (int64, error) {
	jc, ok := ctx.Value(jobContextKey{}).(*jobContext)
	if !ok {
		return 0, errors.New("emit: ctx is not the context of a job run by a Worker or Queue.Working")
	}
	return jc.q.Post(ctx, jc.job, value)
}

// Log keys of the worker.
const (
	logKeyQueue    = "queue"
	logKeyRetry    = "retry"
	logKeySignal   = "signal"
	logKeyWorkerID = "worker_id"
)
