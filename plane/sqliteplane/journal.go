package sqliteplane

import (
	"context"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// FramePost implements plane.Driver.
func (d *Driver) FramePost(ctx context.Context, p *plane.FramePostParams) (int64, error) {
	name := planekit.JournalName(p.Journal)
	value, err := planekit.PostValue(p)
	if err != nil {
		return 0, err
	}
	var seq int64
	var logical error
	err = d.do(ctx, func(t *wtx) (err error) {
		seq, logical, err = planekit.Post(kitTx{t}, d.kit, journals{t}, p, name, value, d.cfg.MaxTopicsPerQueue)
		return err
	})
	if err != nil {
		return 0, err
	}
	return seq, logical
}

// journals are the writes of a post in the writer's transaction (planekit.Journals).
type journals struct{ t *wtx }

func (j journals) Holds(h *head, token string) (error, error) { return j.t.holds(h, token) }

func (j journals) AppendFrame(journal string, seq int64, kind int, value []byte, attempt int) error {
	if _, err := j.t.w.st.insertFrame.ExecContext(j.t.ctx, journal, seq, kind, value, attempt, j.t.ms); err != nil {
		return fmt.Errorf("post: %w", err)
	}
	return nil
}

func (j journals) AdvanceJournal(h *head, final bool) error {
	next := j.t.w.st.nextFrame
	if final {
		next = j.t.w.st.endJournal
	}
	if _, err := next.ExecContext(j.t.ctx, h.Seq); err != nil {
		return fmt.Errorf("post: %w", err)
	}
	return nil
}

// sleep waits for changed, for wait to pass (→ plane.ErrTimeout), for ctx (→ its error) or
// for the plane to close (→ plane.ErrClosed).
func (d *Driver) sleep(ctx context.Context, changed <-chan struct{}, wait time.Duration) error {
	_, err := planekit.Sleep(ctx, d.stopped, changed, nil, wait, 0)
	return err
}
