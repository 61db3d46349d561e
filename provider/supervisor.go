package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Defaults of SupervisorConfig.
const (
	// TickDefault is how often a supervisor looks at its queues.
	TickDefault = time.Second
	// LeaseTTLDefault is how long a supervisor's per-queue lease holds without renewal; a
	// supervisor that dies is replaced by another within it.
	LeaseTTLDefault = 15 * time.Second
	// StopGraceDefault is how long a stopped worker may drain before it is killed.
	StopGraceDefault = 30 * time.Second
	// CallTimeoutDefault bounds one provider call (launch, stop request, list).
	CallTimeoutDefault = 30 * time.Second
	// backoffMax caps the wait between launches after consecutive failures.
	backoffMax = time.Minute
	// FailureRepeatLog is how often a failure that recurs at every tick with the same
	// error (a provider that cannot be built, a List that keeps failing, the plane out of
	// reach) is logged again, with how many times it recurred since it was last logged.
	FailureRepeatLog = time.Minute
)

// Resolver returns the Provider for a ProviderRef's name. Errors: an unknown provider
// (wrapped by UnknownProvider, matching ErrUnknownProvider), or one that is declared but
// cannot be built (its settings, project file, key or known_hosts files are wrong).
type Resolver func(name string) (Provider, error)

// ErrUnknownProvider matches a Resolver's error for a name no provider answers to: not one
// of the build's kinds, or not declared (with that type) in the project file.
var ErrUnknownProvider = errors.New("unknown provider")

// UnknownProvider marks err as a Resolver's error for a name no provider answers to:
// errors.Is matches ErrUnknownProvider and whatever err matches; the message is err's.
func UnknownProvider(err error) error { return unknownProviderError{err} }

type unknownProviderError struct{ err error }

func (e unknownProviderError) Error() string   { return e.err.Error() }
func (e unknownProviderError) Unwrap() []error { return []error{ErrUnknownProvider, e.err} }

// SupervisorConfig configures a Supervisor. Driver and Resolve are required.
type SupervisorConfig struct {
	// Driver is the dispatch plane whose queues the supervisor serves.
	Driver plane.Driver
	// Resolve maps a ProviderRef's name to its Provider.
	Resolve Resolver
	// Namespace restricts the supervisor to one namespace. Defaults to "": every namespace.
	Namespace string
	// Tick is how often it looks at the queues. Defaults to TickDefault (1 s).
	Tick time.Duration
	// LeaseTTL is the per-queue lease ("provider/QUEUE"). Defaults to LeaseTTLDefault
	// (15 s); renewed every third of it.
	LeaseTTL time.Duration
	// StopGrace is how long a stopped worker may drain before it is killed. Defaults to
	// StopGraceDefault (30 s).
	StopGrace time.Duration
	// CallTimeout bounds each provider call. Defaults to CallTimeoutDefault (30 s).
	CallTimeout time.Duration
	// DryRun logs and counts what the supervisor would do, and exports its gauges, but
	// launches and stops nothing and takes no lease: a dry run beside a real supervisor
	// never keeps it from a queue. It logs a decision when it differs from the queue's
	// previous one (not at every tick), and counts no failures (a launch that ended may
	// have been stopped by the supervisor that acts).
	DryRun bool
	// Holder identifies this supervisor in the leases. Defaults to a fresh ULID.
	Holder string
	// WorkerEnv is added to every launched worker's environment: how it reaches the plane
	// (LAKESHORE_URL and LAKESHORE_TOKEN, LAKESHORE_HOME, or a PostgreSQL target).
	WorkerEnv map[string]string
	// Logger receives every decision (info) and every failure (warn). Required: the caller
	// passes its own (slog.New(slog.DiscardHandler) for none), never the process default.
	Logger *slog.Logger
	// Metrics receives the supervisor's metrics. Defaults to none (NewMetrics(nil)).
	Metrics *Metrics
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Supervisor follows the backlog of every queue that has a provider with workers launched
// and stopped through the provider, one supervisor per queue at a time (a lease in the
// plane; a dry run takes none and acts on nothing). Workers it launched keep running when it
// stops; a supervisor started later adopts them (Provider.List). A worker it stops drains
// and counts as live until it ends; a stop that fails is tried again. Each provider's work
// (its List, then its queues' launches and stops) runs apart from the others', so one
// provider's slow or hanging calls never delay another's queues. Create it with
// NewSupervisor; safe for one Run (or Tick) at a time.
type Supervisor struct {
	cfg SupervisorConfig
	ids *plane.IDGenerator

	// state guards what the providers' work, running concurrently, shares: the maps below.
	// A queue's track itself is touched by one provider's work at a time (busyQueues).
	state   sync.Mutex
	queues  map[queueKey]*queueTrack
	checked map[string]bool // providers whose Check ran
	failing map[string]bool // providers whose last List failed
	// repeating holds the failures that recur at every tick, by what failed (a tick, or a
	// provider's resolve, check, list or work), so that each is logged once per change of
	// error and then once per FailureRepeatLog, not at every tick.
	repeating  map[string]*repeatedFailure
	busy       map[string]bool   // providers whose work is in flight
	busyQueues map[queueKey]bool // queues some provider's work in flight acts for
	results    []workResult      // ended provider work, for Run (or Tick) to report
	work       sync.WaitGroup    // provider work in flight

	stops      sync.WaitGroup // Stop calls in flight
	mu         sync.Mutex
	stopFailed map[queueKey]map[string]bool // launches whose Stop failed, to be stopped again
	// noMint is set once the plane refused to create a launch token (the supervisor's token
	// is not the server's admin token): launches then get the supervisor's token, as logged.
	noMint bool
}

// workResult is how one provider's work of a tick ended: nil, or the plane's error.
type workResult struct {
	provider string
	err      error
}

type queueKey struct{ namespace, queue string }

// queueTrack is what the supervisor remembers of a queue whose lease it holds.
type queueTrack struct {
	held     bool // its lease (never in a dry run)
	watched  bool // a dry run logged that it watches the queue
	renewed  time.Time
	pending  map[string]time.Time // launch id → when launched or adopted, until registered
	seen     map[string]bool      // launch ids seen alive (pending, registered or stopping)
	stopping map[string]bool      // launch ids we asked to stop, until they end
	shapeOf  map[string]string    // launch id → the shape it was launched for ("" default)
	shapes   map[string]*shapeTrack
	// ended are launches a List left out, whose token (if one was minted) is revoked when
	// the next List leaves them out too: a provider's List may miss a running launch for a
	// moment, and a revoked token cannot be given back to its worker.
	ended map[string]bool
}

// shapeTrack is what the supervisor remembers of one shape of a queue.
type shapeTrack struct {
	requirement  *plane.Requirement
	lastScale    time.Time
	failures     int
	nextLaunch   time.Time
	lastDecision string // a dry run's last decision logged
	unlaunchable string // why no launch can offer the shape, as last logged ("" when it can)
}

// shape returns the track of shape, made on first use.
func (tr *queueTrack) shape(shape string) *shapeTrack {
	st := tr.shapes[shape]
	if st == nil {
		st = &shapeTrack{}
		tr.shapes[shape] = st
	}
	return st
}

// NewSupervisor checks cfg and returns a Supervisor. Errors: *plane.InvalidError for a
// missing Driver, Resolve or Logger, or a negative duration.
func NewSupervisor(cfg SupervisorConfig) (*Supervisor, error) {
	switch {
	case cfg.Driver == nil:
		return nil, plane.Invalid("driver", nil, "pass the dispatch plane's driver")
	case cfg.Resolve == nil:
		return nil, plane.Invalid("resolver", nil, "pass a function from provider name to Provider")
	case cfg.Logger == nil:
		return nil, plane.Invalid("logger", nil, "pass the supervisor's logger (slog.New(slog.DiscardHandler) for none)")
	case cfg.Tick < 0, cfg.LeaseTTL < 0, cfg.StopGrace < 0, cfg.CallTimeout < 0:
		return nil, plane.Invalid("supervisor durations", nil, "use durations ≥ 0 (0: the defaults)")
	}
	cfg.Tick = cmp.Or(cfg.Tick, TickDefault)
	cfg.LeaseTTL = cmp.Or(cfg.LeaseTTL, LeaseTTLDefault)
	cfg.StopGrace = cmp.Or(cfg.StopGrace, StopGraceDefault)
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, CallTimeoutDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	ids := plane.NewIDGenerator()
	if cfg.Holder == "" {
		cfg.Holder = ids.New(cfg.Now())
	}
	return &Supervisor{cfg: cfg, ids: ids, queues: make(map[queueKey]*queueTrack), checked: map[string]bool{},
		failing: map[string]bool{}, repeating: map[string]*repeatedFailure{}, busy: map[string]bool{}, busyQueues: map[queueKey]bool{},
		stopFailed: map[queueKey]map[string]bool{}}, nil
}

// Holder returns the id this supervisor holds its leases under.
func (s *Supervisor) Holder() string { return s.cfg.Holder }

// Run ticks until ctx ends, then waits for the providers' work in flight (cut off by ctx),
// releases its leases (another supervisor takes over at once) and waits for the stops in
// flight. Workers keep running. It returns nil when ctx ended, or the plane's error when
// the plane closed. A tick does not wait for the providers' work it starts: a provider whose
// work of an earlier tick still runs (a List or a launch that hangs until the call timeout)
// is skipped until it ends, while the others go on at every tick.
func (s *Supervisor) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	defer s.release()
	defer s.work.Wait()
	defer cancel()
	for {
		if _, err := s.tick(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, plane.ErrClosed) {
				return err
			}
			s.warnRepeated("tick", "provider supervisor: tick failed", err)
		} else {
			s.recovered("tick")
		}
		for _, r := range s.takeResults() {
			what := "work\x00" + r.provider
			switch {
			case r.err == nil:
				s.recovered(what)
			case ctx.Err() != nil:
				return nil
			case errors.Is(r.err, plane.ErrClosed):
				return r.err
			default:
				s.warnRepeated(what, "provider supervisor: tick failed", r.err, "provider", r.provider)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// takeResults returns (and forgets) how the providers' work ended since the last call.
func (s *Supervisor) takeResults() []workResult {
	s.state.Lock()
	defer s.state.Unlock()
	out := s.results
	s.results = nil
	return out
}

// release gives up every held lease and waits for the stops in flight. The providers' work
// has ended.
func (s *Supervisor) release() {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
	defer cancel()
	s.state.Lock()
	var held []queueKey
	for k, tr := range s.queues {
		if tr.held {
			held = append(held, k)
		}
	}
	s.state.Unlock()
	for _, k := range held {
		_ = s.cfg.Driver.LeaseRelease(ctx, k.namespace, leaseName(k.queue), s.cfg.Holder)
	}
	s.stops.Wait()
}

func leaseName(queue string) string { return "provider/" + queue }

// Tick looks at every queue with a provider once and acts on the ones whose lease it holds
// or takes (a dry run takes none and only logs), and returns once every provider's work it
// started has ended. Each provider's work runs concurrently with the others'. The first
// time it uses a provider that is a Checker it checks it, and logs an error line when the
// provider cannot work. Provider failures are logged and counted, never returned: one bad
// provider does not stop the others. It returns the plane's errors.
func (s *Supervisor) Tick(ctx context.Context) error {
	started, err := s.tick(ctx)
	started.Wait()
	errs := []error{err}
	for _, r := range s.takeResults() {
		errs = append(errs, r.err)
	}
	return errors.Join(errs...)
}

// tick reads the plane's queues with a provider, their demand and their workers once, and
// starts the work of every provider whose work of an earlier tick has ended (providerWork);
// it does not wait for it, but returns the group of the work it started. A queue another
// provider's work still acts for (its provider changed meanwhile) is left to the next tick.
// It returns the plane's errors reading the queues; how each work ended is in s.results.
func (s *Supervisor) tick(ctx context.Context) (*sync.WaitGroup, error) {
	start := time.Now() // the real clock: the metric is the tick's cost
	started := &sync.WaitGroup{}
	observe := func() { s.cfg.Metrics.tick.Observe(time.Since(start).Seconds()) }
	refs, err := s.cfg.Driver.QueueProviderList(ctx, s.cfg.Namespace)
	if err != nil {
		observe()
		return started, fmt.Errorf("list queues with providers: %w", err)
	}
	if len(refs) == 0 {
		s.forgetAllBut(nil)
		observe()
		return started, nil
	}
	list, err := s.cfg.Driver.DemandList(ctx, s.cfg.Namespace)
	if err != nil {
		observe()
		return started, fmt.Errorf("demand per shape: %w", err)
	}
	demand := make(map[queueKey][]plane.ShapeDemand)
	for _, d := range list {
		k := queueKey{d.Namespace, d.Queue}
		demand[k] = append(demand[k], d)
	}
	workers, err := s.cfg.Driver.WorkerList(ctx, &plane.WorkerListParams{Namespace: s.cfg.Namespace})
	if err != nil {
		observe()
		return started, fmt.Errorf("list workers: %w", err)
	}
	// Index workers by queue once, so a tick is linear in queues + workers.
	workersOf := make(map[queueKey][]plane.WorkerInfo)
	for _, w := range workers {
		if w.LaunchID == "" {
			continue // started by hand
		}
		for _, q := range w.Queues {
			k := queueKey{w.Namespace, q}
			workersOf[k] = append(workersOf[k], w)
		}
	}

	// The queues of each provider, in the order the plane gave them.
	var names []string
	refsOf := make(map[string][]plane.QueueProvider)
	keep := make(map[queueKey]bool, len(refs))
	for _, r := range refs {
		keep[queueKey{r.Namespace, r.Queue}] = true
		name := r.Provider.Name
		if _, seen := refsOf[name]; !seen {
			names = append(names, name)
		}
		refsOf[name] = append(refsOf[name], r)
	}
	n := 0 // the providers' work started
	for _, name := range names {
		s.state.Lock()
		busy := s.busy[name]
		s.state.Unlock()
		if busy {
			continue // its work of an earlier tick still runs; the others go on
		}
		p, err := s.cfg.Resolve(name)
		if err != nil {
			s.cfg.Metrics.errors.WithLabelValues(name, "resolve").Inc()
			if errors.Is(err, ErrUnknownProvider) {
				s.warnRepeated("resolve\x00"+name, "provider supervisor: unknown provider; its queues keep their workers", err, "provider", name)
			} else {
				s.warnRepeated("resolve\x00"+name, "provider supervisor: the provider cannot be built (its declaration, project file or files it names are wrong); its queues keep their workers",
					err, "provider", name)
			}
			continue
		}
		s.recovered("resolve\x00" + name)
		var mine []plane.QueueProvider
		s.state.Lock()
		for _, r := range refsOf[name] {
			k := queueKey{r.Namespace, r.Queue}
			if !s.busyQueues[k] {
				s.busyQueues[k] = true
				mine = append(mine, r)
			}
		}
		s.busy[name] = len(mine) > 0
		s.state.Unlock()
		if len(mine) == 0 {
			continue // its queues are the work of the provider they had before, still running
		}
		n++
		started.Add(1)
		s.work.Go(func() {
			defer started.Done()
			err := s.providerWork(ctx, name, p, mine, demand, workersOf)
			s.state.Lock()
			delete(s.busy, name)
			for _, r := range mine {
				delete(s.busyQueues, queueKey{r.Namespace, r.Queue})
			}
			s.results = append(s.results, workResult{provider: name, err: err})
			s.state.Unlock()
		})
	}
	s.forgetAllBut(keep)
	if n == 0 {
		observe()
	} else {
		go func() { // the tick's cost: until the work it started ended
			started.Wait()
			observe()
		}()
	}
	return started, nil
}

// providerWork is one tick of provider p (named name) for its queues refs: one List (which
// launches still run), then each queue in turn. Its queues' tracks are its own while it
// runs (busyQueues), and one provider's work runs at a time (busy), so a List always starts
// after the launches of the provider's previous work. It returns the plane's errors.
func (s *Supervisor) providerWork(ctx context.Context, name string, p Provider, refs []plane.QueueProvider,
	demand map[queueKey][]plane.ShapeDemand, workersOf map[queueKey][]plane.WorkerInfo) error {
	if !s.check(ctx, name, p) {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	list, err := p.List(cctx)
	cancel()
	if err != nil {
		s.state.Lock()
		s.failing[name] = true
		s.state.Unlock()
		s.cfg.Metrics.errors.WithLabelValues(name, "list").Inc()
		s.warnRepeated("list\x00"+name, "provider supervisor: list launches failed; skipping its queues this tick", err, "provider", name)
		return nil
	}
	s.recovered("list\x00" + name)
	s.state.Lock()
	wasFailing := s.failing[name]
	delete(s.failing, name)
	s.state.Unlock()
	if wasFailing {
		s.cfg.Logger.Info("provider supervisor: the provider answers again", "provider", name)
	}
	alive := make(map[string]LaunchStatus, len(list)) // launch id → status
	launchesOf := make(map[queueKey][]LaunchStatus)
	for _, l := range list {
		if l.State != LaunchExited {
			alive[l.ID] = l
			k := queueKey{l.Namespace, l.Queue}
			launchesOf[k] = append(launchesOf[k], l)
		}
	}
	for _, r := range refs {
		k := queueKey{r.Namespace, r.Queue}
		v := queueView{ref: r.Provider, alive: alive, launches: launchesOf[k], demand: demand[k], workers: workersOf[k]}
		if err := s.queue(ctx, k, p, &v); err != nil {
			return err
		}
	}
	return nil
}

// check runs p's Check the first time the supervisor uses p. It reports whether to go on
// with p this tick: false when the check failed (its error is logged; List, the next
// tick, is the next try).
func (s *Supervisor) check(ctx context.Context, name string, p Provider) bool {
	s.state.Lock()
	checked := s.checked[name]
	s.checked[name] = true
	s.state.Unlock()
	if checked {
		return true
	}
	c, ok := p.(Checker)
	if !ok {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	err := c.Check(cctx)
	cancel()
	if err == nil {
		return true
	}
	s.state.Lock()
	if ctx.Err() != nil {
		s.checked[name] = false
		s.state.Unlock()
		return false
	}
	s.failing[name] = true
	s.state.Unlock()
	s.cfg.Metrics.errors.WithLabelValues(name, "check").Inc()
	s.cfg.Logger.Error("provider supervisor: the provider cannot work; its queues keep the workers they have, and it is tried again every tick",
		"provider", name, "error", err)
	return false
}

// repeatedFailure is a failure that recurs at every tick, as last logged.
type repeatedFailure struct {
	message string    // its error, as logged
	logged  time.Time // when it was last logged
	repeats int       // how many times it recurred since
}

// warnRepeated logs a failure of what (a tick, or a provider's operation) as a warning: at
// once when it is new or its error changed, otherwise at most once per FailureRepeatLog,
// with the number of times it recurred since it was last logged ("repeated") and since
// when ("over"). A failure that recurs at every tick (each second) would otherwise flood
// the log with the same line.
func (s *Supervisor) warnRepeated(what, msg string, err error, args ...any) {
	now, text := s.cfg.Now(), err.Error()
	s.state.Lock()
	f := s.repeating[what]
	if f != nil && f.message == text {
		f.repeats++
		if now.Sub(f.logged) < FailureRepeatLog {
			s.state.Unlock()
			return
		}
		args = append(args, "repeated", f.repeats, "over", now.Sub(f.logged).Round(time.Second))
	}
	s.repeating[what] = &repeatedFailure{message: text, logged: now}
	s.state.Unlock()
	s.cfg.Logger.Warn(msg, append(args, "error", text)...)
}

// recovered forgets the failure of what: the next one is logged at once.
func (s *Supervisor) recovered(what string) {
	s.state.Lock()
	defer s.state.Unlock()
	delete(s.repeating, what)
}

// forgetAllBut drops the tracks of queues that lost their provider, releasing their leases;
// not those a provider's work in flight acts for (the next tick does, once it ended).
func (s *Supervisor) forgetAllBut(keep map[queueKey]bool) {
	s.state.Lock()
	forget := map[queueKey]bool{} // → its lease is held
	for k, tr := range s.queues {
		if !keep[k] && !s.busyQueues[k] {
			forget[k] = tr.held
		}
	}
	s.state.Unlock()
	for k, held := range forget {
		if held {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
			_ = s.cfg.Driver.LeaseRelease(ctx, k.namespace, leaseName(k.queue), s.cfg.Holder)
			cancel()
		}
		s.drop(k)
	}
}

// drop forgets queue k: its track, its gauges and its failed stops.
func (s *Supervisor) drop(k queueKey) {
	s.state.Lock()
	delete(s.queues, k)
	s.state.Unlock()
	s.cfg.Metrics.forget(k)
	s.mu.Lock()
	delete(s.stopFailed, k)
	s.mu.Unlock()
}

// errLeaseLost ends a queue's tick once another supervisor took its lease (holdLease
// dropped the queue's track).
var errLeaseLost = errors.New("another supervisor took the queue")

// holdLease takes this supervisor's lease of queue k, or renews it once a third of its TTL
// has passed since the last renewal, and reports whether the supervisor holds it. When
// another supervisor holds it, the queue's track is dropped: its launches are the holder's
// to adopt. A tick takes it before it acts on the queue and again before each launch, as
// a tick's launches may outlast the lease (each may take the call timeout, twice the
// default lease).
func (s *Supervisor) holdLease(ctx context.Context, k queueKey, tr *queueTrack, providerName string) (bool, error) {
	now := s.cfg.Now()
	if tr.held && now.Sub(tr.renewed) < s.cfg.LeaseTTL/3 {
		return true, nil
	}
	held, err := s.cfg.Driver.LeaseAcquire(ctx, &plane.LeaseParams{Namespace: k.namespace, Name: leaseName(k.queue),
		Holder: s.cfg.Holder, TTL: s.cfg.LeaseTTL})
	if err != nil {
		return false, fmt.Errorf("lease of %s/%s: %w", k.namespace, k.queue, err)
	}
	if !held {
		if tr.held {
			s.cfg.Logger.Info("provider supervisor: another supervisor took the queue", "namespace", k.namespace, "queue", k.queue)
		}
		s.drop(k)
		return false, nil
	}
	if !tr.held {
		s.cfg.Logger.Info("provider supervisor: acting for the queue", "namespace", k.namespace, "queue", k.queue, "provider", providerName)
	}
	tr.held, tr.renewed = true, now
	return true, nil
}

// queueView is what a tick read about one queue.
type queueView struct {
	ref      plane.ProviderRef
	alive    map[string]LaunchStatus // every launch its provider runs, by id
	launches []LaunchStatus          // those of this queue
	demand   []plane.ShapeDemand     // by shape, the default shape's when it has jobs
	workers  []plane.WorkerInfo      // registered workers of this queue with a launch id
}

// launchOf reports whether launch l, as its provider lists it, is one of queue k (whose
// track is tr), so that a registered worker naming its id may count as it. A provider that
// lists a launch's namespace and queue says whose it is. One that leaves either empty (an
// exec program may) says nothing: such a launch is this queue's only when this supervisor
// launched it for this queue and still tracks it (tr.shapeOf, set at the launch), never by
// its id alone — else a registration of this queue naming another queue's launch id would
// count as it, and have it stopped as idle. (A supervisor started after such a launch does
// not adopt it: docs/providers.md, "List".)
func launchOf(k queueKey, tr *queueTrack, l LaunchStatus) bool {
	if l.Namespace != "" && l.Queue != "" {
		return l.Namespace == k.namespace && l.Queue == k.queue
	}
	if l.Namespace != "" && l.Namespace != k.namespace || l.Queue != "" && l.Queue != k.queue {
		return false
	}
	_, ours := tr.shapeOf[l.ID]
	return ours
}

// queue acts for one queue: take or renew its lease, reconcile launches, decide, act.
func (s *Supervisor) queue(ctx context.Context, k queueKey, p Provider, v *queueView) error {
	ref, alive := v.ref, v.alive
	now := s.cfg.Now()
	s.state.Lock()
	tr := s.queues[k]
	if tr == nil {
		tr = &queueTrack{pending: map[string]time.Time{}, seen: map[string]bool{}, stopping: map[string]bool{},
			shapeOf: map[string]string{}, shapes: map[string]*shapeTrack{}}
		s.queues[k] = tr
	}
	s.state.Unlock()
	// The launches the previous List left out: their tokens (if a supervisor minted them)
	// are revoked now if this List leaves them out too; one listed again runs on with its
	// token (it is adopted again below). Before the lease: revoking needs none, and a
	// supervisor that lost the queue's lease meanwhile is the only one that knows them.
	for id := range tr.ended {
		if _, up := alive[id]; !up {
			s.revokeToken(k, id)
		}
	}
	tr.ended = nil
	switch {
	case s.cfg.DryRun:
		// A dry run takes no lease: it must never keep a real supervisor from a queue.
		if !tr.watched {
			tr.watched = true
			s.cfg.Logger.Info("provider supervisor: watching the queue (dry run: no lease taken, nothing launched or stopped)",
				"namespace", k.namespace, "queue", k.queue, "provider", ref.Name)
		}
	default:
		if held, err := s.holdLease(ctx, k, tr, ref.Name); err != nil || !held {
			return err
		}
	}

	policy := ref.Policy.WithDefaults()
	labels := []string{k.namespace, k.queue, ref.Name}

	// A stop that failed: the launch is considered again (stopped again if still idle or
	// expired), never left running unmanaged.
	for _, id := range s.takeStopFailed(k) {
		delete(tr.stopping, id)
	}
	// Registered workers of this queue launched by this provider, alive in it.
	var workers []plane.WorkerInfo
	pending := map[string]time.Time{}
	registered := map[string]bool{}
	for _, w := range v.workers {
		if w.Provider != ref.Name {
			continue
		}
		l, ok := alive[w.LaunchID]
		if !ok {
			continue // ended; its registration has not aged out yet
		}
		if !launchOf(k, tr, l) {
			// A launch of another queue (of another namespace, or of this one): a
			// registration names its launch id itself, and any token that may consume a
			// queue registers workers of that queue, so a worker of this queue naming the
			// launch id of another (another tenant's, or a queue its token is not scoped
			// to) must not count as it (nor have it stopped as idle).
			continue
		}
		registered[w.LaunchID] = true
		if !tr.stopping[w.LaunchID] {
			workers = append(workers, w)
		}
	}
	// Launches of this queue the provider runs that are not registered: ours, or adopted.
	for _, l := range v.launches {
		id := l.ID
		if _, known := tr.shapeOf[id]; !known {
			tr.shapeOf[id] = l.Shape // an adopted launch: the shape its provider kept, or the default
		}
		if registered[id] || tr.stopping[id] {
			continue
		}
		if _, ok := tr.pending[id]; !ok {
			tr.pending[id] = now
			if !tr.seen[id] {
				s.cfg.Logger.Info("provider supervisor: adopted a running launch", "namespace", k.namespace, "queue", k.queue, "launch", id,
					"shape", shapeName(tr.shapeOf[id]))
			}
		}
	}
	for id := range tr.pending {
		switch {
		case registered[id]:
			delete(tr.pending, id)
			st := tr.shape(tr.shapeOf[id])
			st.failures, st.nextLaunch = 0, time.Time{}
		case !aliveOrJustLaunched(alive, id, tr.pending[id], now, s.cfg.Tick):
			delete(tr.pending, id)
		default:
			pending[id] = tr.pending[id]
		}
	}
	for id := range registered {
		tr.seen[id] = true
	}
	for id := range pending {
		tr.seen[id] = true
	}
	// Launches we asked to stop drain until they end: live (max_workers caps what runs),
	// but neither stopped again nor adopted.
	stopping := map[string]int{} // by shape
	for id := range tr.stopping {
		if _, up := alive[id]; up {
			stopping[tr.shapeOf[id]]++
			tr.seen[id] = true
		}
	}
	ended := map[string]bool{}
	// A launch seen alive that ended without our stop: a crash (or SLURM killed it).
	for id := range tr.seen {
		_, isPending := pending[id]
		_, up := alive[id]
		if registered[id] || isPending || (tr.stopping[id] && up) {
			continue
		}
		delete(tr.seen, id)
		shape := tr.shapeOf[id]
		delete(tr.shapeOf, id)
		if !s.cfg.DryRun {
			ended[id] = true // its token is revoked if the next List leaves it out too
		}
		if tr.stopping[id] {
			delete(tr.stopping, id)
			continue
		}
		if s.cfg.DryRun {
			continue // perhaps the acting supervisor stopped it: not ours to count
		}
		s.fail(tr.shape(shape), now, labels, shape, "ended", id, append(launchExit(p, id), s.launchLog(p, id, policy)...)...)
	}
	tr.ended = ended

	// One state per shape: the default shape, every shape with demand, every shape with
	// live launches.
	states := map[string]*QueueState{}
	state := func(shape string) *QueueState {
		st := states[shape]
		if st == nil {
			sh := tr.shape(shape)
			st = &QueueState{Policy: policy, Shaped: shape != "", Pending: map[string]time.Time{}, LastScaleDown: sh.lastScale,
				NextLaunch: sh.nextLaunch, Now: now}
			states[shape] = st
		}
		return st
	}
	state("")
	oldest := map[string]time.Duration{}
	for _, d := range v.demand {
		st := state(d.Shape)
		st.Queued, st.Running, st.Paused = d.Queued, d.Running, d.Paused
		oldest[d.Shape] = d.OldestReady
		if d.Shape != "" {
			tr.shape(d.Shape).requirement = d.Requirement
		}
	}
	for _, w := range workers {
		st := state(tr.shapeOf[w.LaunchID])
		st.Workers = append(st.Workers, w)
	}
	for id, at := range pending {
		state(tr.shapeOf[id]).Pending[id] = at
	}
	for shape, n := range stopping {
		state(shape).Stopping = n
	}
	// MaxWorkers caps the queue's workers over all its shapes: the shapes waiting longest
	// decide first, each within what the others leave.
	order := slices.Collect(maps.Keys(states))
	slices.SortFunc(order, func(a, b string) int {
		if c := cmp.Compare(oldest[b], oldest[a]); c != 0 {
			return c
		}
		if c := cmp.Compare(states[b].Queued, states[a].Queued); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	used := 0
	for _, st := range states {
		used += len(st.Workers) + len(st.Pending) + max(st.Stopping, 0)
	}
	want, live := 0, 0
	for _, shape := range order {
		st := states[shape]
		mine := len(st.Workers) + len(st.Pending) + max(st.Stopping, 0)
		st.Policy.MaxWorkers = max(0, policy.MaxWorkers-(used-mine))
		st.Policy.MinWorkers = min(st.Policy.MinWorkers, st.Policy.MaxWorkers)
		launched, d, err := s.decideShape(ctx, k, p, ref.Name, tr, shape, st)
		if errors.Is(err, errLeaseLost) {
			return nil // the holder acts for the queue now
		}
		if err != nil {
			return err
		}
		used += launched
		want += d.Want
		live += d.Live + launched
	}
	s.cfg.Metrics.want.WithLabelValues(labels...).Set(float64(want))
	s.cfg.Metrics.live.WithLabelValues(labels...).Set(float64(live))
	return nil
}

// shapeName is how a log line names a shape: its key, or "default".
func shapeName(shape string) string {
	if shape == "" {
		return "default"
	}
	return shape
}

// decideShape decides for one shape of queue k and acts: it stops expired and idle launches
// and launches workers offering the shape, unless no launch of p can offer it (a
// ShapeChecker's answer, or offers the --offers form cannot carry), which it reports
// instead. It returns how many it launched and the decision.
func (s *Supervisor) decideShape(ctx context.Context, k queueKey, p Provider, name string, tr *queueTrack, shape string, st *QueueState) (int, Decision, error) {
	sh := tr.shape(shape)
	labels := []string{k.namespace, k.queue, name}
	shapeLabels := append(slices.Clone(labels), shapeName(shape))
	d := Decide(st)
	s.cfg.Metrics.shapeWant.WithLabelValues(shapeLabels...).Set(float64(d.Want))
	s.cfg.Metrics.shapeLive.WithLabelValues(shapeLabels...).Set(float64(d.Live))
	var offers string
	if shape != "" {
		why := ""
		var ok bool
		if sh.requirement == nil {
			why = "its requirement is not known (no demand read for it)"
		} else if offers, ok = plane.FormatOffers((*plane.Offers)(sh.requirement)); !ok {
			why = "a label value holds a comma or surrounding spaces, which --offers cannot carry"
		} else if c, can := p.(ShapeChecker); can {
			if err := c.CanOffer(sh.requirement); err != nil {
				why = err.Error()
			}
		}
		if why != sh.unlaunchable {
			sh.unlaunchable = why
			if why != "" {
				s.cfg.Logger.Warn("provider supervisor: no launch of the provider can offer the shape; its jobs wait for a worker started otherwise",
					"namespace", k.namespace, "queue", k.queue, "provider", name, "shape", shape, "requirement", offers, "reason", why)
			} else {
				s.cfg.Logger.Info("provider supervisor: the provider can offer the shape again", "namespace", k.namespace, "queue", k.queue,
					"provider", name, "shape", shape)
			}
		}
		s.cfg.Metrics.unlaunchable.WithLabelValues(shapeLabels...).Set(float64(min(1, len(why))))
		if why != "" && d.Launch > 0 {
			d.Launch, d.Reason = 0, "no launch can offer the shape"
		}
	}
	if d.Launch == 0 && len(d.Stop) == 0 && len(d.Expired) == 0 {
		sh.lastDecision = ""
		return 0, d, nil
	}
	if s.cfg.DryRun {
		// What it would do, once per change: the same decision repeats at every tick, as
		// nothing acts on it.
		key := fmt.Sprint(d.Want, d.Live, d.Launch, d.Stop, d.Expired, d.Reason)
		if key == sh.lastDecision {
			return 0, d, nil
		}
		sh.lastDecision = key
	}
	s.cfg.Logger.Info("provider supervisor: decision", "namespace", k.namespace, "queue", k.queue, "provider", name,
		"shape", shapeName(shape), "queued", st.Queued, "running", st.Running, "want", d.Want, "live", d.Live, "launch", d.Launch,
		"stop", len(d.Stop), "expired", len(d.Expired), "reason", d.Reason, "dry_run", s.cfg.DryRun)
	if s.cfg.DryRun {
		s.cfg.Metrics.decisions.WithLabelValues(append(labels, "dry_run")...).Inc()
		return 0, d, nil
	}
	s.cfg.Metrics.decisions.WithLabelValues(append(labels, "acted")...).Inc()
	now := st.Now
	for _, id := range d.Expired {
		delete(tr.pending, id)
		tr.stopping[id] = true // counted once; drains (or is cancelled) and is not adopted again
		s.fail(sh, now, labels, shape, "register_timeout", id)
		s.stop(p, k, id, labels, "register_timeout")
	}
	for _, id := range d.Stop {
		tr.stopping[id] = true
		sh.lastScale = now
		s.stop(p, k, id, labels, "idle")
	}
	launched := 0
	for range d.Launch {
		if held, err := s.holdLease(ctx, k, tr, name); err != nil {
			return launched, d, err
		} else if !held {
			return launched, d, errLeaseLost
		}
		l := s.launchSpec(k, name, st.Policy, shape, sh.requirement, offers)
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		minted, err := s.mintToken(cctx, k, l)
		if err == nil {
			err = p.Launch(cctx, l)
		}
		cancel()
		if err != nil {
			if minted {
				s.revokeToken(k, l.ID)
			}
			s.cfg.Metrics.launches.WithLabelValues(append(labels, "error")...).Inc()
			// A provider's error may quote the environment (a program's stderr echoing its
			// stdin): the policy's env and the supervisor's, and the launch's token, are
			// secrets to the log.
			s.cfg.Logger.Warn("provider supervisor: launch failed", "namespace", k.namespace, "queue", k.queue,
				"provider", name, "shape", shapeName(shape), "error", plane.RedactTokenSecrets(plane.RedactValuesIn(err.Error(), s.secretEnv(st.Policy))))
			s.fail(sh, now, labels, shape, "launch", l.ID)
			break // back off before the next one
		}
		launched++
		s.cfg.Metrics.launches.WithLabelValues(append(labels, "ok")...).Inc()
		tr.pending[l.ID], tr.seen[l.ID], tr.shapeOf[l.ID] = now, true, shape
		sh.lastScale = now
		s.cfg.Logger.Info("provider supervisor: launched", "namespace", k.namespace, "queue", k.queue, "provider", name,
			"shape", shapeName(shape), "offers", offers, "launch", l.ID)
	}
	return launched, d, nil
}

// aliveOrJustLaunched: a launch counts while its provider lists it, or for two ticks after
// it was made (a provider may list a launch a moment after accepting it).
func aliveOrJustLaunched(alive map[string]LaunchStatus, id string, at, now time.Time, tick time.Duration) bool {
	if _, ok := alive[id]; ok {
		return true
	}
	return now.Sub(at) < 2*tick
}

// fail counts a failed launch and backs the next launch of its shape off; args are added to
// its log line.
func (s *Supervisor) fail(sh *shapeTrack, now time.Time, labels []string, shape, kind, id string, args ...any) {
	sh.failures++
	wait := min(backoffMax, time.Second<<min(sh.failures-1, 10))
	sh.nextLaunch = now.Add(wait)
	s.cfg.Metrics.failures.WithLabelValues(append(labels, kind)...).Inc()
	s.cfg.Logger.Warn("provider supervisor: worker failed", append([]any{"namespace", labels[0], "queue", labels[1], "provider", labels[2],
		"shape", shapeName(shape), "launch", id, "failure", kind, "consecutive", sh.failures, "next_launch_in", wait}, args...)...)
}

// launchLogTail is how much of a launch's log file launchLog reads for its last line, and
// launchLogLineMax the most of that line it quotes (its end: an error's message ends a
// traceback's last line).
const (
	launchLogTail    = 4096
	launchLogLineMax = 512
)

// launchExit is what a "worker failed failure=ended" line says of how the launch's process
// ended, when p is an ExitReporter that knows: exit_code, or exit_signal.
func launchExit(p Provider, id string) []any {
	e, ok := p.(ExitReporter)
	if !ok {
		return nil
	}
	code, signal, ok := e.ExitStatus(id)
	switch {
	case !ok:
		return nil
	case signal != "":
		return []any{"exit_signal", signal}
	}
	return []any{"exit_code", code}
}

// launchLog is what a "worker failed failure=ended" line adds so its cause can be found:
// the launch's log file ("log", when p is a LogLocator) and, when that file is on this
// machine (an absolute path), its last non-blank line ("log_last_line") with the launch's
// secrets (secretEnv) as xxxxx and every token secret too. A file that cannot be read adds no line.
func (s *Supervisor) launchLog(p Provider, id string, policy plane.LaunchPolicy) []any {
	l, ok := p.(LogLocator)
	if !ok {
		return nil
	}
	path := l.LogPath(id)
	if path == "" {
		return nil
	}
	args := []any{"log", path}
	if !filepath.IsAbs(path) {
		return args
	}
	secrets := s.secretEnv(policy)
	if last := lastLine(path, func(line string) string {
		// A launch's own token (mintToken) is known to no supervisor that adopted it.
		return plane.RedactTokenSecrets(plane.RedactValuesIn(line, secrets))
	}); last != "" {
		args = append(args, "log_last_line", last)
	}
	return args
}

// lastLine returns the last non-blank line of the file at path, from its last
// launchLogTail bytes, redacted (redact hides its secrets), then at most launchLogLineMax
// bytes of its end; "" when there is none or the file cannot be read. Only a whole line is
// redacted and quoted, and it is cut only once redacted: a secret cut short (by the cut, or
// by the start of the bytes read) is one no redaction recognises, and its end would be
// quoted. A last line longer than launchLogTail is not quoted.
func lastLine(path string, redact func(string) string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return ""
	}
	at := max(0, info.Size()-launchLogTail-1) // one byte more: is the first line read whole?
	b := make([]byte, info.Size()-at)
	if _, err := f.ReadAt(b, at); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	text := string(b)
	if at > 0 {
		// The first line read may have begun before: not whole, it is dropped.
		_, text, _ = strings.Cut(text, "\n")
	}
	text = strings.TrimRight(text, " \t\r\n")
	text = redact(strings.TrimSpace(text[strings.LastIndexByte(text, '\n')+1:]))
	if len(text) > launchLogLineMax {
		text = "…" + text[len(text)-launchLogLineMax:]
	}
	return strings.ToValidUTF8(text, "\uFFFD")
}

// stop asks the provider to stop a launch, in the background (it drains for up to
// StopGrace).
func (s *Supervisor) stop(p Provider, k queueKey, id string, labels []string, reason string) {
	s.cfg.Metrics.stops.WithLabelValues(append(labels, reason)...).Inc()
	s.cfg.Logger.Info("provider supervisor: stopping", "namespace", k.namespace, "queue", k.queue, "launch", id, "reason", reason)
	s.stops.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StopGrace+s.cfg.CallTimeout)
		defer cancel()
		if err := p.Stop(ctx, id, s.cfg.StopGrace); err != nil {
			// Recorded for the next tick, logged, then counted, in that order: whoever sees
			// the count (an alert, a test) finds the log line, and the launch due to be
			// considered again at the next tick.
			s.mu.Lock()
			if s.stopFailed[k] == nil {
				s.stopFailed[k] = map[string]bool{}
			}
			s.stopFailed[k][id] = true
			s.mu.Unlock()
			s.cfg.Logger.Warn("provider supervisor: stop failed; the launch is considered again at the next tick",
				"namespace", k.namespace, "queue", k.queue, "launch", id, "error", err)
			s.cfg.Metrics.errors.WithLabelValues(p.Name(), "stop").Inc()
		}
	})
}

// takeStopFailed returns (and forgets) queue k's launches whose Stop failed.
func (s *Supervisor) takeStopFailed(k queueKey) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.Collect(maps.Keys(s.stopFailed[k]))
	delete(s.stopFailed, k)
	return ids
}

// secretEnv is what a log line must not quote of a launch's environment: the policy's env,
// the supervisor's LAKESHORE_TOKEN and any of its WorkerEnv values holding a URL with a
// password (LAKESHORE_URL of a postgres:// plane), and what plane.CommandSecrets finds in the
// policy's command (a --token's value, an env assignment's); not the LAKESHORE_* variables
// describing the launch, which name the queue and provider the line is about.
func (s *Supervisor) secretEnv(p plane.LaunchPolicy) map[string]string {
	out := maps.Clone(p.Env)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range s.cfg.WorkerEnv {
		if k == "LAKESHORE_TOKEN" && v != "" || plane.RedactURL(v) != v {
			out["\x00worker:"+k] = v // beside the policy's variable of the same name
		}
	}
	for i, v := range plane.CommandSecrets(p.Command) { // --token x, NAME=VALUE, a URL's password
		out[fmt.Sprintf("\x00command:%d", i)] = v
	}
	return out
}

// mintToken gives launch l a token of its own in place of the supervisor's: when l's
// LAKESHORE_TOKEN is the supervisor's (WorkerEnv's; a policy's Env that sets its own is
// kept), it stores a token with id LaunchTokenID(l.ID) granting LaunchTokenPermissions on
// l's namespace and puts its secret in l.Env. A launched worker runs its submitters' code
// (shipped code, thunks), which can read its environment, so it must never hold the
// supervisor's token, which may administer the namespace or the whole server. When the
// plane refuses (a supervisor whose token is a namespace's admin may not create tokens:
// only the server's admin may), it logs once that launches get the supervisor's token and
// what to do, and mints no more. It reports whether it stored a token.
func (s *Supervisor) mintToken(ctx context.Context, k queueKey, l *Launch) (bool, error) {
	own := s.cfg.WorkerEnv[EnvToken]
	if own == "" || l.Env[EnvToken] != own {
		return false, nil
	}
	s.mu.Lock()
	off := s.noMint
	s.mu.Unlock()
	if off {
		return false, nil
	}
	secret, hash := plane.NewTokenSecret()
	tok := &plane.TokenInfo{ID: LaunchTokenID(l.ID), Hash: hash, Namespace: k.namespace, Queue: "*",
		Permissions: slices.Clone(LaunchTokenPermissions), CreatedAt: s.cfg.Now()}
	if err := s.cfg.Driver.TokenCreate(ctx, tok); err != nil {
		if !errors.Is(err, plane.ErrForbidden) && !errors.Is(err, plane.ErrNotImplemented) {
			return false, fmt.Errorf("create the launch's token: %w", err)
		}
		s.mu.Lock()
		first := !s.noMint
		s.noMint = true
		s.mu.Unlock()
		if first {
			s.cfg.Logger.Warn("provider supervisor: the plane refused a token for the launched workers (only the server's admin token may create "+
				"tokens), so they get the supervisor's own token, which every job they run can read; run the supervisor with the server's "+
				"admin token, or give each queue's workers a token of their own with --worker-env LAKESHORE_TOKEN=…",
				"namespace", k.namespace, "queue", k.queue, "error", err)
		}
		return false, nil
	}
	l.Env[EnvToken] = secret
	return true, nil
}

// revokeToken revokes the token minted for launch id, if any (LaunchTokenID): its worker
// ended, or never started. An unknown id (a launch given no token of its own) is nothing
// to do; another failure is logged, and the token stays valid with no process holding it.
// A supervisor that mints no tokens (its workers get no LAKESHORE_TOKEN of it: its plane
// is postgres:// or a file) revokes all the same: a launch it adopted from one that
// minted has a token only it can revoke.
func (s *Supervisor) revokeToken(k queueKey, id string) {
	s.mu.Lock()
	off := s.noMint
	s.mu.Unlock()
	if off {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
	defer cancel()
	// Not found: the launch got no token of its own; forbidden: this supervisor may not
	// manage tokens, so it made none (mintToken logs that once); not implemented: a plane
	// without tokens.
	if _, err := s.cfg.Driver.TokenRevoke(ctx, LaunchTokenID(id)); err != nil && !errors.Is(err, plane.ErrNotFound) &&
		!errors.Is(err, plane.ErrForbidden) && !errors.Is(err, plane.ErrNotImplemented) {
		s.cfg.Logger.Warn("provider supervisor: could not revoke the token of an ended launch", "namespace", k.namespace,
			"queue", k.queue, "launch", id, "token", LaunchTokenID(id), "error", err)
	}
}

// launchSpec makes a Launch for shape of queue k: a fresh id, the policy's command (with
// --offers for a `lakeshore worker` command of a shape), resources and environment, the
// supervisor's WorkerEnv, the LAKESHORE_* variables, and the shape's requirement.
func (s *Supervisor) launchSpec(k queueKey, name string, p plane.LaunchPolicy, shape string, r *plane.Requirement, offers string) *Launch {
	env := make(map[string]string, len(p.Env)+len(s.cfg.WorkerEnv)+6)
	maps.Copy(env, s.cfg.WorkerEnv)
	maps.Copy(env, p.Env)
	id := s.ids.New(s.cfg.Now())
	env[EnvLaunchID], env[EnvProvider], env[EnvQueue], env[EnvNamespace] = id, name, k.queue, k.namespace
	l := &Launch{ID: id, Namespace: k.namespace, Queue: k.queue, Command: slices.Clone(p.Command), Env: env, Resources: p.Resources}
	if shape != "" {
		env[EnvShape], env[EnvOffers] = shape, offers
		l.Shape, l.Requirement = shape, r
		l.Command = WithOffers(l.Command, offers)
	}
	return l
}
