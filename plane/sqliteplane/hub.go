package sqliteplane

import "sync"

// hub wakes waiters after the commits that concern them. A waiter watches a key (an
// invocation, a journal, a queue) before it reads, then waits on the channel, so a commit
// between its read and its wait is never missed. notify closes the key's channel; the next
// watch makes a fresh one.
type hub struct {
	mu   sync.Mutex
	keys map[string]*watch
}

type watch struct {
	ch       chan struct{}
	watchers int
}

func newHub() *hub { return &hub{keys: make(map[string]*watch)} }

// watch returns a channel closed at the next notify of key, and a release func the waiter
// must call when it stops waiting.
func (h *hub) watch(key string) (<-chan struct{}, func()) {
	h.mu.Lock()
	w := h.keys[key]
	if w == nil {
		w = &watch{ch: make(chan struct{})}
		h.keys[key] = w
	}
	w.watchers++
	h.mu.Unlock()
	return w.ch, func() {
		h.mu.Lock()
		w.watchers--
		if w.watchers == 0 && h.keys[key] == w {
			delete(h.keys, key)
		}
		h.mu.Unlock()
	}
}

// notify wakes every waiter of the keys.
func (h *hub) notify(keys map[string]struct{}) {
	if len(keys) == 0 {
		return
	}
	h.mu.Lock()
	for k := range keys {
		if w := h.keys[k]; w != nil {
			close(w.ch)
			delete(h.keys, k)
		}
	}
	h.mu.Unlock()
}

// notifyAll wakes every waiter (another process changed the file, or the plane closed).
func (h *hub) notifyAll() {
	h.mu.Lock()
	for k, w := range h.keys {
		close(w.ch)
		delete(h.keys, k)
	}
	h.mu.Unlock()
}

// waiting reports whether anyone waits.
func (h *hub) waiting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.keys) > 0
}

func invocationKey(id string) string      { return "i:" + id }
func journalKey(journal string) string    { return "j:" + journal }
func queueKey(namespace, q string) string { return "q:" + namespace + "/" + q }
