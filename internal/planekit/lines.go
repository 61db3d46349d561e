package planekit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Lines are the in-process arrival order of submits blocked on a full queue: only the head
// of a line retries, so waiters are admitted first come, first served, and new submits
// queue behind them. The zero Lines is ready to use. Safe for concurrent use.
type Lines struct {
	mu    sync.Mutex
	lines map[string][]*Ticket
}

// Ticket is a place in a line. Turn is closed when it reaches the head.
type Ticket struct{ Turn chan struct{} }

// Join puts a new ticket at the end of key's line.
func (l *Lines) Join(key string) *Ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines == nil {
		l.lines = make(map[string][]*Ticket)
	}
	tk := &Ticket{Turn: make(chan struct{})}
	if len(l.lines[key]) == 0 {
		close(tk.Turn)
	}
	l.lines[key] = append(l.lines[key], tk)
	return tk
}

// Leave removes tk from key's line and hands the turn to the next.
func (l *Lines) Leave(key string, tk *Ticket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := l.lines[key]
	for i, x := range line {
		if x == tk {
			line = append(line[:i:i], line[i+1:]...)
			if i == 0 && len(line) > 0 {
				close(line[0].Turn)
			}
			break
		}
	}
	if len(line) == 0 {
		delete(l.lines, key)
	} else {
		l.lines[key] = line
	}
}

// Ahead reports whether someone other than tk waits in key's line.
func (l *Lines) Ahead(key string, tk *Ticket) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := l.lines[key]
	return len(line) > 0 && line[0] != tk
}

// SubmitBlocking runs a submit transaction (once) until it answers anything but ErrBlocked.
// A submit to a full queue whose admission says block waits in l's line for the queue (in
// arrival order, in this process): first for its turn, then, at the head, for a change of
// the queue's RoomKey in hub (a claim or cancel made room) before it tries again, until ctx
// ends (a *plane.AdmissionError of plane.ErrQueueFull, with ctx's error as its cause) or
// stop closes (plane.ErrClosed), or p.Recheck, called before each attempt after a wait,
// fails (its error). once gets the submit's ticket (nil before it blocked);
// sleep is the plane's wait for a notification (planekit.DB.Sleep).
func SubmitBlocking(ctx context.Context, p *plane.SubmitManyParams, l *Lines, hub *Hub, stop <-chan struct{},
	sleep func(context.Context, <-chan struct{}, time.Duration) error,
	once func(*Ticket) ([]plane.SubmitResult, error)) ([]plane.SubmitResult, error) {
	key := RoomKey(p.Namespace, p.Queue)
	var tk *Ticket
	defer func() {
		if tk != nil {
			l.Leave(key, tk)
		}
	}()
	for {
		if tk != nil && p.Recheck != nil {
			// Blocked before and waited since: the caller (a server's token) may have lost
			// its right to submit meanwhile.
			if err := p.Recheck(); err != nil {
				return nil, err
			}
		}
		var changed <-chan struct{}
		release := func() {}
		if tk != nil {
			changed, release = hub.Watch(key)
		}
		out, err := once(tk)
		if err != nil && tk != nil && ctx.Err() != nil && !errors.Is(err, ErrBlocked) &&
			(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			// This submit found the queue full before, and its context ended during a
			// retry (waiting for the writer, say): it blocked until its context ended.
			// Any other error (the storage's) is the reason the retry failed and is
			// returned as it is, below.
			release()
			return nil, gaveUp(p, ctx.Err())
		}
		if !errors.Is(err, ErrBlocked) {
			release()
			return out, err
		}
		if tk == nil { // first time blocked: get in line, then wait for our turn
			release()
			tk = l.Join(key)
			select {
			case <-tk.Turn:
			case <-ctx.Done():
				return nil, gaveUp(p, ctx.Err())
			case <-stop:
				return nil, plane.ErrClosed
			}
			continue
		}
		err = sleep(ctx, changed, time.Hour)
		release()
		if err != nil && !errors.Is(err, plane.ErrTimeout) {
			if errors.Is(err, plane.ErrClosed) {
				return nil, err
			}
			return nil, gaveUp(p, err)
		}
	}
}

func gaveUp(p *plane.SubmitManyParams, cause error) error {
	return &plane.AdmissionError{Sentinel: plane.ErrQueueFull, Queue: p.Namespace + "/" + p.Queue,
		Detail: "at max depth, and the submit blocked until its context ended", Cause: cause}
}
