package pgplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationClaimMany implements plane.Driver. A claim first makes the queue's due delayed
// rows claimable, then takes rows in the order of its kind with FOR UPDATE SKIP LOCKED from
// the partial index of claimable rows, so concurrent claimers never wait on each other and
// never take one row twice. Claims of concurrent callers in this process are served
// together: one transaction, one statement per queue and kind for all of them.
func (d *Driver) InvocationClaimMany(ctx context.Context, p *plane.ClaimParams) ([]*plane.Job, error) {
	return planekit.ClaimMany(ctx, p, d.claimOne, d.claimAcross)
}

// claimOne is the claim loop of a claim of one queue (a planekit.ClaimLoop without a
// before: settle-and-claim groups its settles with the first claim itself).
func (d *Driver) claimOne(ctx context.Context, p *plane.ClaimParams, _ func(t *tx) error) ([]*plane.Job, bool, error) {
	c := planekit.ClaimOf(p)
	req := &claimRequest{p: p, kind: c.Kind, n: c.N, lease: c.Lease}
	// A claim that finds nothing parks after its grouped claim: a transaction of this
	// process that makes jobs of the queue claimable claims for it before it commits
	// (handoff.go).
	return planekit.ClaimWaiting(p, d.hub, &d.claimWaiters, d.cfg.Now, func(*claimWaiter) ([]*plane.Job, int64, bool, bool, error) {
		var err error
		var jobs []*plane.Job // taken by the tries so far, each committed
		d.whileHeld(ctx, func() bool {
			req.n = c.N - len(jobs)
			if err = cmp.Or(d.claims.Do(ctx, req), req.err); err != nil {
				return false
			}
			jobs = append(jobs, req.jobs...)
			return d.claimsAgain(p, req, len(jobs), c.N)
		})
		if len(jobs) > 0 {
			return jobs, 0, false, true, nil // a later try's error leaves the jobs taken theirs
		}
		if err != nil {
			return nil, 0, false, false, err
		}
		return nil, req.next, false, true, nil
	}, func(changed <-chan struct{}, wait time.Duration, deliver <-chan []*plane.Job) ([]*plane.Job, error) {
		return d.sleepParked(ctx, changed, wait, deliver)
	})
}

// claimAcross claims for a claim over several queues (planekit.ClaimAcross): each try is
// one transaction that claims, with claimFor, from the first queue in the rotation's order
// with claimable work (planekit.TryEach); before, when set, runs first in the first. It
// waits on the hub's queue keys, which wakeQueue notifies here and the notifier from other
// processes.
func (d *Driver) claimAcross(ctx context.Context, p *plane.ClaimParams, before func(t *tx) error) ([]*plane.Job, bool, error) {
	c := planekit.ClaimOf(p)
	var held bool // the last try found nothing while a due row of a queue was held (its next is now)
	tryEach := planekit.TryEach(p, before, d.do, d.cfg.Now, func(t *tx, one *plane.ClaimParams) ([]*plane.Job, int64, error) {
		r := &claimRequest{p: one, kind: c.Kind, n: c.N, lease: c.Lease}
		if err := t.claimFor([]*claimRequest{r}); err != nil {
			return nil, 0, err
		}
		held = held || (len(r.jobs) == 0 && r.next != 0 && r.next <= t.ms)
		return r.jobs, r.next, nil
	})
	try := func(ctx context.Context, queues []string) (jobs []*plane.Job, due time.Duration, err error) {
		d.whileHeld(ctx, func() bool {
			held = false
			jobs, due, err = tryEach(ctx, queues)
			return err == nil && len(jobs) == 0 && held && p.Wait == 0
		})
		return jobs, due, err
	}
	return planekit.ClaimAcross(ctx, p, &d.rotation, d.hub, planekit.QueueKey, try, d.sleep)
}

// heldDueRetry bounds how long a claim tries again while a due row of its queue is held by
// another transaction (whileHeld): a holder that takes longer (a stalled connection) leaves
// the claim with what it took, never hung.
const heldDueRetry = time.Second

// whileHeld runs try, a claim's try, and runs it again every millisecond, for up to
// heldDueRetry, while it says to (claimsAgain): a claim's promote takes only the due rows
// it can lock at once and reports the rest (claimRequest.held); their holder (maintenance
// or another claim promoting them, a cancel) lets go within milliseconds. Never on ctx's
// end.
func (d *Driver) whileHeld(ctx context.Context, try func() (again bool)) {
	until := time.Now().Add(heldDueRetry)
	for try() && time.Now().Before(until) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// claimsAgain reports whether a claim of p for n jobs, which has taken took of them, its
// last try r, tries again at once (whileHeld): r's promote left a due row of the queue to
// the transaction holding it (r.held) and the claim took fewer than n, so it takes the
// rest, whether or not it may wait, as a claim made a moment later would: what counts as
// queued is what a claim gets. A claim that took nothing and may wait waits for the row
// instead (r.next is now: planekit.DueIn).
func (d *Driver) claimsAgain(p *plane.ClaimParams, r *claimRequest, took, n int) bool {
	return r.held && took < n && (took > 0 || p.Wait == 0)
}

// claimRequest is one caller's claim, served in a group.
type claimRequest struct {
	p     *plane.ClaimParams
	kind  plane.Kind
	n     int
	lease time.Duration

	jobs    []*plane.Job
	pending []*row // taken, not yet begun
	next    int64  // with no job: when the earliest waiting invocation is due (0: none)
	held    bool   // the promote left a due row of the queue to the transaction holding it
	err     error
}

// maxClaimGroup bounds the jobs one group claims.
const maxClaimGroup = 1000

// claimGroup serves a group of claims in one transaction: the requests for one queue, kind
// and temperature share their statements.
func (d *Driver) claimGroup(ctx context.Context, reqs []*claimRequest) {
	parts := partition(reqs)
	err := d.do(ctx, func(t *tx) error {
		for _, r := range reqs {
			r.jobs, r.pending, r.next, r.held, r.err = nil, nil, 0, false, nil
		}
		return t.claimParts(parts)
	})
	if err != nil {
		for _, r := range reqs {
			r.jobs, r.err = nil, err
		}
	}
}

// partition splits claims into the parts one claimFor serves together, in the order of
// their first request: the same queue, kind, temperature (the bits: a NaN temperature,
// ignored by other kinds, is a key too), offers' shape key and warm host keys (requests
// with offers or warm host keys are served apart).
func partition(reqs []*claimRequest) [][]*claimRequest {
	type partKey struct {
		namespace, queue string
		kind             plane.Kind
		temperature      uint64
		offers           string
		warm             string
	}
	return planekit.Partition(reqs, func(r *claimRequest) partKey {
		return partKey{r.p.Namespace, r.p.Queue, r.kind, math.Float64bits(r.p.Temperature), (*plane.Requirement)(r.p.Offers).Shape(), strings.Join(r.p.WarmHostKeys, " ")}
	})
}

// claimParts claims for each part (partition) in turn.
func (t *tx) claimParts(parts [][]*claimRequest) error {
	for _, part := range parts {
		if err := t.claimFor(part); err != nil {
			return err
		}
	}
	return nil
}

// claimFor claims for requests of one queue, kind, temperature and offers, in request
// order.
func (t *tx) claimFor(reqs []*claimRequest) error {
	p, kind := reqs[0].p, reqs[0].kind
	if !p.Offers.IsZero() || planekit.WarmClaim(p, kind) {
		for _, r := range reqs {
			if err := t.claimPlaced(r); err != nil {
				return err
			}
		}
		return nil
	}
	want := 0
	for _, r := range reqs {
		want += r.n
	}
	sql := t.d.sql.claimFIFO
	switch kind {
	case plane.KindFILO:
		sql = t.d.sql.claimFILO
	case plane.KindPriority:
		sql = t.d.sql.claimPriority
	case plane.KindBoltzmann:
		sql = t.d.sql.levels
	}
	// One round trip: promote the due waiting rows, read the deadline cutoff, and take the
	// first candidates (or, for boltzmann, the level counts).
	if err := t.flush(); err != nil {
		return err
	}
	qkey := planekit.QueueKey(p.Namespace, p.Queue)
	floor, fromFloor := "", false // fifo: scan from this process's floor of the queue
	if kind == plane.KindFIFO {
		floor, fromFloor = t.d.floors.Get(qkey)
	}
	b := &pgx.Batch{}
	b.Queue(t.promote(), p.Namespace, p.Queue, t.ms)
	b.Queue(t.d.sql.admission, p.Namespace, p.Queue)
	turnSQL := planekit.ByOrder(kind, t.d.sql.keyTurnFIFO, t.d.sql.keyTurnFILO, t.d.sql.keyTurnPriority)
	b.Queue(turnSQL, p.Namespace, p.Queue, []string{}, t.ms, want)
	switch {
	case kind == plane.KindBoltzmann:
		b.Queue(sql, p.Namespace, p.Queue)
	case fromFloor:
		b.Queue(t.d.sql.claimFIFOFrom, p.Namespace, p.Queue, want, floor)
	default:
		b.Queue(sql, p.Namespace, p.Queue, want)
	}
	br := t.tx.SendBatch(t.ctx, b)
	var cutoff time.Duration
	var rows []*row
	var levels []plane.Level
	var turns []planekit.KeyTurn     // the ready concurrency keys whose turn it is, locked
	var keyAdmission plane.Admission // the key limits of the queue's admission block
	var leftDue bool                 // the promote left a due row waiting (another transaction holds it)
	err := func() error {
		defer br.Close()
		var promoted *string // the smallest id made claimable
		if err := br.QueryRow().Scan(&promoted, &leftDue); err != nil {
			return fmt.Errorf("claim: promote: %w", err)
		}
		// The transaction may hold rows now, promoted or not (tx.promoted): a later claim
		// of it promotes with promoteHolding.
		t.promoted()
		if promoted != nil && fromFloor && *promoted < floor {
			floor = *promoted // the candidates below are not the oldest: scan again
			fromFloor = false
		}
		var a admission
		var onFull string
		var cutoffMS int64
		var concurrency []byte
		err := br.QueryRow().Scan(&a.MaxDepth, &onFull, &a.RateLimit, &a.Burst, &cutoffMS, &a.Tokens, &a.TokensMS, &concurrency)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("claim: read admission: %w", err)
		}
		if turns, err = readTurns(br.Query()); err != nil {
			return err
		}
		t.holdsRows = t.holdsRows || len(turns) > 0
		if err := planekit.DecodeConcurrency(concurrency, &a.Admission); err != nil {
			return err
		}
		keyAdmission = a.Admission
		cutoff = time.Duration(cutoffMS) * time.Millisecond
		rs, err := br.Query()
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			if kind == plane.KindBoltzmann {
				var l plane.Level
				if err := rs.Scan(&l.Priority, &l.Count); err != nil {
					return fmt.Errorf("claim: read levels: %w", err)
				}
				levels = append(levels, l)
				continue
			}
			r, err := scanRow(rs)
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			rows = append(rows, r)
		}
		return rs.Err()
	}()
	if err != nil {
		return err
	}
	if kind == plane.KindFIFO && !fromFloor && floor != "" {
		// Promoted rows lie below the floor: take candidates from the start instead (the
		// rows read are left as they were; their locks go at commit).
		if rows, err = t.candidates(sql, p.Namespace, p.Queue, want); err != nil {
			return err
		}
	}
	taken := 0
	// start takes r for the first request with room, or ends it by its deadline (false).
	start := func(r *row) (bool, error) {
		if t.expired(r, cutoff) {
			return false, nil
		}
		for _, req := range reqs {
			if len(req.jobs)+len(req.pending) < req.n {
				req.pending = append(req.pending, r)
				taken++
				break
			}
		}
		return true, nil
	}
	tookOf := func() int { return taken }
	keyed := len(turns) > 0
	if keyed && kind != plane.KindBoltzmann {
		if fromFloor && len(rows) < want {
			// Short from the floor: rows below it may be claimable (as below).
			if rows, err = t.candidates(sql, p.Namespace, p.Queue, want); err != nil {
				return err
			}
		}
		if err := planekit.ClaimKeyed(&keyedClaim{t, reqs, turnSQL, rows, start}, kind, keyAdmission, t.now, want, tookOf, turns, false); err != nil {
			return err
		}
	} else if kind == plane.KindBoltzmann {
		err := planekit.Boltzmann(levels, p.Temperature, t.d.float64, func() bool { return taken < want }, func(priority float64) (bool, error) {
			t.begin(reqs)
			rows, err := t.candidates(t.d.sql.claimLevel, p.Namespace, p.Queue, priority)
			if err != nil || len(rows) == 0 { // none: every job of the level is waiting, or taken by another claim
				return false, err
			}
			_, err = start(rows[0])
			return true, err
		})
		if err != nil {
			return err
		}
	} else {
		// Short from the floor, rows below it (requeued or submitted by another process) may
		// be claimable: read again from the start. The next candidates skip what is taken
		// (begin).
		err := planekit.ClaimRows(rows, false, want, tookOf, start, func() error { t.begin(reqs); return nil }, func(more int) ([]*row, error) {
			return t.candidates(sql, p.Namespace, p.Queue, more)
		}, func() bool {
			again := taken < want && fromFloor
			fromFloor = fromFloor && !again
			return again
		})
		if err != nil {
			return err
		}
		if kind == plane.KindFIFO {
			t.begin(reqs) // the floor is raised past the jobs taken, which begin moves to jobs
			t.d.floors.Raise(qkey, oldestJob(reqs), !fromFloor)
		}
	}
	if keyed && kind == plane.KindBoltzmann && taken < want {
		// The draw took the unkeyed jobs; keyed jobs fill what it left.
		if err := planekit.ClaimKeyed(&keyedClaim{t, reqs, turnSQL, nil, start}, kind, keyAdmission, t.now, want, tookOf, turns, false); err != nil {
			return err
		}
	}
	t.begin(reqs)
	if taken < want {
		var next *int64
		if err := t.queryRow(t.d.sql.nextAvailable, p.Namespace, p.Queue, t.ms).Scan(&next); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		// A row due now and still waiting (the promote left it to the transaction that
		// holds it) is reported as well: a claimer that found nothing claims again at once
		// (planekit.DueIn) instead of sleeping until a notification or a poll. The promote
		// says so itself (leftDue): nextAvailable's snapshot may no longer show the row
		// waiting (its holder committed since), while this claim's did not see it claimable.
		if leftDue {
			next = &t.ms
			for _, r := range reqs {
				r.held = true
			}
		}
		if next != nil {
			for _, r := range reqs {
				if len(r.jobs) == 0 {
					r.next = *next
				}
			}
		}
	}
	return nil
}

// promote is the statement that makes a claim's due waiting rows claimable: promote, or
// promoteHolding in a transaction that holds rows already (holdsRows), which waits for no
// counter row either. Neither waits for an invocation row: each takes the due rows no other
// transaction holds (FOR UPDATE SKIP LOCKED) and says whether it left one (leftDue), which
// the claim then reports as due now. Every claim promotes with it (claimFor, claimPlaced),
// and calls promoted after it.
func (t *tx) promote() string {
	if t.holdsRows {
		return t.d.sql.promoteHolding
	}
	return t.d.sql.promote
}

// promoted notes that the transaction ran a promote statement: it holds rows from now on,
// whether or not the statement moved any: the rows it promoted, the keys' counter rows of
// those, and rows it locked and left out (a due row another transaction changed after the
// statement's snapshot is locked in its newest version, then fails the re-check and is left
// out, still locked until the transaction ends). A later promote of the transaction (the
// default shape's claim after a placed one, the next request of its group) waits for no
// counter row either (promoteHolding): one that waited in key order while holding those rows
// could close a cycle with a transaction holding the counter row and waiting for one of them.
//
// Until 2026-12 the first promote waited, in id order, for the due rows other transactions
// held. That wait closed the last deadlock of TestShapedBatchesNoDeadlock (1 run in 115
// under the race detector): a placed claim's heads statement (FOR UPDATE SKIP LOCKED) waited
// for the promote's transaction, because PostgreSQL 15, locking a row whose updater commits
// just then, follows its update chain and waits for the holder of the newer version whatever
// the wait policy (heapam.c, heap_lock_updated_tuple), and the promote held that version (a
// row it had locked and left out); meanwhile the promote waited for a row the placed claim
// held. The promote no longer waits for an invocation row, so that edge is gone, and no
// cycle of invocation rows remains: a first promote's only wait is for the counter rows of
// the keys it promotes, in key order, taken before it writes anything. A cycle through it
// would need that counter row's holder to wait for one of the promote's due rows: by the
// update-chain wait above (both of its rare windows at once, in a claim holding that
// key's row: a keyed placed claim), or without SKIP LOCKED (a cancel of delayed jobs,
// which locks its rows in id order before it writes a counter row). Not seen; PostgreSQL
// would break it as a deadlock and the transaction would run again (Driver.do).
func (t *tx) promoted() { t.holdsRows = true }

// readTurns reads the rows of a keyTurns statement: a ready concurrency key whose turn it
// is, locked, its token bucket, and its head (locked), nil when another transaction holds
// it.
func readTurns(rs pgx.Rows, err error) ([]planekit.KeyTurn, error) {
	if err != nil {
		return nil, fmt.Errorf("claim: read concurrency keys: %w", err)
	}
	defer rs.Close()
	var turns []planekit.KeyTurn
	for rs.Next() {
		var k planekit.KeyTurn
		var tokensMS int64
		if rs.RawValues()[3] == nil { // the head's id: another transaction holds it
			skip := make([]any, len(rs.FieldDescriptions()))
			skip[0], skip[1], skip[2] = &k.Key, &k.Bucket.Tokens, &tokensMS
			err = rs.Scan(skip...)
		} else {
			k.Head, err = planekit.ScanRow(planekit.Around{Scanner: rs, Before: []any{&k.Key, &k.Bucket.Tokens, &tokensMS}}, false)
		}
		if err != nil {
			return nil, fmt.Errorf("claim: read concurrency keys: %w", err)
		}
		k.Bucket.At = time.UnixMilli(tokensMS)
		turns = append(turns, k)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("claim: read concurrency keys: %w", err)
	}
	return turns, nil
}

// keyedClaim is a claim of requests of one queue with a concurrency key ready, as
// planekit.KeyedClaim. Each round locks (FOR UPDATE SKIP LOCKED) the ready keys whose turn
// it is, as many as jobs are still wanted, and the head of each in one statement (keyTurns;
// the first round's read with the claim's first round trip); the unkeyed candidates are
// those the caller locked. The keys' rows stay locked until commit, and the start (begin:
// setRunningKeyed, migration 0013) counts the round's starts in their keys' running
// counters and advances their turns under that lock, so concurrent claimers (of this
// process or another) never start more than a key's limit.
type keyedClaim struct {
	t       *tx
	reqs    []*claimRequest
	turns   string // keyTurns in the claim's order
	unkeyed []*row
	start   func(*row) (bool, error) // claimFor's
}

func (c *keyedClaim) Turns(n int, skip []string) ([]planekit.KeyTurn, error) {
	p := c.reqs[0].p
	return readTurns(c.t.query(c.turns, p.Namespace, p.Queue, skip, c.t.ms, n))
}

// Head is nil: a key read without its head is one whose head another transaction holds.
func (*keyedClaim) Head(*planekit.KeyTurn) (*row, error) { return nil, nil }

func (c *keyedClaim) Unkeyed() (*row, error) {
	if len(c.unkeyed) == 0 {
		return nil, nil
	}
	return c.unkeyed[0], nil
}

func (c *keyedClaim) Drop() { c.unkeyed = c.unkeyed[1:] }

func (c *keyedClaim) Hold(key string, untilMS int64) error {
	c.t.exec(c.t.d.sql.keyHold, c.reqs[0].p.Namespace, c.reqs[0].p.Queue, key, untilMS)
	return nil
}

func (c *keyedClaim) Start(r *row) (bool, error) { return c.start(r) }

// EndRound counts the round's starts in the keys' rows and advances their turns
// (setRunningKeyed) before the next round reads them, and stores the drawn buckets.
func (c *keyedClaim) EndRound(drawn []string, buckets map[string]plane.TokenBucket) error {
	c.t.begin(c.reqs)
	if len(drawn) > 0 {
		tokens := make([]float64, len(drawn))
		ms := make([]int64, len(drawn))
		for i, k := range drawn {
			tokens[i], ms[i] = buckets[k].Tokens, buckets[k].At.UnixMilli()
		}
		c.t.exec(c.t.d.sql.keyBucket, c.reqs[0].p.Namespace, c.reqs[0].p.Queue, drawn, tokens, ms)
	}
	return nil
}

// candidates reads and locks claimable rows.
func (t *tx) candidates(sql string, args ...any) ([]*row, error) {
	return claimRows(t.query(sql, args...))
}

// claimRows reads every row of a claim's query (closing rs); errors say "claim: …".
func claimRows(rs pgx.Rows, err error) ([]*row, error) {
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return planekit.Collect(rs, "claim", scanRow)
}

// expired ends r as timeout instead of running it when plane's policy says so (Row.ClaimEnd),
// and reports whether it did.
func (t *tx) expired(r *row, cutoff time.Duration) bool {
	end := r.ClaimEnd(t.now, cutoff)
	if end != nil {
		t.apply(r.Head(), *end, nil)
	}
	return end != nil
}

// begin starts a new attempt of each request's taken rows under a fresh lease, one write
// for every request (setRunning; setRunningKeyed when it takes keyed rows, which it counts
// in their keys' rows).
func (t *tx) begin(reqs []*claimRequest) {
	var ids, tokens, workers []string
	var expiries []int64
	var keyed keyCounts // the claimable keyed rows taken, per key
	for _, req := range reqs {
		if len(req.pending) == 0 {
			continue
		}
		expires := t.ms + req.lease.Milliseconds()
		for _, r := range req.pending {
			token, job := planekit.Start(r, t.now, expires, t.count)
			ids, tokens = append(ids, r.ID), append(tokens, token)
			expiries, workers = append(expiries, expires), append(workers, req.p.Worker)
			req.jobs = append(req.jobs, job)
			if r.State == planekit.StateKeyed {
				keyed.add(r.Namespace, r.Queue, r.ConcurrencyKey.String, true)
			}
		}
		req.pending = nil
	}
	// The transaction holds the rows it starts: a later claim of it (another request of its
	// group, the default shape's claim after a placed one) promotes with promoteHolding, for
	// another claim's promote may have locked a due row in id order and wait for one of
	// them, which it saw waiting before this transaction promoted and took it.
	t.holdsRows = t.holdsRows || len(ids) > 0
	switch {
	case len(ids) == 0:
	case len(keyed.keys) == 0:
		t.exec(t.d.sql.setRunning, t.ms, ids, tokens, expiries, workers)
	default:
		if !t.keyStartCounted {
			t.exec(t.d.sql.keyStartCounted)
			t.keyStartCounted = true
		}
		t.exec(t.d.sql.setRunningKeyed, t.ms, ids, tokens, expiries, workers,
			keyed.namespaces, keyed.queues, keyed.keys, keyed.queued)
	}
}

// oldestJob is the smallest id of the jobs reqs took ("" when none), to which a fifo claim
// raises its queue's floor (planekit.Floors).
func oldestJob(reqs []*claimRequest) string {
	oldest := ""
	for _, r := range reqs {
		for _, j := range r.jobs {
			if oldest == "" || j.ID < oldest {
				oldest = j.ID
			}
		}
	}
	return oldest
}
