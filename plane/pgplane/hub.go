package pgplane

import "sync"

// hub wakes this process's waiters. A waiter watches a key (an invocation, a journal, a
// queue, a queue's room) before it reads, then waits on the channel, so a commit between its
// read and its wait is never missed. notify closes the key's channel; the next watch makes
// a fresh one.
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
	h.mu.Lock()
	for k := range keys {
		if w := h.keys[k]; w != nil {
			close(w.ch)
			delete(h.keys, k)
		}
	}
	h.mu.Unlock()
}

// notifyAll wakes every waiter (the listener reconnected and may have missed changes, or
// the plane closed).
func (h *hub) notifyAll() {
	h.mu.Lock()
	for k, w := range h.keys {
		close(w.ch)
		delete(h.keys, k)
	}
	h.mu.Unlock()
}

func invocationKey(id string) string      { return "i:" + id }
func journalKey(journal string) string    { return "j:" + journal }
func queueKey(namespace, q string) string { return "q:" + namespace + "/" + q }
func roomKey(namespace, q string) string  { return "r:" + namespace + "/" + q }

// lines are the in-process arrival order of submits blocked on a full queue: only the head
// of a line retries, so waiters are admitted first come, first served.
type lines struct {
	mu    sync.Mutex
	lines map[string][]*ticket
}

type ticket struct{ turn chan struct{} }

// join puts a new ticket at the end of key's line.
func (l *lines) join(key string) *ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines == nil {
		l.lines = make(map[string][]*ticket)
	}
	tk := &ticket{turn: make(chan struct{})}
	if len(l.lines[key]) == 0 {
		close(tk.turn)
	}
	l.lines[key] = append(l.lines[key], tk)
	return tk
}

// leave removes tk from key's line and hands the turn to the next.
func (l *lines) leave(key string, tk *ticket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := l.lines[key]
	for i, x := range line {
		if x == tk {
			line = append(line[:i], line[i+1:]...)
			if i == 0 && len(line) > 0 {
				close(line[0].turn)
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

// ahead reports whether someone other than tk waits in key's line.
func (l *lines) ahead(key string, tk *ticket) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := l.lines[key]
	return len(line) > 0 && line[0] != tk
}
