package pgplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// FramePost implements plane.Driver.
func (d *Driver) FramePost(ctx context.Context, p *plane.FramePostParams) (int64, error) {
	value, err := planekit.PostValue(p)
	if err != nil {
		return 0, err
	}
	req := &postRequest{p: p, value: value, journal: planekit.JournalName(p.Journal)}
	if err := cmp.Or(d.posts.Do(ctx, req), req.err); err != nil {
		return 0, err
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

// postInvocation appends a VALUE frame to an invocation's journal, or with Final the END
// frame that ends the journal (planekit.JournalClosed; the job is settled by its ack).
// The first error is the caller's (written state kept: an expired lease found here is ended).
func (t *tx) postInvocation(p *plane.FramePostParams, value []byte) (int64, error, error) {
	h, err := t.head(p.Journal.InvocationID)
	if err != nil {
		return 0, nil, err
	}
	return planekit.PostInvocation(h, p, t.holds, func(kind int) error {
		next := t.d.sql.nextFrame
		if p.Final {
			next = t.d.sql.endJournal
		}
		t.exec(t.d.sql.insertFrame, h.ID, h.NextFrame, int16(kind), value, h.Attempt, t.ms)
		t.exec(next, h.ID)
		t.wake(planekit.JournalKey(h.ID))
		return nil
	})
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
	t.exec(t.d.sql.insertFrame, name, seq, int16(planekit.FrameKind(final)), value, 0, t.ms)
	t.wake(planekit.JournalKey(name))
	return seq, nil, nil
}
