package pgplane

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationSubmitMany implements plane.Driver. The new invocations go in with one INSERT
// from arrays (ON CONFLICT DO NOTHING on the id and on the unique partial index of keys, so
// concurrent submits of one key make one invocation). A submit to a full queue whose
// admission says block waits in line (arrival order, in this process) for a claim or cancel
// to make room, woken by notification, until ctx ends. ctx bounds that wait, not the submit's
// transactions: once begun, a transaction runs to its answer on a context of its own (as a
// group's does, see planekit.Grouper.Do), so a caller whose context ends mid-transaction is told what
// happened (submitted; or, on a full queue, the admission's answer, queue_full) and never
// that the database was unavailable, nor that nothing was written when its commit was done.
func (d *Driver) InvocationSubmitMany(ctx context.Context, p *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	req := &submitRequest{p: p}
	if !planekit.HasWindow(p) { // a dedup window frees its key first: that runs in submitMany
		if err := d.submits.Do(ctx, req); err != nil {
			return nil, err
		}
		if !req.solo {
			return req.out, req.err
		}
	} else if err := ctx.Err(); err != nil {
		return nil, err
	}
	return planekit.SubmitBlocking(ctx, p, &d.blocked, d.hub, d.stop, d.sleep,
		func(tk *planekit.Ticket) ([]plane.SubmitResult, error) { return d.submitOnce(ctx, p, tk) })
}

// submitOnce runs one submit transaction, on a context of its own that ctx's end does not
// end (see InvocationSubmitMany); planekit.ErrBlocked means the queue is full and blocks.
func (d *Driver) submitOnce(ctx context.Context, p *plane.SubmitManyParams, tk *planekit.Ticket) ([]plane.SubmitResult, error) {
	out := make([]plane.SubmitResult, len(p.Invocations))
	tctx, cancel := planekit.Detached(ctx)
	defer cancel()
	err := d.do(tctx, func(t *tx) error { return t.submitMany(p, out, tk, true) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// submitMany inserts the invocations that are new, resolves the rest to their existing ids,
// then applies the queue's admission block to the new ones when admit is set (a schedule's
// fires are not admitted); a refusal returns an error, which rolls the inserts back.
func (t *tx) submitMany(p *plane.SubmitManyParams, out []plane.SubmitResult, tk *planekit.Ticket, admit bool) error {
	clear(out)
	var a *admission
	if admit {
		var err error
		if a, err = t.admission(p.Namespace, p.Queue, true); err != nil {
			return err
		}
	}
	r := &submitRequest{p: p, out: out}
	var st staged
	if err := t.stage(r, &st); err != nil {
		return err
	}
	inserted, err := t.insertStaged(&st, []*submitRequest{r})
	if err != nil {
		return err
	}
	if r.solo {
		return r.err // an id of another queue
	}
	var freshDeadlines []time.Time
	for _, sl := range st.slots {
		if inserted[sl.id] {
			freshDeadlines = append(freshDeadlines, p.Invocations[sl.i].Deadline)
		}
	}
	if fresh := int64(len(freshDeadlines)); fresh > 0 && a != nil {
		ahead := t.d.blocked.Ahead(planekit.RoomKey(p.Namespace, p.Queue), tk)
		return t.admit(p.Namespace, p.Queue, a, fresh, freshDeadlines, ahead)
	}
	return nil
}

// The submit's insert (statements.insert) writes its rows in insertOrder: the rows of
// concurrency keys first, in key order, for the counting trigger (migration 0007) updates
// each key's counter row in the order the rows go in, so two batches sharing keys wait on
// each other in one order (lockKeys); then the rows of each shape and host key together,
// in that order, so the triggers that record a new shape or warm pair (migrations 0008,
// 0009: a second transaction inserting the same new row waits for the first) take them in
// one order too. An insert also waits on an idempotency key or a caller's id that another
// transaction inserted, until that one ends: rows that can conflict must go in key order.
// In insertOrder they do when they share one (concurrency key, shape, host key); a batch
// whose conflicting rows span several (staged.spread) inserts them in key order instead
// (insertInKeyOrder) and then, before any trigger runs (they run at the end of the
// statement), locks its concurrency keys' counter rows in key order (lockKeys). So every
// insert takes the conflicting keys first, in key order, then the counter rows, in key
// order (TestIdempotencyKeyUnderSeveralConcurrencyKeysNoDeadlock).
const insertOrder = `u.namespace, u.queue, u.concurrency_key, u.shape, u.host_key, u.key NULLS LAST, u.id`

// insertRows is the submit's insert of the rows $2… at $1 in order, without a conflict
// clause or RETURNING.
func insertRows(order string) string {
	return `INSERT INTO {s}.invocations (id, namespace, queue, key, state, priority, waiting, payload,
			metadata, max_attempts, attempt_timeout_ms, deadline_ms, available_ms, created_ms, concurrency_key, shape, requirement, host_key, key_held_until)
		SELECT u.id, u.namespace, u.queue, u.key, 0, u.priority, u.available_ms > $1, u.payload, u.metadata,
			u.max_attempts, u.attempt_timeout_ms, u.deadline_ms, u.available_ms, $1, u.concurrency_key, u.shape, u.requirement, u.host_key,
			NULLIF(u.key_held_until, 0)
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::bytea[], $8::bytea[],
			$9::integer[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::text[], $16::text[], $17::bigint[]) AS u(id, namespace, queue, key, priority,
			payload, metadata, max_attempts, attempt_timeout_ms, deadline_ms, available_ms, concurrency_key, shape, requirement, host_key, key_held_until)
		ORDER BY ` + order
}

// insertInKeyOrder is the insert of a batch whose rows that can conflict span several
// (concurrency key, shape, host key): its rows in idempotency key order, then the counter
// rows of the keys of the rows it inserted locked in key order (the main query reads
// locked first; locked reads every inserted row before it locks one), the triggers last.
func insertInKeyOrder() string {
	return `WITH inserted AS (` + insertRows(`u.namespace, u.queue, u.key NULLS LAST, u.id`) +
		` ON CONFLICT DO NOTHING RETURNING id, namespace, queue, concurrency_key),
		locked AS (` + lockKeys(`inserted`) + `)
		SELECT id FROM inserted WHERE (SELECT count(*) FROM locked) >= 0`
}

// rowGroup is what places a row in insertOrder before its key: its queue, concurrency key,
// shape and host key.
type rowGroup struct {
	namespace, queue, concurrencyKey, shape, hostKey string
}

// staged are the invocations a transaction's submits may insert, laid out as the arrays of
// the one INSERT from unnest that inserts them (statements.go: insert), with where each
// came from.
type staged struct {
	slots       []slot
	mayConflict bool // a key or a caller's id: a row can conflict
	// conflicting is the rowGroup of the first row that can conflict; spread: another
	// such row is of another group (insertInKeyOrder).
	conflicting                         rowGroup
	spread                              bool
	ids, namespaces, queues             []string
	keys, concurrencyKeys, requirements []*string
	shapes, hostKeys                    []string
	prios                               []float64
	payloads, metas                     [][]byte
	maxAttempts                         []int32
	timeouts, deadlines, availables     []int64
	heldUntils                          []int64 // plane.KeyHeldUntil, 0 (NULL) without a dedup window
}

// slot is where a staged invocation came from: its request, its index there, its id.
type slot struct {
	r  *submitRequest
	i  int
	id string
}

// add stages the invocation i of r, with the id id.
func (st *staged) add(r *submitRequest, i int, id string, now time.Time) {
	s := &r.p.Invocations[i]
	st.slots = append(st.slots, slot{r, i, id})
	shape, hostKey := s.Requirement.Shape(), plane.HostKeyOf(s.Metadata)
	if s.Key != "" || s.ID != "" {
		g := rowGroup{r.p.Namespace, r.p.Queue, s.ConcurrencyKey, shape, hostKey}
		if !st.mayConflict {
			st.conflicting = g
		}
		st.spread = st.spread || g != st.conflicting
		st.mayConflict = true
	}
	var key *string
	if s.Key != "" {
		key = &s.Key
	}
	st.ids = append(st.ids, id)
	st.namespaces = append(st.namespaces, r.p.Namespace)
	st.queues = append(st.queues, r.p.Queue)
	st.keys = append(st.keys, key)
	st.concurrencyKeys = append(st.concurrencyKeys, nullable(s.ConcurrencyKey))
	st.shapes = append(st.shapes, shape)
	st.requirements = append(st.requirements, nullable(string(plane.EncodeRequirement(s.Requirement))))
	st.hostKeys = append(st.hostKeys, hostKey)
	st.prios = append(st.prios, s.Priority)
	st.payloads = append(st.payloads, planekit.Payload(s.Payload))
	st.metas = append(st.metas, planekit.EncodeMetadata(plane.DebounceMetadata(s)))
	st.maxAttempts = append(st.maxAttempts, int32(cmp.Or(s.MaxAttempts, plane.MaxAttemptsDefault)))
	st.timeouts = append(st.timeouts, s.AttemptTimeout.Milliseconds())
	st.deadlines = append(st.deadlines, planekit.ToMS(s.Deadline))
	st.availables = append(st.availables, s.DueAt(now).UnixMilli())
	st.heldUntils = append(st.heldUntils, plane.KeyHeldUntil(s, now))
}

// stage stages the invocations of r that may be new in st and answers r as far as it can
// before the insert (planekit.StageSubmit): r.out gets the id of each staged invocation,
// and of the holder of the key each debounced one folded into; r.dupOf the index of the
// earlier invocation of r with the same key or id, whose answer a later one gets after the
// insert. A later debounced invocation of a staged key gives its payload to the staged row.
func (t *tx) stage(r *submitRequest, st *staged) error {
	p := r.p
	if r.out == nil {
		r.out = make([]plane.SubmitResult, len(p.Invocations))
	}
	var position map[int]int // invocation index → its place in st's arrays (debounced keys)
	r.dupOf = make([]int, len(p.Invocations))
	_, err := planekit.StageSubmit(kitTx{t}, t.d.kit, p, r.out, r.dupOf, t.now, t.d.ids, planekit.Stager{
		Stage: func(i int, id string) {
			if p.Invocations[i].Debounce > 0 {
				if position == nil {
					position = map[int]int{}
				}
				position[i] = len(st.ids)
			}
			st.add(r, i, id, t.now)
		},
		Restage: func(first int, s *plane.SubmitParams) {
			if at, ok := position[first]; ok {
				st.payloads[at], st.metas[at] = planekit.Payload(s.Payload), planekit.EncodeMetadata(plane.DebounceMetadata(s))
				st.availables[at] = s.DueAt(t.now).UnixMilli()
			}
		},
	})
	return err
}

// insertStaged inserts the invocations staged for reqs with one statement and returns the
// ids it inserted. Each invocation not inserted is resolved to the invocation holding its
// id (of its queue) or its key; each inserted one is counted, lowers its queue's fifo floor
// and wakes the queue. A caller's id that an invocation of another queue holds sends its
// request back to run alone (solo, with err plane.IDTaken), its inserted invocations
// deleted. Last, every later invocation of a request with the key or id of an earlier one
// gets that one's answer.
func (t *tx) insertStaged(st *staged, reqs []*submitRequest) (map[string]bool, error) {
	inserted := make(map[string]bool, len(st.ids))
	if len(st.ids) > 0 {
		insert := t.d.sql.insertFresh
		if st.spread {
			insert = t.d.sql.insertInKeyOrder
		} else if st.mayConflict {
			insert = t.d.sql.insert
		}
		rs, err := t.query(insert, t.ms, st.ids, st.namespaces, st.queues, st.keys, st.prios, st.payloads, st.metas,
			st.maxAttempts, st.timeouts, st.deadlines, st.availables, st.concurrencyKeys, st.shapes, st.requirements, st.hostKeys, st.heldUntils)
		if err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
		ids, err := planekit.Collect(rs, "submit", planekit.ScanString)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			inserted[id] = true
		}
	}
	// Resolve the conflicts: an existing id of this queue, or an existing key.
	for _, sl := range st.slots {
		if inserted[sl.id] || sl.r.solo {
			continue
		}
		id, refused, err := planekit.Resolve(kitTx{t}, t.d.kit, sl.r.p, &sl.r.p.Invocations[sl.i])
		switch {
		case err != nil:
			return nil, err
		case refused != nil:
			sl.r.solo, sl.r.err = true, refused
			continue
		case id == "": // trimmed between the conflict and the look-up: run the submit again
			return nil, &pgconnRetry{pgx.ErrNoRows}
		}
		sl.r.out[sl.i] = plane.SubmitResult{ID: id, Existing: true}
	}
	var undo []string
	for _, sl := range st.slots {
		if !inserted[sl.id] {
			continue
		}
		if sl.r.solo {
			undo = append(undo, sl.id)
			continue
		}
		t.count(sl.r.p.Namespace, sl.r.p.Queue, planekit.StateQueued, sl.r.p.Invocations[sl.i].Priority, +1)
		t.d.floors.Lower(planekit.QueueKey(sl.r.p.Namespace, sl.r.p.Queue), sl.id)
		t.wakeQueue(sl.r.p.Namespace, sl.r.p.Queue)
	}
	if len(undo) > 0 {
		t.exec(t.d.sql.deleteIDs, undo)
	}
	for _, r := range reqs {
		if !r.solo {
			planekit.AnswerDuplicates(r.out, r.dupOf) // later duplicates of a key or id of this request
		}
	}
	return inserted, nil
}

// pgconnRetry wraps a failure that a fresh transaction resolves.
type pgconnRetry struct{ err error }

func (e *pgconnRetry) Error() string { return "conflicting row vanished: " + e.err.Error() }
func (e *pgconnRetry) Unwrap() error { return e.err }

type admission = planekit.Admission

// admission reads the admission block of a queue (nil: none), locking its row when lock is
// set: a submit holds it to its commit, which orders the queue's admission decisions.
func (t *tx) admission(namespace, queue string, lock bool) (*admission, error) {
	sql := t.d.sql.admission
	if lock {
		sql = t.d.sql.lockAdmission
	}
	return planekit.ScanAdmission(t.queryRow(sql, namespace, queue))
}

// admit applies a's limits (plane's admission policy, planekit.Admission.Admit) to n new
// invocations with the given deadlines. It returns the caller's error
// (*plane.AdmissionError, *plane.InvalidError, planekit.ErrBlocked) or a SQL failure; either
// rolls the transaction back.
func (t *tx) admit(namespace, queue string, a *admission, n int64, deadlines []time.Time, ahead bool) error {
	bucket, refused, err := a.Admit(namespace, queue, t.now, n, deadlines, ahead, func() (int64, error) {
		queued, err := kitTx{t}.Queued(namespace, queue)
		return queued - n, err // the count before this submit
	})
	if err != nil {
		return err
	}
	if refused != nil {
		return refused
	}
	if bucket != nil {
		t.exec(t.d.sql.admissionTokens, namespace, queue, bucket.Tokens, bucket.At.UnixMilli())
	}
	return nil
}

// submitRequest is one caller's submit, served in a group (or alone, by submitMany). solo
// sends it back to run in a transaction of its own: its queue has an admission block (whose
// refusal must roll back that submit alone), it shares a key or id with an earlier submit
// of the group, or it failed in a way its own transaction must report (err: plane.IDTaken,
// which submitMany returns).
type submitRequest struct {
	p    *plane.SubmitManyParams
	out  []plane.SubmitResult
	err  error
	solo bool

	dupOf []int // per invocation: the index of the earlier one with its key or id, or -1
}

// submitParams are r's parameters.
func submitParams(r *submitRequest) *plane.SubmitManyParams { return r.p }

// maxSubmitGroup bounds the invocations of one group.
const maxSubmitGroup = 5000

// submitGroup inserts the invocations of a group of submits with one statement, in one
// transaction, for the queues without an admission block.
func (d *Driver) submitGroup(ctx context.Context, reqs []*submitRequest) {
	group, apart := planekit.Unshared(reqs, submitParams)
	for _, r := range reqs {
		r.solo = false
	}
	for _, r := range apart {
		r.solo = true // shares a key or an id with an earlier one of the group: runs alone
	}
	if len(group) == 0 {
		return
	}
	err := d.do(ctx, func(t *tx) error { return t.submitGroup(group) })
	if err != nil {
		for _, r := range group {
			if !r.solo {
				r.out, r.err = nil, err
			}
		}
	}
}

func (t *tx) submitGroup(group []*submitRequest) error {
	for _, r := range group {
		r.solo, r.err, r.out, r.dupOf = false, nil, nil, nil
	}
	nss, qs := planekit.Queues(group, submitParams)
	rs, err := t.query(t.d.sql.admissionExists, nss, qs)
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	queues, err := planekit.Collect(rs, "submit", func(s planekit.Scanner) (k [2]string, err error) {
		return k, s.Scan(&k[0], &k[1])
	})
	if err != nil {
		return err
	}
	limited := map[[2]string]bool{}
	for _, k := range queues {
		limited[k] = true
	}
	var st staged
	for _, r := range group {
		if limited[[2]string{r.p.Namespace, r.p.Queue}] {
			r.solo = true
			continue
		}
		if err := t.stage(r, &st); err != nil {
			return err
		}
	}
	if _, err := t.insertStaged(&st, group); err != nil {
		return err
	}
	for _, r := range group {
		if r.solo {
			r.out = nil
		}
	}
	return nil
}

// nullable is s, or nil for "" (SQL NULL).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
