package sqliteplane

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationSubmitMany implements plane.Driver. A submit to a full queue whose admission
// says block waits in line (arrival order, in this process) for a claim or cancel to make
// room, woken by notification, until ctx ends.
func (d *Driver) InvocationSubmitMany(ctx context.Context, p *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return planekit.SubmitBlocking(ctx, p, &d.blocked, d.hub, d.stopped, d.sleep,
		func(tk *planekit.Ticket) ([]plane.SubmitResult, error) { return d.submitOnce(ctx, p, tk) })
}

// submitOnce runs one submit transaction. planekit.ErrBlocked means the queue is full and blocks.
func (d *Driver) submitOnce(ctx context.Context, p *plane.SubmitManyParams, tk *planekit.Ticket) ([]plane.SubmitResult, error) {
	out := make([]plane.SubmitResult, len(p.Invocations))
	var logical error
	err := d.do(ctx, func(t *wtx) error {
		var err error
		written := t.written
		logical, err = t.submitMany(p, out, tk, true)
		if err == nil && logical != nil && t.written > written {
			// The walk applied a key's windows before the refusal (a debounced submit
			// folded into its holder, a passed window's holder gave its key up): a refused
			// submit changes nothing, so its writes go back with it, as an error rolls them
			// back (the writer runs the batch's other operations again alone). A refusal
			// that wrote nothing stays the op's answer alone, the batch committing.
			return logical
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if logical != nil {
		return nil, logical
	}
	return out, nil
}

// submitMany resolves existing keys and ids (planekit.StageSubmit, looking them up first:
// planekit.Holder), applies the queue's admission block to the new invocations when admit is set,
// then inserts them. It returns the caller's error or a SQL failure.
func (t *wtx) submitMany(p *plane.SubmitManyParams, out []plane.SubmitResult, tk *planekit.Ticket, admit bool) (error, error) {
	clear(out)
	invs, cloned := p.Invocations, false // copied before a later debounced submit changes one
	now := time.UnixMilli(t.ms)          // due times at millisecond precision
	dupOf := make([]int, len(out))
	held, err := t.heldIDs(p.Invocations)
	if err != nil {
		return nil, err
	}
	refused, err := planekit.StageSubmit(kitTx{t}, t.w.d.kit, p, out, dupOf, now, t.w.d.ids, planekit.Stager{
		Holder: func(s *plane.SubmitParams, byKey bool) (string, error, error) {
			if !byKey && held != nil && !held[s.ID] {
				// No invocation held the id before the walk, and the walk inserts none (its
				// keys' windows update rows): the look-up would find no row.
				return "", nil, nil
			}
			return planekit.Holder(kitTx{t}, t.w.d.kit, p, s, byKey)
		},
		Restage: func(first int, s *plane.SubmitParams) {
			if !cloned {
				invs, cloned = slices.Clone(invs), true
			}
			plane.Debounced(&invs[first], s)
		},
		Folded: func(s *plane.SubmitParams) { t.delayed(s.DueAt(now).UnixMilli()) }, // the writer's alarm goes off for it
	})
	if refused != nil || err != nil {
		return refused, err
	}
	var fresh []int // the staged invocations
	var deadlines []time.Time
	for i := range out {
		if out[i].ID != "" && !out[i].Existing && dupOf[i] < 0 {
			fresh, deadlines = append(fresh, i), append(deadlines, p.Invocations[i].Deadline)
		}
	}
	if len(fresh) > 0 && admit {
		a, err := t.admission(p.Namespace, p.Queue)
		if err != nil {
			return nil, err
		}
		if a != nil {
			ahead := t.w.d.blocked.Ahead(planekit.RoomKey(p.Namespace, p.Queue), tk)
			if refused, err := t.admit(p.Namespace, p.Queue, a, int64(len(fresh)), deadlines, ahead); refused != nil || err != nil {
				return refused, err
			}
		}
	}
	if err := t.insertMany(p.Namespace, p.Queue, invs, fresh, out); err != nil {
		return nil, err
	}
	planekit.AnswerDuplicates(out, dupOf) // later duplicates of a key or id new in this batch
	return nil, nil
}

// heldIDs looks up, idsHeldWidth at a time, which of the caller's ids of invs an
// invocation holds: the set of those held, or nil when fewer than two invocations carry an
// id (planekit.Holder looks a single one up as cheaply). A batch of eight new ids is one
// statement instead of eight (issue 30 item 6: the Python SDK's combined submits carry
// their ids).
func (t *wtx) heldIDs(invs []plane.SubmitParams) (map[string]bool, error) {
	ids := make([]any, 0, idsHeldWidth)
	for i := range invs {
		if invs[i].ID != "" {
			ids = append(ids, invs[i].ID)
		}
	}
	if len(ids) < 2 {
		return nil, nil
	}
	held := map[string]bool{}
	args := make([]any, idsHeldWidth)
	for len(ids) > 0 {
		n := copy(args, ids)
		for i := n; i < len(args); i++ {
			args[i] = ids[0] // the last statement's unused places repeat an id it reads
		}
		ids = ids[n:]
		rows, err := t.w.st.idsHeld.QueryContext(t.ctx, args...)
		if err != nil {
			return nil, fmt.Errorf("submit: look up ids: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("submit: look up ids: %w", err)
			}
			held[id] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("submit: look up ids: %w", err)
		}
	}
	return held, nil
}

// insertMany inserts the invocations at indexes fresh of invs, under their ids in out, in
// multi-row statements (insertChunks). Per batch, not per row: the count changes
// of one (state, priority) pair, the claimable mark and the earliest due time.
func (t *wtx) insertMany(namespace, queue string, invs []plane.SubmitParams, fresh []int, out []plane.SubmitResult) error {
	args := make([]any, 0, 3+min(len(fresh), insertChunks[0])*insertWidth)
	claimable := false
	// The count changes of consecutive rows of one (state, priority) go in one call.
	run := planekit.CountRun{Namespace: namespace, Queue: queue}
	defer run.Flush(t.count)
	for len(fresh) > 0 {
		k := 0
		for insertChunks[k] > len(fresh) {
			k++
		}
		n := insertChunks[k]
		args = append(args[:0], namespace, queue, t.ms)
		for _, i := range fresh[:n] {
			s := &invs[i]
			var key any
			if s.Key != "" {
				key = s.Key
			}
			id := out[i].ID
			payload := planekit.Payload(s.Payload)
			state, due := planekit.StateQueued, t.ms
			if s.Delay > 0 || s.Debounce > 0 || !s.NotBefore.IsZero() {
				// Due times are the plane's clock at millisecond precision, never the client's.
				if due = s.DueAt(time.UnixMilli(t.ms)).UnixMilli(); due > t.ms {
					state = planekit.StateDelayed
				}
			}
			var concurrencyKey any
			stored := state // the row's state: a claimable keyed row without a requirement is -2 at once (migration 014)
			if s.ConcurrencyKey != "" {
				concurrencyKey = s.ConcurrencyKey
				t.w.keyed[[2]string{namespace, queue}] = true
				if state == planekit.StateQueued && s.Requirement.Shape() == "" {
					stored = planekit.StateKeyed
				}
			}
			var requirement any
			if r := plane.EncodeRequirement(s.Requirement); r != nil {
				requirement = string(r)
			}
			var heldUntil any
			if until := plane.KeyHeldUntil(s, time.UnixMilli(t.ms)); until != 0 {
				heldUntil = until
			}
			args = append(args, id, key, stored, s.Priority, payload, planekit.EncodeMetadata(plane.DebounceMetadata(s)),
				cmp.Or(s.MaxAttempts, plane.MaxAttemptsDefault), s.AttemptTimeout.Milliseconds(), planekit.ToMS(s.Deadline), due,
				concurrencyKey, s.Requirement.Shape(), requirement, plane.HostKeyOf(s.Metadata), heldUntil)
			run.Add(state, s.Priority, t.count)
			if state == planekit.StateDelayed {
				t.delayed(due)
			} else {
				claimable = true
			}
		}
		if _, err := t.w.st.insertRows[k].ExecContext(t.ctx, args...); err != nil {
			return fmt.Errorf("submit: insert: %w", err)
		}
		fresh = fresh[n:]
	}
	if claimable {
		t.markClaimable(namespace, queue)
	}
	return nil
}
