package lakestore

import (
	"cmp"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// Defaults of Config.
const (
	FlushIntervalDefault  = 5 * time.Second
	FlushRowsDefault      = 50_000
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
	// file:///dir, mem://, s3://bucket?region=…&endpoint=…, gs://bucket; a "prefix"
	// query parameter puts every object under that prefix. Fragments of queue q are
	// the objects {prefix}{q}/….parquet. Required.
	Blob string
	// FlushInterval is the longest time a row waits in the tail table before a
	// background flush writes it into a fragment. Defaults to FlushIntervalDefault
	// (5 s); -1 disables interval flushes.
	FlushInterval time.Duration
	// FlushRows starts a background flush when this store has put this many rows since
	// its last flush. Defaults to FlushRowsDefault (50,000); -1 disables it.
	FlushRows int
	// SweepInterval is how often the sweeper deletes orphan fragments (objects no
	// catalog row names, left by flushes that died before publishing). Defaults to
	// SweepIntervalDefault (10 min); -1 disables the background sweeper (Sweep still
	// works).
	SweepInterval time.Duration
	// SweepGrace is how old an unnamed object must be before the sweeper deletes it, so
	// that a flush still writing or publishing is never swept. Defaults to
	// SweepGraceDefault (1 h); it must exceed the longest flush.
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
}

func (c Config) withDefaults() Config {
	c.FlushInterval = cmp.Or(c.FlushInterval, FlushIntervalDefault)
	c.FlushRows = cmp.Or(c.FlushRows, FlushRowsDefault)
	c.SweepInterval = cmp.Or(c.SweepInterval, SweepIntervalDefault)
	c.SweepGrace = cmp.Or(c.SweepGrace, SweepGraceDefault)
	c.CacheFragments = cmp.Or(c.CacheFragments, CacheFragmentsDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.RowGroupRows = cmp.Or(c.RowGroupRows, persist.RowGroupRowsDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return c
}

func (c Config) validate() error {
	switch {
	case !IsCatalogURL(c.Catalog):
		return &persist.InvalidError{Field: "Config.Catalog", Value: redact(c.Catalog), Rule: "a postgres:// or postgresql:// URL"}
	case c.Blob == "" || !strings.Contains(c.Blob, "://"):
		return &persist.InvalidError{Field: "Config.Blob", Value: c.Blob, Rule: "a bucket URL: file:///dir, mem://, s3://bucket, gs://bucket"}
	case c.Namespace != "" && persist.CheckName("namespace", c.Namespace) != nil:
		return persist.CheckName("namespace", c.Namespace)
	case c.FlushInterval < 0 && c.FlushInterval != -1:
		return &persist.InvalidError{Field: "Config.FlushInterval", Value: c.FlushInterval, Rule: "positive, 0 for the default, or -1 to disable"}
	case c.FlushRows < -1:
		return &persist.InvalidError{Field: "Config.FlushRows", Value: c.FlushRows, Rule: "positive, 0 for the default, or -1 to disable"}
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

// IsCatalogURL reports whether target is a postgres:// or postgresql:// URL.
func IsCatalogURL(target string) bool {
	return strings.HasPrefix(target, "postgres://") || strings.HasPrefix(target, "postgresql://")
}

// ParseTarget splits a target "postgres://…?blob=<bucket URL>" (the bucket URL
// query-escaped) into Config.Catalog and Config.Blob: the blob parameter is removed
// from the catalog URL. Errors: *persist.InvalidError.
func ParseTarget(target string) (catalog, blobURL string, err error) {
	if !IsCatalogURL(target) {
		return "", "", &persist.InvalidError{Field: "target", Value: redact(target), Rule: "postgres://…?blob=<bucket URL>"}
	}
	u, perr := url.Parse(target)
	if perr != nil {
		return "", "", &persist.InvalidError{Field: "target", Value: redact(target), Rule: "a valid URL: postgres://…?blob=<bucket URL>"}
	}
	q := u.Query()
	blobURL = q.Get("blob")
	if blobURL == "" {
		return "", "", &persist.InvalidError{Field: "target", Value: redact(target),
			Rule: "a blob parameter naming the bucket of the fragments: postgres://…?blob=s3%3A%2F%2Fbucket"}
	}
	q.Del("blob")
	u.RawQuery = q.Encode()
	return u.String(), blobURL, nil
}

// catalogKey is the key of queue name in the catalog and the bucket (see
// Config.Namespace).
func catalogKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return "_ns/" + namespace + "/" + name
}

// Redact returns a URL without its password, for messages and logs.
func Redact(s string) string { return redact(s) }

// redact drops the password of a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
