package planekit

import (
	"context"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationGet implements plane.Driver.
func (v Verbs) InvocationGet(ctx context.Context, id string) (*plane.Invocation, error) {
	return Get(ctx, id, v.row)
}

// InvocationWait implements plane.Driver.
func (v Verbs) InvocationWait(ctx context.Context, p *plane.WaitParams) (*plane.Invocation, error) {
	return WaitTerminal(ctx, v.p.Hub, p.ID, p.Timeout, v.row, v.p.Sleep)
}

// row reads the row of invocation id. Errors: plane.ErrNotFound.
func (v Verbs) row(ctx context.Context, id string) (*Row, error) {
	if err := v.p.CheckOpen(); err != nil {
		return nil, err
	}
	r, err := ScanRow(v.db.QueryRow(ctx, v.st.Row, id), v.st.RowSeq)
	if NoRows(err) {
		return nil, plane.ErrNotFound
	}
	if err != nil {
		return nil, v.db.Failure(ctx, fmt.Errorf("get %s: %w", id, err))
	}
	return r, nil
}

// InvocationCount implements plane.Driver: a sum over the queue's counter rows of one state
// (queued counts delayed invocations too).
func (v Verbs) InvocationCount(ctx context.Context, p *plane.CountParams) (int64, error) {
	if err := ValidateQueue(p.Namespace, p.Queue); err != nil {
		return 0, err
	}
	state := StateNumber(p.State)
	if state < 0 {
		_, err := plane.ParseState(string(p.State))
		return 0, err
	}
	if err := v.p.CheckOpen(); err != nil {
		return 0, err
	}
	also := state
	if state == StateQueued {
		also = StateDelayed
	}
	var n int64
	if err := v.db.QueryRow(ctx, v.st.Count, p.Namespace, p.Queue, int16(state), int16(also)).Scan(&n); err != nil {
		return 0, v.db.Failure(ctx, fmt.Errorf("count: %w", err))
	}
	return n, nil
}

// QueueStatsList implements plane.Driver: each queue's counts by state, its admission block
// and concurrency keys, and whether it is paused, in (namespace, queue) order; the queues
// with a block or a pause but no invocations are listed too.
func (v Verbs) QueueStatsList(ctx context.Context, namespace string) ([]plane.QueueStats, error) {
	if err := ValidateOptionalNamespace(namespace); err != nil {
		return nil, err
	}
	type count struct {
		ns, q string
		state int16
		n     int64
	}
	counts, err := read(ctx, v, "queue stats", func(s Scanner) (c count, err error) {
		return c, s.Scan(&c.ns, &c.q, &c.state, &c.n)
	}, v.st.StatsCounts, namespace)
	if err != nil {
		return nil, err
	}
	var out []plane.QueueStats
	for _, c := range counts {
		if len(out) == 0 || out[len(out)-1].Namespace != c.ns || out[len(out)-1].Queue != c.q {
			out = append(out, plane.QueueStats{Namespace: c.ns, Queue: c.q, Counts: make(map[plane.State]int64)})
		}
		if c.n != 0 {
			out[len(out)-1].Counts[StateName(int(c.state))] += c.n
		}
	}
	type block struct {
		ns, q string
		a     *Admission
	}
	// Each block read by the one reader of a stored block (ScanAdmission), as a submit
	// and QueueAdmissionGet read it.
	blocks, err := read(ctx, v, "queue stats", func(s Scanner) (b block, err error) {
		b.a, err = ScanAdmission(Around{Scanner: s, Before: []any{&b.ns, &b.q}})
		return b, err
	}, v.st.StatsAdmissions, namespace)
	if err != nil {
		return nil, err
	}
	index := make(map[[2]string]int, len(out))
	for i, s := range out {
		index[[2]string{s.Namespace, s.Queue}] = i
	}
	for _, b := range blocks {
		i, ok := index[[2]string{b.ns, b.q}]
		if !ok {
			out = append(out, plane.QueueStats{Namespace: b.ns, Queue: b.q, Counts: map[plane.State]int64{}})
			i = len(out) - 1
		}
		out[i].Admission = &b.a.Admission
	}
	now := v.p.Now()
	keys, err := v.db.Query(ctx, v.st.StatsKeys, namespace, now.UnixMilli())
	if err != nil {
		return nil, v.db.Failure(ctx, fmt.Errorf("queue stats: %w", err))
	}
	out, err = AddKeyStats(out, keys, now)
	keys.Close()
	if err != nil {
		return nil, err
	}
	paused, err := v.pausedQueues(ctx, namespace)
	if err != nil {
		return nil, err
	}
	return plane.MarkPaused(out, paused), nil
}

// InvocationCancel implements plane.Driver.
func (v Verbs) InvocationCancel(ctx context.Context, id string) (bool, error) {
	return v.endIf(ctx, id, Cancel)
}

// InvocationKill implements plane.Driver.
func (v Verbs) InvocationKill(ctx context.Context, id string) (bool, error) {
	return v.endIf(ctx, id, Kill)
}

// endIf ends invocation id as e says when e ends it from its state (a terminal state,
// which policy does not decide, with e's error, its attempt filled in).
func (v Verbs) endIf(ctx context.Context, id string, e Ending) (bool, error) {
	if err := plane.ValidateID(id); err != nil {
		return false, err
	}
	var done bool
	err := write(ctx, v.db, func(t Tx) (error, error) {
		done = false
		h, err := t.Head(id)
		if err != nil {
			return nil, err
		}
		if h == nil {
			return plane.ErrNotFound, nil
		}
		if !e.From(h.State) {
			return nil, nil
		}
		done = true
		info := e.Info
		info.Attempt = h.Attempt
		return nil, t.Apply(h, plane.Transition{State: StateName(e.To), Error: &info})
	})
	return done, err
}

// FrameRead implements plane.Driver (ReadFrames over the plane's hub and sleep).
func (v Verbs) FrameRead(ctx context.Context, p *plane.FrameReadParams) (*plane.FrameReadResult, error) {
	return ReadFrames(ctx, v.p.Hub, p, v.readFrames, v.p.Sleep)
}

// readFrames reads the frames after since in one snapshot, so an invocation's derived
// terminal frame never overtakes a VALUE frame committed with it.
func (v Verbs) readFrames(ctx context.Context, invocation bool, name string, since int64, limit int) (*plane.FrameReadResult, error) {
	if err := v.p.CheckOpen(); err != nil {
		return nil, err
	}
	res := &plane.FrameReadResult{}
	err := v.db.Snapshot(ctx, func(q Reader) error {
		res.Frames = nil
		var inv *Row
		if invocation {
			var err error
			inv, err = ScanRow(q.QueryRow(v.st.Row, name), v.st.RowSeq)
			if NoRows(err) {
				return plane.ErrNotFound
			}
			if err != nil {
				return fmt.Errorf("read frames: %w", err)
			}
			res.Closed = inv.JournalClosed()
		} else if err := q.QueryRow(v.st.TopicClosed, name).Scan(&res.Closed); err != nil && !NoRows(err) {
			return fmt.Errorf("read frames: %w", err)
		}
		rs, err := q.Query(v.st.Frames, name, since, limit)
		if err != nil {
			return fmt.Errorf("read frames: %w", err)
		}
		defer rs.Close()
		res.Frames, err = FramePage(rs, limit, inv, since)
		return err
	})
	if err != nil {
		return nil, v.db.Failure(ctx, err)
	}
	return res, nil
}
