package planekit

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// The claim path's mechanisms around a driver's claim statements that hold no SQL: the
// claims a group's transaction serves together (ClaimRequest, ServeClaims, Assign,
// BeginPending, NoteDue: PostgreSQL's group commit of claims and settle-and-claims), the
// retry of a claim while a due row is held by another transaction (WhileHeld,
// ClaimsAgain), what a settle-and-claim does once its settles committed (SettledClaim),
// the order in which a claim of one queue takes keyed, drawn and plain candidates
// (ClaimInOrder), and the head of a key's jobs over its priority levels (LevelsHead).

// ClaimRequest is one caller's claim, served in a group: the requests of one queue, kind,
// temperature and offers share their statements (PartitionClaims).
type ClaimRequest struct {
	// P is the claim's parameters.
	P *plane.ClaimParams
	// Claim is what P decides; N is how many jobs this request takes at the most (a claim
	// that tries again for the rest asks for fewer).
	Claim

	// Jobs are the jobs taken and begun; Pending the rows taken, not yet begun
	// (BeginPending).
	Jobs    []*plane.Job
	Pending []*Row
	// Next is, with no job, when the earliest waiting invocation is due (Unix ms; 0: none).
	Next int64
	// Held: a row of the queue the claim could take is held by another transaction: its
	// promote left a due row waiting to the transaction holding it, or (after a promotion
	// of the queue: Promotions) a claimable row is left that it did not take.
	Held bool
	// Err: the group's transaction failed.
	Err error
}

// Reset clears what a run of the group's transaction left in r (the transaction runs again
// after a serialization failure).
func (r *ClaimRequest) Reset() {
	r.Jobs, r.Pending, r.Next, r.Held, r.Err = nil, nil, 0, false, nil
}

// PartitionClaims splits claims into the parts one claim statement serves together, in the
// order of their first request: the same queue, kind, temperature (the bits: a NaN
// temperature, ignored by other kinds, is a key too), offers' shape key and warm host keys
// (requests with offers or warm host keys are served apart).
func PartitionClaims(reqs []*ClaimRequest) [][]*ClaimRequest {
	type partKey struct {
		namespace, queue string
		kind             plane.Kind
		temperature      uint64
		offers           string
		warm             string
	}
	return Partition(reqs, func(r *ClaimRequest) partKey {
		return partKey{r.P.Namespace, r.P.Queue, r.Kind, math.Float64bits(r.P.Temperature), (*plane.Requirement)(r.P.Offers).Shape(), strings.Join(r.P.WarmHostKeys, " ")}
	})
}

// ServeClaims serves a group of claims in one transaction of the driver (do): the settles
// of a settle-and-claim group first, when settle is set (settle(t, batches, outs): each
// result of batches[b][i] into outs[b][i]), then claim for each part of reqs
// (PartitionClaims) in turn. A transaction that fails fails every request (Err, no jobs).
func ServeClaims[T any](ctx context.Context, reqs []*ClaimRequest, do func(context.Context, func(T) error) error,
	settle func(t T, batches [][]plane.SettleParams, outs [][]error) error, batches [][]plane.SettleParams, outs [][]error,
	claim func(t T, part []*ClaimRequest) error,
) {
	parts := PartitionClaims(reqs)
	err := do(ctx, func(t T) error {
		for _, r := range reqs {
			r.Reset()
		}
		if settle != nil {
			if err := settle(t, batches, outs); err != nil {
				return err
			}
		}
		for _, part := range parts {
			if err := claim(t, part); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for _, r := range reqs {
			r.Jobs, r.Err = nil, err
		}
	}
}

// Want is how many jobs reqs want in all.
func Want(reqs []*ClaimRequest) int {
	want := 0
	for _, r := range reqs {
		want += r.N
	}
	return want
}

// Assign gives row, taken by a claim of reqs, to the first request with room (its jobs and
// pending rows below its N) and reports whether one had room.
func Assign(reqs []*ClaimRequest, row *Row) bool {
	for _, r := range reqs {
		if len(r.Jobs)+len(r.Pending) < r.N {
			r.Pending = append(r.Pending, row)
			return true
		}
	}
	return false
}

// BeginPending begins a new attempt of each request's pending rows under a fresh lease
// (Start, from now, its job added to the request's Jobs), handing each to write with its
// token, its lease's expiry (Unix ms) and the request's worker: the driver writes them
// with its start statement.
func BeginPending(reqs []*ClaimRequest, now time.Time, count func(namespace, queue string, state int, priority float64, n int64),
	write func(r *Row, token string, expiresMS int64, worker string),
) {
	for _, req := range reqs {
		if len(req.Pending) == 0 {
			continue
		}
		expires := now.UnixMilli() + req.Lease.Milliseconds()
		for _, r := range req.Pending {
			token, job := Start(r, now, expires, count)
			write(r, token, expires, req.P.Worker)
			req.Jobs = append(req.Jobs, job)
		}
		req.Pending = nil
	}
}

// OldestJob is the smallest id of the jobs reqs took ("" when none), to which a fifo claim
// raises its queue's floor (Floors).
func OldestJob(reqs []*ClaimRequest) string {
	oldest := ""
	for _, r := range reqs {
		for _, j := range r.Jobs {
			if oldest == "" || j.ID < oldest {
				oldest = j.ID
			}
		}
	}
	return oldest
}

// NoteDue records, in reqs (the claims of one queue, which took fewer jobs than they
// want), when a job of the queue becomes claimable: next (Unix ms; nil: none known) for
// each request that took none. A row the claim could take that another transaction holds
// (held) is reported as well, as due now (nowMS), and marks each request Held: a claimer
// that found nothing claims again at once (DueIn) instead of sleeping until a notification
// or a poll, and one that may not wait tries again (WhileHeld). Such a row is a due row
// the promote left to the transaction that holds it (the promote says so itself: the
// driver's read of the next due time may no longer show the row waiting, its holder having
// committed since, while the claim's did not see it claimable), or, after a promotion of
// the queue (Promotions), a claimable row the claim's candidates skipped.
func NoteDue(reqs []*ClaimRequest, next *int64, held bool, nowMS int64) {
	if held {
		next = &nowMS
		for _, r := range reqs {
			r.Held = true
		}
	}
	if next != nil {
		for _, r := range reqs {
			if len(r.Jobs) == 0 {
				r.Next = *next
			}
		}
	}
}

// HeldDueRetry bounds how long a claim tries again while a due row of its queue is held by
// another transaction (WhileHeld), counted from the end of its first try: a holder that
// takes longer (a stalled connection) leaves the claim with what it took, never hung.
const HeldDueRetry = time.Second

// WhileHeld runs try, a claim's try, and runs it again every millisecond, for up to
// HeldDueRetry after the first try ended, while it says to (ClaimsAgain): a claim's promote
// takes only the due rows it can lock at once and reports the rest, and a claim that comes
// up short reports a claimable row another transaction holds (ClaimRequest.Held); their
// holder (maintenance or another claim promoting them, a cancel) lets go within
// milliseconds. Never on ctx's end.
func WhileHeld(ctx context.Context, try func() (again bool)) {
	if !try() {
		return
	}
	until := time.Now().Add(HeldDueRetry)
	for time.Now().Before(until) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
		if !try() {
			return
		}
	}
}

// ClaimsAgain reports whether a claim for n jobs, which has taken took of them, its last
// try r, tries again at once (WhileHeld): r's promote left a due row of the queue to the
// transaction holding it (r.Held) and the claim took fewer than n, so it takes the rest,
// whether or not it may wait, as a claim made a moment later would: what counts as queued
// is what a claim gets. A claim that took nothing and may wait waits for the row instead
// (r.Next is now: DueIn).
func ClaimsAgain(r *ClaimRequest, took, n int) bool {
	return r.Held && took < n && (took > 0 || r.P.Wait == 0)
}

// SettledClaim is a settle-and-claim of one queue served in a group (a driver's
// SettleClaim): serve runs r's group (the settles, then the first claim) and returns its
// error. Once the settles committed, a claim whose promote left a due row held tries again
// for the rest (ClaimsAgain), and a claim that found nothing and may wait goes on as
// InvocationClaimMany (claim) for what is left of p.Wait; a wait ended by ctx or Close is
// no error of this call.
func SettledClaim(ctx context.Context, p *plane.ClaimParams, r *ClaimRequest, serve func() error,
	claim func(ctx context.Context, p *plane.ClaimParams) ([]*plane.Job, error),
) ([]*plane.Job, bool, error) {
	waitUntil := time.Now().Add(p.Wait)
	if err := serve(); err != nil {
		return nil, false, err
	}
	if took := len(r.Jobs); ClaimsAgain(r, took, r.N) {
		// A due row another transaction held: the claim tries again for the rest
		// (WhileHeld), now that the settles are committed.
		rest := *p
		rest.Max, rest.Wait = r.N-took, 0
		jobs, _ := claim(ctx, &rest)
		return append(r.Jobs, jobs...), true, nil
	}
	if len(r.Jobs) > 0 || p.Wait == 0 {
		return r.Jobs, true, nil
	}
	rest := *p
	if rest.Wait = time.Until(waitUntil); rest.Wait <= 0 {
		return nil, true, nil
	}
	jobs, _ := claim(ctx, &rest)
	return jobs, true, nil
}

// ClaimInOrder is the order in which a claim of one queue's default shape takes its jobs,
// given whether the queue has a concurrency key ready (keyed): a boltzmann claim draws
// (boltzmann) and keyed jobs fill what the draw left (while more reports the claim wants
// more); another kind's claim of a keyed queue takes keys and unkeyed jobs in turn
// (claimKeyed: ClaimKeyed); else the candidates in order (rows: ClaimRows).
func ClaimInOrder(kind plane.Kind, keyed bool, more func() bool, claimKeyed, boltzmann, rows func() error) error {
	switch {
	case kind == plane.KindBoltzmann:
		if err := boltzmann(); err != nil {
			return err
		}
		if keyed && more() { // keyed jobs fill what the draw left
			return claimKeyed()
		}
		return nil
	case keyed:
		return claimKeyed()
	}
	return rows()
}

// LevelsHead returns the head, in fifo or filo order (kind), of a concurrency key's
// claimable jobs, whose priorities lie between low and high: one index serves every order
// (key, priority descending, id), so the head is the first or last id of one priority
// level. When the key's jobs share one level (low == high: the common case, one probe)
// that is head(low); otherwise the head of each level in turn (next: the highest level
// below one, ok false when none is), keeping the smallest or largest id.
func LevelsHead(kind plane.Kind, low, high float64, head func(priority float64) (*Row, error),
	next func(below float64) (priority float64, ok bool, err error),
) (*Row, error) {
	if low == high {
		if r, err := head(low); err != nil || r != nil {
			return r, err
		}
	}
	var best *Row
	below := math.Inf(1) // the next level is the highest below this one
	for {
		priority, ok, err := next(below)
		if err != nil || !ok {
			return best, err
		}
		r, err := head(priority)
		if err != nil {
			return nil, err
		}
		if r != nil && (best == nil || (kind == plane.KindFILO) == (r.ID > best.ID)) {
			best = r
		}
		below = priority
	}
}

// SettledIDs are the ids of the settles of batches, sorted, each once: the order in which a
// transaction locks their rows, so that concurrent transactions lock alike.
func SettledIDs(batches [][]plane.SettleParams) []string {
	var ids []string
	for _, b := range batches {
		for _, p := range b {
			ids = append(ids, p.ID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// ScanLevel scans a row of a queue's claimable priority levels (priority, count) for
// Collect: a boltzmann claim's draw (Boltzmann).
func ScanLevel(s Scanner) (l plane.Level, err error) {
	return l, s.Scan(&l.Priority, &l.Count)
}

// TryGrouped is the ClaimTry of a claim of one queue for n jobs served in groups (group: a
// Grouper of ClaimRequests whose run is ServeClaims): req served, and again for the rest
// while ClaimsAgain says so (WhileHeld). Jobs an earlier try took stay the caller's when a
// later one fails. It parks nothing: the claim parks after it (ClaimWaiting).
func TryGrouped(ctx context.Context, req *ClaimRequest, n int, group *Grouper[*ClaimRequest]) (jobs []*plane.Job, nextMS int64, parked, committed bool, err error) {
	WhileHeld(ctx, func() bool {
		req.N = n - len(jobs)
		if err = cmp.Or(group.Do(ctx, req), req.Err); err != nil {
			return false
		}
		jobs = append(jobs, req.Jobs...)
		return ClaimsAgain(req, len(jobs), n)
	})
	if len(jobs) > 0 {
		return jobs, 0, false, true, nil // a later try's error leaves the jobs taken theirs
	}
	if err != nil {
		return nil, 0, false, false, err
	}
	return nil, req.Next, false, true, nil
}

// DefaultShapeClaim is the default shape's claim of r, a claim with offers or warm host
// keys, for ClaimPlaced: for n more jobs, a request of its own (so that its bookkeeping
// counts only what it takes) over r's parameters without offers and warm host keys,
// claimed by claim in the transaction; its jobs join r's, and when r has none, its Next is
// the default claim's.
func DefaultShapeClaim(r *ClaimRequest, claim func(reqs []*ClaimRequest) error) func(n int) (int, error) {
	plain := *r.P
	plain.Offers, plain.WarmHostKeys = nil, nil
	return func(n int) (int, error) {
		d := &ClaimRequest{P: &plain, Claim: Claim{Kind: r.Kind, N: n, Lease: r.Lease}}
		if err := claim([]*ClaimRequest{d}); err != nil {
			return 0, err
		}
		r.Jobs = append(r.Jobs, d.Jobs...)
		r.Held = r.Held || d.Held
		if len(r.Jobs) == 0 {
			r.Next = d.Next
		}
		return len(d.Jobs), nil
	}
}

// SplitWarm returns the host keys and the shapes of pairs, in pairs' order (a driver's
// arrays of one statement).
func SplitWarm(pairs []WarmPair) (hostKeys, shapes []string) {
	hostKeys, shapes = make([]string, len(pairs)), make([]string, len(pairs))
	for i, pr := range pairs {
		hostKeys[i], shapes[i] = pr.HostKey, pr.Shape
	}
	return hostKeys, shapes
}

// TryHeld runs try, a try of a claim over several queues (p), and runs it again while it
// found nothing because a due row of one of them was held (held: that queue, which try
// sets and TryHeld clears before each run; "" none) and the claim may not wait
// (WhileHeld); a claim that may wait waits for the row instead. A run again tries the
// held queue first: a due row a claim's promote left waiting may be one it could not take
// because an earlier queue's claim of the same transaction already held rows (PostgreSQL's
// promoteHolding leaves a keyed row whose key has no counter row yet), and the same order
// would leave it again at every run, so a claim without a wait across a quiet queue and
// one whose keyed job had just fallen due came back empty after HeldDueRetry.
func TryHeld(ctx context.Context, p *plane.ClaimParams, try TryAcross, queues []string, held *string) (jobs []*plane.Job, due time.Duration, err error) {
	order := queues
	WhileHeld(ctx, func() bool {
		*held = ""
		jobs, due, err = try(ctx, order)
		again := err == nil && len(jobs) == 0 && *held != "" && p.Wait == 0
		if again {
			order = HeldFirst(queues, *held)
		}
		return again
	})
	return jobs, due, err
}

// HeldFirst is queues with q moved to the front, the others in their order.
func HeldFirst(queues []string, q string) []string {
	out := make([]string, 0, len(queues))
	out = append(out, q)
	for _, x := range queues {
		if x != q {
			out = append(out, x)
		}
	}
	return out
}

// ClaimPlacedProbed is ClaimPlaced over heads read one probe each and kept between rounds
// (SQLite's claim, which locks nothing: a head stays the head until this claim takes it):
// shapeHead reads the head of a shape of shapes, warmHead of a warm pair of warm,
// defaultHead the default shape's unkeyed head (read afresh each round). claimDefault
// claims up to n more jobs of the default shape and returns how many it took; take starts
// r, a shaped or warm head, or ends it by its deadline, and writes its start before the
// next read. After a take the head of r's shape is read again, and after any start the
// warm heads (the job taken may have been one of them).
func ClaimPlacedProbed(kind plane.Kind, want int, got func() int, shapes []string, warm []WarmPair,
	shapeHead func(shape string) (*Row, error), warmHead func(pr WarmPair) (*Row, error), defaultHead func() (*Row, error),
	claimDefault func(n int) (int, error), take func(r *Row) error,
) error {
	heads, warmHeads := make([]*Row, len(shapes)), make([]*Row, len(warm))
	read := func(i int) (err error) {
		heads[i], err = shapeHead(shapes[i])
		return err
	}
	readWarm := func() (err error) {
		for i, pr := range warm {
			if warmHeads[i], err = warmHead(pr); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range shapes {
		if err := read(i); err != nil {
			return err
		}
	}
	if err := readWarm(); err != nil {
		return err
	}
	return ClaimPlaced(kind, want, got, func() ([]*Row, []*Row, *Row, error) {
		def, err := defaultHead()
		return heads, warmHeads, def, err
	}, func(more int) (int, error) {
		n, err := claimDefault(more)
		if err != nil || n == 0 {
			return 0, err
		}
		return n, readWarm() // the job taken may have been a warm head
	}, func(r *Row, isWarm bool, at int) error {
		if isWarm {
			at = slices.Index(shapes, warm[at].Shape)
		}
		if err := take(r); err != nil {
			return err
		}
		if at >= 0 {
			if err := read(at); err != nil {
				return err
			}
		}
		return readWarm()
	})
}
