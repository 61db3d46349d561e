package filestore

import (
	"context"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
)

// changesKey is the hub key of every commit: streams and Changes wait for any commit.
// A waiting GetMeta watches only its partition's key (partitionKey), notified by
// commits that change what is ready in that partition (puts, field updates, clears,
// consumption resets), so producers of other partitions never wake it.
const changesKey = "changes"

// partitionKey is the hub key of the commits that change partition's samples.
func partitionKey(partition string) string { return "p\x1f" + partition }

// hub wakes waiters after commits, on internal/sqlitedb's Hub.
type hub struct{ h *planekit.Hub }

func (h *hub) init() { h.h = planekit.NewHub() }

// watch returns a channel closed by the next broadcast, and the release to call when
// the waiter stops waiting.
func (h *hub) watch() (<-chan struct{}, func()) { return h.h.Watch(changesKey) }

// watchPartition returns a channel closed by the next commit that changes partition
// (or by a broadcast to everyone), and its release.
func (h *hub) watchPartition(partition string) (<-chan struct{}, func()) {
	return h.h.Watch(partitionKey(partition))
}

// wait is watch for a waiter that stops only at the next broadcast (which forgets the
// watch anyway).
func (h *hub) wait() <-chan struct{} {
	ch, _ := h.watch()
	return ch
}

// broadcast wakes every waiter (another process committed, the queue closes).
func (h *hub) broadcast() { h.h.NotifyAll() }

// notifyCommit wakes the waiters of any commit (streams, Changes), and the waiters of
// the partitions the commit changed.
func (h *hub) notifyCommit(partitions map[string]struct{}) {
	keys := make(map[string]struct{}, len(partitions)+1)
	keys[changesKey] = struct{}{}
	for p := range partitions {
		keys[partitionKey(p)] = struct{}{}
	}
	h.h.Notify(keys)
}

// watchLoop notices commits of other processes and wakes every waiter (which
// partitions another process changed is not known here). Every PollInterval while
// anyone waits, and not at all otherwise, it asks the writer whether PRAGMA
// data_version moved on the write connection (writer.othersCommitted): this process's
// own commits, all made on that connection, never move it, so they wake only the
// waiters they concern (notifyCommit).
func (q *fileQueue) watchLoop(ctx context.Context) {
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
		if q.w.othersCommitted(ctx) {
			q.hub.broadcast()
		}
	}
}
