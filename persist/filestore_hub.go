package persist

import (
	"context"
	"sync"
	"time"
)

// hub wakes waiters after commits: wait returns a channel closed by the next broadcast.
type hub struct {
	mu sync.Mutex
	ch chan struct{}
}

func (h *hub) init() { h.ch = make(chan struct{}) }

func (h *hub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ch
}

func (h *hub) broadcast() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.ch)
	h.ch = make(chan struct{})
}

// watchLoop notices commits of other processes (PRAGMA data_version changes) and wakes
// waiters.
func (q *fileQueue) watchLoop(ctx context.Context) {
	conn, err := q.rdb.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	var last int64 = -1
	t := time.NewTicker(q.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var v int64
		if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			continue
		}
		if last >= 0 && v != last {
			q.hub.broadcast()
		}
		last = v
	}
}
