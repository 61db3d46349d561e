package lakeshore

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
)

// Environment variables read by Open and New.
const (
	// EnvURL names the process's default plane when set (an http(s):// or
	// postgres(ql):// URL).
	EnvURL = "LAKESHORE_URL"
	// EnvHome is the directory of the embedded default plane. Defaults to ~/.lakeshore.
	EnvHome = "LAKESHORE_HOME"
	// EnvNamespace is the default namespace. Defaults to "default".
	EnvNamespace = "LAKESHORE_NAMESPACE"
	// EnvToken is the bearer token sent to an http(s):// plane when Config.Token is empty.
	EnvToken = httpplane.EnvToken
)

// DefaultDBName is the file name of the embedded default plane inside $LAKESHORE_HOME.
const DefaultDBName = "lakeshore.db"

// targetRule lists the targets Open accepts, for its error message.
const targetRule = `use "" (the process default: $LAKESHORE_URL, else $LAKESHORE_HOME/lakeshore.db), ` +
	`":memory:", a file path, sqlite://path, http(s)://host[:port] or postgres://…`

// Config configures a Dispatch. A nil *Config means all defaults.
type Config struct {
	// HTTP configures the HTTP plane that Open connects to for http(s):// targets and
	// $LAKESHORE_URL (HTTP client, bearer token, retries). Ignored by New. Defaults to nil:
	// httpplane's defaults (token from $LAKESHORE_TOKEN).
	HTTP *httpplane.Config

	// Logger receives warnings from the SDK (e.g. a failed heartbeat in Working) and, when
	// SQLite.Logger is nil, from the SQLite plane. Defaults to warnings on stderr.
	Logger *slog.Logger

	// Namespace is the namespace of queues opened without QueueOptions.Namespace. Defaults
	// to $LAKESHORE_NAMESPACE, else NamespaceDefault ("default").
	Namespace string

	// Now is the clock the SDK reads (Trim's cutoff, a token's creation and expiry, a
	// worker's start). Defaults to the plane's clock (plane.ClockOf: the SQLite plane's
	// Config.Now, the PostgreSQL plane's database clock), else time.Now (over HTTP), so
	// that times the SDK stamps are compared on the clock the plane compares them on
	// (docs/operations.md, "One clock"). A test with a fake clock sets the plane's clock
	// (SQLite.Now), which this then follows.
	Now func() time.Time

	// Postgres configures the PostgreSQL plane that Open starts for postgres:// and
	// postgresql:// targets (schema, maintenance lease, poll-only mode for PgBouncer).
	// Ignored by New. Defaults to nil: pgplane's defaults (schema "lakeshore").
	Postgres *pgplane.Config

	// SQLite configures the SQLite plane that Open starts for ":memory:", a file path or
	// sqlite://. Ignored by New. Defaults to nil: sqliteplane's defaults (synchronous=FULL,
	// 7-day retention, …).
	SQLite *sqliteplane.Config

	// WorkerID identifies this process's claims to the plane (shown as Invocation.Worker).
	// Defaults to "<hostname>:<pid>".
	WorkerID string
}

func (c *Config) withDefaults(getenv func(string) string) Config {
	var out Config
	if c != nil {
		out = *c
	}
	out.Namespace = cmp.Or(out.Namespace, getenv(EnvNamespace), NamespaceDefault)
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if out.WorkerID == "" {
		host, _ := os.Hostname()
		out.WorkerID = cmp.Or(host, "localhost") + ":" + strconv.Itoa(os.Getpid())
	}
	return out
}

// Dispatch is a connection to one dispatch plane: the embedded SQLite plane (a file or
// ":memory:"), a server over HTTP or a PostgreSQL database. It hands out Queue handles. It
// holds no state of its own beyond its configuration: every call goes to the plane, so any
// number of Dispatches, in any number of processes, may share one plane. Safe for
// concurrent use.
type Dispatch struct {
	drv    plane.Driver
	owned  bool // Close closes drv
	cfg    Config
	topics *plane.IDGenerator // names of auto-named topics
}

// Open connects to the plane named by target and returns a Dispatch that Close releases.
// Targets:
//
//   - "": the process default: $LAKESHORE_URL when set, else the SQLite file
//     $LAKESHORE_HOME/lakeshore.db ($LAKESHORE_HOME defaults to ~/.lakeshore, created on
//     first use with mode 0700).
//   - ":memory:": an in-process plane that lives until Close (tests, examples).
//   - a file path, or sqlite://path: a SQLite plane in that file, created when missing.
//     Several processes may open one file at once.
//   - http://…, https://…: the HTTP plane (a `lakeshore serve` server; bearer token from
//     $LAKESHORE_TOKEN).
//   - postgres://…, postgresql://…: the PostgreSQL plane in that database (pgplane.Open:
//     the schema is migrated on first use; Config.Postgres configures it, and so do the
//     URL parameters schema, poll_only, poll_interval and retention, see
//     pgplane.ParseURL). Errors name a refused connection, wrong credentials, a missing
//     database or a newer schema.
//
// Any other scheme is an *InvalidError listing these forms, as are a target with leading or
// trailing white space, "sqlite:…" without "//" (sqlite://:memory: is ":memory:"), a
// directory and a libpq keyword/value connection string ("host=db password=…", which
// would name a file); each shows the target with its password masked (plane.RedactURL).
// ctx bounds the opening only.
func Open(ctx context.Context, target string, cfg *Config) (*Dispatch, error) {
	c := cfg.withDefaults(os.Getenv)
	if err := plane.ValidateNamespace(c.Namespace); err != nil {
		return nil, err
	}
	drv, err := openDriver(ctx, target, c)
	if err != nil {
		return nil, err
	}
	d := newDispatch(drv, c)
	d.owned = true
	return d, nil
}

// OpenDriver opens the plane named by target, as Open does, and returns its driver, which
// the caller closes: for programs that serve a plane (`lakeshore serve` hands it to
// server.New) rather than use it. cfg's HTTP, SQLite and Logger apply. Errors: as Open.
func OpenDriver(ctx context.Context, target string, cfg *Config) (plane.Driver, error) {
	return openDriver(ctx, target, cfg.withDefaults(os.Getenv))
}

func openDriver(ctx context.Context, target string, c Config) (plane.Driver, error) {
	path, err := resolveTarget(target, os.Getenv, os.UserHomeDir)
	if err != nil {
		return nil, err
	}
	if plane.IsPostgresURL(path) {
		var pc pgplane.Config
		if c.Postgres != nil {
			pc = *c.Postgres
		}
		if pc.Logger == nil {
			pc.Logger = c.Logger
		}
		return pgplane.Open(ctx, path, &pc) // pgplane names the host, user or database
	}
	if path != ":memory:" && !isHTTP(path) {
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return nil, plane.Invalid("target", plane.RedactURL(target), "it is a directory; name a database file, e.g. "+filepath.Join(path, DefaultDBName))
		}
	}
	if isHTTP(path) {
		return httpplane.New(path, c.HTTP)
	}
	var sq sqliteplane.Config
	if c.SQLite != nil {
		sq = *c.SQLite
	}
	if sq.Logger == nil {
		sq.Logger = c.Logger
	}
	drv, err := sqliteplane.Open(ctx, path, &sq)
	if err != nil {
		return nil, err // sqliteplane names the path
	}
	return drv, nil
}

// CheckTarget returns the error Open would return for target before opening anything, or
// nil: a URL of a scheme Open does not serve, a PostgreSQL scheme in another case than
// lower (plane.PostgresURLRule), a PostgreSQL or HTTP URL without its "//", a libpq
// keyword/value string, white space around it (each an *InvalidError, the target shown
// with its password masked); for "", the same of $LAKESHORE_URL when it is set. For a
// program that chooses a store of its own by the kind of target (the lakeshore command's
// data verbs, whose data queues live beside a SQLite plane in a directory of their own):
// what Open refuses, it refuses too, rather than take it for that directory.
func CheckTarget(target string) error {
	if target == "" && os.Getenv(EnvURL) == "" {
		return nil // the process default: $LAKESHORE_HOME, nothing to check
	}
	_, err := resolveTarget(target, os.Getenv, func() (string, error) { return "", nil }) // not reached: target or $LAKESHORE_URL is set
	return err
}

// New returns a Dispatch over an explicit driver (a plane opened by the caller, e.g. with
// sqliteplane.Open). Dispatch.Close does not close drv: its opener does. An invalid
// Config.Namespace is reported by Dispatch.Queue.
func New(drv plane.Driver, cfg *Config) *Dispatch {
	return newDispatch(drv, cfg.withDefaults(os.Getenv))
}

func newDispatch(drv plane.Driver, c Config) *Dispatch {
	if c.Now == nil {
		c.Now = plane.ClockOf(drv)
	}
	return &Dispatch{drv: drv, cfg: c, topics: plane.NewIDGenerator()}
}

// Close releases the plane when Open opened it (for SQLite: waits for pending writes,
// stops background work, closes the file). Calls after Close fail with ErrClosed. Safe to
// call twice. For a Dispatch made by New it does nothing: the driver's opener closes it.
func (d *Dispatch) Close() error {
	if !d.owned {
		return nil
	}
	return d.drv.Close()
}

// Driver returns the plane under d, for what the SDK does not wrap. The SDK wraps every
// verb of the Driver (QueueStats, Workers, Queue.List, Admin for tokens, trims and
// maintenance); the lakeshore CLI uses no Driver call.
func (d *Dispatch) Driver() plane.Driver { return d.drv }

// Namespace returns the namespace of queues opened without QueueOptions.Namespace.
func (d *Dispatch) Namespace() string { return d.cfg.Namespace }

// Queue returns a handle on queue name (1–128 bytes of [A-Za-z0-9._-], not starting with
// '.' or '-'). Queues need no creation: a handle is cheap, holds no state, and any number
// may exist for one queue. opts sets the handle's claim order and lease (nil: fifo, 30 s).
// Errors: *InvalidError naming the bad name, kind, temperature or lease.
func (d *Dispatch) Queue(name string, opts *QueueOptions) (*Queue, error) {
	if err := plane.ValidateName("queue name", name); err != nil {
		return nil, err
	}
	o := opts.withDefaults(d.cfg.Namespace)
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &Queue{d: d, name: name, opts: o}, nil
}

// keywordTargetRE matches a libpq keyword/value connection string ("host=db port=5432
// user=lake password=…"), which pgplane.Open would take but which as a target reads as a
// file path: a SQLite plane in a file named after it, password included, beside the
// database meant (refused by resolveTarget).
var keywordTargetRE = regexp.MustCompile(`(?i)^(host|hostaddr|port|dbname|user|password|sslmode|service)\s*=`)

// schemeNoSlashesRE matches the scheme of a PostgreSQL or HTTP URL written without its
// "//" ("postgres:user:pw@db", "http:127.0.0.1:7077", "Postgres:/db"), which as a target
// reads as a file path: a SQLite plane in a file named after it, password included, beside
// the plane meant (refused by resolveTarget, as "sqlite:path" is).
var schemeNoSlashesRE = regexp.MustCompile(`(?i)^(postgres|postgresql|http|https):`)

// schemeRE matches a URL scheme prefix ("name://").
var schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// isHTTP reports whether a resolved target is an http(s) URL.
func isHTTP(path string) bool {
	m := schemeRE.FindStringSubmatch(path)
	return m != nil && (strings.EqualFold(m[1], "http") || strings.EqualFold(m[1], "https"))
}

// resolveTarget turns an Open target into the path of a SQLite plane (":memory:" or a file)
// or the URL of an HTTP plane, creating $LAKESHORE_HOME for the SQLite process default.
func resolveTarget(target string, getenv func(string) string, userHome func() (string, error)) (string, error) {
	if target == "" {
		if u := getenv(EnvURL); u != "" {
			if plane.IsMiscasedPostgresURL(u) {
				return "", plane.Invalid(EnvURL, plane.RedactURL(u), plane.PostgresURLRule)
			}
			if !isHTTP(u) && !plane.IsPostgresURL(u) {
				return "", plane.Invalid(EnvURL, plane.RedactURL(u), "use http(s)://host[:port] or postgres://user@host/database, or unset it to use the embedded SQLite plane")
			}
			return u, nil
		}
		home := getenv(EnvHome)
		if home == "" {
			h, err := userHome()
			if err != nil {
				return "", fmt.Errorf("find the default plane: set %s: %w", EnvHome, err)
			}
			home = filepath.Join(h, ".lakeshore")
		}
		if err := os.MkdirAll(home, 0o700); err != nil {
			return "", fmt.Errorf("create %s: %w", home, err)
		}
		return filepath.Join(home, DefaultDBName), nil
	}
	if target == ":memory:" {
		return target, nil
	}
	if strings.TrimSpace(target) != target {
		return "", plane.Invalid("target", plane.RedactURL(target), "remove the leading or trailing white space")
	}
	m := schemeRE.FindStringSubmatch(target)
	if m == nil {
		if len(target) >= 7 && strings.EqualFold(target[:7], "sqlite:") {
			return "", plane.Invalid("target", plane.RedactURL(target), `use sqlite://path for a file, or ":memory:" (also sqlite://:memory:) for an in-process plane`)
		}
		if m := schemeNoSlashesRE.FindStringSubmatch(target); m != nil {
			return "", plane.Invalid("target", plane.RedactURL(target),
				fmt.Sprintf(`a %s URL needs "://" after its scheme (as a file path, it would be a SQLite file of that name): write postgres://user@host/database or http(s)://host[:port]`, strings.ToLower(m[1])))
		}
		if keywordTargetRE.MatchString(target) {
			return "", plane.Invalid("target", plane.RedactURL(target),
				"a libpq keyword/value connection string would be a SQLite file of that name: write it as postgres://user:password@host:port/database?sslmode=…")
		}
		return target, nil // a file path
	}
	rest := target[len(m[0]):]
	switch strings.ToLower(m[1]) {
	case "sqlite":
		if rest == "" {
			return "", plane.Invalid("target", plane.RedactURL(target), "sqlite:// needs a path, e.g. sqlite:///var/lib/lakeshore.db")
		}
		return rest, nil // sqlite://:memory: is ":memory:"
	case "http", "https":
		return target, nil
	case "postgres", "postgresql":
		if !plane.IsPostgresURL(target) { // "POSTGRES://…": pgx would read a keyword/value string
			return "", plane.Invalid("target", plane.RedactURL(target), plane.PostgresURLRule)
		}
		return target, nil
	}
	return "", plane.Invalid("target", plane.RedactURL(target), targetRule)
}
