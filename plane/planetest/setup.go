package planetest

import (
	"cmp"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lakeshore-dev/lakeshore/plane"
)

const (
	// testTimeout bounds every driver call of one subtest, so a hung plane fails instead of
	// hanging the suite. It is a budget for the whole subtest, not a latency bound, and
	// raceSlowdown times longer under the race detector: the Boltzmann cases' 1,000 claims
	// and submits took over 2 minutes with -race on a loaded 2-core machine.
	testTimeout = 2 * time.Minute * raceSlowdown
	// wakeLatency is how soon after an event a waiter must have returned. Waiters are woken
	// by notification; this bound is loose only because the machine may be busy, and it is
	// raceSlowdown times longer under the race detector, which makes every plane call (the
	// HTTP plane's wait answer: a SQLite read, JSON, a response) several times slower. It
	// stays well below longWait, so a waiter that was not woken still fails.
	wakeLatency = 2 * time.Second * raceSlowdown
	// longWait is the wait given to a waiter that must be woken long before it elapses.
	longWait = 20 * time.Second
	// shortWait is a wait that is meant to elapse.
	shortWait = 250 * time.Millisecond
	// headStart is how long an event is delayed so that a waiter is most likely parked
	// before it happens. Nothing depends on it for correctness: a waiter that arrives late
	// finds the event already there.
	headStart = 50 * time.Millisecond
	// maintenanceShort is the maintenance interval of most subtests.
	maintenanceShort = 20 * time.Millisecond
	// maintenanceOff is the interval of subtests that need maintenance to run only when
	// they call Driver.Maintain.
	maintenanceOff = time.Hour
	// pastBackoff is a clock step that takes any job out of backoffShort.
	pastBackoff = time.Second
)

// backoffShort is the suite's retry backoff unless a subtest needs another.
var backoffShort = plane.Backoff{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond, Jitter: 0.1}

// config is what a subtest asks of its plane.
type config struct {
	// realClock gives the plane real time instead of a fake clock.
	realClock bool
	// seed for the plane's random source; 0: random.
	seed uint64
	// backoff replaces backoffShort.
	backoff plane.Backoff
	// noMaintenance runs maintenance only on Driver.Maintain.
	noMaintenance bool
	// maxSchedules is Options.MaxSchedulesPerNamespace.
	maxSchedules int
	// maxTopics and maxWorkers are Options.MaxTopicsPerQueue and MaxWorkersPerNamespace.
	maxTopics, maxWorkers int
	// retention is Options.Retention.
	retention time.Duration
}

// bundle is one subtest's plane and what drives it. Its helpers fail the test on unexpected
// errors and skip it when the driver answers plane.ErrNotImplemented.
type bundle struct {
	drv   plane.Driver
	clock *fakeClock // nil with realClock
	ctx   context.Context
	ns    string // the namespace of the subtest's queue
	q     string // the subtest's queue
}

func (s *suite) setup(t *testing.T, cfg config) *bundle {
	t.Helper()
	opts := Options{
		Seed:                     cfg.seed,
		Backoff:                  cmp.Or(cfg.backoff, backoffShort),
		MaintenanceInterval:      maintenanceShort,
		MaxSchedulesPerNamespace: cfg.maxSchedules,
		MaxTopicsPerQueue:        cfg.maxTopics,
		MaxWorkersPerNamespace:   cfg.maxWorkers,
		Retention:                cfg.retention,
	}
	if cfg.noMaintenance {
		opts.MaintenanceInterval = maintenanceOff
	}
	b := &bundle{ns: plane.NamespaceDefault, q: "jobs"}
	if !cfg.realClock {
		b.clock = newFakeClock()
		opts.Now = b.clock.Now
	}
	b.drv = s.factory(t, opts)
	require.NotNil(t, b.drv, "factory returned no driver")
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	b.ctx = ctx
	return b
}

// skipUnimplemented skips t when err says the driver does not implement the call.
func skipUnimplemented(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, plane.ErrNotImplemented) {
		t.Skipf("driver does not implement this: %v", err)
	}
}

// must fails t on err (skipping it on plane.ErrNotImplemented).
func must(t *testing.T, err error, what string) {
	t.Helper()
	skipUnimplemented(t, err)
	require.NoError(t, err, what)
}

// requireIs checks errors.Is(err, target) (skipping t on plane.ErrNotImplemented).
func requireIs(t *testing.T, err, target error, msgAndArgs ...any) {
	t.Helper()
	skipUnimplemented(t, err)
	require.ErrorIs(t, err, target, msgAndArgs...)
}

// requireTime checks that a stored time is want, allowing for a plane that keeps only
// milliseconds.
func requireTime(t *testing.T, want, got time.Time, what string) {
	t.Helper()
	require.False(t, got.IsZero(), "%s is zero", what)
	require.WithinDuration(t, want, got, time.Millisecond, what)
}

// now is the plane's current time.
func (b *bundle) now() time.Time {
	if b.clock == nil {
		return time.Now()
	}
	return b.clock.Now()
}

// advance moves the plane's fake clock forward.
func (b *bundle) advance(d time.Duration) time.Time { return b.clock.Advance(d) }

func (b *bundle) submitTo(t *testing.T, ns, q string, ps ...plane.SubmitParams) []plane.SubmitResult {
	t.Helper()
	res, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: ns, Queue: q, Invocations: ps})
	must(t, err, "submit")
	require.Len(t, res, len(ps), "one submit result per invocation")
	return res
}

func (b *bundle) submit(t *testing.T, ps ...plane.SubmitParams) []plane.SubmitResult {
	t.Helper()
	return b.submitTo(t, b.ns, b.q, ps...)
}

// submitOne submits one invocation and returns its id.
func (b *bundle) submitOne(t *testing.T, p plane.SubmitParams) string {
	t.Helper()
	res := b.submit(t, p)[0]
	require.False(t, res.Existing, "a fresh submit is not Existing")
	return res.ID
}

// submitPayloads submits one invocation per payload, each in its own call, in order.
func (b *bundle) submitPayloads(t *testing.T, payloads ...string) []string {
	t.Helper()
	ids := make([]string, len(payloads))
	for i, p := range payloads {
		ids[i] = b.submitOne(t, plane.SubmitParams{Payload: []byte(p)})
	}
	return ids
}

// claim claims from the subtest's queue unless p names another.
func (b *bundle) claim(t *testing.T, p plane.ClaimParams) []*plane.Job {
	t.Helper()
	p.Namespace = cmp.Or(p.Namespace, b.ns)
	p.Queue = cmp.Or(p.Queue, b.q)
	jobs, err := b.drv.InvocationClaimMany(b.ctx, &p)
	must(t, err, "claim")
	for _, j := range jobs {
		require.NotNil(t, j)
	}
	return jobs
}

// claimOne claims the next fifo job, which must exist.
func (b *bundle) claimOne(t *testing.T) *plane.Job {
	t.Helper()
	jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Worker: "worker-1"})
	require.Len(t, jobs, 1, "one job claimable")
	return jobs[0]
}

// claimID claims the next fifo job and checks it is id.
func (b *bundle) claimID(t *testing.T, id string) *plane.Job {
	t.Helper()
	j := b.claimOne(t)
	require.Equal(t, id, j.ID)
	return j
}

// requireNothingClaimable checks that a fifo claim finds nothing.
func (b *bundle) requireNothingClaimable(t *testing.T) {
	t.Helper()
	jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: 10, Worker: "worker-x"})
	require.Empty(t, jobs, "nothing should be claimable")
}

// settle settles one invocation and returns its per-item error.
func (b *bundle) settle(t *testing.T, p plane.SettleParams) error {
	t.Helper()
	errs, err := b.drv.InvocationSettleMany(b.ctx, []plane.SettleParams{p})
	must(t, err, "settle call")
	require.Len(t, errs, 1, "one settle result per param")
	return errs[0]
}

func (b *bundle) ack(t *testing.T, j *plane.Job, result string) {
	t.Helper()
	must(t, b.settle(t, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: []byte(result)}), "ack")
}

// nack settles j as failed (retry false) or for a retry, with error message msg.
func (b *bundle) nack(t *testing.T, j *plane.Job, retry bool, msg string) {
	t.Helper()
	must(t, b.settle(t, nackParams(j, retry, msg)), "nack")
}

func nackParams(j *plane.Job, retry bool, msg string) plane.SettleParams {
	outcome := plane.OutcomeFailed
	if retry {
		outcome = plane.OutcomeRetry
	}
	return plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: outcome, Error: &plane.ErrorInfo{Type: "error", Message: msg}}
}

func (b *bundle) heartbeat(t *testing.T, id, token string, ttl time.Duration) plane.HeartbeatResult {
	t.Helper()
	res, err := b.drv.InvocationHeartbeatMany(b.ctx, []plane.HeartbeatParams{{ID: id, Token: token, LeaseTTL: ttl}})
	must(t, err, "heartbeat call")
	require.Len(t, res, 1, "one heartbeat result per param")
	skipUnimplemented(t, res[0].Err)
	return res[0]
}

func (b *bundle) get(t *testing.T, id string) *plane.Invocation {
	t.Helper()
	inv, err := b.drv.InvocationGet(b.ctx, id)
	must(t, err, "get "+id)
	require.NotNil(t, inv)
	require.Equal(t, id, inv.ID)
	return inv
}

// requireState checks invocation id's state and attempt.
func (b *bundle) requireState(t *testing.T, id string, state plane.State, attempt int) *plane.Invocation {
	t.Helper()
	inv := b.get(t, id)
	require.Equal(t, state, inv.State, "state of %s", id)
	require.Equal(t, attempt, inv.Attempt, "attempt of %s", id)
	return inv
}

func (b *bundle) countIn(t *testing.T, ns, q string, state plane.State) int64 {
	t.Helper()
	n, err := b.drv.InvocationCount(b.ctx, &plane.CountParams{Namespace: ns, Queue: q, State: state})
	must(t, err, "count")
	return n
}

func (b *bundle) count(t *testing.T, state plane.State) int64 {
	t.Helper()
	return b.countIn(t, b.ns, b.q, state)
}

// requireCounts checks the count of every state of the subtest's queue; states not in want
// must count 0.
func (b *bundle) requireCounts(t *testing.T, want map[plane.State]int64) {
	t.Helper()
	got := make(map[plane.State]int64)
	for _, st := range plane.States() {
		if n := b.count(t, st); n != 0 || want[st] != 0 {
			got[st] = n
		}
	}
	require.Equal(t, want, got, "counts by state")
}

// maintain runs one maintenance pass.
func (b *bundle) maintain(t *testing.T) {
	t.Helper()
	must(t, b.drv.Maintain(b.ctx), "maintain")
}

// waitTerminal waits (bounded) until id is terminal.
func (b *bundle) waitTerminal(t *testing.T, id string) *plane.Invocation {
	t.Helper()
	inv, err := b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id, Timeout: 10 * time.Second})
	must(t, err, "wait "+id)
	require.True(t, inv.State.Terminal(), "waited for %s, got state %s", id, inv.State)
	return inv
}

func invJournal(id string) plane.Journal { return plane.Journal{InvocationID: id} }

func (b *bundle) topicJournal(topic string) plane.Journal {
	return plane.Journal{Namespace: b.ns, Queue: b.q, Topic: topic}
}

func (b *bundle) postErr(j plane.Journal, token, value string, final bool) (int64, error) {
	return b.drv.FramePost(b.ctx, &plane.FramePostParams{Journal: j, Token: token, Value: []byte(value), Final: final})
}

// post appends a VALUE frame to job's journal and returns its seq.
func (b *bundle) post(t *testing.T, job *plane.Job, value string) int64 {
	t.Helper()
	seq, err := b.postErr(invJournal(job.ID), job.Token, value, false)
	must(t, err, "post")
	return seq
}

func (b *bundle) read(t *testing.T, p plane.FrameReadParams) *plane.FrameReadResult {
	t.Helper()
	res, err := b.drv.FrameRead(b.ctx, &p)
	must(t, err, "read frames")
	require.NotNil(t, res)
	last := p.Since
	for _, f := range res.Frames {
		require.Greater(t, f.Seq, last, "frames come after the cursor, in seq order")
		last = f.Seq
	}
	return res
}

// frames reads journal j from the start, page by page, and reports whether it is closed.
func (b *bundle) frames(t *testing.T, j plane.Journal) ([]plane.Frame, bool) {
	t.Helper()
	var all []plane.Frame
	since := int64(-1)
	for range 1000 {
		res := b.read(t, plane.FrameReadParams{Journal: j, Since: since})
		if len(res.Frames) == 0 {
			return all, res.Closed
		}
		all = append(all, res.Frames...)
		since = res.Frames[len(res.Frames)-1].Seq
	}
	require.FailNow(t, "journal did not end after 1000 pages")
	return nil, false
}

// requireDense checks that frames have seqs 0, 1, 2, ….
func requireDense(t *testing.T, frames []plane.Frame) {
	t.Helper()
	for i, f := range frames {
		require.Equal(t, int64(i), f.Seq, "seqs are 0-based and dense")
	}
}

// frameKinds lists the kinds of frames, for compact comparisons.
func frameKinds(frames []plane.Frame) []plane.FrameKind {
	kinds := make([]plane.FrameKind, len(frames))
	for i, f := range frames {
		kinds[i] = f.Kind
	}
	return kinds
}

// requireErrorFrame checks that invocation id's journal is closed by exactly one ERROR frame,
// its last, from attempt; that the frame's value is a msgpack map {type, message, attempt};
// and that Get reports the same error. It returns the error.
func (b *bundle) requireErrorFrame(t *testing.T, id string, attempt int) plane.ErrorInfo {
	t.Helper()
	frames, closed := b.frames(t, invJournal(id))
	require.True(t, closed, "a journal ended by ERROR is closed")
	require.NotEmpty(t, frames)
	requireDense(t, frames)
	nError := 0
	for _, f := range frames {
		require.NotEqual(t, plane.FrameEnd, f.Kind, "a failed invocation has no END frame")
		if f.Kind == plane.FrameError {
			nError++
		}
	}
	require.Equal(t, 1, nError, "exactly one ERROR frame: %v", frameKinds(frames))
	last := frames[len(frames)-1]
	require.Equal(t, plane.FrameError, last.Kind, "ERROR is the last frame")
	require.Equal(t, attempt, last.Attempt, "ERROR frame's attempt")
	info := decodeErrorInfo(t, last.Value)
	require.Equal(t, attempt, info.Attempt, "ERROR value's attempt")
	require.NotEmpty(t, info.Type, "ERROR value's type")
	inv := b.get(t, id)
	require.NotNil(t, inv.Error, "Get carries the error the invocation ended with")
	require.Equal(t, info, *inv.Error, "Get's error and the ERROR frame agree")
	return info
}

// decodeErrorInfo decodes an ERROR frame's value: a msgpack map with string keys type,
// message and attempt.
func decodeErrorInfo(t *testing.T, value []byte) plane.ErrorInfo {
	t.Helper()
	var m map[string]any
	require.NoError(t, msgpack.Unmarshal(value, &m), "an ERROR value is a msgpack map")
	for _, k := range []string{"type", "message", "attempt"} {
		require.Contains(t, m, k, "ERROR value has %q", k)
	}
	var info plane.ErrorInfo
	require.NoError(t, msgpack.Unmarshal(value, &info))
	return info
}

// requireBackoff checks that a retry scheduled at now for after attempt becomes available
// when backoff says, within its jitter.
func requireBackoff(t *testing.T, bo plane.Backoff, attempt int, now, availableAt time.Time) {
	t.Helper()
	lo, hi := bo.Delay(attempt, 0), bo.Delay(attempt, 1)
	d := availableAt.Sub(now)
	require.True(t, d >= lo-time.Millisecond && d <= hi+time.Millisecond,
		"backoff after attempt %d is %s, want %s…%s", attempt, d, lo, hi)
}
