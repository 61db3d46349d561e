package planetest_test

import (
	"cmp"
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// TestReference runs the suite against refDriver, a deliberately simple in-memory plane
// written from the semantics page alone. It keeps the suite honest while the real planes are
// being built: every check must be satisfiable, and (by mutating refDriver by hand) each
// must fail for the bug it names.
func TestReference(t *testing.T) {
	planetest.Run(t, func(t *testing.T, opts planetest.Options) plane.Driver {
		d := newRefDriver(opts)
		t.Cleanup(func() { d.Close() })
		return d
	})
}

type refInvocation struct {
	inv       plane.Invocation
	token     string // the current lease's token ("" when not running)
	lastToken string // the token of the latest claim
	frames    []plane.Frame
	closed    bool // terminal: the journal ended
	closedBy  int  // the attempt whose final post stored an END frame, 0 when none did
	// heldUntil is plane.KeyHeldUntil (ms, 0: no dedup window): trims keep the invocation
	// until then while it still holds its key.
	heldUntil int64
}

type refTopicKey struct{ ns, q, topic string }

type refTopic struct {
	frames  []plane.Frame
	closed  bool
	updated time.Time // the last post: retention trims a topic idle for longer
}

type refKey struct{ ns, q, key string }

// refDriver is a plane.Driver kept in memory under one mutex. Waiters wait on a channel that
// every change closes and replaces.
type refDriver struct {
	now     func() time.Time
	backoff plane.Backoff
	ids     *plane.IDGenerator

	mu     sync.Mutex
	rng    *rand.Rand
	invs   map[string]*refInvocation
	keys   map[refKey]string
	topics map[refTopicKey]*refTopic
	// maxTopics and maxWorkers are the caps (plane.CheckTopicCount, CheckWorkerCount).
	maxTopics, maxWorkers int
	// retention is Options.Retention, else plane.RetentionDefault.
	retention time.Duration
	changed   chan struct{}
	closed    bool
	workers   map[[2]string]plane.WorkerInfo
	// rotation is how many claims over several queues began: the first queue they try
	// turns with it.
	rotation int
	// providers and leases are created on first use (reference_provider_test.go).
	providers map[[2]string][]byte // the ProviderRef as JSON, by (namespace, queue)
	leases    map[[2]string]refLease
	paused    map[[2]string]bool // the paused queues, created on first use
	// passes are the fair-share turns of concurrency keys (no limits: the reference keeps
	// no admission blocks), created when a key joins the rotation and forgotten when it has
	// no queued or running invocation; joined marks the keys that joined since their last
	// claim (they go first on a tie).
	passes map[refKey]float64
	joined map[refKey]bool
	// held are the concurrency keys a rate-limited settle holds back, until when.
	held map[refKey]time.Time
	// lastPass is the clock reading of the last maintenance pass: invocations that came due
	// since then wake the waiters.
	lastPass time.Time

	done chan struct{}
	wg   sync.WaitGroup
}

var _ plane.Driver = (*refDriver)(nil)

func newRefDriver(opts planetest.Options) *refDriver {
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	d := &refDriver{
		now:        opts.Now,
		backoff:    opts.Backoff,
		maxTopics:  opts.MaxTopicsPerQueue,
		maxWorkers: opts.MaxWorkersPerNamespace,
		retention:  cmp.Or(opts.Retention, plane.RetentionDefault),
		ids:        plane.NewIDGenerator(),
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		invs:       map[string]*refInvocation{},
		keys:       map[refKey]string{},
		topics:     map[refTopicKey]*refTopic{},
		changed:    make(chan struct{}),
		done:       make(chan struct{}),
		workers:    map[[2]string]plane.WorkerInfo{},
	}
	if opts.Now == nil {
		d.now = time.Now
	}
	interval := cmp.Or(opts.MaintenanceInterval, time.Second)
	d.wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-d.done:
				return
			case <-tick.C:
				d.Maintain(context.Background()) //nolint:errcheck // nothing to report to
			}
		}
	})
	return d
}

// lock takes the mutex unless the plane is closed.
func (d *refDriver) lock() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return plane.ErrClosed
	}
	return nil
}

// notify wakes every waiter; call with the mutex held.
func (d *refDriver) notify() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// waitChange waits, with the mutex held on entry and on return, until something changes,
// until deadline, or until ctx ends. It reports false when the wait is over.
func (d *refDriver) waitChange(ctx context.Context, deadline time.Time) (bool, error) {
	ch := d.changed
	d.mu.Unlock()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var err error
	more := true
	select {
	case <-ch:
	case <-timer.C:
		more = false
	case <-ctx.Done():
		err = ctx.Err()
	case <-d.done:
		err = plane.ErrClosed
	}
	d.mu.Lock()
	if err == nil && d.closed {
		err = plane.ErrClosed
	}
	return more && err == nil, err
}

func (d *refDriver) InvocationSubmitMany(ctx context.Context, p *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	now := d.now()
	out := make([]plane.SubmitResult, len(p.Invocations))
	for _, s := range p.Invocations {
		if ri, ok := d.invs[s.ID]; ok && s.ID != "" && (ri.inv.Namespace != p.Namespace || ri.inv.Queue != p.Queue) {
			return nil, plane.IDTaken(s.ID)
		}
	}
	for i, s := range p.Invocations {
		if _, ok := d.invs[s.ID]; ok && s.ID != "" {
			// The caller's id held: this submit was made already (a retry), before any
			// key window applies.
			out[i] = plane.SubmitResult{ID: s.ID, Existing: true}
			continue
		}
		if s.Key != "" {
			k := refKey{p.Namespace, p.Queue, s.Key}
			if cutoff := plane.DedupCutoff(now, s.UniqueFor); !cutoff.IsZero() {
				if ri, ok := d.invs[d.keys[k]]; ok && plane.DedupFrees(ri.inv.Metadata, ri.inv.CreatedAt, cutoff) {
					ri.inv.Key = "" // the window has passed: it gives the key up
					delete(d.keys, k)
				}
			}
			if ri, ok := d.invs[d.keys[k]]; ok && s.Debounce > 0 {
				delayed := ri.inv.State == plane.StateQueued && ri.inv.AvailableAt.After(now)
				switch plane.Debounce(ri.inv.Metadata, delayed, ri.inv.Attempt, ri.inv.AvailableAt.After(now)) {
				case plane.DebounceFold: // still waiting for quiet: the last submit wins and pushes it back
					ri.inv.Payload, ri.inv.Metadata, ri.inv.AvailableAt = slices.Clone(s.Payload), plane.DebounceMetadata(&s), s.DueAt(now)
					out[i] = plane.SubmitResult{ID: ri.inv.ID, Existing: true}
					continue
				case plane.DebounceTakeOver: // started or finished: it gives the key up
					ri.inv.Key = ""
					delete(d.keys, k)
				}
			}
			if id, ok := d.keys[k]; ok {
				out[i] = plane.SubmitResult{ID: id, Existing: true}
				continue
			}
		}
		id := s.ID
		if id != "" {
			if _, ok := d.invs[id]; ok {
				out[i] = plane.SubmitResult{ID: id, Existing: true}
				continue
			}
		} else {
			id = d.ids.New(now)
		}
		d.invs[id] = &refInvocation{inv: plane.Invocation{
			ID: id, Namespace: p.Namespace, Queue: p.Queue, Key: s.Key, ConcurrencyKey: s.ConcurrencyKey, State: plane.StateQueued,
			Priority: s.Priority, Payload: slices.Clone(s.Payload), Metadata: plane.DebounceMetadata(&s),
			MaxAttempts: cmp.Or(s.MaxAttempts, plane.MaxAttemptsDefault), AttemptTimeout: s.AttemptTimeout,
			Deadline: s.Deadline, AvailableAt: s.DueAt(now), CreatedAt: now,
		}, heldUntil: plane.KeyHeldUntil(&s, now)}
		if !s.Requirement.IsZero() {
			r := *s.Requirement
			r.Labels = maps.Clone(r.Labels)
			d.invs[id].inv.Requirement, d.invs[id].inv.Shape = &r, r.Shape()
		}
		if s.Key != "" {
			d.keys[refKey{p.Namespace, p.Queue, s.Key}] = id
		}
		out[i] = plane.SubmitResult{ID: id}
	}
	d.notify()
	return out, nil
}

func (d *refDriver) InvocationClaimMany(ctx context.Context, p *plane.ClaimParams) ([]*plane.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.claimLocked(ctx, p)
}

// InvocationSettleAndClaim settles and makes the first claim under one hold of the lock.
func (d *refDriver) InvocationSettleAndClaim(ctx context.Context, ps []plane.SettleParams, p *plane.ClaimParams) ([]error, []*plane.Job, error) {
	for i := range ps {
		if err := ps[i].Validate(); err != nil {
			return nil, nil, err
		}
	}
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	if err := d.lock(); err != nil {
		return nil, nil, err
	}
	defer d.mu.Unlock()
	out := d.settleLocked(ps)
	jobs, _ := d.claimLocked(ctx, p) // the settles are done: a wait ended by ctx is no error
	return out, jobs, nil
}

// claimLocked is InvocationClaimMany with d.mu held.
func (d *refDriver) claimLocked(ctx context.Context, p *plane.ClaimParams) ([]*plane.Job, error) {
	kind, _ := plane.ParseKind(string(p.Kind))
	deadline := time.Now().Add(p.Wait)
	queues := p.QueueNames()
	for {
		// Several queues: the first with work, tried from one place further each time.
		first := d.rotation % len(queues)
		d.rotation++
		var jobs []*plane.Job
		for i := range queues {
			q := queues[(first+i)%len(queues)]
			for range max(p.Max, 1) {
				ri := d.pick(p.Namespace, q, kind, p.Temperature, p.Offers, p.WarmHostKeys)
				if ri == nil {
					break
				}
				jobs = append(jobs, d.start(ri, p))
			}
			if len(jobs) > 0 {
				break
			}
		}
		if len(jobs) > 0 {
			d.notify()
			return jobs, nil
		}
		if p.Wait == 0 {
			return nil, nil
		}
		// Wake when the next backoff ends, too (real clock only).
		wake := deadline
		var next time.Time
		for _, q := range queues {
			if n := d.nextAvailable(p.Namespace, q); !n.IsZero() && (next.IsZero() || n.Before(next)) {
				next = n
			}
		}
		if !next.IsZero() && d.now().Add(time.Until(wake)).After(next) {
			wake = time.Now().Add(next.Sub(d.now()))
		}
		more, err := d.waitChange(ctx, wake)
		if err != nil {
			return nil, err
		}
		if !more && !time.Now().Before(deadline) {
			return nil, nil
		}
	}
}

func (d *refDriver) nextAvailable(ns, q string) time.Time {
	var next time.Time
	for _, ri := range d.invs {
		inv := &ri.inv
		if inv.Namespace == ns && inv.Queue == q && inv.State == plane.StateQueued && (next.IsZero() || inv.AvailableAt.Before(next)) {
			next = inv.AvailableAt
		}
	}
	return next
}

// pick chooses the next claimable invocation of a queue that offers satisfy (plane/
// placement.go), ending those past their deadline.
//
// With warm host keys (not boltzmann), the first unkeyed job of a warm key goes before the
// first unkeyed job of all when plane.WarmFirst says so.
func (d *refDriver) pick(ns, q string, kind plane.Kind, temp float64, offers *plane.Offers, warmKeys []string) *refInvocation {
	if d.paused[[2]string{ns, q}] {
		return nil
	}
	now := d.now()
	var cands []*refInvocation
	for _, ri := range d.invs {
		inv := &ri.inv
		if inv.Namespace != ns || inv.Queue != q || inv.State != plane.StateQueued || !offers.Satisfies(inv.Requirement) {
			continue
		}
		if end := plane.ClaimTransition(inv.Deadline, now, 0, inv.Attempt); end != nil {
			d.apply(ri, *end)
			continue
		}
		if inv.AvailableAt.After(now) {
			continue
		}
		cands = append(cands, ri)
	}
	if len(cands) == 0 {
		return nil
	}
	slices.SortFunc(cands, func(a, b *refInvocation) int { return cmp.Compare(a.inv.ID, b.inv.ID) })
	// Keyed jobs: the head of the key whose turn it is (smallest pass; a key seen for the
	// first time joins at the current turn) against the head of the unkeyed jobs.
	var unkeyed, keyed []*refInvocation
	for _, c := range cands {
		if c.inv.ConcurrencyKey == "" {
			unkeyed = append(unkeyed, c)
		} else if until, ok := d.held[refKey{ns, q, c.inv.ConcurrencyKey}]; !ok || !now.Before(until) {
			keyed = append(keyed, c)
		}
	}
	if len(keyed) == 0 && len(unkeyed) == 0 {
		return nil
	}
	if len(warmKeys) > 0 && kind != plane.KindBoltzmann && len(unkeyed) > 0 {
		var warm []*refInvocation
		for _, c := range unkeyed {
			if slices.Contains(warmKeys, c.inv.Metadata[plane.MetaHostKey]) {
				warm = append(warm, c)
			}
		}
		if len(warm) > 0 {
			w, c := d.pickIn(warm, kind, temp), d.pickIn(unkeyed, kind, temp)
			if plane.WarmFirst(kind, w.inv.ID, w.inv.Priority, c.inv.ID, c.inv.Priority) {
				return w
			}
		}
	}
	if len(keyed) == 0 {
		return d.pickIn(unkeyed, kind, temp)
	}
	if d.passes == nil {
		d.passes, d.joined = map[refKey]float64{}, map[refKey]bool{}
	}
	active := map[refKey]bool{} // the keys with a queued or running invocation
	for _, ri := range d.invs {
		if inv := &ri.inv; inv.Namespace == ns && inv.Queue == q && inv.ConcurrencyKey != "" &&
			(inv.State == plane.StateQueued || inv.State == plane.StateRunning) {
			active[refKey{ns, q, inv.ConcurrencyKey}] = true
		}
	}
	for k := range d.passes {
		if k.ns == ns && k.q == q && !active[k] {
			delete(d.passes, k)
			delete(d.joined, k)
		}
	}
	// The current turn: the smallest pass of the keys with claimable jobs, else the largest
	// of the queue's keys; a key joins at it.
	turn, found := 0.0, false
	for _, c := range keyed {
		if p, ok := d.passes[refKey{ns, q, c.inv.ConcurrencyKey}]; ok && (!found || p < turn) {
			turn, found = p, true
		}
	}
	if !found {
		queueKeys := false
		for k, p := range d.passes {
			if k.ns == ns && k.q == q && (!queueKeys || p > turn) {
				turn, queueKeys = p, true
			}
		}
	}
	var key string
	for _, c := range keyed {
		k := refKey{ns, q, c.inv.ConcurrencyKey}
		if _, ok := d.passes[k]; !ok {
			d.passes[k], d.joined[k] = turn, true
		}
		best := refKey{ns, q, key}
		if key == "" || d.passes[k] < d.passes[best] ||
			d.passes[k] == d.passes[best] && (d.joined[k] && !d.joined[best] || d.joined[k] == d.joined[best] && k.key < key) {
			key = k.key
		}
	}
	var ofKey []*refInvocation
	for _, c := range keyed {
		if c.inv.ConcurrencyKey == key {
			ofKey = append(ofKey, c)
		}
	}
	head := d.pickIn(ofKey, kind, temp)
	if kind == plane.KindBoltzmann && len(unkeyed) > 0 {
		return d.pickIn(unkeyed, kind, temp) // the draw takes unkeyed jobs first
	}
	if len(unkeyed) > 0 {
		other := d.pickIn(unkeyed, kind, temp)
		if !plane.KeyTurnFirst(kind, head.inv.ID, head.inv.Priority, other.inv.ID, other.inv.Priority) {
			return other
		}
	}
	d.passes[refKey{ns, q, key}]++
	d.joined[refKey{ns, q, key}] = false
	return head
}

// pickIn chooses among claimable candidates sorted by id, in kind's order.
func (d *refDriver) pickIn(cands []*refInvocation, kind plane.Kind, temp float64) *refInvocation {
	switch kind {
	case plane.KindFILO:
		return cands[len(cands)-1]
	case plane.KindPriority:
		best := cands[0]
		for _, c := range cands[1:] {
			if c.inv.Priority > best.inv.Priority {
				best = c
			}
		}
		return best
	case plane.KindBoltzmann:
		count := map[float64]int64{}
		var levels []plane.Level
		for _, c := range cands {
			if count[c.inv.Priority] == 0 {
				levels = append(levels, plane.Level{Priority: c.inv.Priority})
			}
			count[c.inv.Priority]++
		}
		slices.SortFunc(levels, func(a, b plane.Level) int { return cmp.Compare(a.Priority, b.Priority) })
		for i := range levels {
			levels[i].Count = count[levels[i].Priority]
		}
		level := levels[plane.DrawLevel(levels, temp, d.rng.Float64())].Priority
		for _, c := range cands {
			if c.inv.Priority == level {
				return c
			}
		}
	}
	return cands[0]
}

func (d *refDriver) start(ri *refInvocation, p *plane.ClaimParams) *plane.Job {
	now := d.now()
	inv := &ri.inv
	inv.State = plane.StateRunning
	inv.Attempt++
	inv.StartedAt = now
	inv.LeaseExpiresAt = now.Add(cmp.Or(p.LeaseTTL, plane.LeaseTTLDefault))
	inv.Worker = p.Worker
	ri.token = plane.NewToken(now)
	ri.lastToken = ri.token
	return &plane.Job{
		ID: inv.ID, Namespace: inv.Namespace, Queue: inv.Queue, Key: inv.Key, ConcurrencyKey: inv.ConcurrencyKey, Payload: inv.Payload,
		Metadata: inv.Metadata, Priority: inv.Priority, Attempt: inv.Attempt, MaxAttempts: inv.MaxAttempts,
		AttemptTimeout: inv.AttemptTimeout, Deadline: inv.Deadline, Token: ri.token, LeaseExpiresAt: inv.LeaseExpiresAt,
	}
}

// holds reports whether token is the live lease of ri. An attempt past its attempt timeout
// is ended on the spot (as Maintain would), and its holder no longer holds it.
func (d *refDriver) holds(ri *refInvocation, token string) bool {
	live := ri.inv.State == plane.StateRunning && token != "" && token == ri.token && d.now().Before(ri.inv.LeaseExpiresAt)
	if live && ri.inv.AttemptTimeout > 0 && d.now().Sub(ri.inv.StartedAt) > ri.inv.AttemptTimeout {
		d.apply(ri, plane.AttemptOverdueTransition(ri.inv.Attempt, ri.inv.MaxAttempts, d.backoff, d.rng.Float64))
		return false
	}
	return live
}

// end makes ri terminal, closing its journal with ERROR when info is set.
func (d *refDriver) end(ri *refInvocation, state plane.State, info *plane.ErrorInfo) {
	now := d.now()
	ri.inv.State = state
	ri.inv.FinishedAt = now
	ri.inv.LeaseExpiresAt = time.Time{}
	ri.token = ""
	if info != nil {
		ri.inv.Error = info
		v, _ := msgpack.Marshal(map[string]any{"type": info.Type, "message": info.Message, "attempt": info.Attempt})
		d.appendFrame(ri, plane.FrameError, v)
	}
	if state == plane.StateCancelled {
		ri.closed = true
	}
}

func (d *refDriver) appendFrame(ri *refInvocation, kind plane.FrameKind, v []byte) int64 {
	seq := int64(len(ri.frames))
	if kind != plane.FrameValue && ri.closedBy != 0 && ri.closedBy == ri.inv.Attempt {
		// The attempt that settles ri ended its journal with a final post: the stored END
		// frame stays the last.
		ri.closed = true
		return seq
	}
	ri.frames = append(ri.frames, plane.Frame{Seq: seq, Kind: kind, Value: slices.Clone(v), Attempt: ri.inv.Attempt, Time: d.now()})
	if kind != plane.FrameValue {
		ri.closed = true
	}
	return seq
}

// apply writes a transition decided by plane's policy: a retry re-queues ri, any other
// state ends it.
func (d *refDriver) apply(ri *refInvocation, tr plane.Transition) {
	if !tr.Retry() {
		d.end(ri, tr.State, tr.Error)
		return
	}
	inv := &ri.inv
	inv.State = plane.StateQueued
	inv.AvailableAt = d.now().Add(tr.Delay)
	inv.LeaseExpiresAt = time.Time{}
	inv.Error = tr.Error // why it is being retried
	ri.token = ""
	if tr.Refund {
		inv.Attempt--
	}
	if tr.HoldKey != "" {
		if d.held == nil {
			d.held = map[refKey]time.Time{}
		}
		d.held[refKey{inv.Namespace, inv.Queue, tr.HoldKey}] = inv.AvailableAt
	}
}

func (d *refDriver) InvocationSettleMany(ctx context.Context, ps []plane.SettleParams) ([]error, error) {
	for i := range ps {
		if err := ps[i].Validate(); err != nil {
			return nil, err
		}
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.settleLocked(ps), nil
}

// settleLocked is InvocationSettleMany with d.mu held.
func (d *refDriver) settleLocked(ps []plane.SettleParams) []error {
	out := make([]error, len(ps))
	for i, p := range ps {
		ri, ok := d.invs[p.ID]
		switch {
		case !ok:
			out[i] = plane.ErrNotFound
		case !d.holds(ri, p.Token):
			out[i] = plane.ErrLeaseLost
		case p.Outcome == plane.OutcomeSucceeded:
			d.succeed(ri, p.Result)
		default:
			d.apply(ri, plane.SettleTransition(&p, ri.inv.Attempt, ri.inv.MaxAttempts, d.backoff, d.rng.Float64))
		}
	}
	d.notify()
	return out
}

func (d *refDriver) succeed(ri *refInvocation, result []byte) {
	ri.inv.Result = slices.Clone(result)
	d.appendFrame(ri, plane.FrameEnd, result)
	d.end(ri, plane.StateSucceeded, nil)
}

func (d *refDriver) InvocationHeartbeatMany(ctx context.Context, ps []plane.HeartbeatParams) ([]plane.HeartbeatResult, error) {
	for i := range ps {
		if err := ps[i].Validate(); err != nil {
			return nil, err
		}
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	out := make([]plane.HeartbeatResult, len(ps))
	for i, p := range ps {
		ri, ok := d.invs[p.ID]
		switch {
		case !ok:
			out[i].Err = plane.ErrNotFound
		case !d.holds(ri, p.Token):
			out[i].Err = plane.ErrLeaseLost
		default:
			ri.inv.LeaseExpiresAt = d.now().Add(cmp.Or(p.LeaseTTL, plane.LeaseTTLDefault))
			out[i].LeaseExpiresAt = ri.inv.LeaseExpiresAt
		}
	}
	return out, nil
}

func (d *refDriver) get(id string) (*refInvocation, error) {
	if err := plane.ValidateID(id); err != nil {
		return nil, err
	}
	ri, ok := d.invs[id]
	if !ok {
		return nil, plane.ErrNotFound
	}
	return ri, nil
}

func copyInvocation(ri *refInvocation) *plane.Invocation {
	inv := ri.inv
	if inv.Error != nil {
		e := *inv.Error
		inv.Error = &e
	}
	return &inv
}

func (d *refDriver) InvocationGet(ctx context.Context, id string) (*plane.Invocation, error) {
	if err := plane.ValidateID(id); err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	ri, err := d.get(id)
	if err != nil {
		return nil, err
	}
	return copyInvocation(ri), nil
}

func (d *refDriver) InvocationWait(ctx context.Context, p *plane.WaitParams) (*plane.Invocation, error) {
	if err := plane.ValidateID(p.ID); err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	deadline := time.Now().Add(p.Timeout)
	for {
		ri, err := d.get(p.ID)
		if err != nil {
			return nil, err
		}
		if ri.inv.State.Terminal() {
			return copyInvocation(ri), nil
		}
		if p.Timeout == 0 {
			return nil, plane.ErrTimeout
		}
		more, err := d.waitChange(ctx, deadline)
		if err != nil {
			return nil, err
		}
		if !more {
			return nil, plane.ErrTimeout
		}
	}
}

func (d *refDriver) InvocationCancel(ctx context.Context, id string) (bool, error) {
	if err := plane.ValidateID(id); err != nil {
		return false, err
	}
	if err := d.lock(); err != nil {
		return false, err
	}
	defer d.mu.Unlock()
	ri, err := d.get(id)
	if err != nil || ri.inv.State != plane.StateQueued {
		return false, err
	}
	d.end(ri, plane.StateCancelled, nil)
	d.notify()
	return true, nil
}

func (d *refDriver) InvocationKill(ctx context.Context, id string) (bool, error) {
	if err := plane.ValidateID(id); err != nil {
		return false, err
	}
	if err := d.lock(); err != nil {
		return false, err
	}
	defer d.mu.Unlock()
	ri, err := d.get(id)
	if err != nil || ri.inv.State != plane.StateRunning {
		return false, err
	}
	d.end(ri, plane.StateKilled, &plane.ErrorInfo{Type: "killed", Message: "killed", Attempt: ri.inv.Attempt})
	d.notify()
	return true, nil
}

func (d *refDriver) InvocationCount(ctx context.Context, p *plane.CountParams) (int64, error) {
	if err := plane.ValidateName("namespace", p.Namespace); err != nil {
		return 0, err
	}
	if err := plane.ValidateName("queue name", p.Queue); err != nil {
		return 0, err
	}
	if _, err := plane.ParseState(string(p.State)); err != nil {
		return 0, err
	}
	if err := d.lock(); err != nil {
		return 0, err
	}
	defer d.mu.Unlock()
	var n int64
	for _, ri := range d.invs {
		if ri.inv.Namespace == p.Namespace && ri.inv.Queue == p.Queue && ri.inv.State == p.State {
			n++
		}
	}
	return n, nil
}

func (d *refDriver) QueueStatsList(ctx context.Context, namespace string) ([]plane.QueueStats, error) {
	if namespace != "" {
		if err := plane.ValidateName("namespace", namespace); err != nil {
			return nil, err
		}
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	byQueue := map[[2]string]map[plane.State]int64{}
	for _, ri := range d.invs {
		if namespace != "" && ri.inv.Namespace != namespace {
			continue
		}
		k := [2]string{ri.inv.Namespace, ri.inv.Queue}
		if byQueue[k] == nil {
			byQueue[k] = map[plane.State]int64{}
		}
		byQueue[k][ri.inv.State]++
	}
	var out []plane.QueueStats
	for k, counts := range byQueue {
		out = append(out, plane.QueueStats{Namespace: k[0], Queue: k[1], Counts: counts})
	}
	out = d.addKeyStats(out, namespace)
	paused := map[[2]string]bool{}
	for k := range d.paused {
		if namespace == "" || k[0] == namespace {
			paused[k] = true
		}
	}
	return plane.MarkPaused(out, paused), nil
}

// addKeyStats lists the concurrency keys of stats' queues (no admission here: weight 1,
// no limit, no rate limit): those with jobs claimable or running, and those a worker's
// "slow down" holds back past now, saying for how long; with d.mu held.
func (d *refDriver) addKeyStats(stats []plane.QueueStats, namespace string) []plane.QueueStats {
	now := d.now()
	keys := map[refKey]*plane.KeyStats{}
	of := func(k refKey) *plane.KeyStats {
		if keys[k] == nil {
			keys[k] = &plane.KeyStats{Key: k.key, Weight: 1}
		}
		return keys[k]
	}
	for _, ri := range d.invs {
		inv := &ri.inv
		if inv.ConcurrencyKey == "" || (namespace != "" && inv.Namespace != namespace) {
			continue
		}
		k := refKey{inv.Namespace, inv.Queue, inv.ConcurrencyKey}
		switch {
		case inv.State == plane.StateRunning:
			of(k).Running++
		case inv.State == plane.StateQueued && !now.Before(inv.AvailableAt):
			of(k).Queued++
		}
	}
	for k, until := range d.held {
		if (namespace == "" || k.ns == namespace) && until.After(now) {
			of(k).RateWait = plane.Admission{}.KeyRateWait(k.key, -1, time.Time{}, until, now)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(keys), func(a, b refKey) int {
		return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.q, b.q), cmp.Compare(a.key, b.key))
	}) {
		stats = plane.AddKeyStats(stats, k.ns, k.q, *keys[k])
	}
	return stats
}

func (d *refDriver) InvocationTrim(ctx context.Context, p *plane.TrimParams) (int64, error) {
	if p.Namespace != "" {
		if err := plane.ValidateName("namespace", p.Namespace); err != nil {
			return 0, err
		}
	}
	if p.Queue != "" {
		if err := plane.ValidateName("queue name", p.Queue); err != nil {
			return 0, err
		}
	}
	if err := d.lock(); err != nil {
		return 0, err
	}
	defer d.mu.Unlock()
	return d.trim(p.Namespace, p.Queue, p.FinishedBefore), nil
}

func (d *refDriver) trim(ns, q string, before time.Time) int64 {
	var n int64
	for id, ri := range d.invs {
		inv := &ri.inv
		if (ns != "" && inv.Namespace != ns) || (q != "" && inv.Queue != q) || !inv.State.Terminal() || !inv.FinishedAt.Before(before) {
			continue
		}
		if inv.Key != "" && ri.heldUntil > d.now().UnixMilli() {
			continue // its dedup window lasts: a submit within it still finds it
		}
		delete(d.invs, id)
		if inv.Key != "" {
			delete(d.keys, refKey{inv.Namespace, inv.Queue, inv.Key})
		}
		n++
	}
	return n
}

func (d *refDriver) FramePost(ctx context.Context, p *plane.FramePostParams) (int64, error) {
	if err := p.Journal.Validate(); err != nil {
		return 0, err
	}
	if err := plane.ValidateValueSize("frame value", len(p.Value)); err != nil {
		return 0, err
	}
	if err := d.lock(); err != nil {
		return 0, err
	}
	defer d.mu.Unlock()
	defer d.notify()
	if p.Journal.InvocationID == "" {
		k := refTopicKey{p.Journal.Namespace, p.Journal.Queue, p.Journal.Topic}
		tp := d.topics[k]
		if tp == nil {
			stored := 0
			for other := range d.topics {
				if other.ns == k.ns && other.q == k.q {
					stored++
				}
			}
			if err := plane.CheckTopicCount(k.ns, k.q, stored, d.maxTopics); err != nil {
				return 0, err
			}
			tp = &refTopic{}
			d.topics[k] = tp
		}
		if tp.closed {
			return 0, plane.ErrJournalClosed
		}
		kind := plane.FrameValue
		if p.Final {
			kind = plane.FrameEnd
			tp.closed = true
		}
		seq := int64(len(tp.frames))
		tp.updated = d.now()
		tp.frames = append(tp.frames, plane.Frame{Seq: seq, Kind: kind, Value: slices.Clone(p.Value), Time: tp.updated})
		return seq, nil
	}
	ri, err := d.get(p.Journal.InvocationID)
	if err != nil {
		return 0, err
	}
	if !d.holds(ri, p.Token) {
		if ri.closed && p.Token == ri.lastToken {
			return 0, plane.ErrJournalClosed
		}
		return 0, plane.ErrLeaseLost
	}
	if ri.closedBy == ri.inv.Attempt {
		return 0, plane.ErrJournalClosed
	}
	if p.Final {
		// END ends the journal of this attempt; the ack that follows settles the job.
		seq := int64(len(ri.frames))
		ri.frames = append(ri.frames, plane.Frame{Seq: seq, Kind: plane.FrameEnd, Value: slices.Clone(p.Value), Attempt: ri.inv.Attempt, Time: d.now()})
		ri.closedBy = ri.inv.Attempt
		return seq, nil
	}
	return d.appendFrame(ri, plane.FrameValue, p.Value), nil
}

func (d *refDriver) FrameRead(ctx context.Context, p *plane.FrameReadParams) (*plane.FrameReadResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	deadline := time.Now().Add(p.Wait)
	for {
		var frames []plane.Frame
		var closed bool
		if p.Journal.InvocationID != "" {
			ri, err := d.get(p.Journal.InvocationID)
			if err != nil {
				return nil, err
			}
			frames = ri.frames
			closed = ri.closed || ri.inv.State == plane.StateRunning && ri.closedBy == ri.inv.Attempt
		} else if tp := d.topics[refTopicKey{p.Journal.Namespace, p.Journal.Queue, p.Journal.Topic}]; tp != nil {
			frames, closed = tp.frames, tp.closed
		}
		start := int(min(max(p.Since+1, 0), int64(len(frames))))
		page := plane.FramePage{Limit: cmp.Or(p.Limit, plane.FrameReadLimitDefault)}
		for _, f := range frames[start:] {
			if !page.Add(f) {
				break
			}
		}
		out := page.Frames
		if len(out) > 0 || closed || p.Wait == 0 {
			return &plane.FrameReadResult{Frames: out, Closed: closed}, nil
		}
		more, err := d.waitChange(ctx, deadline)
		if err != nil {
			return nil, err
		}
		if !more {
			return &plane.FrameReadResult{}, nil
		}
	}
}

func (d *refDriver) Maintain(ctx context.Context) error {
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	now := d.now()
	changed := false
	for _, ri := range d.invs {
		inv := &ri.inv
		switch {
		case inv.State == plane.StateRunning && !now.Before(inv.LeaseExpiresAt):
			d.apply(ri, plane.LeaseExpiredTransition(inv.Attempt, inv.MaxAttempts))
		case inv.State == plane.StateRunning && inv.AttemptTimeout > 0 && now.Sub(inv.StartedAt) > inv.AttemptTimeout:
			d.apply(ri, plane.AttemptOverdueTransition(inv.Attempt, inv.MaxAttempts, d.backoff, d.rng.Float64))
		case inv.State == plane.StateQueued && !inv.Deadline.IsZero() && !now.Before(inv.Deadline):
			d.apply(ri, plane.DeadlineTransition(inv.Attempt))
		case inv.State == plane.StateQueued && inv.AvailableAt.After(d.lastPass) && !inv.AvailableAt.After(now):
			// came due since the last pass: claimers waiting for it must look again
		default:
			continue
		}
		changed = true
	}
	d.lastPass = now
	if d.retention < 0 {
		if changed {
			d.notify()
		}
		return nil
	}
	cutoff := now.Add(-d.retention)
	for k, tp := range d.topics {
		if tp.updated.Before(cutoff) {
			delete(d.topics, k)
		}
	}
	// A worker is kept while it may still be listed (seen within the last minute), however
	// short the retention.
	workerCutoff := cutoff
	if seen := now.Add(-plane.WorkerSeenWithinDefault); seen.Before(workerCutoff) {
		workerCutoff = seen
	}
	for k, w := range d.workers {
		if w.LastSeen.Before(workerCutoff) {
			delete(d.workers, k)
		}
	}
	if d.trim("", "", cutoff) > 0 || changed {
		d.notify()
	}
	return nil
}

func (d *refDriver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.done)
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}

// Admission, workers, tokens and schedules are beyond what refDriver checks: the suite
// skips them.

func (d *refDriver) QueueAdmissionSet(context.Context, *plane.AdmissionParams) (*plane.Admission, error) {
	return nil, plane.ErrNotImplemented
}

func (d *refDriver) QueueAdmissionGet(context.Context, string, string) (*plane.Admission, error) {
	return nil, plane.ErrNotImplemented
}

func (d *refDriver) QueueAdmissionDelete(context.Context, string, string) (bool, error) {
	return false, plane.ErrNotImplemented
}

func (d *refDriver) WorkerRegister(_ context.Context, info *plane.WorkerInfo) error {
	if err := info.Validate(); err != nil {
		return err
	}
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	w := *info
	w.Namespace = cmp.Or(w.Namespace, plane.NamespaceDefault)
	w.Queues = slices.Clone(w.Queues)
	w.LastSeen = d.now()
	key := [2]string{w.Namespace, w.ID}
	if old, ok := d.workers[key]; ok {
		w.StartedAt = old.StartedAt
	} else {
		stored := 0
		for other := range d.workers {
			if other[0] == w.Namespace {
				stored++
			}
		}
		if err := plane.CheckWorkerCount(w.Namespace, stored, d.maxWorkers); err != nil {
			return err
		}
		if w.StartedAt.IsZero() {
			w.StartedAt = w.LastSeen
		}
	}
	d.workers[key] = w
	return nil
}

func (d *refDriver) WorkerList(_ context.Context, p *plane.WorkerListParams) ([]plane.WorkerInfo, error) {
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	since := d.now().Add(-cmp.Or(p.SeenWithin, plane.WorkerSeenWithinDefault))
	var out []plane.WorkerInfo
	for _, w := range d.workers {
		if (p.Namespace == "" || w.Namespace == p.Namespace) && !w.LastSeen.Before(since) {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b plane.WorkerInfo) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Namespace, b.Namespace))
	})
	return out, nil
}

func (d *refDriver) WorkerRemove(_ context.Context, namespace, id string) error {
	namespace = cmp.Or(namespace, plane.NamespaceDefault)
	if err := (&plane.WorkerInfo{ID: id, Namespace: namespace}).Validate(); err != nil {
		return err
	}
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	delete(d.workers, [2]string{namespace, id})
	return nil
}

// InvocationList sorts the whole queue per page: the reference driver checks the contract,
// not the cost.
func (d *refDriver) InvocationList(_ context.Context, p *plane.ListParams) (*plane.ListPage, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	var match []*refInvocation
	for _, ri := range d.invs {
		inv := &ri.inv
		if inv.Namespace != p.Namespace || inv.Queue != p.Queue || (p.State != "" && inv.State != p.State) ||
			(p.KeyPrefix != "" && !strings.HasPrefix(inv.Key, p.KeyPrefix)) {
			continue
		}
		if p.After != "" && (p.Oldest && inv.ID <= p.After || !p.Oldest && inv.ID >= p.After) {
			continue
		}
		match = append(match, ri)
	}
	slices.SortFunc(match, func(a, b *refInvocation) int { return cmp.Compare(a.inv.ID, b.inv.ID) })
	if !p.Oldest {
		slices.Reverse(match)
	}
	limit := cmp.Or(p.Limit, plane.ListLimitDefault)
	page := &plane.ListPage{Invocations: []*plane.Invocation{}}
	for i, ri := range match {
		if i == limit {
			page.Next = match[i-1].inv.ID
			break
		}
		inv := copyInvocation(ri)
		inv.Payload, inv.Result = nil, nil
		page.Invocations = append(page.Invocations, inv)
	}
	return page, nil
}

func (d *refDriver) TokenCreate(context.Context, *plane.TokenInfo) error {
	return plane.ErrNotImplemented
}

func (d *refDriver) TokenGet(context.Context, []byte) (*plane.TokenInfo, error) {
	return nil, plane.ErrNotImplemented
}

func (d *refDriver) TokenList(context.Context) ([]plane.TokenInfo, error) {
	return nil, plane.ErrNotImplemented
}

func (d *refDriver) TokenRevoke(context.Context, string) (bool, error) {
	return false, plane.ErrNotImplemented
}

func (d *refDriver) ScheduleSet(context.Context, *plane.Schedule) (*plane.Schedule, error) {
	return nil, plane.ErrNotImplemented
}

func (d *refDriver) ScheduleList(context.Context, *plane.ScheduleListParams) (*plane.SchedulePage, error) {
	return nil, plane.ErrNotImplemented
}

func (d *refDriver) ScheduleDelete(context.Context, string, string) (bool, error) {
	return false, plane.ErrNotImplemented
}

func (d *refDriver) SchedulePause(context.Context, string, string, bool) (*plane.Schedule, bool, error) {
	return nil, false, plane.ErrNotImplemented
}

func (d *refDriver) DemandList(ctx context.Context, namespace string) ([]plane.ShapeDemand, error) {
	if namespace != "" {
		if err := plane.ValidateName("namespace", namespace); err != nil {
			return nil, err
		}
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	now := d.now()
	type key struct{ ns, q, shape string }
	byShape := map[key]*plane.ShapeDemand{}
	oldest := map[key]string{} // the first claimable id
	for _, ri := range d.invs {
		inv := &ri.inv
		if namespace != "" && inv.Namespace != namespace {
			continue
		}
		k := key{inv.Namespace, inv.Queue, inv.Shape}
		sd := byShape[k]
		if sd == nil {
			sd = &plane.ShapeDemand{Namespace: inv.Namespace, Queue: inv.Queue, Shape: inv.Shape, Requirement: inv.Requirement}
			byShape[k] = sd
		}
		switch inv.State {
		case plane.StateQueued:
			sd.Queued++
			if !inv.AvailableAt.After(now) && inv.ConcurrencyKey == "" && (oldest[k] == "" || inv.ID < oldest[k]) {
				oldest[k] = inv.ID
				sd.OldestReady = now.Sub(inv.AvailableAt)
			}
		case plane.StateRunning:
			sd.Running++
		}
	}
	var out []plane.ShapeDemand
	for _, sd := range byShape {
		if sd.Shape == "" && sd.Queued == 0 && sd.Running == 0 {
			continue
		}
		sd.Paused = d.paused[[2]string{sd.Namespace, sd.Queue}]
		out = append(out, *sd)
	}
	plane.SortDemand(out)
	return out, nil
}
