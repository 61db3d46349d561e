package planekit

import (
	"cmp"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// CommonDefaults fills in the defaults of the Config fields both SQL planes have: the retry
// backoff (plane.BackoffDefault), the retention of terminal invocations
// (plane.RetentionDefault), the clock (time.Now) and the logger (warnings on stderr).
func CommonDefaults(backoff *plane.Backoff, retention *time.Duration, now *func() time.Time, logger **slog.Logger) {
	if *backoff == (plane.Backoff{}) {
		*backoff = plane.BackoffDefault()
	}
	*retention = cmp.Or(*retention, plane.RetentionDefault)
	if *now == nil {
		*now = time.Now
	}
	if *logger == nil {
		*logger = slog.New(slog.NewTextHandler(stderr{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

// stderr writes to os.Stderr as it is at each write.
type stderr struct{}

func (stderr) Write(p []byte) (int, error) { return os.Stderr.Write(p) }

// NewRand returns a plane's random source (the boltzmann draw, the backoff jitter) seeded
// with seed, or with a random seed when seed is 0.
func NewRand(seed uint64) *rand.Rand {
	if seed == 0 {
		seed = rand.Uint64()
	}
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// LockedRand is a plane's random source that concurrent transactions share (pgplane's),
// each draw under its lock.
type LockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewLockedRand returns a LockedRand seeded as NewRand seeds.
func NewLockedRand(seed uint64) *LockedRand { return &LockedRand{r: NewRand(seed)} }

// Float64 draws a number in [0, 1).
func (l *LockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}
