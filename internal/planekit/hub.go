package planekit

import "sync"

// Hub wakes waiters after the commits that concern them. A waiter watches a key (a row, a
// queue, anything the caller names) before it reads, then waits on the channel, so a commit
// between its read and its wait is never missed. Notify closes the key's channel; the next
// Watch makes a fresh one. The zero Hub is not usable; make one with NewHub. Safe for
// concurrent use.
type Hub struct {
	mu   sync.Mutex
	keys map[string]*watch
	anys map[string][]*anyWatch // the waiters of several keys (WatchAny), by key
}

// anyWatch is one waiter of several keys.
type anyWatch struct {
	ch     chan struct{}
	closed bool
}

func (a *anyWatch) wake() {
	if !a.closed {
		a.closed = true
		close(a.ch)
	}
}

type watch struct {
	ch       chan struct{}
	watchers int
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{keys: make(map[string]*watch), anys: make(map[string][]*anyWatch)}
}

// Watch returns a channel closed at the next Notify of key (or NotifyAll), and a release
// func the waiter must call when it stops waiting.
func (h *Hub) Watch(key string) (<-chan struct{}, func()) {
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

// Notify wakes every waiter of the keys.
func (h *Hub) Notify(keys map[string]struct{}) { h.NotifyExcept(keys, nil) }

// NotifyExcept wakes every waiter of the keys but the one-key waiters (Watch) of the keys
// in except (pgplane: the queues whose claimable jobs a commit handed to parked claimers,
// whose other parked claimers would find nothing). The waiters of several keys (WatchAny:
// claims over several queues) are woken even there: no handoff served them, and their
// offers may take what the parked claimers could not.
func (h *Hub) NotifyExcept(keys, except map[string]struct{}) {
	if len(keys) == 0 {
		return
	}
	h.mu.Lock()
	for k := range keys {
		if _, ok := except[k]; !ok {
			if w := h.keys[k]; w != nil {
				close(w.ch)
				delete(h.keys, k)
			}
		}
		if as := h.anys[k]; as != nil {
			for _, a := range as {
				a.wake()
			}
			delete(h.anys, k)
		}
	}
	h.mu.Unlock()
}

// NotifyAll wakes every waiter (another process changed the file, or the store closed).
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	for k, w := range h.keys {
		close(w.ch)
		delete(h.keys, k)
	}
	for k, as := range h.anys {
		for _, a := range as {
			a.wake()
		}
		delete(h.anys, k)
	}
	h.mu.Unlock()
}

// Waiting reports whether anyone waits.
func (h *Hub) Waiting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.keys) > 0 || len(h.anys) > 0
}

// WatchAny is Watch over several keys at once: the channel closes at the next Notify of
// any of them (or NotifyAll). The waiter must call release when it stops waiting.
func (h *Hub) WatchAny(keys []string) (<-chan struct{}, func()) {
	a := &anyWatch{ch: make(chan struct{})}
	h.mu.Lock()
	for _, k := range keys {
		h.anys[k] = append(h.anys[k], a)
	}
	h.mu.Unlock()
	return a.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, k := range keys {
			as := h.anys[k]
			for i, x := range as {
				if x == a {
					as = append(as[:i:i], as[i+1:]...)
					break
				}
			}
			if len(as) == 0 {
				delete(h.anys, k)
			} else {
				h.anys[k] = as
			}
		}
	}
}
