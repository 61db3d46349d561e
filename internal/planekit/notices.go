package planekit

import (
	"strings"
	"sync"
)

// Notices coalesce the hub keys this process's commits changed into notifications for the
// other processes sharing its database (pgplane sends them with NOTIFY, at most one per
// interval): each key once per notification, every waiter ("*") past MaxNoticeKeys keys or
// a payload's size bound. A notification is its sender's node name and its keys, one a
// line; Deliver wakes a receiver's hub with it.
type Notices struct {
	node string

	mu      sync.Mutex
	pending map[string]struct{}
	signal  chan struct{} // a send means pending is not empty
}

// MaxNoticeKeys is how many keys one notification may name; more wake every waiter ("*").
const MaxNoticeKeys = 64

// NewNotices returns the notices of the process named node.
func NewNotices(node string) *Notices {
	return &Notices{node: node, pending: make(map[string]struct{}), signal: make(chan struct{}, 1)}
}

// Add schedules keys for the next notification.
func (n *Notices) Add(keys map[string]struct{}) {
	n.mu.Lock()
	if len(n.pending) <= MaxNoticeKeys {
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

// Pending receives when keys were added since the last Take.
func (n *Notices) Pending() <-chan struct{} { return n.signal }

// Take returns the payload of a notification of the pending keys ("" when none), under
// maxBytes (or "*": every waiter), and clears them.
func (n *Notices) Take(maxBytes int) string {
	n.mu.Lock()
	keys := n.pending
	n.pending = make(map[string]struct{})
	n.mu.Unlock()
	if len(keys) == 0 {
		return ""
	}
	payload := n.node + "\n*"
	if len(keys) <= MaxNoticeKeys {
		var b strings.Builder
		b.WriteString(n.node)
		for k := range keys {
			b.WriteByte('\n')
			b.WriteString(k)
		}
		if b.Len() < maxBytes {
			payload = b.String()
		}
	}
	return payload
}

// Deliver wakes the waiters of hub that a notification's payload names (every waiter for
// "*"); a notification of this process is left alone: its waiters were woken at commit.
func (n *Notices) Deliver(hub *Hub, payload string) {
	lines := strings.Split(payload, "\n")
	if len(lines) == 0 || lines[0] == n.node {
		return
	}
	keys := make(map[string]struct{}, len(lines)-1)
	for _, k := range lines[1:] {
		if k == "*" {
			hub.NotifyAll()
			return
		}
		keys[k] = struct{}{}
	}
	hub.Notify(keys)
}
