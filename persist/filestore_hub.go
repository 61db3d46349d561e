package persist

import (
	"context"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
)

// changesKey is the one key of the file store's hub: every waiter (GetMeta in wait
// mode, streams) waits for any commit.
const changesKey = "changes"

// hub wakes waiters after commits, on internal/sqlitedb's Hub.
type hub struct{ h *sqlitedb.Hub }

func (h *hub) init() { h.h = sqlitedb.NewHub() }

// watch returns a channel closed by the next broadcast, and the release to call when
// the waiter stops waiting.
func (h *hub) watch() (<-chan struct{}, func()) { return h.h.Watch(changesKey) }

// wait is watch for a waiter that stops only at the next broadcast (which forgets the
// watch anyway).
func (h *hub) wait() <-chan struct{} {
	ch, _ := h.watch()
	return ch
}

// broadcast wakes every waiter.
func (h *hub) broadcast() { h.h.NotifyAll() }

// watchLoop notices commits of other processes (PRAGMA data_version changes, through
// sqlitedb.CommitWatch) and wakes waiters. It reads data_version every PollInterval
// while anyone waits, and not at all otherwise.
func (q *fileQueue) watchLoop(ctx context.Context) {
	conn, err := q.rdb.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	watch := sqlitedb.NewCommitWatch(ctx, conn)
	t := time.NewTicker(q.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !q.hub.h.Waiting() {
			continue
		}
		if changed, _ := watch.Changed(ctx); changed {
			q.hub.broadcast()
		}
	}
}
