package pgplane

import (
	"cmp"
	"log/slog"
	"regexp"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Config configures a PostgreSQL plane. A nil *Config means all defaults.
type Config struct {
	// Schema is the PostgreSQL schema holding every table of the plane, so it coexists with
	// other tables in one database. 1–63 bytes of [a-z0-9_], not starting with a digit.
	// Defaults to SchemaDefault ("lakeshore").
	Schema string

	// Backoff is the retry delay policy after a nack with retry. Defaults to
	// plane.BackoffDefault (1 s doubling to 5 min, ±10% jitter).
	Backoff plane.Backoff

	// Logger receives warnings from background work. Defaults to warnings on stderr.
	Logger *slog.Logger

	// MaintenanceInterval is how often the maintenance leader runs maintenance (lease
	// expiry, per-attempt timeouts, deadlines, retention), and how often the others check
	// whether the leader's lease has lapsed. Defaults to MaintenanceIntervalDefault.
	MaintenanceInterval time.Duration

	// LeaderTTL is how long the maintenance leader's lease lives without renewal: after a
	// leader dies, another process takes over within about this long. Defaults to
	// LeaderTTLDefault.
	LeaderTTL time.Duration

	// Now is the plane's clock for every stored time: leases, deadlines, due times,
	// schedules. Defaults to the database's clock, read as the machine's (time.Now)
	// corrected by its offset from PostgreSQL's clock_timestamp(), measured when the plane
	// starts and again on every maintenance beat (every process's, leader or not), so that
	// processes on machines whose clocks disagree agree on when a lease ends (docs/operations.md,
	// "One clock"). Tests inject a fake clock, used as it is; the leader lease always uses
	// the database's clock.
	Now func() time.Time

	// machineClock is the machine's clock that the database's corrects (time.Now); a test
	// of a machine whose clock is off sets it. Unused when Now is set.
	machineClock func() time.Time
	// followDatabase: Now was not set, so the plane's clock is the database's.
	followDatabase bool

	// OnDemand makes Open's pool open connections only as they are used and prepare nothing
	// ahead: Open's warm pool (pool_min_conns connections opened and their hot statements
	// prepared before it returns, docs/operations.md "Sizing the pool") is skipped, unless
	// the URL sets pool_min_conns. For a program that runs one command and exits (the
	// lakeshore CLI's verbs other than worker and map), which would otherwise wait for 8
	// connections and their preparing before a one-row command: a `lakeshore submit` to a
	// PostgreSQL on this machine took 158 ms with the warm pool against 97 ms without
	// (docs/benchmarks-pg.md, "The first second"). Defaults to false: a plane warms its pool.
	OnDemand bool

	// PollOnly turns LISTEN/NOTIFY off, for PgBouncer in transaction pooling mode (which
	// cannot hold a LISTEN): waiters then re-check every PollInterval, and changes made by
	// other processes are seen within about that long.
	PollOnly bool

	// PollInterval is how often waiters re-check while there is no listener (PollOnly, or
	// the listening connection dropped and is reconnecting), ±20% jitter. Defaults to
	// PollIntervalDefault.
	PollInterval time.Duration

	// NotifyInterval bounds the rate of NOTIFY: the keys changed by the commits of one
	// interval go out together, one notification per interval at most. Defaults to
	// NotifyIntervalDefault.
	NotifyInterval time.Duration

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
}

// Defaults.
const (
	// SchemaDefault is the schema of a plane configured without one.
	SchemaDefault = "lakeshore"
	// MaintenanceIntervalDefault is how often maintenance runs without a Config value.
	MaintenanceIntervalDefault = time.Second
	// LeaderTTLDefault is the maintenance leader's lease without a Config value.
	LeaderTTLDefault = 15 * time.Second
	// PollIntervalDefault is the polling fallback's period without a Config value.
	PollIntervalDefault = time.Second
	// NotifyIntervalDefault is the NOTIFY coalescing window without a Config value.
	NotifyIntervalDefault = 5 * time.Millisecond
)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// validateSchema checks the schema name v, given as field.
func validateSchema(field, v string) error {
	if !schemaName.MatchString(v) {
		return plane.Invalid(field, v, "use 1–63 bytes of [a-z0-9_], not starting with a digit")
	}
	return nil
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	out.Schema = cmp.Or(out.Schema, SchemaDefault)
	out.followDatabase = out.Now == nil
	if out.machineClock == nil {
		out.machineClock = time.Now
	}
	planekit.CommonDefaults(&out.Backoff, &out.Retention, &out.Now, &out.Logger)
	out.MaintenanceInterval = cmp.Or(out.MaintenanceInterval, MaintenanceIntervalDefault)
	out.LeaderTTL = cmp.Or(out.LeaderTTL, LeaderTTLDefault)
	out.PollInterval = cmp.Or(out.PollInterval, PollIntervalDefault)
	out.NotifyInterval = cmp.Or(out.NotifyInterval, NotifyIntervalDefault)
	return out
}

func (c *Config) validate() error {
	if err := validateSchema("schema", c.Schema); err != nil {
		return err
	}
	if c.MaintenanceInterval < 0 || c.LeaderTTL < 0 || c.PollInterval < 0 || c.NotifyInterval < 0 {
		return plane.Invalid("interval", nil, "use positive durations")
	}
	return nil
}
