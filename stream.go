package lakeshore

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// Frame is one VALUE frame of a journal (an invocation's or a topic's), decoded.
type Frame struct {
	// Seq is the frame's position in its journal, 0-based and dense: the cursor to resume
	// after this frame (pass it as since).
	Seq int64
	// Attempt is the invocation attempt that posted it (0 on topics).
	Attempt int
	// Time is when the plane appended it.
	Time time.Time
	// Value is the value in its generic form, as wire.Decode returns it (nil, bool, int64,
	// uint64, float32, float64, string, []byte, []any, map[string]any, time.Time or a wire
	// extension type). Decode fills a typed value instead.
	Value any

	raw []byte
}

// Decode decodes the frame's value into into, a pointer (as for wire.Unmarshal).
func (f Frame) Decode(into any) error {
	if err := checkInto(into); err != nil {
		return err
	}
	if err := wire.Unmarshal(f.raw, into); err != nil {
		return fmt.Errorf("decode frame %d into %T: %w", f.Seq, into, err)
	}
	return nil
}

// Raw returns the value's wire encoding (msgpack). The caller must not modify it.
func (f Frame) Raw() []byte { return f.raw }

func newFrame(f plane.Frame) (Frame, error) {
	out := Frame{Seq: f.Seq, Attempt: f.Attempt, Time: f.Time, raw: f.Value}
	v, err := wire.Decode(f.Value)
	if err != nil {
		return out, fmt.Errorf("decode frame %d: %w", f.Seq, err)
	}
	out.Value = v
	return out, nil
}

// Stream returns the VALUE frames of invocation id's journal with seq > since, live while
// the job runs, as an iterator for range-over-func:
//
//	for f, err := range q.Stream(ctx, id, lakeshore.FromStart, nil) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(f.Seq, f.Value)
//	}
//
// since is a cursor: FromStart (-1) reads the whole journal; the Seq of the last frame seen
// resumes after it, with no frame lost or repeated. The END frame (success) ends the
// sequence cleanly. Any error is the last element: a *TerminalError when the job ended
// without success (matching ErrFailed, ErrCancelled or ErrTimedOut, as Result), ErrTimeout
// after opts.Timeout (default 30 s) without a new frame, ErrNotFound for an unknown id,
// ctx's error, or a decoding error; an *InvalidError (the only element) for an id that is
// not a ULID. Breaking out of the loop stops the stream; nothing is
// left running. The sequence may be ranged over more than once; each range reads anew.
func (q *Queue) Stream(ctx context.Context, id string, since int64, opts *StreamOptions) iter.Seq2[Frame, error] {
	if err := plane.ValidateID(id); err != nil {
		return func(yield func(Frame, error) bool) { yield(Frame{}, err) }
	}
	seq := q.d.stream(ctx, plane.Journal{InvocationID: id}, since, opts.timeout(StreamTimeoutDefault))
	return func(yield func(Frame, error) bool) {
		for f, err := range seq {
			if !yield(f, plane.InvocationNotFound(err, id)) {
				return
			}
		}
	}
}

// stream reads journal j from cursor since, yielding VALUE frames until END, an error, or
// silence (no frame for silence; < 0: no limit).
func (d *Dispatch) stream(ctx context.Context, j plane.Journal, from int64, silence time.Duration) iter.Seq2[Frame, error] {
	return func(yield func(Frame, error) bool) {
		since := from // each range reads anew from the caller's cursor
		if since < FromStart {
			yield(Frame{}, plane.Invalid("since", since, "use a frame seq ≥ 0, or -1 for the whole journal (FromStart in Go)"))
			return
		}
		last := time.Now()
		for {
			wait := waitChunk
			if silence > 0 {
				wait = silence - time.Since(last)
				if wait <= 0 {
					if err := d.endedOrTimeout(ctx, j, silence); err != nil {
						yield(Frame{}, err)
					}
					return
				}
			}
			res, err := d.drv.FrameRead(ctx, &plane.FrameReadParams{Journal: j, Since: since, Wait: wait})
			if err != nil {
				yield(Frame{}, ctxError(err))
				return
			}
			for _, f := range res.Frames {
				since = f.Seq
				switch f.Kind {
				case plane.FrameValue:
					fr, err := newFrame(f)
					if !yield(fr, err) || err != nil {
						return
					}
				case plane.FrameEnd:
					return
				case plane.FrameError:
					yield(Frame{}, d.journalError(ctx, j.InvocationID, f))
					return
				default:
					yield(Frame{}, fmt.Errorf("journal frame %d: unknown kind %q", f.Seq, f.Kind))
					return
				}
			}
			if len(res.Frames) > 0 {
				last = time.Now()
				continue
			}
			if res.Closed {
				// The cursor is past the journal's last frame: end as the invocation ended.
				if j.InvocationID != "" {
					if err := d.invocationError(ctx, j.InvocationID); err != nil {
						yield(Frame{}, err)
					}
				}
				return
			}
		}
	}
}

// endedOrTimeout is the end of a silent stream: an invocation that is terminal ends it as
// its state says (its journal may have been trimmed), else ErrTimeout.
func (d *Dispatch) endedOrTimeout(ctx context.Context, j plane.Journal, silence time.Duration) error {
	if j.InvocationID != "" {
		inv, err := d.drv.InvocationGet(ctx, j.InvocationID)
		if err != nil {
			return ctxError(err)
		}
		if inv.State.Terminal() {
			return inv.TerminalError()
		}
	}
	return fmt.Errorf("stream %s: no frame for %s: %w", journalName(j), silence, ErrTimeout)
}

// invocationError returns the terminal error of invocation id (nil when it succeeded).
func (d *Dispatch) invocationError(ctx context.Context, id string) error {
	inv, err := d.drv.InvocationGet(ctx, id)
	if err != nil {
		return ctxError(err)
	}
	return inv.TerminalError()
}

// journalError turns an invocation's ERROR frame into its *TerminalError. The invocation
// row is the truth (it says whether the job failed, timed out or was killed); the frame's
// own ErrorInfo is the fallback when the row is gone.
func (d *Dispatch) journalError(ctx context.Context, id string, f plane.Frame) error {
	if inv, err := d.drv.InvocationGet(ctx, id); err == nil {
		if terr := inv.TerminalError(); terr != nil {
			return terr
		}
	}
	terr := &TerminalError{ID: id, State: StateFailed}
	_ = wire.Unmarshal(f.Value, &terr.Info) // best effort: the state says more than the text
	return terr
}

func journalName(j plane.Journal) string {
	if j.InvocationID != "" {
		return j.InvocationID
	}
	return "topic " + j.Topic
}
