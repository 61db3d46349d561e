package pgplane

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/pgdb"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
)

// notifier carries wake-ups between processes: the keys changed by this process's commits
// go out through NOTIFY, coalesced (planekit.Notices: each key once per NotifyInterval, one
// notification per interval at most, from the application rather than a trigger per row),
// and a listening connection turns other processes' notifications into wake-ups of this
// process's waiters. While the listener is down (or in PollOnly mode) waiters poll instead.
type notifier struct {
	d       *Driver
	channel string
	notices *planekit.Notices
	up      atomic.Bool // the listener is connected and listening
}

func newNotifier(d *Driver) *notifier {
	return &notifier{d: d, channel: d.cfg.Schema + "_wake", notices: planekit.NewNotices(d.node)}
}

func (n *notifier) listening() bool { return n.up.Load() }

// add schedules keys for the next notification.
func (n *notifier) add(keys map[string]struct{}) {
	if !n.d.cfg.PollOnly {
		n.notices.Add(keys)
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

// notifySQL sends one notification: channel, payload.
const notifySQL = `SELECT pg_notify($1, $2)`

// send sends the pending keys at most once per NotifyInterval.
func (n *notifier) send(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.notices.Pending():
		}
		// NOTIFY payloads stop at 8000 bytes.
		if payload := n.notices.Take(7900); payload != "" {
			if _, err := n.d.pool.Exec(ctx, notifySQL, n.channel, payload); err != nil && ctx.Err() == nil {
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

// listen keeps a connection listening (pgdb.Listen), reconnecting after a jittered delay
// when it drops. Each (re)connection and each drop wakes every local waiter, which
// re-checks what it may have missed.
func (n *notifier) listen(ctx context.Context) {
	pgdb.Listen(ctx, n.d.pool.Config().ConnConfig, n.channel, pgdb.Listener{
		Up: func(up bool) {
			n.up.Store(up)
			n.d.hub.NotifyAll() // changes made while no one listened
		},
		Notified: func(payload string) { n.notices.Deliver(n.d.hub, payload) },
		Dropped: func(err error) {
			n.d.cfg.Logger.Warn("pgplane: listener dropped; polling until it reconnects", "err", err)
		},
		Delay: n.d.pollDelay,
	})
}
