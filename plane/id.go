package plane

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// IDGenerator makes invocation ids: ULIDs, monotonic within the generator, so ids from one
// process sort in submit order. Safe for concurrent use.
type IDGenerator struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
	last    uint64 // the last id's millisecond timestamp
}

// NewIDGenerator returns a generator drawing entropy from crypto/rand.
func NewIDGenerator() *IDGenerator {
	return &IDGenerator{entropy: ulid.Monotonic(rand.Reader, 0)}
}

// New returns a fresh id for time now.
func (g *IDGenerator) New(now time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := max(ulid.Timestamp(now), g.last) // a clock stepping back must not reorder ids
	g.last = ms
	id, err := ulid.New(ms, g.entropy)
	if err != nil {
		// The monotonic entropy overflowed within one millisecond (2^80 ids): move on to
		// the next millisecond.
		g.last++
		id = ulid.MustNew(g.last, g.entropy)
	}
	return id.String()
}

// NewToken returns a random fencing token (a ULID string, unguessable in its 80 random bits).
func NewToken(now time.Time) string {
	return ulid.MustNew(ulid.Timestamp(now), rand.Reader).String()
}
