package planekit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Stored frame kinds, the same in every plane's frames table.
const (
	FrameValue = 0
	FrameEnd   = 1
	FrameError = 2
)

var frameKinds = [...]plane.FrameKind{plane.FrameValue, plane.FrameEnd, plane.FrameError}

// JournalName is the frames.journal of j: the invocation id, or "t/ns/queue/topic" (names
// cannot contain '/', ids cannot start with 't').
func JournalName(j plane.Journal) string {
	if j.InvocationID != "" {
		return j.InvocationID
	}
	return "t/" + j.Namespace + "/" + j.Queue + "/" + j.Topic
}

// PostValue checks the post p and returns the value to store (msgpack nil for none).
func PostValue(p *plane.FramePostParams) ([]byte, error) {
	if err := p.Journal.Validate(); err != nil {
		return nil, err
	}
	if err := plane.ValidateValueSize("frame value", len(p.Value)); err != nil {
		return nil, err
	}
	if p.Value == nil {
		return []byte{0xc0}, nil // msgpack nil
	}
	return p.Value, nil
}

// JournalClosed is the rule of an invocation's journal (issue 24, semantics 1), from its
// stored state, attempt and closedBy (the attempt whose final post stored an END frame, 0
// when none did): the journal is closed once the job is terminal, and while the attempt
// that posted the END frame still runs. A final post ends the journal, not the job: the
// job is settled by the ack (or nack, or expiry) that follows, as in the dreamlake-lakeshore
// package ("the journal is derived data — truth is the invocation row"). A retried job's
// next attempt opens the journal again, and its posts continue the seqs.
func JournalClosed(state, attempt, closedBy int) bool {
	return state >= StateSucceeded || state == StateRunning && closedBy == attempt
}

// DerivesTerminalFrame reports whether a terminal invocation's journal ends with the END or
// ERROR frame derived from its row: not when the attempt that settled it had already ended
// the journal with a final post (its stored END frame is then the journal's last frame,
// and the outcome is the invocation's alone).
func DerivesTerminalFrame(attempt, closedBy int) bool { return closedBy == 0 || closedBy != attempt }

// Rows are the rows of a query (database/sql's and pgx's alike).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// FramePage reads stored frames (seq, kind, value, attempt, time in ms) from rs into a page
// of limit frames, then adds the derived END or ERROR frame of inv (nil for a topic) when
// inv is terminal, DerivesTerminalFrame, the page has room and the frame comes after since.
func FramePage(rs Rows, limit int, inv *Row, since int64) ([]plane.Frame, error) {
	page := plane.FramePage{Limit: limit}
	for rs.Next() {
		var f plane.Frame
		var kind int
		var ms int64
		if err := rs.Scan(&f.Seq, &kind, &f.Value, &f.Attempt, &ms); err != nil {
			return nil, fmt.Errorf("read frames: %w", err)
		}
		f.Kind, f.Time = frameKinds[kind], FromMS(ms)
		if !page.Add(f) {
			break
		}
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read frames: %w", err)
	}
	if inv != nil && inv.Terminal() && DerivesTerminalFrame(inv.Attempt, inv.JournalClosedBy) && !page.Full() {
		if f := inv.TerminalFrame(); f.Seq > since {
			page.Add(f)
		}
	}
	return page.Frames, nil
}

// ReadFrames is Driver.FrameRead over a plane's hub, its snapshot read of one page (read)
// and its sleep: it waits up to p.Wait for a frame after p.Since or the journal's close.
func ReadFrames(ctx context.Context, hub *Hub, p *plane.FrameReadParams,
	read func(ctx context.Context, invocation bool, name string, since int64, limit int) (*plane.FrameReadResult, error),
	sleep func(context.Context, <-chan struct{}, time.Duration) error,
) (*plane.FrameReadResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit == 0 {
		limit = plane.FrameReadLimitDefault
	}
	name := JournalName(p.Journal)
	waitUntil := time.Now().Add(p.Wait)
	for {
		var changed <-chan struct{}
		release := func() {}
		if p.Wait > 0 {
			changed, release = hub.Watch(JournalKey(name))
		}
		res, err := read(ctx, p.Journal.InvocationID != "", name, p.Since, limit)
		if err != nil || len(res.Frames) > 0 || res.Closed || p.Wait == 0 {
			release()
			return res, err
		}
		err = sleep(ctx, changed, time.Until(waitUntil))
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

// PostCheck decides, in order, whether a post may go to the journal of an invocation in
// state (its attempt, and the attempt whose final post closed the journal, closedBy): a
// terminal invocation's journal is closed (plane.ErrJournalClosed); the caller must hold
// the lease (holds: the plane's fencing check, plane.Holds; its first error is the
// caller's, its second a storage failure); a journal a final post closed takes no more.
// It returns the caller's error or the storage failure.
func PostCheck(state, attempt, closedBy int, holds func() (lost, err error)) (logical, err error) {
	if state >= StateSucceeded {
		return plane.ErrJournalClosed, nil
	}
	if lost, err := holds(); lost != nil || err != nil {
		return lost, err
	}
	if JournalClosed(state, attempt, closedBy) {
		return plane.ErrJournalClosed, nil
	}
	return nil, nil
}

// FrameKind is the stored kind of a posted frame: FrameEnd for a final post, else FrameValue.
func FrameKind(final bool) int {
	if final {
		return FrameEnd
	}
	return FrameValue
}

// Journals are a driver's writes of a post (Post), in its transaction.
type Journals interface {
	// Holds is the driver's fencing check of h for token (Head.Fence).
	Holds(h *Head, token string) (lost, err error)
	// AppendFrame stores the frame of kind with value at seq of journal, posted by attempt
	// (0 for a topic).
	AppendFrame(journal string, seq int64, kind int, value []byte, attempt int) error
	// AdvanceJournal moves the next seq of the invocation h's journal on, and for a final
	// post closes the journal (journal_closed: its attempt).
	AdvanceJournal(h *Head, final bool) error
}

// Post is the post p of value (PostValue) to the journal name (JournalName) in a driver's
// transaction t (its writes j): to a topic, the topic's next seq unless it is closed
// (TopicSeq); to an invocation's journal, its head (t.Head: pgplane locks its row), then
// PostCheck (j.Holds is the fencing check), then the frame (of FrameKind, at seq
// h.NextFrame) and the journal's next seq (for a final post: closed, JournalClosed). The
// journal's waiters are woken. A topic's first post applies the queue's cap on topics
// (TopicCap, maxTopics: the driver's). It returns the frame's seq, the caller's error
// (plane.ErrJournalClosed, plane.ErrNotFound, plane.ErrLeaseLost, plane.ErrLimitExceeded;
// what the transaction wrote stays: a lease the fencing check found expired is ended; a
// topic past the cap is not) and a storage failure.
func Post(t Tx, st *Statements, j Journals, p *plane.FramePostParams, name string, value []byte, maxTopics int) (seq int64, logical, err error) {
	kind := FrameKind(p.Final)
	if p.Journal.InvocationID == "" {
		seq, ok, err := TopicSeq(t, st, name, p.Final)
		if err != nil {
			return 0, nil, err
		}
		if !ok {
			return 0, plane.ErrJournalClosed, nil
		}
		if seq == 0 { // a new topic: its queue's cap applies
			if logical, err := TopicCap(t, st, p.Journal, name, maxTopics); logical != nil || err != nil {
				return 0, logical, err
			}
		}
		if err := j.AppendFrame(name, seq, kind, value, 0); err != nil {
			return 0, nil, err
		}
		t.Wake(JournalKey(name))
		return seq, nil, nil
	}
	h, err := t.Head(p.Journal.InvocationID)
	if err != nil {
		return 0, nil, err
	}
	if h == nil {
		return 0, plane.ErrNotFound, nil
	}
	if logical, err := PostCheck(h.State, h.Attempt, h.JournalClosedBy, func() (error, error) { return j.Holds(h, p.Token) }); logical != nil || err != nil {
		return 0, logical, err
	}
	if err := j.AppendFrame(h.ID, h.NextFrame, kind, value, h.Attempt); err != nil {
		return 0, nil, err
	}
	if err := j.AdvanceJournal(h, p.Final); err != nil {
		return 0, nil, err
	}
	t.Wake(JournalKey(h.ID))
	seq = h.NextFrame
	h.NextFrame++
	if p.Final {
		h.JournalClosedBy = h.Attempt
	}
	return seq, nil, nil
}
