package sqliteplane

import (
	"context"
	"database/sql"
	"errors"
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
	err = d.do(ctx, func(t *wtx) error {
		var err error
		if p.Journal.InvocationID != "" {
			seq, logical, err = t.postInvocation(p, value)
		} else {
			seq, logical, err = t.postTopic(name, value, p.Final)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return seq, logical
}

// postInvocation appends a VALUE frame to an invocation's journal, or with Final the END
// frame that ends the journal (planekit.JournalClosed; the job is settled by its ack).
func (t *wtx) postInvocation(p *plane.FramePostParams, value []byte) (int64, error, error) {
	h, _, err := t.head(p.Journal.InvocationID)
	if err != nil {
		return 0, nil, err
	}
	return planekit.PostInvocation(h, p, t.holds, func(kind int) error {
		next := t.w.st.nextFrame
		if p.Final {
			next = t.w.st.endJournal
		}
		if _, err := t.w.st.insertFrame.ExecContext(t.ctx, h.ID, h.NextFrame, kind, value, h.Attempt, t.ms); err != nil {
			return fmt.Errorf("post: %w", err)
		}
		if _, err := next.ExecContext(t.ctx, h.Seq); err != nil {
			return fmt.Errorf("post: %w", err)
		}
		t.wake(planekit.JournalKey(h.ID))
		return nil
	})
}

func (t *wtx) postTopic(name string, value []byte, final bool) (int64, error, error) {
	var seq int64
	var closed bool
	err := t.w.st.topicGet.QueryRowContext(t.ctx, name).Scan(&seq, &closed)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, nil, fmt.Errorf("post: %w", err)
	}
	if closed {
		return 0, plane.ErrJournalClosed, nil
	}
	if _, err := t.w.st.insertFrame.ExecContext(t.ctx, name, seq, planekit.FrameKind(final), value, 0, t.ms); err != nil {
		return 0, nil, fmt.Errorf("post: %w", err)
	}
	if _, err := t.w.st.topicPut.ExecContext(t.ctx, name, seq+1, final, t.ms); err != nil {
		return 0, nil, fmt.Errorf("post: %w", err)
	}
	t.wake(planekit.JournalKey(name))
	return seq, nil, nil
}

// sleep waits for changed, for wait to pass (→ plane.ErrTimeout), for ctx (→ its error) or
// for the plane to close (→ plane.ErrClosed).
func (d *Driver) sleep(ctx context.Context, changed <-chan struct{}, wait time.Duration) error {
	_, err := planekit.Sleep(ctx, d.stopped, changed, nil, wait, 0)
	return err
}
