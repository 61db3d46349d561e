package planekit

import (
	"cmp"
	"sync"
	"time"
)

// Floors keep, per queue, the smallest id a fifo claim of this process last found
// claimable. A fifo claim scans from there instead of from the start of the index: claimed
// rows leave dead entries at the start of the fifo index that only vacuum removes, and while
// an old snapshot is open (a long transaction anywhere in the database) vacuum cannot, so a
// scan from the start would step over every job claimed since. Every FloorTTL a claim scans
// from the start again (finding what other processes requeued or submitted below the
// floor), as does a claim that finds too few from the floor; this process's own submits,
// requeues and promotions lower the floor at once. pgplane's fifo claims use them.
type Floors struct {
	mu sync.Mutex
	m  map[string]floorMark
	// TTL is how long a floor is trusted; 0 means FloorTTL (tests set a longer one, so a
	// stalled machine does not expire a floor between a claim and the check of it).
	TTL time.Duration
}

type floorMark struct {
	id      string
	scanned time.Time // the last scan from the start
}

// FloorTTL is how long a floor is trusted before a claim scans from the start again.
const FloorTTL = 250 * time.Millisecond

// Get returns the floor of queue key, and whether a claim may scan from it.
func (f *Floors) Get(key string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.m[key]
	if !ok || m.id == "" || time.Since(m.scanned) > cmp.Or(f.TTL, FloorTTL) {
		return "", false
	}
	return m.id, true
}

// Raise moves the floor of a queue to oldest, the oldest job a claim took ("" when it took
// none; fullScan: the claim scanned from the start, which renews the floor's trust).
func (f *Floors) Raise(key, oldest string, fullScan bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string]floorMark)
	}
	m := f.m[key]
	if fullScan {
		m = floorMark{id: oldest, scanned: time.Now()}
	} else if oldest > m.id {
		m.id = oldest
	}
	if m.id == "" {
		delete(f.m, key)
		return
	}
	f.m[key] = m
}

// Lower moves the floor of a queue down to id (a job made claimable below it).
func (f *Floors) Lower(key, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.m[key]; ok && id < m.id {
		m.id = id
		f.m[key] = m
	}
}
