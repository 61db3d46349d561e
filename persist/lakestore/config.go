package lakestore

import (
	"cmp"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Defaults of Config. FlushIntervalDefault and FlushRowsDefault are the file store's
// (persist.Config's): the same settings, filled by persist.Config.WithDefaults.
const (
	FlushIntervalDefault  = persist.FlushIntervalDefault
	FlushRowsDefault      = persist.FlushRowsDefault
	FlushTimeoutDefault   = 5 * time.Minute
	SweepIntervalDefault  = 10 * time.Minute
	SweepGraceDefault     = time.Hour
	CacheFragmentsDefault = 64
	PollIntervalDefault   = time.Second
)

// Config configures Open. The zero value of every field but Catalog and Blob means its
// default.
type Config struct {
	// Catalog is the postgres:// (or postgresql://) URL of the catalog database. The
	// store keeps its tables in the schema "lakestore" there, created and migrated at
	// Open. Required.
	Catalog string
	// Blob is the gocloud.dev/blob URL of the bucket holding the Parquet fragments:
	// file:///dir, mem://, s3://bucket?region=…&endpoint=…, and with their build tags
	// gs://bucket (lakeshore_gcs) and azblob://container (lakeshore_azure): see
	// BucketSchemes. A URL whose driver this build does not link is a
	// *persist.InvalidError naming the tag. A "prefix" query parameter puts every
	// object under that prefix. Fragments of queue q are
	// the objects {prefix}{q}/….parquet. Required.
	Blob string
	// FlushInterval is the longest time a row waits in the tail table before a
	// background flush writes it into a fragment. Defaults to FlushIntervalDefault
	// (5 s); -1 disables interval flushes.
	FlushInterval time.Duration
	// FlushRows starts a background flush when this store has put this many rows since
	// its last flush. Defaults to FlushRowsDefault (50,000); -1 disables it.
	FlushRows int
	// FlushTimeout bounds one flush, from the start of its catalog transaction to its
	// commit (writing its fragment objects included). Each fragment object carries its
	// flush's publication deadline (the catalog's clock at the start plus FlushTimeout,
	// in the object's metadata), and the catalog refuses to publish it later (a
	// deferred check run at commit, on the catalog's clock), so the sweeper never
	// deletes an object a flush may still publish however SweepGrace is set and
	// whatever the clocks of the machines say. A flush that takes longer fails (its
	// rows stay in the tail) and is retried. Defaults to FlushTimeoutDefault (5 min).
	FlushTimeout time.Duration
	// SweepInterval is how often the sweeper deletes orphan fragments (objects no
	// catalog row names, left by flushes that died before publishing). Defaults to
	// SweepIntervalDefault (10 min); -1 disables the background sweeper (Sweep still
	// works).
	SweepInterval time.Duration
	// SweepGrace is how long past its flush's publication deadline (see FlushTimeout)
	// an unnamed object is kept before the sweeper deletes it, both read on the
	// catalog's clock: the deadline alone already makes deleting safe, the grace
	// covers a commit whose deadline check passed but whose commit record is still
	// being written. An object without a deadline (written by an older version) is
	// deleted once its modification time is older than FlushTimeoutDefault plus
	// SweepGrace. Defaults to SweepGraceDefault (1 h); below a second only for tests.
	SweepGrace time.Duration
	// CacheFragments is how many decoded fragments are kept in memory for reads.
	// Defaults to CacheFragmentsDefault (64).
	CacheFragments int
	// PollInterval is how often a waiting reader re-checks the catalog besides the
	// notifications of other servers (PostgreSQL LISTEN/NOTIFY), in case one was
	// missed while the listening connection was down. Defaults to PollIntervalDefault
	// (1 s).
	PollInterval time.Duration
	// RowGroupRows is the largest number of rows in one Parquet row group. Defaults
	// to persist.RowGroupRowsDefault (65,536).
	RowGroupRows int
	// Namespace, when set, puts the queue in that namespace (a tenant of a server): the
	// queue's catalog rows are keyed "_ns/{namespace}/{name}" and its fragments are the
	// objects {prefix}_ns/{namespace}/{name}/….parquet, so queues of the same name in
	// different namespaces share nothing, and no queue opened without a namespace (its
	// name cannot start with "_") shares a key or an object prefix with them. Same
	// rules as a queue name. Defaults to "" (the queue is keyed by its name alone).
	// `lakeshore serve --data` opens every queue in the namespace of its route.
	Namespace string
	// Logger receives warnings from background work. Defaults to a text logger on
	// stderr at level Warn.
	Logger *slog.Logger
	// Existing opens only a queue the catalog has: Open of one it does not fails with a
	// *persist.NotFoundError naming it (persist.ErrNotFound) and adds no catalog row.
	// Defaults to false: Open creates the queue.
	Existing bool
	// Samplers are the samplers GetMeta runs by name (persist.MetaRequest.Sampler).
	// The zero value means persist.DefaultSamplers().
	Samplers persist.Samplers
}

// withDefaults returns c with each zero setting replaced by its default. The settings
// c shares with persist.Config (FlushInterval, FlushRows, RowGroupRows, Logger,
// Samplers) are filled by persist.Config.WithDefaults, so both stores default them
// alike; PollInterval is not among them (here it paces the re-check of the catalog
// behind LISTEN/NOTIFY, a slower default).
func (c Config) withDefaults() Config {
	shared := persist.Config{FlushInterval: c.FlushInterval, FlushRows: c.FlushRows, RowGroupRows: c.RowGroupRows,
		Logger: c.Logger, Samplers: c.Samplers}.WithDefaults()
	c.FlushInterval, c.FlushRows, c.RowGroupRows = shared.FlushInterval, shared.FlushRows, shared.RowGroupRows
	c.Logger, c.Samplers = shared.Logger, shared.Samplers
	c.FlushTimeout = cmp.Or(c.FlushTimeout, FlushTimeoutDefault)
	c.SweepInterval = cmp.Or(c.SweepInterval, SweepIntervalDefault)
	c.SweepGrace = cmp.Or(c.SweepGrace, SweepGraceDefault)
	c.CacheFragments = cmp.Or(c.CacheFragments, CacheFragmentsDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	return c
}

func (c Config) validate() error {
	switch {
	case !plane.IsPostgresURL(c.Catalog):
		return &persist.InvalidError{Field: "Config.Catalog", Value: plane.RedactURL(c.Catalog), Rule: "a postgres:// or postgresql:// URL"}
	case c.Blob == "" || !strings.Contains(c.Blob, "://"):
		return &persist.InvalidError{Field: "Config.Blob", Value: c.Blob, Rule: "a bucket URL: " + strings.Join(schemeExamples(), ", ")}
	case checkBucketURL("Config.Blob", c.Blob) != nil:
		return checkBucketURL("Config.Blob", c.Blob)
	case c.Namespace != "" && persist.CheckName("namespace", c.Namespace) != nil:
		return persist.CheckName("namespace", c.Namespace)
	case c.FlushInterval < 0 && c.FlushInterval != -1:
		return &persist.InvalidError{Field: "Config.FlushInterval", Value: c.FlushInterval, Rule: "positive, 0 for the default, or -1 to disable"}
	case c.FlushRows < -1:
		return &persist.InvalidError{Field: "Config.FlushRows", Value: c.FlushRows, Rule: "positive, 0 for the default, or -1 to disable"}
	case c.FlushTimeout < 0:
		return &persist.InvalidError{Field: "Config.FlushTimeout", Value: c.FlushTimeout, Rule: "positive, or 0 for the default"}
	case c.SweepInterval < 0 && c.SweepInterval != -1:
		return &persist.InvalidError{Field: "Config.SweepInterval", Value: c.SweepInterval, Rule: "positive, 0 for the default, or -1 to disable"}
	case c.SweepGrace < 0:
		return &persist.InvalidError{Field: "Config.SweepGrace", Value: c.SweepGrace, Rule: "positive, or 0 for the default"}
	case c.CacheFragments < 0:
		return &persist.InvalidError{Field: "Config.CacheFragments", Value: c.CacheFragments, Rule: "positive, or 0 for the default"}
	case c.PollInterval < 0:
		return &persist.InvalidError{Field: "Config.PollInterval", Value: c.PollInterval, Rule: "positive, or 0 for the default"}
	case c.RowGroupRows < 0:
		return &persist.InvalidError{Field: "Config.RowGroupRows", Value: c.RowGroupRows, Rule: "positive, or 0 for the default"}
	}
	return nil
}

// ParseTarget splits a target "postgres://…?blob=<bucket URL>" (the bucket URL
// query-escaped) into Config.Catalog and Config.Blob: the blob parameter and the
// store's settings (TargetOptions) are removed from the catalog URL. Errors:
// *persist.InvalidError.
func ParseTarget(target string) (catalog, blobURL string, err error) {
	c, err := ParseTargetConfig(target)
	if err != nil {
		return "", "", err
	}
	return c.Catalog, c.Blob, nil
}

// TargetOptions returns the query parameters of a target URL that set the store's Config
// instead of reaching PostgreSQL: each names the Config field of the same words
// (flush_interval → FlushInterval). Durations are Go durations ("200ms", "5m"), or -1 to
// disable where the field allows it; flush_rows is a count.
func TargetOptions() []string {
	return []string{"flush_interval", "flush_rows", "flush_timeout", "sweep_interval", "sweep_grace", "poll_interval"}
}

// ParseTargetConfig reads a target "postgres://…?blob=<bucket URL>[&flush_interval=…]":
// the catalog URL (without blob and TargetOptions), the bucket URL and the settings the
// target carries, so that `lakeshore serve --data`, `lakeshore data --target` and
// persist.Open take the store's settings from configuration alone. The other fields
// of the Config it returns are zero. Errors: *persist.InvalidError naming the
// parameter.
func ParseTargetConfig(target string) (Config, error) {
	var c Config
	if plane.IsMiscasedPostgresURL(target) {
		return c, &persist.InvalidError{Field: "target", Value: plane.RedactURL(target), Rule: plane.PostgresURLRule}
	}
	if !plane.IsPostgresURL(target) {
		return c, &persist.InvalidError{Field: "target", Value: plane.RedactURL(target), Rule: "postgres://…?blob=<bucket URL>"}
	}
	u, perr := url.Parse(target)
	if perr != nil {
		return c, &persist.InvalidError{Field: "target", Value: plane.RedactURL(target), Rule: "a valid URL: postgres://…?blob=<bucket URL>"}
	}
	q := u.Query()
	c.Blob = q.Get("blob")
	if c.Blob == "" {
		return c, &persist.InvalidError{Field: "target", Value: plane.RedactURL(target),
			Rule: "a blob parameter naming the bucket of the fragments: postgres://…?blob=s3%3A%2F%2Fbucket"}
	}
	q.Del("blob")
	for _, opt := range TargetOptions() {
		v := q.Get(opt)
		q.Del(opt)
		if v == "" {
			continue
		}
		if opt == "flush_rows" {
			n, err := strconv.Atoi(v)
			if err != nil || n < -1 {
				return c, &persist.InvalidError{Field: "target parameter " + opt, Value: v, Rule: "a count ≥ 1, or -1 to disable"}
			}
			c.FlushRows = n
			continue
		}
		var d time.Duration
		if v == "-1" {
			d = -1
		} else if x, err := time.ParseDuration(v); err == nil && x > 0 {
			d = x
		} else {
			return c, &persist.InvalidError{Field: "target parameter " + opt, Value: v, Rule: "a positive duration such as 200ms or 5m (or -1 to disable, where allowed)"}
		}
		switch opt {
		case "flush_interval":
			c.FlushInterval = d
		case "flush_timeout":
			c.FlushTimeout = d
		case "sweep_interval":
			c.SweepInterval = d
		case "sweep_grace":
			c.SweepGrace = d
		case "poll_interval":
			c.PollInterval = d
		}
	}
	u.RawQuery = q.Encode()
	c.Catalog = u.String()
	return c, nil
}

// overlay returns c with the settings a target carried (the non-zero fields of t) in
// place of its own.
func (c Config) overlay(t Config) Config {
	c.Catalog, c.Blob = t.Catalog, t.Blob
	c.FlushInterval = cmp.Or(t.FlushInterval, c.FlushInterval)
	c.FlushRows = cmp.Or(t.FlushRows, c.FlushRows)
	c.FlushTimeout = cmp.Or(t.FlushTimeout, c.FlushTimeout)
	c.SweepInterval = cmp.Or(t.SweepInterval, c.SweepInterval)
	c.SweepGrace = cmp.Or(t.SweepGrace, c.SweepGrace)
	c.PollInterval = cmp.Or(t.PollInterval, c.PollInterval)
	return c
}

// catalogKey is the key of queue name in the catalog and the bucket (see
// Config.Namespace).
func catalogKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return "_ns/" + namespace + "/" + name
}
