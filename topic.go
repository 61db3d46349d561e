package lakeshore

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// Topic is a publish/subscribe channel of a queue: a journal without an invocation, read
// with the same cursors as Queue.Stream. Anyone may post; readers get every value after
// their cursor; Close appends END, which ends every reader's Stream. Topic handles are
// cheap and stateless; make them with Queue.Topic. Safe for concurrent use.
type Topic struct {
	q    *Queue
	name string
}

// topicPrefix starts the name of an auto-named topic.
const topicPrefix = "topic-"

// Topic returns a handle on the queue's topic name (1–128 bytes of [A-Za-z0-9._-], not
// starting with '.' or '-'). An empty name makes a fresh one, "topic-<ULID>", for a
// private reply channel; share it by Name. Topics need no creation: one that was never
// posted to reads as empty. Errors: *InvalidError for a bad name.
func (q *Queue) Topic(name string) (*Topic, error) {
	if name == "" {
		name = topicPrefix + q.d.topics.New(q.d.cfg.Now())
	}
	if err := plane.ValidateName("topic name", name); err != nil {
		return nil, err
	}
	return &Topic{q: q, name: name}, nil
}

// topicOf returns the topic name of queue namespace/queue.
func (d *Dispatch) topicOf(namespace, queue, name string) (*Topic, error) {
	q, err := d.Queue(queue, &QueueOptions{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	return q.Topic(name)
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// Queue returns the queue the topic belongs to.
func (t *Topic) Queue() *Queue { return t.q }

func (t *Topic) journal() plane.Journal {
	return plane.Journal{Namespace: t.q.opts.Namespace, Queue: t.q.name, Topic: t.name}
}

// Post appends value (encoded with the wire codec) as a VALUE frame and returns its seq.
// Errors: ErrJournalClosed after Close; *InvalidError when value does not encode or
// exceeds 16 MiB (nothing posted).
func (t *Topic) Post(ctx context.Context, value any) (int64, error) {
	return t.post(ctx, value, false)
}

// Close appends the END frame: readers' Streams end cleanly, and later Posts fail with
// ErrJournalClosed. It closes the topic for everyone, for good; it releases nothing local
// (a Topic handle holds nothing). Errors: ErrJournalClosed when it was already closed.
func (t *Topic) Close(ctx context.Context) error {
	_, err := t.post(ctx, nil, true)
	return err
}

func (t *Topic) post(ctx context.Context, value any, final bool) (int64, error) {
	b, err := wire.Marshal(value)
	if err != nil {
		return 0, encodeError("frame value", value, err)
	}
	seq, err := t.q.d.drv.FramePost(ctx, &plane.FramePostParams{Journal: t.journal(), Value: b, Final: final})
	if err != nil {
		return 0, fmt.Errorf("post to topic %s: %w", t.name, err)
	}
	return seq, nil
}

// Listen returns the first value posted after cursor since (FromStart: the first value of
// all), waiting up to opts.Timeout (default 5 s) for one. It returns ok=false and no error
// when none came in time. Errors: ErrJournalClosed when the next frame is the topic's END
// (no value will ever come); ctx's error; a decoding error.
func (t *Topic) Listen(ctx context.Context, since int64, opts *ListenOptions) (f Frame, ok bool, err error) {
	if since < FromStart {
		return Frame{}, false, plane.Invalid("since", since, "use a frame seq ≥ 0, or -1 for the first value (FromStart in Go)")
	}
	timeout := TopicTimeoutDefault
	if opts != nil && opts.Timeout != 0 {
		timeout = opts.Timeout
	}
	end := time.Now().Add(timeout)
	for {
		wait := waitChunk
		if timeout > 0 {
			if wait = time.Until(end); wait <= 0 {
				return Frame{}, false, nil
			}
		}
		res, err := t.q.d.drv.FrameRead(ctx, &plane.FrameReadParams{Journal: t.journal(), Since: since, Limit: 1, Wait: wait})
		if err != nil {
			return Frame{}, false, err
		}
		if len(res.Frames) == 0 {
			if res.Closed {
				return Frame{}, false, fmt.Errorf("listen to topic %s: %w", t.name, ErrJournalClosed)
			}
			continue
		}
		pf := res.Frames[0]
		if pf.Kind != plane.FrameValue {
			return Frame{}, false, fmt.Errorf("listen to topic %s after %d: %w", t.name, since, ErrJournalClosed)
		}
		f, err := newFrame(pf)
		if err != nil {
			return Frame{}, false, err
		}
		return f, true, nil
	}
}

// Stream returns the topic's values posted after cursor since (FromStart: all of them), live,
// until END (Close) ends the sequence cleanly. opts.Timeout (default 5 s) of silence yields
// ErrTimeout as the last element; so do ctx's error and decoding errors. Breaking out of
// the loop stops the stream. See Queue.Stream for cursors.
func (t *Topic) Stream(ctx context.Context, since int64, opts *StreamOptions) iter.Seq2[Frame, error] {
	return t.q.d.stream(ctx, t.journal(), since, opts.timeout(TopicTimeoutDefault))
}
