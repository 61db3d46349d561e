package sqliteplane

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Config configures a SQLite plane. A nil *Config means all defaults.
type Config struct {
	// Backoff is the retry delay policy after a nack with retry. Defaults to
	// plane.BackoffDefault (1 s doubling to 5 min, ±10% jitter).
	Backoff plane.Backoff

	// Logger receives warnings from background work. Defaults to warnings on stderr.
	Logger *slog.Logger

	// MaintenanceInterval is how often the writer runs maintenance: lease expiry,
	// per-attempt timeouts, deadlines and retention. Defaults to MaintenanceIntervalDefault.
	MaintenanceInterval time.Duration

	// Now is the clock. Defaults to time.Now. Tests inject a fake clock.
	Now func() time.Time

	// PollInterval is how often the plane checks whether another process changed the file
	// (PRAGMA data_version) while someone waits. Defaults to PollIntervalDefault.
	PollInterval time.Duration

	// Retention is how long terminal invocations and their journals are kept before
	// maintenance trims them. Defaults to plane.RetentionDefault (7 days); negative keeps
	// them forever.
	Retention time.Duration

	// MaxSchedulesPerNamespace caps the schedules one namespace holds: creating one more is
	// refused with plane.ErrLimitExceeded (plane.CheckScheduleCount). Defaults to
	// plane.SchedulesPerNamespaceDefault (10,000); negative: no cap.
	MaxSchedulesPerNamespace int

	// MaxTopicsPerQueue caps the topics one queue holds: the first post to one more is
	// refused with plane.ErrLimitExceeded (plane.CheckTopicCount). Defaults to
	// plane.TopicsPerQueueDefault (100,000); negative: no cap.
	MaxTopicsPerQueue int

	// MaxWorkersPerNamespace caps the registered workers one namespace holds: registering
	// one more is refused with plane.ErrLimitExceeded (plane.CheckWorkerCount). Defaults
	// to plane.WorkersPerNamespaceDefault (100,000); negative: no cap.
	MaxWorkersPerNamespace int

	// Seed seeds the random source of the boltzmann draw and the backoff jitter. Defaults
	// to a random seed.
	Seed uint64

	// Synchronous is the SQLite synchronous mode: "FULL" (every commit durable on disk) or
	// "NORMAL" (WAL commits durable at checkpoints; a power loss may drop the last commits,
	// a process crash does not). Defaults to "FULL".
	Synchronous string
}

// Defaults.
const (
	// MaintenanceIntervalDefault is how often maintenance runs without a Config value.
	MaintenanceIntervalDefault = 250 * time.Millisecond
	// PollIntervalDefault is how often waiters check for changes by other processes.
	PollIntervalDefault = 20 * time.Millisecond
	// SynchronousDefault is the durable setting.
	SynchronousDefault = "FULL"
)

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	planekit.CommonDefaults(&out.Backoff, &out.Retention, &out.Now, &out.Logger)
	out.MaintenanceInterval = cmp.Or(out.MaintenanceInterval, MaintenanceIntervalDefault)
	out.PollInterval = cmp.Or(out.PollInterval, PollIntervalDefault)
	out.Synchronous = cmp.Or(out.Synchronous, SynchronousDefault)
	return out
}

func (c *Config) validate() error {
	switch c.Synchronous {
	case "FULL", "NORMAL":
	default:
		return plane.Invalid("synchronous mode", c.Synchronous, "use FULL or NORMAL")
	}
	if c.MaintenanceInterval < 0 || c.PollInterval < 0 {
		return plane.Invalid("interval", nil, "use a positive duration")
	}
	return nil
}
