package pgplane

import (
	"sync"
	"time"
)

// Known-empty queues. A claim with Wait that finds nothing claimable is usually followed,
// a moment later, by another claim of the same queue from the same worker (the slots its
// first claim did not fill, a settle's claim for the freed slot): against PostgreSQL each
// is a transaction and a round trip that finds nothing again. So an empty claim leaves a
// mark on its queue, held on the hub watch it took before it claimed: every commit of this
// process that makes jobs of the queue claimable, and every notification from another
// process, closes that watch. While the mark stands, a claim of the queue skips its
// statements (nothing is claimable) and a waiting one parks for the direct handoff at once.
//
// A mark also ends when the earliest delayed job it knew of comes due, after one poll
// interval (rows that come back without a notification, a claim of another process rolled
// back, are found by then), and whenever the listener is down (PollOnly included): without
// notifications a queue's emptiness cannot be known.
type emptyQueues struct {
	mu    sync.Mutex
	marks map[string]*emptyMark
}

type emptyMark struct {
	changed <-chan struct{} // closed by the hub when the queue may have claimable jobs
	release func()          // the mark's hold on the watch
	next    int64           // when the earliest waiting job is due (Unix ms; 0: none known)
	until   time.Time       // the mark's end at the latest
}

// mark records that a claim of key found nothing, from changed, the watch of key taken
// before that claim began. A watch already closed, or replaced, means a commit or a
// notification came since: no mark.
func (d *Driver) markEmpty(key string, changed <-chan struct{}, next int64) {
	if !d.notifier.listening() {
		return
	}
	select {
	case <-changed:
		return
	default:
	}
	ch, release := d.hub.watch(key)
	if ch != changed {
		release()
		return
	}
	m := &emptyMark{changed: ch, release: release, next: next, until: time.Now().Add(d.cfg.PollInterval)}
	e := &d.empty
	e.mu.Lock()
	if e.marks == nil {
		e.marks = make(map[string]*emptyMark)
	}
	old := e.marks[key]
	e.marks[key] = m
	e.mu.Unlock()
	if old != nil {
		old.release()
	}
}

// knownEmpty reports whether key is known to have no claimable job at nowMS (the plane's
// clock), and when its earliest waiting job is due (0: none known).
func (d *Driver) knownEmpty(key string, nowMS int64) (next int64, ok bool) {
	e := &d.empty
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.marks[key]
	if m == nil {
		return 0, false
	}
	stale := !d.notifier.listening() || time.Now().After(m.until) || (m.next > 0 && nowMS >= m.next)
	if !stale {
		select {
		case <-m.changed:
			stale = true
		default:
		}
	}
	if stale {
		delete(e.marks, key)
		m.release()
		return 0, false
	}
	return m.next, true
}
