package pgplane

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifier carries wake-ups between processes: the keys changed by this process's commits
// go out through NOTIFY, coalesced (each key once per NotifyInterval, one notification per
// interval at most, from the application rather than a trigger per row), and a listening
// connection turns other processes' notifications into wake-ups of this process's waiters.
// While the listener is down (or in PollOnly mode) waiters poll instead.
type notifier struct {
	d       *Driver
	channel string

	mu      sync.Mutex
	pending map[string]struct{}
	signal  chan struct{} // a send means pending is not empty

	up atomic.Bool // the listener is connected and listening
}

// maxNotifyKeys is how many keys one interval may name; more wake every waiter ("*").
const maxNotifyKeys = 64

func newNotifier(d *Driver) *notifier {
	return &notifier{d: d, channel: d.cfg.Schema + "_wake", pending: make(map[string]struct{}), signal: make(chan struct{}, 1)}
}

func (n *notifier) listening() bool { return n.up.Load() }

// add schedules keys for the next notification.
func (n *notifier) add(keys map[string]struct{}) {
	if n.d.cfg.PollOnly {
		return
	}
	n.mu.Lock()
	if len(n.pending) <= maxNotifyKeys {
		for k := range keys {
			n.pending[k] = struct{}{}
		}
	}
	n.mu.Unlock()
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

// run sends and listens until the plane closes.
func (n *notifier) run() {
	if n.d.cfg.PollOnly {
		<-n.d.stop
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-n.d.stop; cancel() }()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); n.send(ctx) }()
	n.listen(ctx)
	wg.Wait()
}

// send sends the pending keys at most once per NotifyInterval.
func (n *notifier) send(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.signal:
		}
		n.mu.Lock()
		keys := n.pending
		n.pending = make(map[string]struct{})
		n.mu.Unlock()
		if len(keys) > 0 {
			payload := n.d.node + "\n*"
			if len(keys) <= maxNotifyKeys {
				var b strings.Builder
				b.WriteString(n.d.node)
				for k := range keys {
					b.WriteByte('\n')
					b.WriteString(k)
				}
				if b.Len() < 7900 { // NOTIFY payloads stop at 8000 bytes
					payload = b.String()
				}
			}
			if _, err := n.d.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, n.channel, payload); err != nil && ctx.Err() == nil {
				n.d.cfg.Logger.Warn("pgplane: notify failed; other processes fall back to polling", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.d.cfg.NotifyInterval):
		}
	}
}

// listen keeps a connection listening, reconnecting after a jittered delay when it drops.
// Each (re)connection wakes every local waiter, which re-checks what it may have missed.
func (n *notifier) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := n.listenOnce(ctx)
		n.up.Store(false)
		n.d.hub.NotifyAll()
		if ctx.Err() != nil {
			return
		}
		n.d.cfg.Logger.Warn("pgplane: listener dropped; polling until it reconnects", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.d.pollDelay()):
		}
	}
}

func (n *notifier) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, n.d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize()); err != nil {
		return err
	}
	n.up.Store(true)
	n.d.hub.NotifyAll() // changes made while no one listened
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		lines := strings.Split(note.Payload, "\n")
		if len(lines) == 0 || lines[0] == n.d.node {
			continue // our own: local waiters were woken at commit
		}
		keys := make(map[string]struct{}, len(lines)-1)
		for _, k := range lines[1:] {
			if k == "*" {
				n.d.hub.NotifyAll()
				keys = nil
				break
			}
			keys[k] = struct{}{}
		}
		n.d.hub.Notify(keys)
	}
}
