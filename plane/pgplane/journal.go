package pgplane

import (
	"cmp"
	"context"
	"slices"
	"strings"

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
			if r.seq, r.logical, err = planekit.Post(kitTx{t}, d.kit, journals{t}, r.p, r.journal, r.value, d.cfg.MaxTopicsPerQueue); err != nil {
				return err
			}
		}
		return nil
	})
	for _, r := range reqs {
		r.err = err
	}
}

// journals are the writes of a post in a group's transaction (planekit.Journals); they are
// queued, and never fail.
type journals struct{ t *tx }

func (j journals) Holds(h *head, token string) (error, error) { return j.t.holds(h, token) }

func (j journals) AppendFrame(journal string, seq int64, kind int, value []byte, attempt int) error {
	j.t.exec(j.t.d.sql.insertFrame, journal, seq, int16(kind), value, attempt, j.t.ms)
	return nil
}

func (j journals) AdvanceJournal(h *head, final bool) error {
	next := j.t.d.sql.nextFrame
	if final {
		next = j.t.d.sql.endJournal
	}
	j.t.exec(next, h.ID)
	return nil
}
