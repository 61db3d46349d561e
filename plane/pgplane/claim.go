package pgplane

import (
	"context"
	"fmt"
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
	req := &claimRequest{P: p, Claim: c}
	// A claim that finds nothing parks after its grouped claim: a transaction of this
	// process that makes jobs of the queue claimable claims for it before it commits
	// (handoff.go).
	return planekit.ClaimWaiting(p, d.hub, &d.claimWaiters, d.cfg.Now, func(*claimWaiter) ([]*plane.Job, int64, bool, bool, error) {
		return planekit.TryGrouped(ctx, req, c.N, d.claims)
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
	var held string // the queue of which the last try found nothing while a due row was held (its next is now)
	tryEach := planekit.TryEach(p, before, d.do, d.cfg.Now, func(t *tx, one *plane.ClaimParams) ([]*plane.Job, int64, error) {
		r := &claimRequest{P: one, Claim: c}
		if err := t.claimFor([]*claimRequest{r}); err != nil {
			return nil, 0, err
		}
		if held == "" && len(r.Jobs) == 0 && r.Next != 0 && r.Next <= t.ms {
			held = one.Queue
		}
		return r.Jobs, r.Next, nil
	})
	try := func(ctx context.Context, queues []string) ([]*plane.Job, time.Duration, error) {
		return planekit.TryHeld(ctx, p, tryEach, queues, &held)
	}
	return planekit.ClaimAcross(ctx, p, &d.rotation, d.hub, planekit.QueueKey, try, d.sleep)
}

// claimRequest is one caller's claim, served in a group (planekit.ServeClaims).
type claimRequest = planekit.ClaimRequest

// maxClaimGroup bounds the jobs one group claims.
const maxClaimGroup = 1000

// claimGroup serves a group of claims in one transaction: the requests for one queue, kind
// and temperature share their statements.
func (d *Driver) claimGroup(ctx context.Context, reqs []*claimRequest) {
	planekit.ServeClaims(ctx, reqs, d.do, nil, nil, nil, (*tx).claimFor)
}

// claimFor claims for requests of one queue, kind, temperature and offers, in request
// order.
func (t *tx) claimFor(reqs []*claimRequest) error {
	p, kind := reqs[0].P, reqs[0].Kind
	if !p.Offers.IsZero() || planekit.WarmClaim(p, kind) {
		for _, r := range reqs {
			if err := t.claimPlaced(r); err != nil {
				return err
			}
		}
		return nil
	}
	want := planekit.Want(reqs)
	sql := planekit.ByOrder(kind, t.d.sql.claimFIFO, t.d.sql.claimFILO, t.d.sql.claimPriority)
	if kind == plane.KindBoltzmann {
		sql = t.d.sql.levels
	}
	// One round trip, behind the queued writes (staged first: their rows count for the
	// promote's choice): promote the due waiting rows, read the deadline cutoff, and take the
	// first candidates (or, for boltzmann, the level counts).
	t.takeWrites()
	qkey := planekit.QueueKey(p.Namespace, p.Queue)
	floor, fromFloor := "", false // fifo: scan from this process's floor of the queue
	if kind == plane.KindFIFO {
		floor, fromFloor = t.d.floors.Get(qkey)
	}
	b := &pgx.Batch{}
	alone := t.queuePromote(b, p.Namespace, p.Queue)
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
	br := t.sendBatch(b)
	var cutoff time.Duration
	var rows []*row
	var levels []plane.Level
	var turns []planekit.KeyTurn     // the ready concurrency keys whose turn it is, locked
	var keyAdmission plane.Admission // the key limits of the queue's admission block
	var leftDue bool                 // the promote left a due row waiting (another transaction holds it)
	err := func() error {
		defer br.Close()
		promoted, left, err := t.readPromote(br, alone) // the smallest id made claimable
		if err != nil {
			return err
		}
		leftDue = left
		if promoted != nil {
			t.d.promotions.Note(qkey)
		}
		if promoted != nil && fromFloor && *promoted < floor {
			floor = *promoted // the candidates below are not the oldest: scan again
			fromFloor = false
		}
		a, err := planekit.ScanAdmission(br.QueryRow())
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if a != nil {
			keyAdmission, cutoff = a.Admission, a.DeadlineCutoff
		}
		if turns, err = planekit.ReadTurns(br.Query()); err != nil {
			return err
		}
		t.holdsRows = t.holdsRows || len(turns) > 0
		if kind != plane.KindBoltzmann {
			rows, err = claimRows(br.Query())
			return err
		}
		rs, err := br.Query()
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		levels, err = planekit.Collect(rs, "claim: read levels", planekit.ScanLevel)
		return err
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
	// start takes r for the first request with room, or ends it by its deadline (false:
	// Row.ClaimEnd, whose queued writes never fail).
	start := func(r *row) (bool, error) {
		if ended, _ := r.ClaimEnd(t.now, cutoff, t.apply); ended {
			return false, nil
		}
		if planekit.Assign(reqs, r) {
			taken++
		}
		return true, nil
	}
	tookOf := func() int { return taken }
	more := func() bool { return taken < want }
	err = planekit.ClaimInOrder(kind, len(turns) > 0, more, func() error {
		if fromFloor && len(rows) < want {
			// Short from the floor: rows below it may be claimable (as below).
			if rows, err = t.candidates(sql, p.Namespace, p.Queue, want); err != nil {
				return err
			}
		}
		return planekit.ClaimKeyed(&keyedClaim{t, reqs, turnSQL, rows, start}, kind, keyAdmission, t.now, want, tookOf, turns, false)
	}, func() error {
		return planekit.Boltzmann(levels, p.Temperature, t.d.rand.Float64, more, func(priority float64) (bool, error) {
			t.begin(reqs)
			rows, err := t.candidates(t.d.sql.claimLevel, p.Namespace, p.Queue, priority)
			if err != nil || len(rows) == 0 { // none: every job of the level is waiting, or taken by another claim
				return false, err
			}
			_, err = start(rows[0])
			return true, err
		})
	}, func() error {
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
		if err == nil && kind == plane.KindFIFO {
			t.begin(reqs) // the floor is raised past the jobs taken, which begin moves to jobs
			t.d.floors.Raise(qkey, planekit.OldestJob(reqs), !fromFloor)
		}
		return err
	})
	if err != nil {
		return err
	}
	t.begin(reqs)
	if taken < want {
		var next *int64
		if err := t.queryRow(t.d.sql.nextAvailable, p.Namespace, p.Queue, t.ms).Scan(&next); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		// A due row the promote left to the transaction holding it (leftDue) is due now, as
		// is a claimable row left after a promotion of the queue (planekit.Promotions).
		held := leftDue
		if !held {
			if held, err = t.claimableLeft(p.Namespace, p.Queue, nil); err != nil {
				return err
			}
		}
		planekit.NoteDue(reqs, next, held, t.ms)
	}
	return nil
}

// claimableLeft says, for a claim that came up short, whether a claimable row of queue
// (namespace, queue) is left, of the default shape, of one of shapes or of a ready
// concurrency key, which another transaction holds (statements.claimableLeft). It asks only after a promotion of the queue
// in this process (planekit.Promotions), and answers false otherwise.
func (t *tx) claimableLeft(namespace, queue string, shapes []string) (bool, error) {
	if !t.d.promotions.Recent(planekit.QueueKey(namespace, queue)) {
		return false, nil
	}
	var left bool
	if err := t.queryRow(t.d.sql.claimableLeft, namespace, queue, shapes, t.ms).Scan(&left); err != nil {
		return false, fmt.Errorf("claim: %w", err)
	}
	return left, nil
}

// setSyncOff makes the commit of the transaction it is sent in return before its WAL is
// flushed (queuePromote).
const setSyncOff = `set local synchronous_commit = off`

// queuePromote queues the claim's promote (promote: the statement) at the head of b, and
// reports whether it goes out alone: in a transaction of its own, committed before the
// claim's transaction begins, in the same round trip (BEGIN, promote, COMMIT, BEGIN, the
// claim's statements). It does when the claim is its transaction's first statement:
// nothing sent, nothing queued, nothing held (a claim of its own, the first try of a claim
// across queues). So the claim's transaction never holds the counter rows of the keys it
// promoted while it reads its key turns and heads (FOR UPDATE SKIP LOCKED): in PostgreSQL
// 15 such a read can wait after all, for the holder of a newer version of a row whose
// updater ends just as it is locked (heap_lock_updated_tuple follows the update chain
// whatever the wait policy), and a writer that took a lower key's newer version in key
// order (a submit, a settle, another promote) and waits for a higher key the claim held
// closed a deadlock PostgreSQL broke after deadlock_timeout (TestKeyedHandoffNoDeadlock,
// once in a while; TestClaimHoldsNoPromotedCounterRow). The promote's transaction commits
// without waiting for its WAL to reach disk (synchronous_commit off, for it alone): one
// lost in a crash leaves its rows waiting, which the next claim or maintenance promotes
// again, and the claim's own commit, later in the WAL, flushes it anyway. A promote that
// moves nothing writes nothing and its commit costs nothing. Read its answers with
// readPromote.
func (t *tx) queuePromote(b *pgx.Batch, namespace, queue string) (alone bool) {
	t.takeWrites()
	alone = !t.begun && len(t.ahead) == 0 && !t.holdsRows
	if alone {
		b.Queue(setSyncOff)
	}
	b.Queue(t.promote(), namespace, queue, t.ms)
	if alone {
		b.Queue("commit")
		b.Queue("begin")
	}
	return alone
}

// readPromote reads the answers of the promote queuePromote queued (alone: its own
// transaction's too): the smallest id it made claimable (nil: none) and whether it left a
// due row waiting (leftDue). Either way the transaction counts as holding rows from now on
// (promoted): one that went out alone left nothing held, but the claim goes on to lock
// rows (candidates it may read and leave locked, key turns), so a later promote of the
// transaction (a claim across queues, the default shape's claim after a placed one) waits
// for nothing, as before.
func (t *tx) readPromote(br pgx.BatchResults, alone bool) (promoted *string, leftDue bool, err error) {
	if alone {
		if _, err := br.Exec(); err != nil {
			return nil, false, fmt.Errorf("claim: promote: %w", err)
		}
	}
	if err := br.QueryRow().Scan(&promoted, &leftDue); err != nil {
		return nil, false, fmt.Errorf("claim: promote: %w", err)
	}
	t.promoted()
	if !alone {
		return promoted, leftDue, nil
	}
	tag, err := br.Exec()
	if err == nil && tag.String() != "COMMIT" {
		err = pgx.ErrTxCommitRollback
	}
	if err == nil {
		_, err = br.Exec() // the claim's BEGIN
	}
	if err != nil {
		return nil, false, fmt.Errorf("claim: promote: %w", err)
	}
	return promoted, leftDue, nil
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
// The promote waits for no invocation row (the deadlock its wait for due rows in id order
// once closed with a placed claim, through PostgreSQL's update-chain wait, is told in
// docs/architecture.md, The PostgreSQL plane, Claims), so no cycle of invocation rows
// remains: a first promote's only wait is for the counter rows of
// the keys it promotes, in key order, taken before it writes anything. A cycle through it
// would need that counter row's holder to wait for one of the promote's due rows: by the
// update-chain wait above (both of its rare windows at once, in a claim holding that
// key's row: a keyed placed claim), or without SKIP LOCKED (a cancel of delayed jobs,
// which locks its rows in id order before it writes a counter row). Not seen; PostgreSQL
// would break it as a deadlock and the transaction would run again (Driver.do).
func (t *tx) promoted() { t.holdsRows = true }

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
	p := c.reqs[0].P
	return planekit.ReadTurns(c.t.query(c.turns, p.Namespace, p.Queue, skip, c.t.ms, n))
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
	c.t.exec(c.t.d.sql.keyHold, c.reqs[0].P.Namespace, c.reqs[0].P.Queue, key, untilMS)
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
		c.t.exec(c.t.d.sql.keyBucket, c.reqs[0].P.Namespace, c.reqs[0].P.Queue, drawn, tokens, ms)
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

// begin starts a new attempt of each request's taken rows under a fresh lease, one write
// for every request (setRunning; setRunningKeyed when it takes keyed rows, which it counts
// in their keys' rows).
func (t *tx) begin(reqs []*claimRequest) {
	var ids, tokens, workers []string
	var expiries []int64
	var keyed planekit.KeyCounts // the claimable keyed rows taken, per key
	planekit.BeginPending(reqs, t.now, t.count, func(r *row, token string, expires int64, worker string) {
		ids, tokens = append(ids, r.ID), append(tokens, token)
		expiries, workers = append(expiries, expires), append(workers, worker)
		if r.State == planekit.StateKeyed {
			keyed.Add(r.Namespace, r.Queue, r.ConcurrencyKey.String, true)
		}
	})
	// The transaction holds the rows it starts: a later claim of it (another request of its
	// group, the default shape's claim after a placed one) promotes with promoteHolding, for
	// another claim's promote may have locked a due row in id order and wait for one of
	// them, which it saw waiting before this transaction promoted and took it.
	t.holdsRows = t.holdsRows || len(ids) > 0
	switch {
	case len(ids) == 0:
	case len(keyed.Keys) == 0:
		t.exec(t.d.sql.setRunning, t.ms, ids, tokens, expiries, workers)
	default:
		t.exec(t.d.sql.setRunningKeyed, t.ms, ids, tokens, expiries, workers,
			keyed.Namespaces, keyed.Queues, keyed.Keys, keyed.Queued)
	}
}
