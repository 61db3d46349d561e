package pgplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Stored frame kinds.
const (
	frameValue = 0
	frameEnd   = 1
	frameError = 2
)

var frameKinds = [...]plane.FrameKind{plane.FrameValue, plane.FrameEnd, plane.FrameError}

// journalName is the frames.journal of j: the invocation id, or "t/ns/queue/topic" (names
// cannot contain '/', ids cannot start with 't').
func journalName(j plane.Journal) string {
	if j.InvocationID != "" {
		return j.InvocationID
	}
	return "t/" + j.Namespace + "/" + j.Queue + "/" + j.Topic
}

// FramePost implements plane.Driver.
func (d *Driver) FramePost(ctx context.Context, p *plane.FramePostParams) (int64, error) {
	if err := p.Journal.Validate(); err != nil {
		return 0, err
	}
	if err := plane.ValidateValueSize("frame value", len(p.Value)); err != nil {
		return 0, err
	}
	value := p.Value
	if value == nil {
		value = []byte{0xc0} // msgpack nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	req := &postRequest{p: p, value: value, journal: journalName(p.Journal)}
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	d.posts.do(ctx, req)
	if req.err != nil {
		return 0, req.err
	}
	return req.seq, req.logical
}

// postRequest is one caller's post, served in a group: the posts of concurrent callers go
// in one transaction, taken in journal order (so two groups lock rows in one order), each
// journal's posts in arrival order.
type postRequest struct {
	p       *plane.FramePostParams
	value   []byte
	journal string

	seq     int64
	logical error // the caller's error: ErrLeaseLost, ErrJournalClosed, ErrNotFound
	err     error // the transaction's
}

// maxPostGroup bounds the posts of one group.
const maxPostGroup = 500

func newPostGrouper(d *Driver) *grouper[*postRequest] {
	return &grouper[*postRequest]{max: maxPostGroup, run: d.postGroup, size: func(*postRequest) int { return 1 }}
}

func (d *Driver) postGroup(ctx context.Context, reqs []*postRequest) {
	ordered := slices.Clone(reqs)
	slices.SortStableFunc(ordered, func(a, b *postRequest) int { return strings.Compare(a.journal, b.journal) })
	err := d.do(ctx, func(t *tx) error {
		for _, r := range ordered {
			var err error
			if r.p.Journal.InvocationID != "" {
				r.seq, r.logical, err = t.postInvocation(r.p, r.value)
			} else {
				r.seq, r.logical, err = t.postTopic(r.journal, r.value, r.p.Final)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	for _, r := range reqs {
		r.err = err
	}
}

// postInvocation appends a VALUE frame to an invocation's journal, or with Final acks it.
// The first error is the caller's (written state kept: an expired lease found here is ended).
func (t *tx) postInvocation(p *plane.FramePostParams, value []byte) (int64, error, error) {
	h, err := t.head(p.Journal.InvocationID)
	if err != nil {
		return 0, nil, err
	}
	if h == nil {
		return 0, plane.ErrNotFound, nil
	}
	if h.state >= planekit.StateSucceeded {
		return 0, plane.ErrJournalClosed, nil
	}
	if lost := t.holds(h, p.Token); lost != nil {
		return 0, lost, nil
	}
	seq := h.nextFrame
	if p.Final {
		t.apply(h, plane.Transition{State: plane.StateSucceeded}, value)
		return seq, nil, nil
	}
	t.exec(t.d.sql.insertFrame, h.id, seq, int16(frameValue), value, h.attempt, t.ms)
	t.exec(t.d.sql.nextFrame, h.id)
	t.wake(planekit.JournalKey(h.id))
	return seq, nil, nil
}

// postTopic appends a frame to a topic (creating it), taking its seq atomically.
func (t *tx) postTopic(name string, value []byte, final bool) (int64, error, error) {
	var seq int64
	err := t.queryRow(t.d.sql.topicAppend, name, final, t.ms).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, plane.ErrJournalClosed, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("post: %w", err)
	}
	kind := frameValue
	if final {
		kind = frameEnd
	}
	t.exec(t.d.sql.insertFrame, name, seq, int16(kind), value, 0, t.ms)
	t.wake(planekit.JournalKey(name))
	return seq, nil, nil
}

// FrameRead implements plane.Driver.
func (d *Driver) FrameRead(ctx context.Context, p *plane.FrameReadParams) (*plane.FrameReadResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit == 0 {
		limit = plane.FrameReadLimitDefault
	}
	name := journalName(p.Journal)
	waitUntil := time.Now().Add(p.Wait)
	for {
		var changed <-chan struct{}
		release := func() {}
		if p.Wait > 0 {
			changed, release = d.hub.Watch(planekit.JournalKey(name))
		}
		res, err := d.readFrames(ctx, p.Journal.InvocationID != "", name, p.Since, limit)
		if err != nil || len(res.Frames) > 0 || res.Closed || p.Wait == 0 {
			release()
			return res, err
		}
		err = d.sleep(ctx, changed, time.Until(waitUntil))
		release()
		if errors.Is(err, plane.ErrTimeout) {
			if time.Until(waitUntil) <= 0 {
				return res, nil
			}
			continue
		}
		if err != nil {
			return nil, err
		}
	}
}

// readFrames reads the frames after since in one repeatable-read snapshot, so an
// invocation's derived terminal frame never overtakes a VALUE frame committed with it.
func (d *Driver) readFrames(ctx context.Context, invocation bool, name string, since int64, limit int) (*plane.FrameReadResult, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	res := &plane.FrameReadResult{}
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		res.Frames = nil
		var inv *row
		if invocation {
			var err error
			inv, err = scanRow(tx.QueryRow(ctx, d.sql.row, name))
			if errors.Is(err, pgx.ErrNoRows) {
				return plane.ErrNotFound
			}
			if err != nil {
				return fmt.Errorf("read frames: %w", err)
			}
			res.Closed = inv.Terminal()
		} else {
			err := tx.QueryRow(ctx, d.sql.topicClosed, name).Scan(&res.Closed)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("read frames: %w", err)
			}
		}
		rs, err := tx.Query(ctx, d.sql.frames, name, since, limit)
		if err != nil {
			return fmt.Errorf("read frames: %w", err)
		}
		defer rs.Close()
		page := plane.FramePage{Limit: limit}
		for rs.Next() {
			var f plane.Frame
			var kind int16
			var ms int64
			if err := rs.Scan(&f.Seq, &kind, &f.Value, &f.Attempt, &ms); err != nil {
				return fmt.Errorf("read frames: %w", err)
			}
			f.Kind, f.Time = frameKinds[kind], planekit.FromMS(ms)
			if !page.Add(f) {
				break
			}
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return fmt.Errorf("read frames: %w", err)
		}
		if inv != nil && inv.Terminal() && !page.Full() {
			if f := inv.TerminalFrame(); f.Seq > since {
				page.Add(f)
			}
		}
		res.Frames = page.Frames
		return nil
	})
	if err != nil {
		return nil, d.failure(err)
	}
	return res, nil
}
