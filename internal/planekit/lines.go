package planekit

import "sync"

// Lines are the in-process arrival order of submits blocked on a full queue: only the head
// of a line retries, so waiters are admitted first come, first served, and new submits
// queue behind them. The zero Lines is ready to use. Safe for concurrent use.
type Lines struct {
	mu    sync.Mutex
	lines map[string][]*Ticket
}

// Ticket is a place in a line. Turn is closed when it reaches the head.
type Ticket struct{ Turn chan struct{} }

// Join puts a new ticket at the end of key's line.
func (l *Lines) Join(key string) *Ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines == nil {
		l.lines = make(map[string][]*Ticket)
	}
	tk := &Ticket{Turn: make(chan struct{})}
	if len(l.lines[key]) == 0 {
		close(tk.Turn)
	}
	l.lines[key] = append(l.lines[key], tk)
	return tk
}

// Leave removes tk from key's line and hands the turn to the next.
func (l *Lines) Leave(key string, tk *Ticket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := l.lines[key]
	for i, x := range line {
		if x == tk {
			line = append(line[:i:i], line[i+1:]...)
			if i == 0 && len(line) > 0 {
				close(line[0].Turn)
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

// Ahead reports whether someone other than tk waits in key's line.
func (l *Lines) Ahead(key string, tk *Ticket) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := l.lines[key]
	return len(line) > 0 && line[0] != tk
}
