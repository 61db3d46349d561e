package httpplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// maxSettleGroup bounds the settles of one coalesced request.
const maxSettleGroup = 1000

// settleGroup coalesces the settles of concurrent callers into batched requests, as the
// SQLite plane's writer coalesces commits: while one POST /v1/settle is in flight, later
// callers queue up, and the queue goes out as one request when it returns. A lone settle
// goes out at once. Each settle keeps its own result (settles are independent and fenced
// by their tokens), so grouping changes nothing a caller can see but the round trips.
type settleGroup struct {
	mu    sync.Mutex
	busy  bool
	queue []*settleCall
}

// settleCall is one caller's settles and, once done closes, their outcome.
type settleCall struct {
	ctx    context.Context
	params []plane.SettleParams
	out    []error
	err    error
	done   chan struct{}
}

// do settles params in the next request, waiting for it or for ctx.
func (g *settleGroup) do(ctx context.Context, d *Driver, params []plane.SettleParams) ([]error, error) {
	c := &settleCall{ctx: ctx, params: params, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if !g.busy {
		g.busy = true
		go g.serve(d)
	}
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		// The request may still settle them; a repeat answers lease_lost, as after any
		// settle whose answer was lost.
		return nil, ctx.Err()
	}
}

// serve sends the queue, batch after batch, until it is empty.
func (g *settleGroup) serve(d *Driver) {
	for {
		g.mu.Lock()
		n, k := 0, 0
		for k < len(g.queue) && (k == 0 || n+len(g.queue[k].params) <= maxSettleGroup) {
			n += len(g.queue[k].params)
			k++
		}
		batch := g.queue[:k:k]
		g.queue = g.queue[k:]
		if len(batch) == 0 {
			g.busy = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.send(d, batch)
	}
}

// send settles batch in one request. The request outlives any one caller's cancellation
// (others wait for it) and is retried until the latest deadline among the callers, at most
// the latest lease of its jobs.
func (g *settleGroup) send(d *Driver, batch []*settleCall) {
	var live []*settleCall
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
		c.out, c.err = d.settleNow(c.ctx, c.params)
		close(c.done)
		return
	}
	var params []plane.SettleParams
	var latest time.Time
	ctx, cancel := context.WithCancel(context.WithoutCancel(live[0].ctx))
	defer cancel()
	for _, c := range live {
		params = append(params, c.params...)
		dl, ok := c.ctx.Deadline()
		if !ok {
			dl = time.Now().Add(d.cfg.RequestTimeout + plane.LeaseTTLDefault)
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	ctx, cancelDeadline := context.WithDeadline(ctx, latest)
	defer cancelDeadline()
	out, err := d.settleNow(ctx, params)
	if errors.Is(err, plane.ErrInvalid) {
		// One caller's settle the server refuses must not fail the others: each alone.
		for _, c := range live {
			c.out, c.err = d.settleNow(c.ctx, c.params)
			close(c.done)
		}
		return
	}
	if err == nil && len(out) != len(params) {
		err = fmt.Errorf("settle: the server answered %d results for %d settles", len(out), len(params))
	}
	at := 0
	for _, c := range live {
		if err != nil {
			c.err = err
		} else {
			c.out = out[at : at+len(c.params) : at+len(c.params)]
		}
		at += len(c.params)
		close(c.done)
	}
}
