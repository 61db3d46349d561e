package filestore

import "github.com/lakeshore-dev/lakeshore/internal/planekit"

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

// broadcast wakes every waiter (another process committed, the queue closes). Commits
// of other processes are noticed by the writer (startWriter's Foreign): at the start of
// each transaction, and every PollInterval while anyone waits (none otherwise).
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
