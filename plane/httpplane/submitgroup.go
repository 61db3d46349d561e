package httpplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Bounds of one coalesced submit request. A caller whose own submit is larger still goes
// out, alone.
const (
	// maxSubmitGroup bounds the invocations of one coalesced request.
	maxSubmitGroup = plane.SubmitManyMax
	// maxSubmitGroupBytes bounds the payload bytes of one coalesced request, well under
	// the server's body limit beyond one largest payload (server.MaxBodyBytesDefault).
	maxSubmitGroupBytes = 512 << 10
)

// submitGroup coalesces the submits of concurrent callers to one queue into batched
// requests (POST …/invocations/batch), as the SQLite plane's writer coalesces commits:
// while one request of the queue is in flight, later callers queue up, and the queue goes
// out as one request, one transaction on the server, when it returns. A lone submit goes
// out at once.
//
// A batch is all-or-nothing on the server, but callers are independent: when a coalesced
// request fails for any reason (a payload the server refuses, a full queue, an outage
// that outlasted the earliest caller's deadline), each caller still waiting sends its own
// submit again alone, with its own deadline and semantics, so one bad submit fails only
// its caller. Every invocation carries its client-made id from the start, so a repeat
// after a request that did commit finds the invocation (Existing) and never creates a
// second job.
type submitGroup struct {
	mu     sync.Mutex
	queues map[submitQueueKey]*submitQueue
}

type submitQueueKey struct{ namespace, queue string }

// submitQueue is the callers waiting to submit to one queue.
type submitQueue struct {
	busy  bool
	calls []*submitCall
}

// submitCall is one caller's submits and, once done closes, their outcome.
type submitCall struct {
	ctx    context.Context
	params *plane.SubmitManyParams // ids set
	bytes  int                     // payload bytes
	out    []plane.SubmitResult
	err    error
	done   chan struct{}
}

// do submits params (whose invocations all have ids) in the next request of their queue,
// waiting for it or for ctx.
func (g *submitGroup) do(ctx context.Context, d *Driver, params *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
	c := &submitCall{ctx: ctx, params: params, done: make(chan struct{})}
	for i := range params.Invocations {
		c.bytes += len(params.Invocations[i].Payload)
	}
	key := submitQueueKey{params.Namespace, params.Queue}
	g.mu.Lock()
	if g.queues == nil {
		g.queues = map[submitQueueKey]*submitQueue{}
	}
	q := g.queues[key]
	if q == nil {
		q = &submitQueue{}
		g.queues[key] = q
	}
	q.calls = append(q.calls, c)
	start := !q.busy
	q.busy = true
	g.mu.Unlock()
	if start {
		// A goroutine sends, not this caller: a caller whose ctx ends returns at once even
		// while the request that carries others' submits goes on.
		go g.serve(d, key, q)
	}
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The server ends a blocked submit just before the caller's deadline and answers
		// queue_full, which the caller must see rather than its own deadline; on a busy
		// machine that answer may land a little after the deadline. Wait for it, briefly.
		t := time.NewTimer(deadlineGrace)
		defer t.Stop()
		select {
		case <-c.done:
			return c.out, c.err
		case <-t.C:
		}
	}
	// The request may still submit them: the ids make a repeat find them.
	return nil, ctx.Err()
}

// deadlineGrace is how long a caller whose deadline passed still waits for the answer of
// the request that carries its submits (see submitGroup.do).
const deadlineGrace = 2 * time.Second

// serve sends q's callers, batch after batch, until none wait.
func (g *submitGroup) serve(d *Driver, key submitQueueKey, q *submitQueue) {
	for {
		g.mu.Lock()
		if len(q.calls) == 0 {
			q.busy = false
			delete(g.queues, key)
			g.mu.Unlock()
			return
		}
		n, size, k := 0, 0, 0
		for k < len(q.calls) {
			c := q.calls[k]
			if k > 0 && (n+len(c.params.Invocations) > maxSubmitGroup || size+c.bytes > maxSubmitGroupBytes) {
				break
			}
			n += len(c.params.Invocations)
			size += c.bytes
			k++
		}
		batch := q.calls[:k:k]
		q.calls = q.calls[k:]
		g.mu.Unlock()
		g.send(d, batch)
	}
}

// send submits batch in one request; see submitGroup for what a failure does.
func (g *submitGroup) send(d *Driver, batch []*submitCall) {
	live := batch[:0:0]
	for _, c := range batch {
		if c.ctx.Err() != nil {
			c.err = c.ctx.Err()
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		c := live[0]
		c.out, c.err = d.submitNow(c.ctx, c.params)
		close(c.done)
		return
	}
	// The request waits (on a full queue with on_full=block) and rides out an outage no
	// longer than the earliest caller's deadline: nobody is held past its own. An explicit
	// cancel of one caller does not end the others' request.
	first := live[0]
	params := &plane.SubmitManyParams{Namespace: first.params.Namespace, Queue: first.params.Queue}
	var earliest time.Time
	for _, c := range live {
		params.Invocations = append(params.Invocations, c.params.Invocations...)
		if dl, ok := c.ctx.Deadline(); ok && (earliest.IsZero() || dl.Before(earliest)) {
			earliest = dl
		}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(first.ctx))
	defer cancel()
	if !earliest.IsZero() {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, earliest)
		defer cancelDeadline()
	}
	out, err := d.submitNow(ctx, params)
	if err == nil && len(out) != len(params.Invocations) {
		err = fmt.Errorf("submit: the server answered %d results for %d invocations", len(out), len(params.Invocations))
	}
	if err != nil {
		// Each caller alone, concurrently: its own error, its own deadline.
		var wg sync.WaitGroup
		var ae *plane.AdmissionError
		admission := errors.As(err, &ae)
		for _, c := range live {
			if admission && c.ctx.Err() != nil {
				// The queue refused the request this caller's deadline bounded: its answer.
				c.err = err
				close(c.done)
				continue
			}
			wg.Go(func() {
				c.out, c.err = d.submitNow(c.ctx, c.params)
				close(c.done)
			})
		}
		wg.Wait()
		return
	}
	at := 0
	for _, c := range live {
		n := len(c.params.Invocations)
		c.out = out[at : at+n : at+n]
		at += n
		close(c.done)
	}
}
