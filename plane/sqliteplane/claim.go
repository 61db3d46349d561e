package sqliteplane

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationClaimMany implements plane.Driver.
func (d *Driver) InvocationClaimMany(ctx context.Context, p *plane.ClaimParams) ([]*plane.Job, error) {
	return planekit.ClaimMany(ctx, p, d.claimAfter, d.claimAcross)
}

// claimAcross is claimAfter for a claim over several queues (planekit.ClaimAcross): each
// try is one write op that claims from the first queue, in the rotation's order, with
// claimable work (planekit.TryEach); before, when set, runs in the first. It waits on the
// hub's planekit.ClaimableKey of every queue, which markClaimable notifies.
func (d *Driver) claimAcross(ctx context.Context, p *plane.ClaimParams, before func(t *wtx) error) ([]*plane.Job, bool, error) {
	c := planekit.ClaimOf(p)
	try := planekit.TryEach(p, before, d.do, d.cfg.Now, func(t *wtx, one *plane.ClaimParams) ([]*plane.Job, int64, error) {
		return t.claim(one, c.Kind, c.N, c.Lease)
	})
	return planekit.ClaimAcross(ctx, p, &d.rotation, d.hub, planekit.ClaimableKey, try, d.sleep)
}

// InvocationSettleAndClaim implements plane.Driver: the settles and the first claim are
// one write op, so one commit; a claim that then waits waits as InvocationClaimMany.
func (d *Driver) InvocationSettleAndClaim(ctx context.Context, settle []plane.SettleParams, p *plane.ClaimParams) ([]error, []*plane.Job, error) {
	return planekit.SettleThenClaim(ctx, settle, p, d.settleClaim, d.claimAcross, (*wtx).settleMany)
}

// settleClaim is a settle-and-claim of one queue (planekit.SettleClaim): the settles run in
// the claim's first write op.
func (d *Driver) settleClaim(ctx context.Context, settle []plane.SettleParams, p *plane.ClaimParams, out []error) ([]*plane.Job, bool, error) {
	return d.claimAfter(ctx, p, func(t *wtx) error { return t.settleMany(settle, out) })
}

// claimAfter claims as InvocationClaimMany does; before, when set, runs in the first claim
// transaction, before the claim. committed reports whether that transaction committed.
func (d *Driver) claimAfter(ctx context.Context, p *plane.ClaimParams, before func(t *wtx) error) ([]*plane.Job, bool, error) {
	c := planekit.ClaimOf(p)
	// The hub wakes a wait for what the writer cannot hand off: another process's commit, a
	// job entering backoff, Close.
	return planekit.ClaimWaiting(p, d.hub, &d.claimWaiters, d.cfg.Now, func(w *claimWaiter) ([]*plane.Job, int64, bool, bool, error) {
		var jobs []*plane.Job
		var nextMS int64
		parked := false // set by the write op that parked w
		first := before
		before = nil
		err := d.do(ctx, func(t *wtx) error {
			if first != nil {
				if err := first(t); err != nil {
					return err
				}
			}
			var err error
			jobs, nextMS, err = t.claim(p, c.Kind, c.N, c.Lease)
			if parked = err == nil && len(jobs) == 0 && w != nil; parked {
				d.claimWaiters.Park(planekit.QueueKey(p.Namespace, p.Queue), w) // in the transaction: no submit slips between
			}
			return err
		})
		return jobs, nextMS, parked, err == nil, err
	}, func(changed <-chan struct{}, wait time.Duration, deliver <-chan []*plane.Job) ([]*plane.Job, error) {
		return planekit.Sleep(ctx, d.stopped, changed, deliver, wait, 0)
	})
}

// promoteBatchClaim bounds the delayed invocations a claim promotes; the writer's alarm
// promotes the rest in batches of promoteBatch.
const (
	promoteBatchClaim = 256
	promoteBatch      = 1000
)

// claim claims up to n invocations in kind's order. When it claims none, nextMS is when the
// earliest delayed invocation (of any queue) becomes due (0: none known).
func (t *wtx) claim(p *plane.ClaimParams, kind plane.Kind, n int, lease time.Duration) ([]*plane.Job, int64, error) {
	var cutoff time.Duration // the queue's deadline cutoff
	var jobs []*plane.Job
	t.runs = t.runs[:0] // nothing left of a claim that failed
	// Delayed invocations that are due join the claim indexes first (usually a no-op that
	// costs nothing: the writer knows the earliest due time).
	if _, err := t.promoteDue(promoteBatchClaim); err != nil {
		return nil, 0, err
	}
	if paused, err := t.paused(p.Namespace, p.Queue); paused || err != nil {
		return nil, 0, err // a paused queue gives nothing; its resume hands off (pause.go)
	}
	a, err := t.admission(p.Namespace, p.Queue)
	if err != nil {
		return nil, 0, err
	}
	if a != nil {
		cutoff = a.DeadlineCutoff
	}
	// Invocations with a requirement are claimable only by a claim whose offers satisfy
	// their shape (placement.go); a claim without offers skips this (no read at all).
	shapes, err := t.satisfiedShapes(p)
	if err != nil {
		return nil, 0, err
	}
	warm, err := t.warmPairs(p, kind, shapes)
	if err != nil {
		return nil, 0, err
	}
	if len(shapes) > 0 || len(warm) > 0 {
		err = t.claimPlaced(p, kind, n, lease, cutoff, shapes, warm, &jobs)
	} else {
		err = t.claimDefault(p, kind, n, lease, cutoff, &jobs)
	}
	if err != nil {
		return nil, 0, err
	}
	if len(jobs) > 0 {
		return jobs, 0, nil
	}
	var next int64
	if due := t.w.nextDue; due != dueUnknown && due != dueNone && due > t.ms {
		next = due
	}
	// A concurrency key held back (rate limited) becomes claimable at its next_ms.
	var held sql.NullInt64
	if err := t.w.st.keyNext.QueryRowContext(t.ctx, p.Namespace, p.Queue, t.ms).Scan(&held); err != nil {
		return nil, 0, fmt.Errorf("claim: read concurrency keys: %w", err)
	}
	return nil, planekit.EarlierDue(next, held.Int64), nil
}

// readyKey is the key whose turn it is, with its token bucket (and, when read with the key
// by keyReadyHead, its head in the claim's order), the range of its claimable jobs'
// priorities, and whether its queue holds unkeyed jobs to compare it with.
type readyKey struct {
	planekit.KeyTurn
	// unkeyed is false when the queue holds no claimable unkeyed job (no row in state 0,
	// read in the same statement as the key): the claim then skips the unkeyed head's read.
	unkeyed bool
	// low and high bound the priorities of the key's claimable jobs (migration 014's
	// priority_low and priority_high: every one lies within them; equal, they all share one
	// level).
	low, high float64
}

// keyReady returns the concurrency key whose turn it is among the queue's keys with
// claimable jobs below their limit and not held back (key "" when there is none).
func (t *wtx) keyReady(namespace, queue string) (readyKey, error) {
	k, _, err := t.readKey(t.w.st.keyReady, false, namespace, queue)
	return k, err
}

// keyReadyHead reads the ready key and its head in kind's order in one statement
// (keyReadyHeadSQL): for fifo and filo only when the key's jobs share one priority level.
// ok is false when it read none (no ready key, or a key of several levels): keyReady and
// keyHead then read them.
func (t *wtx) keyReadyHead(kind plane.Kind, namespace, queue string) (readyKey, bool, error) {
	stmt := planekit.ByOrder(kind, t.w.st.keyReadyHeadFIFO, t.w.st.keyReadyHeadFILO, t.w.st.keyReadyHeadPriority)
	return t.readKey(stmt, true, namespace, queue)
}

// readKey reads the ready key of stmt (keyReadySQL, or keyReadyHeadSQL with its head:
// head), ok false when there is none.
func (t *wtx) readKey(stmt *sql.Stmt, head bool, namespace, queue string) (k readyKey, ok bool, err error) {
	rs, err := stmt.QueryContext(t.ctx, namespace, queue, t.ms)
	if err != nil {
		return readyKey{}, false, fmt.Errorf("claim: read concurrency keys: %w", err)
	}
	defer rs.Close()
	if ok = rs.Next(); ok && head { // the key is the head's (keyReadyHeadSQL)
		var tokensMS int64
		if k.Head, err = scanRow(planekit.Around{Scanner: rs, After: []any{&k.Bucket.Tokens, &tokensMS, &k.low, &k.high, &k.unkeyed}}); err == nil {
			k.Key, k.Bucket.At = k.Head.ConcurrencyKey.String, time.UnixMilli(tokensMS)
		}
	} else if ok {
		err = planekit.ScanTurn(rs, &k.KeyTurn, false, true, &k.low, &k.high, &k.unkeyed)
	}
	if err = cmp.Or(err, rs.Err()); err != nil {
		return readyKey{}, false, fmt.Errorf("claim: read concurrency keys: %w", err)
	}
	return k, ok, nil
}

// keyHead returns the head, in kind's order, of the claimable jobs of k (none, or one row).
// One index serves every order (invocations_keyed_priority: key, priority descending, id):
// the priority order reads its first entry; fifo and filo the first or last id of a
// priority level (planekit.LevelsHead over keyHeadLevel and keyLevel).
func (t *wtx) keyHead(kind plane.Kind, namespace, queue string, k readyKey) (*row, error) {
	if kind == plane.KindPriority || kind == plane.KindBoltzmann {
		return t.first(t.w.st.keyHeadPriority, namespace, queue, k.Key)
	}
	level := planekit.ByOrder(kind, t.w.st.keyHeadLevelFIFO, t.w.st.keyHeadLevelFILO, nil) // priority: above
	return planekit.LevelsHead(kind, k.low, k.high, func(priority float64) (*row, error) {
		return t.first(level, namespace, queue, k.Key, priority)
	}, func(below float64) (priority float64, ok bool, err error) {
		err = t.w.st.keyLevel.QueryRowContext(t.ctx, namespace, queue, k.Key, below).Scan(&priority)
		if err == sql.ErrNoRows {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("claim: read the priority levels of a concurrency key: %w", err)
		}
		return priority, true, nil
	})
}

// claimKeyed claims up to n jobs (with those in jobs) from a queue with keyed jobs, one key
// a round (planekit.ClaimKeyed over keyedClaim): each takes, in kind's order, the earlier
// of the head of the unkeyed jobs (stmt) and the head of the key whose turn it is. The
// triggers (migrations 009, 013, 014 and 015) count every start in the key's running
// counter and advance its turn, so the next read of the ready keys leaves a key at its
// limit out and takes the next key in turn. ready, when set, is the ready key the caller
// read in this transaction and nothing changed since: the first round takes it instead of
// reading it again.
func (t *wtx) claimKeyed(p *plane.ClaimParams, kind plane.Kind, stmt *sql.Stmt, n int, lease, cutoff time.Duration, jobs *[]*plane.Job, ready *readyKey) error {
	a, err := t.admission(p.Namespace, p.Queue)
	if err != nil {
		return err
	}
	var limits plane.Admission
	if a != nil {
		limits = a.Admission
	}
	c := &keyedClaim{t: t, p: p, kind: kind, stmt: stmt, lease: lease, cutoff: cutoff, jobs: jobs, ready: ready}
	return planekit.ClaimKeyed(c, kind, limits, t.now, n, func() int { return len(*jobs) }, nil, true)
}

// keyedClaim is claimKeyed's planekit.KeyedClaim: the key of the round (keyReady), the
// unkeyed head read afresh each round, each start written at the round's end.
type keyedClaim struct {
	t             *wtx
	p             *plane.ClaimParams
	kind          plane.Kind
	stmt          *sql.Stmt
	lease, cutoff time.Duration
	jobs          *[]*plane.Job
	ready         *readyKey           // the first round's key, read by the caller
	k             readyKey            // the key of the round
	turn          [1]planekit.KeyTurn // Turns' answer
}

// Turns reads the key whose turn it is (none when there is none, or it is left out).
func (c *keyedClaim) Turns(_ int, skip []string) ([]planekit.KeyTurn, error) {
	var err error
	if c.ready != nil {
		c.k, c.ready = *c.ready, nil
	} else if c.k, err = c.t.keyReady(c.p.Namespace, c.p.Queue); err != nil {
		return nil, err
	}
	if c.k.Key == "" || slices.Contains(skip, c.k.Key) {
		c.k = readyKey{}
		return nil, nil
	}
	c.turn[0] = c.k.KeyTurn
	return c.turn[:], nil
}

func (c *keyedClaim) Head(*planekit.KeyTurn) (*row, error) {
	return c.t.keyHead(c.kind, c.p.Namespace, c.p.Queue, c.k)
}

// Unkeyed reads the unkeyed head, unless the key's read said the queue holds none.
func (c *keyedClaim) Unkeyed() (*row, error) {
	if c.k.Key != "" && !c.k.unkeyed {
		return nil, nil
	}
	return c.t.first(c.stmt, c.p.Namespace, c.p.Queue, c.t.ms, 1)
}

func (*keyedClaim) Drop() {}

func (c *keyedClaim) Hold(key string, untilMS int64) error {
	if _, err := c.t.w.st.keyHold.ExecContext(c.t.ctx, c.p.Namespace, c.p.Queue, key, untilMS); err != nil {
		return fmt.Errorf("claim: hold a rate-limited concurrency key: %w", err)
	}
	return nil
}

func (c *keyedClaim) Start(r *row) (bool, error) {
	started, err := c.t.take(r, c.p, c.lease, c.cutoff, c.jobs)
	if started && r.ConcurrencyKey.Valid {
		// The claim's trigger (migrations 013 and 015) counted the start and advanced the
		// key's turn.
		c.t.w.keyed[[2]string{c.p.Namespace, c.p.Queue}] = true
	}
	return started, err
}

// EndRound writes the round's start (before the next read) and the token bucket of a key
// under a rate limit.
func (c *keyedClaim) EndRound(drawn []string, buckets map[string]plane.TokenBucket) error {
	if err := c.t.runPending(c.lease, c.p.Worker); err != nil {
		return err
	}
	for _, key := range drawn {
		if _, err := c.t.w.st.keyBucket.ExecContext(c.t.ctx, c.p.Namespace, c.p.Queue, key, buckets[key].Tokens, buckets[key].At.UnixMilli()); err != nil {
			return fmt.Errorf("claim: store the token bucket of a concurrency key: %w", err)
		}
	}
	return nil
}

// candidates reads claimable rows (all of them before any update touches the table).
func (t *wtx) candidates(stmt *sql.Stmt, args ...any) ([]*row, error) {
	rs, err := stmt.QueryContext(t.ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return planekit.Collect(sqlRows{rs}, "claim", scanRow)
}

// first reads the first claimable row of stmt (nil when none).
func (t *wtx) first(stmt *sql.Stmt, args ...any) (*row, error) {
	rows, err := t.candidates(stmt, args...)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0], nil
}

// take begins a new attempt of r under a fresh lease (its row written by the caller's
// runPending) and adds its job to jobs, or, when r's deadline has passed or is nearer than
// the queue's cutoff (Row.ClaimEnd), ends it as timeout without running it (false).
func (t *wtx) take(r *row, p *plane.ClaimParams, lease, cutoff time.Duration, jobs *[]*plane.Job) (bool, error) {
	if ended, err := r.ClaimEnd(time.UnixMilli(t.ms), cutoff, t.apply); ended || err != nil {
		return false, err
	}
	token, job := planekit.Start(r, t.now, t.ms+lease.Milliseconds(), t.count)
	// The row is written with the claim's other started rows by runPending (batch.go):
	// attempt + 1, token, expires, the attempt deadline, started now by p.Worker.
	t.runs = append(t.runs, run{seq: r.Seq, token: token})
	*jobs = append(*jobs, job)
	return true, nil
}

// claimBoltzmann draws a priority level with probability ∝ count·exp((p − pmax)/T), then
// takes that level's oldest claimable invocation; n draws cost O(n · levels).
func (t *wtx) claimBoltzmann(p *plane.ClaimParams, n int, lease, cutoff time.Duration, jobs *[]*plane.Job) error {
	if err := t.flushCounts(); err != nil {
		return err
	}
	levels, err := t.levels(p.Namespace, p.Queue)
	if err != nil {
		return err
	}
	return planekit.Boltzmann(levels, p.Temperature, t.w.rand.Float64, func() bool { return len(*jobs) < n }, func(priority float64) (bool, error) {
		r, err := t.first(t.w.st.claimLevel, p.Namespace, p.Queue, t.ms, priority)
		if err != nil || r == nil { // nil: every job of the level is in backoff
			return false, err
		}
		if _, err := t.take(r, p, lease, cutoff, jobs); err != nil {
			return false, err
		}
		return true, t.runPending(lease, p.Worker) // before the next draw reads
	})
}

func (t *wtx) levels(namespace, queue string) ([]plane.Level, error) {
	rs, err := t.w.st.levels.QueryContext(t.ctx, namespace, queue)
	if err != nil {
		return nil, fmt.Errorf("claim: read levels: %w", err)
	}
	return planekit.Collect(sqlRows{rs}, "claim: read levels", planekit.ScanLevel)
}

// defaultStmt is the claim statement of kind over the default shape's unkeyed jobs.
func (t *wtx) defaultStmt(kind plane.Kind) *sql.Stmt {
	return planekit.ByOrder(kind, t.w.st.claimFIFO, t.w.st.claimFILO, t.w.st.claimPriority)
}

// claimDefault claims up to n jobs (with those in jobs) of the default shape — without a
// requirement —, keyed or not, in kind's order.
func (t *wtx) claimDefault(p *plane.ClaimParams, kind plane.Kind, n int, lease, cutoff time.Duration, jobs *[]*plane.Job) error {
	stmt := t.defaultStmt(kind)
	// Keyed jobs are claimable only through a key below its limit (concurrency.go); a
	// queue without one claims exactly as before, after this one index probe.
	var ready readyKey
	var err error
	read := false
	if kind != plane.KindBoltzmann && t.w.keyed[[2]string{p.Namespace, p.Queue}] {
		// A queue known to hold keyed jobs: the ready key and its head in one statement
		// (a hint only: either way reads the same key and head).
		if ready, read, err = t.keyReadyHead(kind, p.Namespace, p.Queue); err != nil {
			return err
		}
	}
	if !read {
		if ready, err = t.keyReady(p.Namespace, p.Queue); err != nil {
			return err
		}
	}
	return planekit.ClaimInOrder(kind, ready.Key != "", func() bool { return len(*jobs) < n }, func() error {
		// A boltzmann claim's keyed jobs fill what the draw left: the key read again.
		first := &ready
		if kind == plane.KindBoltzmann {
			first = nil
		}
		return t.claimKeyed(p, kind, stmt, n, lease, cutoff, jobs, first)
	}, func() error {
		return t.claimBoltzmann(p, n, lease, cutoff, jobs)
	}, func() error {
		// The started rows are written before any new read of candidates, which must not
		// see them as claimable.
		return planekit.ClaimRows(nil, true, n, func() int { return len(*jobs) }, func(r *row) (bool, error) {
			return t.take(r, p, lease, cutoff, jobs)
		}, func() error { return t.runPending(lease, p.Worker) }, func(more int) ([]*row, error) {
			return t.candidates(stmt, p.Namespace, p.Queue, t.ms, more)
		}, func() bool { return false })
	})
}
