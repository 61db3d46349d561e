package persist

import (
	"context"
	"io"
	"time"
)

// Stream reads a queue's records in global-index order, batch by batch. It is not safe
// for concurrent use; each consumer makes its own.
type Stream struct {
	s        Store
	opts     StreamOpts
	next     int64
	lastData time.Time
}

// Stream returns a stream of the records from opts.Offset on (nil opts: from 0, all
// fields and partitions, no wait).
func (q *Queue) Stream(opts *StreamOpts) *Stream {
	s := &Stream{s: q.s}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.BatchSize <= 0 {
		s.opts.BatchSize = StreamBatchSizeDefault
	}
	s.next = s.opts.Offset
	return s
}

// Offset returns the global index where the next call continues.
func (s *Stream) Offset() int64 { return s.next }

// Next returns the next batch of at most BatchSize rows (never an empty batch). When
// the stream has caught up it returns io.EOF, or with Wait blocks until rows arrive;
// with IdleTimeout it returns io.EOF once no row arrived for that long. Errors:
// io.EOF, ErrClosed (also when the queue closes during a wait), ctx's error, and
// the errors of Get.
func (s *Stream) Next(ctx context.Context) ([]Row, error) {
	if s.lastData.IsZero() {
		s.lastData = time.Now()
	}
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	for {
		rows, done, err := s.nextOnce(ctx, &idle)
		if done {
			return rows, err
		}
	}
}

// nextOnce is one attempt of Next: rows or the end (done), or a wait for the next
// commit (not done).
func (s *Stream) nextOnce(ctx context.Context, idle **time.Timer) ([]Row, bool, error) {
	woken, release := s.s.Changes() // taken before the read, so no commit is missed
	defer release()
	b, scanned, err := s.s.Scan(ctx, s.next, s.opts.BatchSize, &s.opts.GetOpts)
	if err != nil {
		return nil, true, err
	}
	s.next = max(s.next, scanned)
	if b.Len() > 0 {
		rows, err := b.Rows()
		b.Release()
		if err != nil {
			return nil, true, err
		}
		s.lastData = time.Now()
		return rows, true, nil
	}
	b.Release()
	if !s.opts.Wait {
		return nil, true, io.EOF
	}
	var timeout <-chan time.Time
	if s.opts.IdleTimeout > 0 {
		left := s.opts.IdleTimeout - time.Since(s.lastData)
		if left <= 0 {
			return nil, true, io.EOF
		}
		if *idle == nil {
			*idle = time.NewTimer(left)
		} else {
			(*idle).Reset(left)
		}
		timeout = (*idle).C
	}
	select {
	case <-woken:
		return nil, false, nil
	case <-timeout:
		return nil, true, io.EOF
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
}
